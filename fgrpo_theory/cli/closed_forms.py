"""``fgrpo-theory tail-miss | peak | pass-at-k``: the closed forms from the command line.

    fgrpo-theory tail-miss --mu 0.3 --rho 0.05,0.1,0.2 --max-group-size 128 --plot out.png
    fgrpo-theory tail-miss --mu 0.3 --tau 0.015 --group-size 1,2,8 --json
    fgrpo-theory peak --mu 0.8,0.5,0.2 --rho 0.01,0.05
    fgrpo-theory pass-at-k --samples 1024 --c 3,100 --k 1,8,256
    fgrpo-theory pass-at-k --p 0.01,0.1 --k 1,256

Lists are comma-separated. The old spellings ``--n`` (group sizes; samples in ``pass-at-k``)
and ``--n-max`` still work, with a deprecation line on stderr. Bad values raise ``ValueError``
naming the argument (exit status 2, one line on stderr). ``--json`` prints strict JSON: a value
with no finite answer (the stationary point N_c of a curve with tau = 0 is +inf, of one with
P(B) = 0 undefined, of one with N_c above e^709 beyond float64) is ``null``, never a NaN /
Infinity token.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np

from fgrpo_common.checks import check_integer, single
from fgrpo_common.cli import add_deprecated_alias, add_json_flag, json_result
from fgrpo_common.files import save_figure
from fgrpo_theory.passk import pass_at_k_exact, pass_at_k_unbiased
from fgrpo_theory.plots import plot_tail_miss_curves
from fgrpo_theory.tail_miss import p_active, p_tail_miss, peak_group_size, stationary_group_size

#: At most this many table rows (curves x group sizes, or values x k): a bigger request is a
#: typo far more often than a wish to print a million lines.
MAX_ROWS = 1_000_000
#: At most this many curves for ``peak`` and panels (distinct mu) for ``--plot``.
MAX_CURVES = 10_000
MAX_PANELS = 16


def _float_list(name: str, text: str) -> np.ndarray:
    """Comma-separated numbers; ValueError naming ``name`` when empty or unparsable."""
    items = [s.strip() for s in str(text).split(",")]
    if not any(items):
        raise ValueError(f"{name} must not be empty, got {name}={text!r}")
    try:
        values = [float(s) for s in items]
    except ValueError as err:
        raise ValueError(
            f"{name} must be a comma-separated list of numbers, got {name}={text!r}"
        ) from err
    if any(v != v for v in values):
        raise ValueError(f"{name} must not be NaN, got {name}={text!r}")
    if len(values) > MAX_ROWS:
        raise ValueError(f"{name} has {len(values)} values, more than the {MAX_ROWS} allowed")
    return np.asarray(values)


def _int_list(name: str, text: str, *, minimum: int) -> np.ndarray:
    """Comma-separated integers (exact, as Python ints: 2**53 + 1 stays itself; a value with a
    zero fraction such as 8.0 is accepted); ValueError naming ``name`` otherwise."""
    items = [s.strip() for s in str(text).split(",")]
    values = []
    for item in items:
        try:
            values.append(int(item))
        except ValueError:
            values = None
            break
    if values is None:  # not all plain integers: 8.0, 1e3, or not numbers at all
        return check_integer(name, _float_list(name, text), minimum=minimum)
    if len(values) > MAX_ROWS:
        raise ValueError(f"{name} has {len(values)} values, more than the {MAX_ROWS} allowed")
    return check_integer(name, np.asarray(values, dtype=object), minimum=minimum)


def _check_plot_path(text: str) -> Path:
    """--plot must name a new or existing regular file with an image suffix matplotlib writes,
    in a writable directory (missing directories are created when the figure is saved, as for
    every other output): checked before any work is done."""
    if not text or "\0" in text:
        raise ValueError(f"--plot must be a file path, got --plot={text!r}")
    path = Path(text)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:  # the nearest existing ancestor
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--plot directory is not a directory: {parent}")
    if path.is_dir():
        raise ValueError(f"--plot must be a file, got the directory --plot={text}")
    if path.exists() and not path.is_file():
        raise ValueError(f"--plot must be a regular file, got --plot={text}")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"--plot is not writable: {text}")
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    formats.pop("pgf", None)  # (needs a LaTeX installation, which matplotlib only finds late)
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise ValueError(
            f"--plot must end in one of .{', .'.join(sorted(formats))}, got --plot={text}"
        )
    return path


def _curves(args) -> list[tuple[float, float, float | None]]:
    """(mu, tau, rho or None) for every mu x (rho or tau) pair, validated."""
    mus = _float_list("--mu", args.mu)
    bad = [m for m in mus if not 0.0 <= m <= 1.0]
    if bad:
        raise ValueError(f"--mu must lie in [0, 1], got --mu={bad[0]:g}")
    if args.rho is not None:
        others = _float_list("--rho", args.rho)
        bad = [r for r in others if not 0.0 <= r <= 1.0]
        if bad:
            raise ValueError(f"--rho must lie in [0, 1], got --rho={bad[0]:g}")
    else:
        others = _float_list("--tau", args.tau)
        bad = [t for t in others if not 0.0 <= t <= 1.0]
        if bad:
            raise ValueError(f"--tau must lie in [0, 1], got --tau={bad[0]:g}")
    if len(mus) * len(others) > MAX_CURVES:
        raise ValueError(
            f"--mu x --{'rho' if args.rho is not None else 'tau'} gives "
            f"{len(mus) * len(others)} curves, more than the {MAX_CURVES} allowed"
        )
    curves = []
    for mu in mus:
        for v in others:
            if args.rho is not None:
                curves.append((float(mu), float(v * mu), float(v)))
            elif v > mu:
                raise ValueError(f"--tau must be <= --mu, got --tau={v:g} > --mu={mu:g}")
            else:
                curves.append((float(mu), float(v), None))
    return curves


def _group_sizes(args) -> np.ndarray:
    n_max = single(  # checked even beside --group-size
        "--max-group-size", check_integer("--max-group-size", args.n_max, minimum=1)
    )
    if args.n is not None:
        return _int_list("--group-size", args.n, minimum=1)
    if n_max > MAX_ROWS:
        raise ValueError(
            f"--max-group-size must be <= {MAX_ROWS} (use --group-size for chosen sizes), got "
            f"--max-group-size={n_max}"
        )
    return np.arange(1, n_max + 1)


def _label(mu: float, tau: float, rho: float | None) -> str:
    return (
        f"mu={mu:g} rho={rho:g} (tau={tau:.4g})" if rho is not None else f"mu={mu:g} tau={tau:.4g}"
    )


# ---------------------------------------------------------------------------------------------
# tail-miss
# ---------------------------------------------------------------------------------------------


def run_tail_miss(args) -> int:
    curves = _curves(args)
    N = _group_sizes(args)
    if len(curves) * len(N) > MAX_ROWS:
        raise ValueError(
            f"{len(curves)} curves x {len(N)} group sizes is more than the {MAX_ROWS} rows allowed"
        )
    plot = None
    if args.plot is not None:
        plot = _check_plot_path(args.plot)
        if len({c[0] for c in curves}) > MAX_PANELS:
            raise ValueError(f"--plot draws one panel per --mu value, at most {MAX_PANELS}")
        _plot_tail_miss(curves, N, plot)  # first: a write error comes before any output
    p_a = {mu: np.asarray(p_active(mu, N)) for mu, _, _ in curves}  # mu -> (len(N),)
    p_b = [np.asarray(p_tail_miss(mu, tau, N)) for mu, tau, _ in curves]  # per curve (len(N),)
    if args.json:
        rows = [
            {
                "N": int(n),
                "mu": mu,
                "tau": tau,
                "p_active": float(p_a[mu][i]),
                "p_tail_miss": float(pb[i]),
            }
            for (mu, tau, _), pb in zip(curves, p_b, strict=True)
            for i, n in enumerate(N)
        ]
        return json_result(args, rows)
    else:
        for mu in dict.fromkeys(c[0] for c in curves):
            group = [(c, pb) for c, pb in zip(curves, p_b, strict=True) if c[0] == mu]
            header = ["N", "P(A)"] + [
                f"P(B) {'rho' if r is not None else 'tau'}={r if r is not None else t:g}"
                for (_, t, r), _ in group
            ]
            widths = [max(6, len(h)) for h in header]
            print(f"mu={mu:g}")
            print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
            for i, n in enumerate(N):
                cells = [str(int(n)), f"{p_a[mu][i]:.6f}"] + [f"{pb[i]:.6f}" for _, pb in group]
                print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
        cap = min(int(N.max()), 2**53)  # the largest N that float64 holds exactly
        for mu, tau, rho in curves:
            n_star, p_star = peak_group_size(mu, tau, n_max=cap)
            print(
                f"peak {_label(mu, tau, rho)}: N*={int(n_star)} P(B)={float(p_star):.6f}"
                f" (over N <= {cap})"
            )
    return 0


def _plot_tail_miss(curves, N, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mus = list(dict.fromkeys(c[0] for c in curves))
    fig, axes = plt.subplots(1, len(mus), figsize=(4.2 * len(mus), 3.2), squeeze=False)
    for ax, mu in zip(axes[0], mus, strict=True):
        group = [c for c in curves if c[0] == mu]
        if all(r is not None for _, _, r in group):
            plot_tail_miss_curves(ax, mu=mu, rhos=[r for _, _, r in group], N=N)
        else:  # --tau: label curves by tau
            plot_tail_miss_curves(
                ax, mu=mu, rhos=[t / mu if mu > 0 else 0.0 for _, t, _ in group], N=N
            )
    fig.tight_layout()
    try:
        save_figure(fig, path, dpi=110)
    except OSError as err:
        raise OSError(err.errno, f"cannot write --plot ({err.strerror})", str(path)) from None
    finally:
        plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# peak
# ---------------------------------------------------------------------------------------------


def run_peak(args) -> int:
    curves = _curves(args)
    n_max = (
        None
        if args.n_max is None
        else single("--max-group-size", check_integer("--max-group-size", args.n_max, minimum=1))
    )
    rows = []
    for mu, tau, rho in curves:
        if tau == 0.0 and 0.0 < mu < 1.0 and n_max is None:  # (mu 0 or 1: P(B) = 0 for all N)
            why = (
                f"--rho={rho:g} gives tau = rho * mu = 0 in float64"
                if rho is not None and rho > 0.0
                else "--tau=0 (or --rho=0)"
            )
            raise ValueError(
                f"{why} with --mu={mu:g}: P(B) rises with N without a peak; pass --max-group-size"
            )
        # N_c above e^709 (tau tiny next to a tiny mu) is +inf here: with n_max, N* is n_max
        n_c = float(stationary_group_size(mu, tau, beyond=math.inf))
        top = 1.0 if math.isnan(n_c) else min(n_c, math.inf if n_max is None else n_max)
        if top > 2.0**53:  # (peak_group_size's own limit, said with the flags typed)
            curve = f"--rho={rho:g} (tau = {tau:g})" if rho is not None else f"--tau={tau:g}"
            fix = (
                "pass --max-group-size"
                if n_max is None
                else "pass a --max-group-size of at most 2^53"
            )
            raise ValueError(f"the peak group size for --mu={mu:g}, {curve} is beyond 2^53; {fix}")
        n_star, p_star = peak_group_size(mu, tau, n_max=n_max)
        rows.append(
            {
                "mu": float(mu),
                "tau": float(tau),
                "rho": None if rho is None else float(rho),
                "N_star": int(n_star),
                "P_star": float(p_star),
                "N_stationary": n_c,
            }
        )
    if args.json:
        return json_result(args, rows)
    print(f"{'mu':>8}  {'tau':>10}  {'rho':>6}  {'N*':>8}  {'P(B) at N*':>10}  {'N_c':>10}")
    for r in rows:
        rho = "" if r["rho"] is None else f"{r['rho']:g}"
        print(
            f"{r['mu']:>8g}  {r['tau']:>10.4g}  {rho:>6}  {r['N_star']:>8d}  {r['P_star']:>10.6f}  "
            + (
                f"{r['N_stationary']:>10.3f}"
                if r["N_stationary"] < 1e7
                else f"{r['N_stationary']:>10.4g}"
            )
        )
    return 0


# ---------------------------------------------------------------------------------------------
# pass-at-k
# ---------------------------------------------------------------------------------------------


def _exact_rows(args, ks) -> list[dict]:
    """pass@k = 1 - (1 - p)^k for every --p and k."""
    if args.n is not None or args.c is not None:
        raise ValueError("--p cannot be combined with --samples/--c")
    ps = _float_list("--p", args.p)
    bad = [p for p in ps if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"--p must lie in [0, 1], got --p={bad[0]:g}")
    if len(ps) * len(ks) > MAX_ROWS:
        raise ValueError(f"--p x --k is more than the {MAX_ROWS} rows allowed")
    return [
        {"p": float(p), "k": int(k), "pass_at_k": float(pass_at_k_exact(p, k))}
        for p in ps
        for k in ks
    ]


def _unbiased_rows(args, ks) -> list[dict]:
    """The unbiased pass@k estimate from c of n correct for every --c and k, then its mean over
    the --c values per k (``c = "mean"``)."""
    if args.n is None or args.c is None:
        raise ValueError("pass-at-k needs either --p, or both --samples and --c")
    n = single("--samples", _int_list("--samples", args.n, minimum=1))
    cs = _int_list("--c", args.c, minimum=0)
    if len(cs) * len(ks) > MAX_ROWS:
        raise ValueError(f"--c x --k is more than the {MAX_ROWS} rows allowed")
    rows = []
    for c in cs:
        for k in ks:
            if c > n:
                raise ValueError(f"--c must be <= --samples={n}, got --c={int(c)}")
            if k > n:
                raise ValueError(f"--k must be <= --samples={n}, got --k={int(k)}")
            rows.append(
                {"n": n, "c": int(c), "k": int(k), "pass_at_k": float(pass_at_k_unbiased(n, c, k))}
            )
    for k in ks:
        rows.append(
            {
                "n": n,
                "c": "mean",
                "k": int(k),
                "pass_at_k": float(
                    np.mean([r["pass_at_k"] for r in rows if r["k"] == k and r["c"] != "mean"])
                ),
            }
        )
    return rows


def run_pass_at_k(args) -> int:
    ks = _int_list("--k", args.k, minimum=1)
    rows = _exact_rows(args, ks) if args.p is not None else _unbiased_rows(args, ks)
    if args.json:
        return json_result(args, rows)
    key = "p" if args.p is not None else "c"
    print(f"{key:>8}  {'k':>6}  {'pass@k':>10}")
    for r in rows:
        print(f"{r[key]!s:>8}  {r['k']:>6d}  {r['pass_at_k']:>10.6f}")
    return 0


# ---------------------------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------------------------


def _add_mu_rho_tau(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mu", required=True, help="success probability mu (comma-separated list)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--rho", help="rare fraction rho = tau/mu (comma-separated list)")
    which.add_argument("--tau", help="rare-correct mass tau <= mu (comma-separated list)")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "tail-miss",
        help="P(A_N), P(B_{E,N}) against N, and the peak (Lemma 3.1)",
        description="Table of N, P(A), P(B) per curve (mu x rho or mu x tau) "
        "and the peak N* of each curve.",
    )
    _add_mu_rho_tau(p)
    sizes = p.add_mutually_exclusive_group()
    n_max = sizes.add_argument(
        "--max-group-size",
        dest="n_max",
        type=int,
        default=128,
        help="tabulate N = 1..max (default 128)",
    )
    n = sizes.add_argument(
        "--group-size", dest="n", help="tabulate these group sizes N only (comma-separated)"
    )
    add_deprecated_alias(sizes, "--n-max", n_max)
    add_deprecated_alias(sizes, "--n", n)
    p.add_argument("--plot", help="also write the curves to this PNG file")
    add_json_flag(p, "a list of {N, mu, tau, p_active, p_tail_miss}")
    p.set_defaults(func=run_tail_miss)

    p = subparsers.add_parser(
        "peak",
        help="the group size N* that maximises P(B_{E,N})",
        description="Integer argmax N*, P(B) at N*, and the continuous stationary "
        "point N_c of dP/dN = 0, per (mu, rho) or (mu, tau).",
    )
    _add_mu_rho_tau(p)
    n_max = p.add_argument(
        "--max-group-size",
        dest="n_max",
        type=int,
        default=None,
        help="search N <= max only (needed when tau = 0)",
    )
    add_deprecated_alias(p, "--n-max", n_max)
    add_json_flag(
        p,
        "the table (N_stationary is null where it is +inf (tau = 0), beyond float64 (above "
        "e^709) or undefined (P(B) = 0))",
    )
    p.set_defaults(func=run_peak)

    p = subparsers.add_parser(
        "pass-at-k",
        help="pass@k: exact from p, or unbiased from (n, c)",
        description="Exact pass@k = 1 - (1 - p)^k, or the unbiased estimator "
        "1 - C(n - c, k)/C(n, k) per count c and their mean.",
    )
    p.add_argument("--k", required=True, help="k values (comma-separated)")
    p.add_argument("--p", help="per-sample success probabilities (comma-separated)")
    samples = p.add_argument("--samples", dest="n", help="samples per problem n")
    add_deprecated_alias(p, "--n", samples)
    p.add_argument("--c", help="correct samples per problem (comma-separated)")
    add_json_flag(p, "the table")
    p.set_defaults(func=run_pass_at_k)
