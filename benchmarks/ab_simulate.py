"""The compiled simulator engine against its own version at another git revision, in one process,
interleaved: CPU time of one paper-fig2 run per N (gamma 1, seed 1, 1000 steps), best of
``--repeats``, and whether every record is bit for bit the same.

    python benchmarks/ab_simulate.py --against 3e6f602
    python benchmarks/ab_simulate.py --against HEAD~1 --sizes 2,2048,131072 --repeats 3

The baseline is ``git show REV:fgrpo_theory/sim/compiled.py`` imported beside the current
module (it uses the current package for everything else), compiled into a temporary folder.
Alternating the two in one process is what makes the ratio trustworthy on a machine whose speed
drifts from minute to minute; two sweeps run one after the other are not. One thread.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "fgrpo_theory/sim/compiled.py"


def _load_revision(rev: str, folder: Path):
    """The compiled engine's module as it was at ``rev``; ValueError naming rev if git has no
    such file there."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{MODULE}"], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise ValueError(f"--against {rev!r}: git has no {MODULE} there ({out.stderr.strip()})")
    path = folder / "compiled_baseline.py"
    path.write_text(out.stdout)
    spec = importlib.util.spec_from_file_location("compiled_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # numba resolves the kernels' globals through it
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    import numpy as np

    from fgrpo_common.cli import parse_list
    from fgrpo_theory.sim import PRESETS
    from fgrpo_theory.sim.threads import pinned

    base = PRESETS["paper-fig2"]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--against", required=True, help="git revision of the baseline engine")
    p.add_argument("--sizes", default=",".join(map(str, base.group_sizes)), help="group sizes N")
    p.add_argument("--steps", type=int, default=base.steps, help="steps per run (default 1000)")
    p.add_argument("--repeats", type=int, default=2, help="runs per N and engine (best is kept)")
    args = p.parse_args(argv)
    try:
        sizes = parse_list("--sizes", args.sizes, int)
    except ValueError as err:
        p.error(str(err))
    if args.steps < 1 or args.repeats < 1 or min(sizes) < 2:
        p.error(
            f"need --steps >= 1, --repeats >= 1 and every N >= 2, got steps={args.steps} "
            f"repeats={args.repeats} sizes={sizes}"
        )
    import fgrpo_theory.sim.compiled as now

    reason = now.unavailable_reason()
    if reason:
        p.error(f"the compiled engine is not available here: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            before = _load_revision(args.against, Path(tmp))
        except ValueError as err:
            p.error(str(err))
        cfg = replace(base, steps=args.steps)
        with pinned(1):
            for engine in (before, now):  # compile outside the timings
                engine.simulate_run_compiled(replace(cfg, steps=3), 64, 1.0, 1)
                engine.simulate_run_compiled(replace(cfg, steps=3), 131072, 1.0, 1)
            print(f"N, CPU s of one run: {args.against} | now | now / {args.against} | records")
            total = {"before": 0.0, "now": 0.0}
            same_all = True
            for N in sizes:
                spent = {"before": [], "now": []}
                for _ in range(args.repeats):  # interleaved: a drift hits both alike
                    for name, engine in (("before", before), ("now", now)):
                        t = time.process_time()
                        rec = engine.simulate_run_compiled(cfg, N, 1.0, 1)
                        spent[name].append(time.process_time() - t)
                        if name == "before":
                            ref = rec
                same = all(np.array_equal(ref[k], rec[k]) for k in ref)
                same_all &= same
                b, n = min(spent["before"]), min(spent["now"])
                total["before"] += b
                total["now"] += n
                print(
                    f"N={N:7d} {b:7.3f} {n:7.3f} {n / b:6.3f} {'identical' if same else 'DIFFER'}",
                    flush=True,
                )
    b, n = total["before"], total["now"]
    print(
        f"all {len(sizes)} N: {b:.2f} s against {n:.2f} s, now / {args.against} = {n / b:.3f}; "
        f"records {'identical' if same_all else 'DIFFER'} at every N"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
