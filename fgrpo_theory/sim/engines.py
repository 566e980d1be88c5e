"""Which engine simulates a config's runs, and how runs are grouped into work items (paper
Section 5.1, Appendix J).

- ``dense`` (``fgrpo_theory.sim.dense``): every option, runs that share N batched on (R, K)
  arrays; the reference.
- ``sparse`` (``fgrpo_theory.sim.sparse``): the paper's setting (ratio surrogate, zero-sum
  advantages) on the touched actions only; numpy.
- ``compiled`` (``fgrpo_theory.sim.compiled``): the sparse engine's draws and arithmetic in
  numba kernels, with its own vectorised exp; used by ``auto`` where it applies.
- ``split`` (``fgrpo_theory.sim.split``): the compiled engine with each run over two cores,
  each owning half of the actions; its own random numbers. Never chosen by ``auto``.
- ``torch`` (``fgrpo_theory.sim.torch_engine``): many (N, gamma, seed) runs as one batch on a
  GPU (or the CPU); its own random numbers. Never chosen by ``auto``.

The contract (``fgrpo_theory.sim.agreement``): each engine is deterministic for a given
(config, seed, machine), and the engines agree in distribution over seeds; the numpy-draws
engines also share a seed's draws (with probability ~1 - 1e-15 per draw) and so agree run by
run to rounding.

``auto`` takes ``compiled`` where the sparse engine applies and numba runs (with a warning
where it does not), else ``sparse`` where it applies, else ``dense``.

    >>> from fgrpo_theory.sim.config import SimConfig
    >>> choose_engine(SimConfig(surrogate="prob"), "auto")
    'dense'
"""

from __future__ import annotations

import warnings

import numpy as np

from fgrpo_theory.sim.config import SimConfig, sparse_applies
from fgrpo_theory.sim.dense import simulate_batch
from fgrpo_theory.sim.sparse import simulate_run_sparse

ENGINES = ("auto", "dense", "sparse", "compiled", "split", "torch")
#: The engines whose draws are those of ``samplers`` (their records agree to rounding).
NUMPY_DRAWS = ("dense", "sparse", "compiled")

#: Runs are batched while a batch's (R, K) arrays stay about this size (elements): beyond
#: it they fall out of cache and one run at a time is faster (measured at K = 128,000).
BATCH_ELEMENTS = 1 << 17


def _check_available(cfg: SimConfig, engine: str) -> None:
    """A ValueError when ``engine`` (torch, compiled, split) cannot run ``cfg`` here."""
    if engine == "torch":
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise ValueError("engine='torch' needs torch (pip install 'fgrpo[llm]')")
    if engine == "compiled":
        from fgrpo_theory.sim import compiled  # lazy: numba

        why = compiled.unavailable_reason()
        if why:
            raise ValueError(f"engine='compiled' is not available here: {why}")
    if engine == "split":
        from fgrpo_theory.sim import split  # lazy: numba

        why = split.unavailable_reason(cfg)
        if why:
            raise ValueError(f"engine='split' is not available here: {why}")


def choose_engine(cfg: SimConfig, engine: str) -> str:
    """The engine that runs ``cfg``: ``engine`` itself, checked, or the one ``auto`` picks."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got engine={engine!r}")
    if engine in ("sparse", "compiled", "split") and not sparse_applies(cfg):
        raise ValueError(
            f"engine={engine!r} needs surrogate='ratio' and advantage 'centered' "
            f"or 'grpo', got surrogate={cfg.surrogate!r}, "
            f"advantage={cfg.advantage!r}"
        )
    _check_available(cfg, engine)
    if engine != "auto":
        return engine
    if not sparse_applies(cfg):
        return "dense"
    from fgrpo_theory.sim import compiled  # lazy: numba

    why = compiled.unavailable_reason()
    if why is None:
        return "compiled"
    warnings.warn(
        f"the compiled simulator engine is not available ({why}); the numpy sparse engine "
        "runs instead, about 3x slower",
        RuntimeWarning,
        stacklevel=2,
    )
    return "sparse"


def simulate_runs(
    cfg: SimConfig, N: int, runs: list[tuple[float, int]], *, engine: str = "auto", progress=None
) -> dict:
    """Records (R, ...) of the runs [(gamma, seed), ...] at group size N, by an engine that
    runs on the CPU (``dense``, ``sparse``, ``compiled``, ``split`` or ``auto``)."""
    engine = choose_engine(cfg, engine)
    if engine == "dense":
        return simulate_batch(cfg, N, runs, progress=progress)
    if engine == "sparse":
        run_one = simulate_run_sparse
    elif engine == "compiled":
        from fgrpo_theory.sim.compiled import simulate_run_compiled as run_one  # lazy: numba
    elif engine == "split":
        from fgrpo_theory.sim.split import simulate_run_split as run_one  # lazy: numba
    else:
        raise ValueError(
            f"simulate_runs takes a CPU engine {NUMPY_DRAWS + ('split',)}, "
            f"got engine={engine!r} (the torch engine runs whole sweeps)"
        )
    parts = [run_one(cfg, N, g, s, progress=progress) for g, s in runs]
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def work_items(cfg: SimConfig, engine: str, runs) -> list[tuple[int, list[tuple[float, int]]]]:
    """(N, [(gamma, seed), ...]) work items for the (N, gamma, seed) ``runs``, largest N first.
    The dense engine batches the runs of one N while (R, K) stays near BATCH_ELEMENTS; the
    others take runs singly."""
    size = max(1, BATCH_ELEMENTS // cfg.actions) if engine == "dense" else 1
    items = []
    for N in sorted({n for n, _, _ in runs}, reverse=True):
        mine = [(g, s) for n, g, s in runs if n == N]
        items += [(N, mine[i : i + size]) for i in range(0, len(mine), size)]
    return items
