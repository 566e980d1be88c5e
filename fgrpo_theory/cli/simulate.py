"""``fgrpo-theory simulate``: the categorical policy simulation of Section 5.1 / Appendix J
(Fig. 2).

    fgrpo-theory simulate --preset paper-fig2 --out results/fig2
    fgrpo-theory simulate --actions 12800 --correct 1000 --group-size 2,64,4096 --steps 300 \\
        --lr 0.03 --csv results/small.csv

With ``--out`` it writes ``fig2.png`` (Q_pos and M_ret against step; final Q_pos and M_ret
against N), ``metrics.jsonl`` (one line per step, seed means), ``fig2.csv`` (one row per
(N, gamma, seed): N, gamma, seed, q_pos, m_ret, entropy), the records ``simulation.npz`` and
the resolved config ``simulation_config.json`` (a rerun with the same config reuses them).
Finished runs are saved under ``OUT/partial/`` as they finish, so an interrupted sweep (Ctrl-C,
a killed job) resumes where it stopped when rerun. ``--csv PATH`` writes the CSV there instead
(without ``--out``, finished runs wait in ``PATH.partial/`` until the CSV is written). The seed
means of the final Q_pos and M_ret per (N, gamma) go to stdout (``--json``: as JSON). The first
run on a machine compiles the engine's kernels (numba, cached on disk), which a line on stderr
says. ``--group-sizes`` and ``--gammas`` are deprecated spellings of ``--group-size`` and
``--gamma``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from fgrpo_common.cli import (
    add_deprecated_alias,
    add_json_flag,
    add_progress_flag,
    check_path_flag,
    json_result,
    parse_list,
)
from fgrpo_common.files import TEMPORARY_MARK, save_figure
from fgrpo_theory.plots_categorical import plot_fig2
from fgrpo_theory.sim.config import (
    ADVANTAGES,
    OPTIMIZERS,
    PRESETS,
    SIM_WEIGHTINGS,
    SURROGATES,
    SimConfig,
    sparse_applies,
)
from fgrpo_theory.sim.engines import ENGINES
from fgrpo_theory.sim.sweep import remove_checkpoint, run_cached, run_sweep, sweep_lock

#: The most worker processes the command starts.
MAX_WORKERS = 1024


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="categorical policy simulation (Fig. 2: Q_pos, M_ret vs N)",
        description="Multi-step softmax-policy simulation; writes a CSV of final Q_pos, M_ret "
        "and entropy per (N, gamma, seed) and the Fig. 2 panels.",
    )
    p.add_argument(
        "--preset", choices=sorted(PRESETS), help="start from a preset (flags below override it)"
    )
    p.add_argument("--out", help="directory for fig2.png, fig2.csv and the cached records")
    p.add_argument("--csv", help="write the CSV here (default: OUT/fig2.csv)")
    p.add_argument("--actions", type=int, help="K, number of actions")
    p.add_argument("--correct", type=int, help="number of correct actions")
    sizes = p.add_argument("--group-size", dest="group_sizes", help="N values, e.g. 2,4,8")
    add_deprecated_alias(p, "--group-sizes", sizes)
    gammas = p.add_argument("--gamma", dest="gammas", help="focal exponents, e.g. 0,1")
    add_deprecated_alias(p, "--gammas", gammas)
    p.add_argument("--seeds", help="seeds, e.g. 0,1,2,3")
    p.add_argument("--steps", type=int, help="optimisation steps")
    p.add_argument("--lr", type=float, help="learning rate")
    p.add_argument("--optimizer", choices=OPTIMIZERS)
    p.add_argument("--surrogate", choices=SURROGATES)
    p.add_argument("--advantage", choices=ADVANTAGES)
    p.add_argument(
        "--weighting",
        choices=SIM_WEIGHTINGS,
        help="focal (w = (1 - X/N)^gamma, default), none (GRPO; give one gamma) or maxrl "
        "(w = sqrt((1 - X/N) / (X/N)); give one gamma)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes, one core each (default: min(2, CPUs); 1 with --engine split, "
        "whose runs take two cores each)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="simulation engine (default auto: the compiled sparse engine where it "
        "applies); 'split' runs each run on two cores; 'torch' batches all runs on --device",
    )
    p.add_argument(
        "--device", help="torch engine device, e.g. cuda or cpu (default: cuda when available)"
    )
    add_progress_flag(p)
    add_json_flag(p, "the seed means of the final Q_pos and M_ret per (N, gamma)")
    p.set_defaults(func=run_simulate)


def _writable_dir(flag: str, folder: Path) -> None:
    """Create ``folder`` and check that files can be written in it (before a long sweep)."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{flag}: {str(folder)!r} exists and is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"{flag}: cannot create {str(folder)!r}: {err.strerror or type(err).__name__}"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{flag}: cannot write in {str(folder)!r}")


def _config(args):
    from dataclasses import replace

    overrides = {
        k: getattr(args, k)
        for k in (
            "actions",
            "correct",
            "group_sizes",
            "gammas",
            "seeds",
            "steps",
            "lr",
            "optimizer",
            "surrogate",
            "advantage",
            "weighting",
        )
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    for key, flag, kind in (
        ("group_sizes", "--group-size", int),
        ("gammas", "--gamma", float),
        ("seeds", "--seeds", int),
    ):
        if key in overrides:
            overrides[key] = parse_list(flag, overrides[key], kind)
    return replace(PRESETS[args.preset], **overrides) if args.preset else SimConfig(**overrides)


def _check_outputs(args) -> None:
    """--csv a file (not a directory, not the --out directory) in a writable folder, --out a
    writable directory: checked before the sweep starts."""
    if args.csv:
        csv_path = Path(args.csv)
        if csv_path.is_dir():
            raise ValueError(f"--csv: {args.csv!r} is a directory")
        if args.out and csv_path.resolve() == Path(args.out).resolve():
            raise ValueError(f"--csv: {args.csv!r} is the --out directory; give a file in it")
        _writable_dir("--csv", csv_path.parent)
    if args.out:
        _writable_dir("--out", Path(args.out))


def run_simulate(args) -> int:
    for flag, value in (("--out", args.out), ("--csv", args.csv)):
        if value is not None:
            check_path_flag(flag, value)
    cfg = _config(args)
    if not args.out and not args.csv:
        raise ValueError("give --out DIR and/or --csv PATH")
    if args.workers is None:
        args.workers = 1 if args.engine == "split" else min(2, os.cpu_count() or 1)
    if not 1 <= args.workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be in 1..{MAX_WORKERS}, got {args.workers}")
    if args.device is not None and args.engine != "torch":
        raise ValueError(
            f"--device {args.device!r} applies to --engine torch only (got --engine {args.engine})"
        )
    _check_outputs(args)
    progress = not args.no_progress
    announce_compilation(cfg, args.engine)
    kw = dict(workers=args.workers, progress=progress, engine=args.engine, device=args.device)
    if args.out:
        out = Path(args.out)
        with sweep_lock(out):  # one sweep at a time in OUT, its files written together
            res = run_cached(cfg, out, **kw)
            _remove_stale_temporaries(out, args.csv)
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            with _sigterm_unwinds():  # a kill mid-write leaves no .fig2.png.tmp-* behind
                fig = plot_fig2(res)
                save_figure(fig, out / "fig2.png", dpi=100)
                plt.close(fig)
                res.write_jsonl(out / "metrics.jsonl")
                print(f"wrote {out / 'fig2.png'} and {out / 'metrics.jsonl'}", file=sys.stderr)
                csv = res.write_csv(args.csv or out / "fig2.csv")
    else:
        partial = Path(f"{args.csv}.partial")
        res = run_sweep(cfg, checkpoint=partial, **kw)
        csv = res.write_csv(args.csv)
        remove_checkpoint(partial)
    print(f"wrote {csv}", file=sys.stderr)
    if args.json:
        return json_result(args, _summary_rows(res))
    _print_summary(res)
    return 0


def _summary_rows(res) -> list[dict]:
    """The seed means of the final Q_pos and M_ret, one row per (N, weighting)."""
    cfg = res.config
    q = res.records["q_pos"][..., -1].mean(axis=2)  # (len(N), len(gammas))
    m = res.records["m_ret"][..., -1].mean(axis=2)
    return [
        {
            "N": int(N),
            "gamma": float(gamma),
            "weighting": res.weighting_label(j),
            "seeds": len(cfg.seeds),
            "q_pos": float(q[i, j]),
            "m_ret": float(m[i, j]),
        }
        for i, N in enumerate(cfg.group_sizes)
        for j, gamma in enumerate(cfg.gammas)
    ]


def announce_compilation(cfg, engine: str) -> bool:
    """Say on stderr when this run compiles the compiled engine's kernels (numba caches them
    on disk after the first run on a machine; until then the bar would sit at 0% for about
    30 s). Returns whether it said so."""
    from fgrpo_theory.sim import compiled  # lazy: numba

    if engine not in ("auto", "compiled", "split") or compiled.numba is None:
        return False
    if engine == "auto" and not sparse_applies(cfg):
        return False  # the numpy engine runs: nothing to compile
    index = kernel_index(compiled)
    if index is None or os.path.exists(index):
        return False
    print(
        "fgrpo-theory simulate: compiling the simulator's kernels (numba, about 30 s, once per "
        f"machine; cached in {os.path.dirname(index)})",
        file=sys.stderr,
        flush=True,
    )
    return True


def kernel_index(compiled) -> str | None:
    """The file of numba's on-disk cache that indexes the compiled engine's run kernel (it
    exists once the kernel is compiled on this machine), or None without such a cache."""
    cache = getattr(getattr(compiled, "_run_steps", None), "_cache", None)
    return getattr(getattr(cache, "_cache_file", None), "_index_path", None)


#: The files ``simulate --out`` writes atomically (each through a ``.NAME.tmp-*`` sibling).
_OUTPUTS = ("fig2.png", "metrics.jsonl", "fig2.csv")


@contextlib.contextmanager
def _sigterm_unwinds():
    """While the block runs, SIGTERM raises SystemExit(143) in the main thread instead of ending
    the process at once, so that the atomic writes' cleanup (their ``finally``) removes the
    temporary file they were writing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _remove_stale_temporaries(out: Path, csv_path) -> None:
    """Delete the ``.NAME.tmp-*`` siblings of this command's outputs that an earlier run killed
    mid-write (SIGKILL) left behind; called under the sweep lock, so no writer owns them."""
    targets = [out / name for name in _OUTPUTS] + ([Path(csv_path)] if csv_path else [])
    for target in targets:
        for stale in target.parent.glob(f".{target.name}{TEMPORARY_MARK}*"):
            with contextlib.suppress(OSError):
                stale.unlink()


def _print_summary(res) -> None:
    """Seed-mean final Q_pos and M_ret per (N, gamma) on stdout."""
    cfg = res.config
    q = res.records["q_pos"][..., -1].mean(axis=2)
    m = res.records["m_ret"][..., -1].mean(axis=2)
    labels = [res.weighting_label(j).replace("gamma=", "g=") for j in range(len(cfg.gammas))]
    head = "N".rjust(7) + "".join(f"  Q_pos({w})  M_ret({w})" for w in labels)
    print(head)
    for i, N in enumerate(cfg.group_sizes):
        print(
            f"{N:7d}"
            + "".join(f"  {q[i, j]:11.4f}  {m[i, j]:11.4f}" for j in range(len(cfg.gammas)))
        )
