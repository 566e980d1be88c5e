"""Multi-step simulation of the categorical softmax policy (paper Section 5.1, Appendix J, Fig. 2;
SPEC.md §4): the sweep configuration, its presets, the sweep over (N, gamma, seed), caching and
output files.

K actions, the first C of them correct (reward R_c), the rest incorrect (R_w). Action 0 is the
"anchor" (a high initial logit), actions 1..E are the designated rare-correct subset. Each step
draws N actions i.i.d. from p = softmax(z), forms advantages r_j, and ascends

    ratio:  L = (g/N) sum_j r_j pi(a_j)/pi_old(a_j)   gradient (g/N) sum_j r_j (onehot(a_j) - p)
    prob:   L = (g/N) sum over distinct sampled a of r_a p_a   gradient (g/N) p_i (r_i - S_r)  (Eq. 5)

with the focal weight g = (1 - X/N)^gamma (Eq. 11-13), by SGD or Adam. Per step it records
Q_pos, M_ret (Eq. 26), the entropy, Q_u,pos (correct mass the group missed), the rare mass tau,
and whether the group was a tail miss for the rare subset beside the Lemma 3.1 probability at
the current (mu, tau).

Where things live: the exact group samplers in ``fgrpo_theory.sampling``; the dense engine
(``simulate_batch``, every option) and the sparse engine (``simulate_run_sparse``, the paper's
ratio surrogate with zero-sum advantages) in ``fgrpo_theory.sim_engines``; here ``SimConfig``,
``PRESETS``, ``run_sweep`` (which engine: ``engine='auto'``), ``run_cached`` and the demo. The
dense engine batches runs only while R * K stays cache-sized (``BATCH_ELEMENTS``), since at
K = 128,000 one run's arrays already fill the cache. Each run draws from its own
``numpy.random.Generator`` seeded by (seed, N), so a run gives the same numbers alone or in a
batch, and gamma = 0 and gamma = 1 share their draws (common random numbers). The names of the
two other modules are re-exported here.

    fgrpo-theory simulate --preset paper-fig2 --out results/fig2
    >>> from fgrpo_theory.simulate import SimConfig, run_sweep
    >>> res = run_sweep(SimConfig(actions=500, correct=40, group_sizes=(4,), gammas=(0.0,),
    ...                          seeds=(0,), steps=5), progress=False)
    >>> res.q_pos.shape           # (group sizes, gammas, seeds, steps + 1)
    (1, 1, 1, 6)

Shapes: ``R`` runs in a batch, ``K`` actions, ``N`` group, ``T`` steps.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from fgrpo_theory.checks import as_float_array, check_integer, check_nonnegative
from fgrpo_theory.sampling import (  # noqa: F401  (re-exported)
    BLOCK,
    GUIDE_BUCKETS,
    GUIDE_FACTOR,
    GUIDE_ROWS,
    sample_counts,
    sample_group,
    uses_guide,
)
from fgrpo_theory.sim_engines import (  # noqa: F401  (re-exported)
    FULL_FRACTION,
    SHIFT_SLACK,
    group_advantages,
    simulate_batch,
    simulate_run_sparse,
    sparse_applies,
)

OPTIMIZERS = ("sgd", "adam")
SURROGATES = ("ratio", "prob")
ADVANTAGES = ("centered", "grpo", "raw")


@dataclass(frozen=True)
class SimConfig:
    """One sweep of the categorical simulator (defaults: the paper's App. J setting, one N)."""

    actions: int = 128_000
    """K, the number of actions"""
    correct: int = 10_000
    """C, the number of correct actions (actions 0..C-1; action 0 is the anchor)"""
    anchor_logit: float = 5.0
    """initial logit of the anchor (action 0)"""
    correct_logit: float = 3.0
    """initial logit of the other correct actions"""
    incorrect_logit: float = 0.0
    """initial logit of the incorrect actions"""
    initial_logits: tuple[float, ...] | None = None
    """explicit initial logits (K values); overrides the three values above"""
    rare: int = 1
    """E, the size of the rare-correct subset: actions 1..E"""
    reward_correct: float = 1.0
    """R_c"""
    reward_wrong: float = -1.0
    """R_w (< R_c)"""
    group_sizes: tuple[int, ...] = (64,)
    """the group sizes N to sweep"""
    gammas: tuple[float, ...] = (0.0, 1.0)
    """the focal exponents gamma to sweep (0 = plain GRPO)"""
    seeds: tuple[int, ...] = (0,)
    """one run per seed; a run's generator is seeded by (seed, N)"""
    steps: int = 1000
    """T, optimisation steps"""
    lr: float = 1e-2
    """learning rate"""
    optimizer: str = "adam"
    """'adam' (betas 0.9/0.999, eps 1e-8, bias-corrected) or 'sgd'"""
    surrogate: str = "ratio"
    """'ratio' (log-prob gradient) or 'prob' (the literal Eq. 5 gradient)"""
    advantage: str = "centered"
    """'centered' r = R - mean (App. J), 'grpo' (R - mean)/(std + 1e-6) with Bessel std, 'raw' r = R"""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """Adam (beta1, beta2)"""
    adam_eps: float = 1e-8
    """Adam epsilon"""

    def __post_init__(self):
        K = int(check_integer("actions", self.actions, minimum=2))
        C = int(check_integer("correct", self.correct, minimum=1))
        if C >= K:
            raise ValueError(f"correct must be < actions={K}, got correct={C}")
        E = int(check_integer("rare", self.rare, minimum=1))
        if E >= C:
            raise ValueError(f"rare must be < correct={C} (action 0 is the anchor), got rare={E}")
        for name in ("anchor_logit", "correct_logit", "incorrect_logit", "reward_correct", "reward_wrong"):
            x = as_float_array(name, getattr(self, name))
            if not np.isfinite(x).all():
                raise ValueError(f"{name} must be finite, got {name}={getattr(self, name)}")
        if not self.reward_correct > self.reward_wrong:
            raise ValueError(f"reward_correct must exceed reward_wrong, got "
                             f"{self.reward_correct} <= {self.reward_wrong}")
        if self.initial_logits is not None:
            z0 = as_float_array("initial_logits", self.initial_logits)
            if z0.shape != (K,) or not np.isfinite(z0).all():
                raise ValueError(f"initial_logits must be {K} finite values, got shape {z0.shape}")
            object.__setattr__(self, "initial_logits", tuple(float(v) for v in z0))
        sizes = check_integer("group_sizes", self.group_sizes, minimum=1).ravel()
        object.__setattr__(self, "group_sizes", tuple(int(n) for n in sizes))
        gammas = check_nonnegative("gammas", self.gammas).ravel()
        object.__setattr__(self, "gammas", tuple(float(g) for g in gammas))
        seeds = check_integer("seeds", self.seeds, minimum=0).ravel()
        object.__setattr__(self, "seeds", tuple(int(s) for s in seeds))
        for name in ("group_sizes", "gammas", "seeds"):
            if len(set(getattr(self, name))) != len(getattr(self, name)):
                raise ValueError(f"{name} must not repeat values, got {name}={getattr(self, name)}")
        check_integer("steps", self.steps, minimum=1)
        lr = float(as_float_array("lr", self.lr))
        if not (np.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be > 0, got lr={self.lr}")
        for name, allowed in (("optimizer", OPTIMIZERS), ("surrogate", SURROGATES), ("advantage", ADVANTAGES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {name}={getattr(self, name)!r}")
        b1, b2 = (float(b) for b in self.adam_betas)
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"adam_betas must lie in [0, 1), got {self.adam_betas}")
        object.__setattr__(self, "adam_betas", (b1, b2))
        if not float(self.adam_eps) > 0:
            raise ValueError(f"adam_eps must be > 0, got {self.adam_eps}")

    def logits0(self) -> np.ndarray:
        """Initial logits z_0 (K,)."""
        if self.initial_logits is not None:
            return np.asarray(self.initial_logits, dtype=np.float64)
        z0 = np.full(self.actions, float(self.incorrect_logit))
        z0[: self.correct] = self.correct_logit
        z0[0] = self.anchor_logit
        return z0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


PRESETS: dict[str, SimConfig] = {
    # App. J / Fig. 2: Adam on the ratio surrogate reproduces the paper's description (SPEC §4).
    "paper-fig2": SimConfig(
        actions=128_000, correct=10_000, group_sizes=tuple(2**k for k in range(1, 18)),
        gammas=(0.0, 1.0), seeds=(0, 1, 2, 3), steps=1000, lr=1e-2,
        optimizer="adam", surrogate="ratio", advantage="centered",
    ),
    # The same with plain SGD: the logits barely move (updates scale with p_i ~ 6e-5).
    "paper-fig2-sgd": SimConfig(
        actions=128_000, correct=10_000, group_sizes=tuple(2**k for k in range(1, 18)),
        gammas=(0.0, 1.0), seeds=(0, 1, 2, 3), steps=1000, lr=1e-2,
        optimizer="sgd", surrogate="ratio", advantage="centered",
    ),
    # A reduced sweep (K / 10, fewer steps, a larger lr) that shows the three regimes in seconds.
    "small": SimConfig(
        actions=12_800, correct=1_000, group_sizes=tuple(2**k for k in range(1, 15)),
        gammas=(0.0, 1.0), seeds=(0, 1), steps=300, lr=3e-2,
    ),
    "tiny": SimConfig(
        actions=1_280, correct=100, group_sizes=(2, 16, 128, 4096),
        gammas=(0.0, 1.0), seeds=(0,), steps=100, lr=3e-2,
    ),
}


# ----------------------------------------------------------------------------- sweeps

@dataclass
class SweepResult:
    """Records of a sweep, each indexed (group size, gamma, seed, step)."""

    config: SimConfig
    records: dict = field(default_factory=dict)

    def __getattr__(self, name):
        rec = self.__dict__.get("records", {})
        if name in rec:
            return rec[name]
        raise AttributeError(name)

    def final_rows(self) -> list[dict]:
        """One row per (N, gamma, seed) with the final q_pos, m_ret, entropy."""
        rows = []
        for i, N in enumerate(self.config.group_sizes):
            for j, gamma in enumerate(self.config.gammas):
                for k, seed in enumerate(self.config.seeds):
                    rows.append({"N": N, "gamma": gamma, "seed": seed,
                                 "q_pos": float(self.records["q_pos"][i, j, k, -1]),
                                 "m_ret": float(self.records["m_ret"][i, j, k, -1]),
                                 "entropy": float(self.records["entropy"][i, j, k, -1])})
        return rows

    def write_csv(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            f.write("N,gamma,seed,q_pos,m_ret,entropy\n")
            for r in self.final_rows():
                f.write(f"{r['N']},{r['gamma']:g},{r['seed']},{r['q_pos']:.6g},{r['m_ret']:.6g},{r['entropy']:.6g}\n")
        return path

    def write_jsonl(self, path) -> Path:
        """One JSON line per step t: {"step": t, "q_pos/N=2/gamma=0": seed mean, ...} for the
        policy records (q_pos, m_ret, entropy, tau)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        means = {k: self.records[k].mean(axis=2) for k in ("q_pos", "m_ret", "entropy", "tau")}
        with path.open("w") as f:
            for t in range(cfg.steps + 1):
                row = {"step": t}
                for k, a in means.items():
                    for i, N in enumerate(cfg.group_sizes):
                        for j, g in enumerate(cfg.gammas):
                            row[f"{k}/N={N}/gamma={g:g}"] = round(float(a[i, j, t]), 7)
                f.write(json.dumps(row) + "\n")
        return path

    def save(self, out_dir) -> Path:
        """records as ``simulation.npz`` next to the resolved config ``simulation_config.json``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(out / "simulation.npz", **self.records)
        (out / "simulation_config.json").write_text(_saved_config_json(self.config))
        return out / "simulation.npz"


#: Runs are batched while a batch's (R, K) arrays stay about this size (elements): beyond
#: it they fall out of cache and one run at a time is faster (measured at K = 128,000).
BATCH_ELEMENTS = 1 << 17


ENGINES = ("auto", "dense", "sparse")


def _engine(cfg: SimConfig, engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "sparse" and not sparse_applies(cfg):
        raise ValueError("engine='sparse' needs surrogate='ratio' and advantage 'centered' or 'grpo'")
    if engine == "auto":
        return "sparse" if sparse_applies(cfg) else "dense"
    return engine


def simulate_runs(cfg: SimConfig, N: int, runs: list[tuple[float, int]], *, engine: str = "auto",
                  progress=None) -> dict:
    """Records (R, ...) of the runs [(gamma, seed), ...] at group size N, by either engine."""
    if _engine(cfg, engine) == "dense":
        return simulate_batch(cfg, N, runs, progress=progress)
    parts = [simulate_run_sparse(cfg, N, g, s, progress=progress) for g, s in runs]
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def _batch_task(args):
    cfg, N, runs, engine = args
    return N, runs, simulate_runs(cfg, N, runs, engine=engine)


def _tasks(cfg: SimConfig, engine: str) -> list[tuple[int, list[tuple[float, int]]]]:
    """(N, runs) work items, largest N first; runs = (gamma, seed) pairs. The dense engine
    batches runs while (R, K) stays near BATCH_ELEMENTS; the sparse engine takes runs singly."""
    runs = [(g, s) for g in cfg.gammas for s in cfg.seeds]
    size = max(1, BATCH_ELEMENTS // cfg.actions) if engine == "dense" else 1
    return [(N, runs[i:i + size]) for N in sorted(cfg.group_sizes, reverse=True)
            for i in range(0, len(runs), size)]


def run_sweep(cfg: SimConfig, *, workers: int = 1, progress: bool = True, engine: str = "auto") -> SweepResult:
    """All (N, gamma, seed) runs of ``cfg``, largest N first, over ``workers`` processes
    (1 = in this process), with a tqdm bar on stderr. ``engine``: 'dense' (every option,
    runs batched), 'sparse' (ratio surrogate with zero-sum advantages; much faster at small N)
    or 'auto' (sparse where it applies)."""
    from tqdm.auto import tqdm

    workers = int(check_integer("workers", workers, minimum=1))
    engine = _engine(cfg, engine)
    nG, nS, T = len(cfg.gammas), len(cfg.seeds), cfg.steps
    tasks = _tasks(cfg, engine)
    bar = tqdm(total=len(cfg.group_sizes) * nG * nS * T, unit="run-step", disable=not progress,
               desc="simulate", unit_scale=True)
    done: dict[tuple[int, float, int], dict] = {}

    def collect(N, runs, rec):
        for r, (g, s) in enumerate(runs):
            done[N, g, s] = {k: a[r] for k, a in rec.items()}

    if workers == 1 or len(tasks) == 1:
        for N, runs in tasks:
            collect(N, runs, simulate_runs(cfg, N, runs, engine=engine, progress=bar.update))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for N, runs, rec in pool.map(_batch_task, [(cfg, N, runs, engine) for N, runs in tasks]):
                collect(N, runs, rec)
                bar.update(len(runs) * T)
    bar.close()
    keys = next(iter(done.values())).keys()
    records = {k: np.stack([np.stack([np.stack([done[N, g, s][k] for s in cfg.seeds])
                                      for g in cfg.gammas]) for N in cfg.group_sizes])
               for k in keys}                                      # (nN, nG, nS, ...)
    return SweepResult(config=cfg, records=records)


#: Bumped whenever the simulator draws or computes differently for the same config, so that
#: results cached by an older version are recomputed (2: the guide-table sampler for large N).
SIMULATOR_VERSION = 2


def _saved_config_json(cfg: SimConfig) -> str:
    """The resolved config as saved next to the results, with the simulator version."""
    return json.dumps({**asdict(cfg), "simulator_version": SIMULATOR_VERSION}, indent=2, sort_keys=True)


def load_cached(cfg: SimConfig, out_dir) -> SweepResult | None:
    """The saved sweep in ``out_dir`` when its config (and simulator version) equals ``cfg``'s,
    else None."""
    out = Path(out_dir)
    npz, js = out / "simulation.npz", out / "simulation_config.json"
    if not (npz.exists() and js.exists()):
        return None
    if json.loads(js.read_text()) != json.loads(_saved_config_json(cfg)):
        return None
    with np.load(npz) as data:
        return SweepResult(config=cfg, records={k: data[k] for k in data.files})


def run_cached(cfg: SimConfig, out_dir, *, workers: int = 1, progress: bool = True,
               engine: str = "auto") -> SweepResult:
    """``run_sweep`` unless ``out_dir`` already holds this exact config's results; saves them."""
    cached = load_cached(cfg, out_dir)
    if cached is not None:
        return cached
    res = run_sweep(cfg, workers=workers, progress=progress, engine=engine)
    res.save(out_dir)
    return res


def config_from_preset(name: str, **overrides) -> SimConfig:
    """A preset with some fields replaced."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})


def config_fields() -> list[str]:
    return [f.name for f in fields(SimConfig)]


def regime_sweep_demo(out_dir, *, fast: bool = False) -> dict:
    """A reduced Fig. 2 sweep for ``make demo``: the 'small' preset (or 'tiny' when fast),
    writing ``regimes.csv``, ``regimes.png`` and the cached records under ``out_dir``.
    Returns a summary dict (paths and final mean M_ret per (gamma, N))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fgrpo_theory.plots_categorical import plot_fig2

    cfg = PRESETS["tiny" if fast else "small"]
    out = Path(out_dir)
    res = run_cached(cfg, out, workers=1 if fast else min(2, os.cpu_count() or 1), progress=not fast)
    csv = res.write_csv(out / "regimes.csv")
    fig = plot_fig2(res)
    png = out / "regimes.png"
    fig.savefig(png, dpi=90)
    plt.close(fig)
    m = res.records["m_ret"][..., -1].mean(axis=2)                      # (nN, nG)
    return {"csv": str(csv), "figure": str(png),
            "final_m_ret": {f"gamma={g:g}": dict(zip(cfg.group_sizes, m[:, j].round(4).tolist()))
                            for j, g in enumerate(cfg.gammas)}}
