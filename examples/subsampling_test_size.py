"""How often the paired subsampling test (App. Q) rejects a true null, with and without the
finite-population factor, at the paper's n = 1024 samples and m = 256 (or your own n, m, k).

    .venv/bin/python examples/subsampling_test_size.py                 # about 1 min on one core
    .venv/bin/python examples/subsampling_test_size.py --n 512 --m 128 --k 1,8 --tests 500
    .venv/bin/python examples/subsampling_test_size.py --n 64 --m 16 --k 1,16 --rate 0.5

Each null test draws a pass rate per problem from U(0, 1) (or takes ``--rate`` for every
problem) and both methods' outcomes from it (:func:`fgrpo_theory.passk.null_rejection_rate`); a
calibrated test rejects alpha of them. With k close to m and problems both methods nearly always
solve, a subsample's pass@k saturates and the test is not calibrated (the last example: k = 16).
"""

from __future__ import annotations

import numpy as np

from fgrpo_common.cli import CLI_ERRORS, OneLineArgumentParser, error_line, parse_list
from fgrpo_theory.passk import null_rejection_rate


def main(argv=None) -> int:
    parser = OneLineArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024, help="samples per problem (1024)")
    parser.add_argument("--m", type=int, default=256, help="subsample size (256)")
    parser.add_argument("--k", default="1,16,64", help="the ks of pass@k (1,16,64)")
    parser.add_argument("--problems", type=int, default=20, help="problems per test (20)")
    parser.add_argument("--tests", type=int, default=2000, help="null tests per row (2000)")
    parser.add_argument("--iterations", type=int, default=400, help="subsamples per test (400)")
    parser.add_argument("--alpha", type=float, default=0.05, help="level (0.05)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every row (1)")
    parser.add_argument(
        "--rate", type=float, default=None, help="one pass rate for every problem (default U(0, 1))"
    )
    args = parser.parse_args(argv)
    try:
        return _table(args)
    except CLI_ERRORS as err:  # a bad --n, --m, --k, ...: one line, exit 2
        parser.error(error_line(err))


def _table(args) -> int:
    ks = parse_list("--k", args.k, int)
    print(
        f"n = {args.n}, m = {args.m}, {args.problems} problems, {args.tests} null tests of "
        f"{args.iterations} subsamples each, alpha = {args.alpha}, seed {args.seed}, pass rates "
        f"{'U(0, 1)' if args.rate is None else args.rate}; "
        "rejection rate [95% Wilson interval]"
    )
    print(f"{'k':>4}  {'sqrt(m) alone (the paper)':>28}  {'with the factor (default)':>28}")
    for k in ks:
        cells = []
        for finite_population in (False, True):
            rate, low, high = null_rejection_rate(
                n=args.n,
                m=args.m,
                k=k,
                problems=args.problems,
                tests=args.tests,
                iterations=args.iterations,
                alpha=args.alpha,
                finite_population=finite_population,
                rate=args.rate,
                rng=np.random.default_rng(args.seed),
            )
            cells.append(f"{rate:.4f} [{low:.3f}, {high:.3f}]")
        print(f"{k:>4}  {cells[0]:>28}  {cells[1]:>28}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
