"""The sweep of the categorical simulator over (N, gamma, seed) (paper Section 5.1, Appendix J,
Fig. 2): worker processes with pinned thread pools, a progress bar, results saved as runs
finish (an interrupted sweep resumes where it stopped), the cache and the output files.

Each run draws from its own ``numpy.random.Generator`` seeded by (seed, N), so its numbers do
not depend on the worker count, the engine (``dense``, ``sparse``, ``compiled``: the same
draws, records equal to rounding) or the order in which runs finish; gamma = 0 and gamma = 1
share their draws (common random numbers).

    fgrpo-theory simulate --preset paper-fig2 --out results/fig2
    >>> from fgrpo_theory.sim import SimConfig, run_sweep
    >>> res = run_sweep(SimConfig(actions=500, correct=40, group_sizes=(4,), gammas=(0.0,),
    ...                          seeds=(0,), steps=5), progress=False)
    >>> res.q_pos.shape           # (group sizes, gammas, seeds, steps + 1)
    (1, 1, 1, 6)

``run_cached(cfg, out_dir)`` writes every finished run to ``out_dir/partial/`` at once, so a
sweep killed at any moment loses only the runs in flight; rerun, it loads the finished runs
and computes the rest. When all are done it writes ``simulation.npz`` and the resolved config
``simulation_config.json`` and removes its files from ``partial/`` (the folder too, unless
something else is in it); a rerun with the same config then loads
them instead of simulating.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fgrpo_common.checks import check_integer
from fgrpo_common.cli import bar_disabled
from fgrpo_common.environment import machine_environment
from fgrpo_common.files import TEMPORARY_MARK, atomic_write, atomic_write_text, directory_lock
from fgrpo_common.pool import as_finished
from fgrpo_theory.sim.config import SimConfig
from fgrpo_theory.sim.engines import choose_engine, simulate_runs, work_items
from fgrpo_theory.sim.group import GROUP_RECORDS, POLICY_RECORDS
from fgrpo_theory.sim.threads import pin_worker, pinned
from fgrpo_theory.sim.torch_engine import check_device, simulate_runs_torch

#: Bumped whenever the simulator draws or computes differently for the same config, so that
#: results cached by an older version are recomputed (2: the guide-table sampler for large N;
#: 3: the compiled engine's own exp; 4: its masses by an incremental exp between Adam's rebases).
SIMULATOR_VERSION = 4

RECORD_KEYS = POLICY_RECORDS + GROUP_RECORDS


@dataclass
class SweepResult:
    """Records of a sweep, each indexed (group size, gamma, seed, step)."""

    config: SimConfig
    records: dict = field(default_factory=dict)
    family: str = "numpy"
    """whose draws made the records: 'numpy' (the dense, sparse and compiled engines),
    'split' or 'torch'; saved with them, so that no family's cache is taken for another's"""

    def __getattr__(self, name):
        rec = self.__dict__.get("records", {})
        if name in rec:
            return rec[name]
        raise AttributeError(name)

    def weighting_label(self, j: int) -> str:
        """What the j-th series of the gamma axis is: "gamma=<g>" for a weighting with an
        exponent (the focal weight), else its name, "maxrl" for MaxRL's weight (one series,
        whose gamma the simulator ignores)."""
        w = self.config.weightings()[j]
        return f"gamma={w.gamma:g}" if w.rule.takes_gamma else w.kind

    def final_rows(self) -> list[dict]:
        """One row per (N, gamma, seed) with the final q_pos, m_ret, entropy."""
        rows = []
        for i, N in enumerate(self.config.group_sizes):
            for j, gamma in enumerate(self.config.gammas):
                for k, seed in enumerate(self.config.seeds):
                    rows.append(
                        {
                            "N": N,
                            "gamma": gamma,
                            "seed": seed,
                            **{
                                key: float(self.records[key][i, j, k, -1])
                                for key in ("q_pos", "m_ret", "entropy")
                            },
                        }
                    )
        return rows

    def csv_text(self) -> str:
        """The CSV: one row per (N, gamma, seed): N, gamma, seed, q_pos, m_ret, entropy; with
        a weighting without an exponent (MaxRL's) also a last column ``weighting`` naming it
        (gamma is then ignored)."""
        w = self.config.weightings()[0]
        named = "" if w.rule.takes_gamma else f",{w.kind}"
        lines = ["N,gamma,seed,q_pos,m_ret,entropy" + (",weighting" if named else "")]
        lines += [
            f"{r['N']},{r['gamma']:g},{r['seed']},{r['q_pos']:.6g},{r['m_ret']:.6g},"
            f"{r['entropy']:.6g}" + named
            for r in self.final_rows()
        ]
        return "\n".join(lines) + "\n"

    def write_csv(self, path) -> Path:
        return _write_text(Path(path), self.csv_text())

    def write_jsonl(self, path) -> Path:
        """One JSON line per step t: {"step": t, "q_pos/N=2/gamma=0": seed mean, ...} for the
        policy records (q_pos, m_ret, entropy, tau); "q_pos/N=2/maxrl" with MaxRL's weight
        (``weighting_label``)."""
        cfg = self.config
        means = {k: self.records[k].mean(axis=2) for k in POLICY_RECORDS}
        lines = []
        for t in range(cfg.steps + 1):
            row = {"step": t}
            for k, a in means.items():
                for i, N in enumerate(cfg.group_sizes):
                    for j in range(len(cfg.gammas)):
                        row[f"{k}/N={N}/{self.weighting_label(j)}"] = round(float(a[i, j, t]), 7)
            lines.append(json.dumps(row))
        return _write_text(Path(path), "\n".join(lines) + "\n")

    def save(self, out_dir) -> Path:
        """records as ``simulation.npz`` next to the resolved config ``simulation_config.json``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _save_pair(out, self.records, _saved_config_json(self.config, self.family))
        return out / "simulation.npz"


# ----------------------------------------------------------------------------- files


def _write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file in the same folder, renamed)."""
    return atomic_write_text(path, text)


def _save_pair(out: Path, records: dict, config_json: str) -> None:
    """``simulation.npz`` and then ``simulation_config.json`` in ``out``, the old config removed
    first: a process killed between the two writes leaves no config, so the new records are
    never read back as the old config's (``load_cached`` needs both)."""
    (out / "simulation_config.json").unlink(missing_ok=True)
    _save_npz(out / "simulation.npz", records)
    _write_text(out / "simulation_config.json", config_json)


def _save_npz(path: Path, arrays: dict) -> Path:
    """``np.savez`` to ``path`` atomically. Not compressed: the records are float series that
    zlib shrinks by a quarter at 50x the time (0.4 s against 7 ms for paper-fig2's)."""
    return atomic_write(path, lambda fh: np.savez(fh, **arrays))


def _record_dtype(key: str) -> np.dtype:
    """The dtype of a record (``group.new_records``): bool for the tail-miss flags, else float64."""
    return np.dtype(bool) if key == "tail_miss" else np.dtype(np.float64)


def _load_npz(path: Path, shapes: dict) -> dict | None:
    """The arrays of ``path`` (never unpickled) when it holds exactly ``shapes`` with the
    records' dtypes, else None: a file that cannot be read as such (damaged, foreign, another
    zip version) is recomputed, never trusted."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if set(data.files) != set(shapes):
                return None
            out = {k: data[k] for k in data.files}
    except Exception:  # noqa: BLE001 - any unreadable cache file is recomputed (zipfile, zlib, ...)
        return None
    if any(
        out[k].shape != shape or out[k].dtype != _record_dtype(k) for k, shape in shapes.items()
    ):
        return None
    return out


def _saved_config_json(cfg: SimConfig, engine_family: str = "numpy") -> str:
    """The resolved config as saved next to the results, with the simulator version (and the
    engine family when its draws are not numpy's)."""
    extra = {} if engine_family == "numpy" else {"engine": engine_family}
    return json.dumps(
        {**asdict(cfg), "simulator_version": SIMULATOR_VERSION, **extra}, indent=2, sort_keys=True
    )


def _family(engine: str) -> str:
    return engine if engine in ("torch", "split") else "numpy"


# ----------------------------------------------------------------------------- one sweep per folder


def sweep_lock(folder):
    """Hold ``folder`` (created if missing) for one sweep while the block runs: an exclusive OS
    lock on the folder itself (``fgrpo_common.files.directory_lock``, nothing written into it),
    which the operating system releases when the process ends, however it ends (``kill -9``
    included). A sweep of another process into the same folder is refused with a ValueError
    before it touches anything: two sweeps would otherwise mix the runs of two configs in
    ``partial/`` and pair one's records with the other's config. Re-entrant within a process.
    Where there is no such lock (no ``fcntl``, a file system without ``flock``) the block runs
    unlocked."""
    return directory_lock(
        folder, what="sweep (fgrpo-theory simulate or run_cached)", lock_file=None
    )


# ----------------------------------------------------------------------------- checkpoints


class _Checkpoint:
    """Finished runs of one sweep as ``DIR/N{N}-g{j}-s{k}.npz`` (j, k: indices of gamma and
    seed) next to ``DIR/config.json``; files of another config are removed on open."""

    def __init__(self, folder, cfg: SimConfig, family: str):
        self.dir = Path(folder)
        self.cfg = cfg
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg_path = self.dir / "config.json"
        want = _saved_config_json(cfg, family)
        if not _same_json_file(cfg_path, want):
            for old in self._runs():
                old.unlink()
            _write_text(cfg_path, want)
        T = cfg.steps
        self.shapes = {k: (T + 1,) for k in POLICY_RECORDS}
        self.shapes.update({k: (T,) for k in GROUP_RECORDS})

    def _runs(self) -> list[Path]:
        """The run files in the folder (only the names this class writes)."""
        return [p for p in self.dir.glob("N*-g*-s*.npz") if _RUN_FILE.fullmatch(p.name)]

    def _path(self, N: int, gamma: float, seed: int) -> Path:
        j, k = self.cfg.gammas.index(gamma), self.cfg.seeds.index(seed)
        return self.dir / f"N{N}-g{j}-s{k}.npz"

    def load(self, N: int, gamma: float, seed: int) -> dict | None:
        path = self._path(N, gamma, seed)
        return _load_npz(path, self.shapes) if path.exists() else None

    def save(self, N: int, gamma: float, seed: int, rec: dict) -> None:
        _save_npz(self._path(N, gamma, seed), rec)

    def remove(self) -> None:
        """Delete the run files and config.json, then the folder if nothing else is in it (a
        file of the user's there stays)."""
        remove_checkpoint(self.dir)


#: The name of a finished run's file in a checkpoint folder.
_RUN_NAME = r"N\d+-g\d+-s\d+\.npz"
_RUN_FILE = re.compile(_RUN_NAME)
#: The files a checkpoint folder holds of its own: runs, config.json, and what an interrupted
#: atomic write of either left (``fgrpo_common.files``).
_OWN_FILE = re.compile(rf"\.?(config\.json|{_RUN_NAME})({re.escape(TEMPORARY_MARK)}\w+)?")


def remove_checkpoint(folder) -> None:
    """Remove what a sweep's checkpoint folder holds of its own (run files, config.json) and the
    folder when it is then empty; anything else in it is left where it is."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        if p.is_file() and _OWN_FILE.fullmatch(p.name):
            p.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: the user's files stay
        folder.rmdir()


def _same_json_file(path: Path, want: str) -> bool:
    """Whether the JSON file ``path`` holds the same value as the text ``want`` (False when it
    is missing, unreadable, not UTF-8 or not JSON)."""
    try:
        return json.loads(path.read_bytes().decode("utf-8")) == json.loads(want)
    except (OSError, ValueError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return False


# ----------------------------------------------------------------------------- sweeps


def _task(args):
    cfg, N, runs, engine = args
    return N, runs, simulate_runs(cfg, N, runs, engine=engine)


def _bar(total_steps: int, runs: int, progress: bool):
    """A tqdm bar over run-steps whose label counts the runs done (its ETA: time left)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total_steps,
        unit="run-step",
        unit_scale=True,
        disable=bar_disabled(progress),
        file=sys.stderr,
        desc=f"simulate: runs 0/{runs}",
    )


def run_sweep(
    cfg: SimConfig,
    *,
    workers: int = 1,
    progress: bool = True,
    engine: str = "auto",
    checkpoint=None,
    device: str | None = None,
) -> SweepResult:
    """All (N, gamma, seed) runs of ``cfg``, largest N first, over ``workers`` processes
    (1 = in this process), each with its native thread pools pinned to one thread.

    progress: a bar on stderr with the runs done and the estimated time left.
    engine: 'auto', 'dense', 'sparse', 'compiled', 'split' (one worker) or 'torch'
        (``fgrpo_theory.sim.engines``).
    checkpoint: a folder where each finished run is saved at once and from which finished runs
        are loaded instead of simulated (``run_cached`` passes ``OUT/partial``).
    device: the torch engine's device ('cuda' when available, else 'cpu', by default).

    A checkpoint folder is held for the sweep (``sweep_lock``): a second sweep into it, from
    another process, is refused with a ValueError."""
    workers, engine = _check_sweep_arguments(cfg, workers, engine, device)
    if checkpoint is None:
        return _sweep(cfg, workers, progress, engine, None, device)
    with sweep_lock(checkpoint):
        return _sweep(cfg, workers, progress, engine, checkpoint, device)


def _check_sweep_arguments(cfg: SimConfig, workers, engine, device) -> tuple[int, str]:
    """(workers, the engine that runs cfg), or a ValueError / TypeError naming the bad one."""
    workers = int(check_integer("workers", workers, minimum=1))
    if workers > 1024:
        raise ValueError(f"workers must be <= 1024, got workers={workers}")
    engine = choose_engine(cfg, engine)
    if engine == "split" and workers > 1:
        raise ValueError(
            f"engine='split' runs each run on two cores, so a sweep takes one worker, got "
            f"workers={workers} (worker processes on one core each use the cores better)"
        )
    if engine == "torch":
        check_device(device)  # a bad device fails before any file
    elif device is not None:
        raise ValueError(f"device={device!r} applies to engine='torch' only, got engine={engine!r}")
    return workers, engine


def _sweep(cfg, workers, progress, engine, checkpoint, device) -> SweepResult:
    """``run_sweep`` after its checks (and with its checkpoint folder held)."""
    ckpt = _Checkpoint(checkpoint, cfg, _family(engine)) if checkpoint is not None else None
    every = [(N, g, s) for N in cfg.group_sizes for g in cfg.gammas for s in cfg.seeds]
    done: dict[tuple[int, float, int], dict] = {}
    if ckpt is not None:
        for key in every:
            rec = ckpt.load(*key)
            if rec is not None:
                done[key] = rec
    todo = [key for key in every if key not in done]
    T = cfg.steps
    bar = _bar(len(todo) * T, len(todo), progress)

    def collect(N, runs, rec):
        for r, (g, s) in enumerate(runs):
            one = {k: np.ascontiguousarray(a[r]) for k, a in rec.items()}
            done[N, g, s] = one
            if ckpt is not None:
                ckpt.save(N, g, s, one)
        bar.set_description_str(
            f"simulate: runs {len(done) - (len(every) - len(todo))}/{len(todo)}", refresh=False
        )

    try:
        if not todo:
            pass
        elif engine == "torch":
            with pinned(workers):
                simulate_runs_torch(
                    cfg,
                    todo,
                    device=device,
                    progress=bar.update,
                    on_run=lambda key, rec: collect(
                        key[0], [key[1:]], {k: a[None] for k, a in rec.items()}
                    ),
                )
        else:
            _run_numpy(cfg, engine, todo, workers, collect, bar)
    finally:
        bar.close()
    records = {
        k: np.stack(
            [
                np.stack([np.stack([done[N, g, s][k] for s in cfg.seeds]) for g in cfg.gammas])
                for N in cfg.group_sizes
            ]
        )
        for k in RECORD_KEYS
    }  # (nN, nG, nS, ...)
    return SweepResult(config=cfg, records=records, family=_family(engine))


def _run_numpy(cfg, engine, todo, workers, collect, bar) -> None:
    """The runs ``todo`` on a numpy engine, in this process (one worker, or one work item) or
    over ``workers`` processes, each collected as it finishes."""
    items = work_items(cfg, engine, todo)
    if workers == 1 or len(items) == 1:
        with pinned(1):
            for N, runs in items:
                collect(N, runs, simulate_runs(cfg, N, runs, engine=engine, progress=bar.update))
    else:
        _run_pool(cfg, engine, items, workers, collect, bar)


def _run_pool(cfg, engine, items, workers, collect, bar) -> None:
    """The work items over ``workers`` processes (threads pinned to 1 each), collected as they
    finish."""
    jobs = [((cfg, N, runs, engine),) for N, runs in items]
    finished = as_finished(
        _task, jobs, workers=workers, spawn=False, initializer=pin_worker, initargs=(1,)
    )
    for N, runs, rec in finished:
        collect(N, runs, rec)
        bar.update(len(runs) * cfg.steps)


# ----------------------------------------------------------------------------- cache


def load_cached(cfg: SimConfig, out_dir, *, engine: str = "auto") -> SweepResult | None:
    """The saved sweep in ``out_dir`` when its config (and simulator version) equals ``cfg``'s,
    else None."""
    out = Path(out_dir)
    npz, js = out / "simulation.npz", out / "simulation_config.json"
    if not (npz.is_file() and js.is_file()):
        return None
    family = _family(engine)
    if not _same_json_file(js, _saved_config_json(cfg, family)):
        return None
    n = (len(cfg.group_sizes), len(cfg.gammas), len(cfg.seeds))
    shapes = {k: n + (cfg.steps + 1,) for k in POLICY_RECORDS}
    shapes.update({k: n + (cfg.steps,) for k in GROUP_RECORDS})
    records = _load_npz(npz, shapes)
    if records is None:
        return None
    return SweepResult(config=cfg, records=records, family=family)


def run_cached(
    cfg: SimConfig,
    out_dir,
    *,
    workers: int = 1,
    progress: bool = True,
    engine: str = "auto",
    device: str | None = None,
) -> SweepResult:
    """``run_sweep`` unless ``out_dir`` already holds this exact config's results; saves them,
    and what computed them in ``environment.json`` (``environment``: versions, CPU, the engine).
    Finished runs go to ``out_dir/partial/`` as they finish, so an interrupted sweep resumes.
    The arguments are checked also when the results are cached; ``out_dir`` is held for the
    call (``sweep_lock``: a sweep of another process into it is refused)."""
    workers, engine = _check_sweep_arguments(cfg, workers, engine, device)
    out = Path(out_dir)
    with sweep_lock(out):
        cached = load_cached(cfg, out, engine=engine)
        if cached is not None:
            return cached
        with sweep_lock(out / "partial"):  # (``run_sweep`` without its checks, made above)
            res = _sweep(cfg, workers, progress, engine, out / "partial", device)
        res.save(out)
        _write_text(out / ENVIRONMENT_FILE, json.dumps(environment(cfg, engine, workers), indent=2))
        remove_checkpoint(out / "partial")
    return res


#: The file in which ``run_cached`` records what computed a sweep.
ENVIRONMENT_FILE = "environment.json"


def environment(cfg: SimConfig, engine: str = "auto", workers: int = 1) -> dict:
    """What a sweep of ``cfg`` computes on here: the versions (fgrpo and its commit, python,
    numpy, scipy, numba), the CPU and its vector flags, the kernel variables that are set
    (``fgrpo_common.environment.machine_environment``), the engine ``engine`` resolves to and the
    worker count. A run's numbers depend on the machine's and the engine's rounding (the engines
    agree in distribution, docs/simulator.md): this says where a saved sweep's came from."""
    env = machine_environment(packages=("numpy", "scipy", "numba"))
    return {**env, "engine": choose_engine(cfg, engine), "workers": int(workers)}
