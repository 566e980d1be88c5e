"""``fgrpo-theory plan``: which group size N and which weighting, from a model's own pass rates
(``fgrpo_theory.plan``; paper Lemma 3.1, Section 4).

    fgrpo-theory plan --outcomes runs/demo/base_eval --split test --rho 0.05
    fgrpo-theory plan --counts passrates.csv --rho 0.1 --group-size 4,8,16,64 --json
    fgrpo-theory plan --mu 0.05,0.3,0.9 --rho 0.1 --weightings none,focal:0.5,focal:1,maxrl

Pass rates come from ``fgrpo-llm eval``'s outcome matrices (``--outcomes``: a directory holding
``outcomes_<split>.npy`` or one such file, a (prompts, n) 0/1 matrix), a CSV with columns
``prompt_id,n,c`` (``--counts``, any engine's evaluation), or a list (``--mu``). Per N it prints
the rollouts per step, the expected fraction of groups with signal and the expected tail-miss
rate over the prompts (for counts, posterior medians, and the tail-miss rate's 95% range from
the finite n), where tail misses peak (with counts, every N where the pass rates' uncertainty
may put the peak), and the share of the update each weighting sends to hard
prompts (mu < 1/2), as a markdown table.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from fgrpo_common.cli import add_deprecated_alias, add_json_flag, json_result
from fgrpo_common.files import save_figure
from fgrpo_theory.cli.closed_forms import _check_plot_path, _float_list, _int_list
from fgrpo_theory.weighting import parse_weighting

#: A counts CSV holds at most this many rows.
MAX_PROMPTS = 1_000_000


def _from_outcomes(path: Path, split: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(n, c) per prompt from an outcome matrix (an .npy file, or ``outcomes_<split>.npy`` in a
    directory); loaded without pickle."""
    if path.is_dir():
        found = sorted(p.name[len("outcomes_") : -len(".npy")] for p in path.glob("outcomes_*.npy"))
        if not found:
            raise ValueError(
                f"--outcomes {path} holds no outcomes_<split>.npy (fgrpo-llm eval writes them)"
            )
        if split is None:
            raise ValueError(f"--outcomes is a directory: choose --split among {', '.join(found)}")
        if split not in found:
            raise ValueError(f"--split {split!r}: {path} holds the splits {', '.join(found)}")
        path = path / f"outcomes_{split}.npy"
    if not path.is_file():
        raise ValueError(
            f"--outcomes not found: {path} (fgrpo-llm eval's output directory, or one "
            "outcomes_<split>.npy in it)"
        )
    try:
        m = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"--outcomes {path} is not a numpy outcome matrix ({err})") from None
    if not isinstance(m, np.ndarray):  # an .npz archive
        m.close()
        raise ValueError(f"--outcomes {path} is an .npz archive; give one .npy outcome matrix")
    if m.dtype.kind not in "biuf":
        raise ValueError(f"--outcomes {path} must hold numbers 0/1, got dtype {m.dtype}")
    if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0 or not np.isin(m, (0, 1)).all():
        raise ValueError(f"--outcomes {path} must be a (prompts, n) matrix of 0/1, got {m.shape}")
    return np.full(m.shape[0], m.shape[1], dtype=np.int64), m.sum(axis=1).astype(np.int64)


def _from_counts(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(n, c) per row of a CSV with columns prompt_id, n, c."""
    if not path.is_file():
        raise ValueError(f"--counts file not found: {path}")
    try:
        return _read_counts(path)
    except UnicodeDecodeError as err:
        raise ValueError(f"--counts {path} is not UTF-8 text ({err.reason})") from None


def _read_counts(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``_from_counts``'s rows, checked line by line: every row names its prompt, and a prompt
    id given twice is refused (counted twice it would weigh double; with other counts, which
    row holds?)."""
    n, c = [], []
    seen: dict[str, tuple[int, int, int]] = {}  # prompt_id -> (line, n, c)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        try:
            for line, row in enumerate(reader, 2):
                if line == 2 or reader.fieldnames is None:
                    _check_header(path, reader.fieldnames)
                pid, ni, ci = _row(path, line, row)
                if pid in seen:
                    first, n0, c0 = seen[pid]
                    how = "repeats" if (n0, c0) == (ni, ci) else "conflicts with"
                    raise ValueError(
                        f"{path}:{line}: prompt_id {pid!r} {how} line {first} (n={n0}, c={c0}; "
                        f"here n={ni}, c={ci}); give each prompt once"
                    )
                seen[pid] = (line, ni, ci)
                n.append(ni)
                c.append(ci)
                if len(n) > MAX_PROMPTS:
                    raise ValueError(f"--counts {path} has more than {MAX_PROMPTS} rows")
        except csv.Error as err:  # a field over csv.field_size_limit(), a NUL byte, ...
            raise ValueError(
                f"{path}:{reader.line_num + 1}: not a readable CSV row ({err})"
            ) from None
        if not n:
            _check_header(path, reader.fieldnames)
    if not n:
        raise ValueError(f"--counts {path} has no rows")
    return np.array(n), np.array(c)


def _row(path: Path, line: int, row: dict) -> tuple[str, int, int]:
    """(prompt_id, n, c) of one CSV row, checked (integers, 0 <= c <= n, n >= 1, an id)."""
    pid = row["prompt_id"]
    try:
        ni, ci = int(row["n"]), int(row["c"])
    except (TypeError, ValueError):
        raise ValueError(f"{path}:{line}: n and c must be integers") from None
    if not 0 <= ci <= ni or ni < 1:
        raise ValueError(f"{path}:{line}: need 0 <= c <= n and n >= 1, got n={ni}, c={ci}")
    if pid is None or not pid.strip():
        raise ValueError(f"{path}:{line}: the prompt_id is empty")
    return pid, ni, ci


def _check_header(path: Path, fieldnames) -> None:
    if not fieldnames or not {"prompt_id", "n", "c"} <= set(fieldnames):
        raise ValueError(
            f"--counts {path} needs the columns prompt_id,n,c, got {','.join(fieldnames or [])!r}"
        )


def run_plan(args) -> int:
    from fgrpo_theory.plan import plan  # lazy: scipy

    sources = [x is not None for x in (args.mu, args.outcomes, args.counts)]
    if sum(sources) != 1:
        raise ValueError("give exactly one of --mu, --outcomes, --counts")
    Ns = [int(v) for v in _int_list("--group-size", args.group_sizes, minimum=1)]
    twice = sorted({N for N in Ns if Ns.count(N) > 1})
    if twice:
        raise ValueError(f"--group-size lists {twice[0]} twice (as {args.group_sizes!r})")
    weightings = [parse_weighting(w) for w in args.weightings.split(",") if w.strip()]
    if not weightings:
        raise ValueError("--weightings must name at least one weighting")
    labels = [w.label for w in weightings]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise ValueError(f"--weightings names {twice[0]} twice (as {args.weightings!r})")
    plot = _check_plot_path(args.plot) if args.plot is not None else None
    kw = dict(rho=args.rho, group_sizes=Ns, weightings=weightings,
              prompts_per_step=args.prompts_per_step, draws=args.draws, seed=args.seed)  # fmt: skip
    if args.mu is not None:
        res = plan(_float_list("--mu", args.mu), **kw)
    else:
        n, c = (
            _from_outcomes(Path(args.outcomes), args.split)
            if args.outcomes
            else _from_counts(Path(args.counts))
        )
        res = plan(None, n=n, c=c, **kw)
    if plot is not None:
        _plot(res, plot)
    if args.json:
        return json_result(args, res)
    _print_plan(res)
    return 0


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table, each column padded to its widest cell and right-aligned (``---:``), so
    that it reads as a table in a terminal too."""
    widths = [max(len(c) for c in column) for column in zip(head, *rows, strict=True)]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(head), rule, *(line(r) for r in rows)])


def _plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    N = [r["N"] for r in res["rows"]]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    a.plot(N, [r["active"] for r in res["rows"]], "o-", label="active groups")
    a.plot(N, [r["tail_miss"] for r in res["rows"]], "s-", label="tail-miss rate")
    if res["rows"][0]["tail_miss_lo"] is not None:
        a.fill_between(N, [r["tail_miss_lo"] for r in res["rows"]],
                       [r["tail_miss_hi"] for r in res["rows"]], alpha=0.2)  # fmt: skip
    a.set(xscale="log", xlabel="group size N", ylabel="expected fraction", ylim=(0, 1))
    a.legend()
    for w in res["weightings"]:
        b.plot(N, [r["hard_share"][w] for r in res["rows"]], "o-", label=w)
    b.set(xscale="log", xlabel="group size N", ylabel="share of the update to hard prompts")
    b.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="which N and which weighting, from a model's own pass rates",
        description="Per group size: rollouts per step, expected active groups, expected "
        "tail-miss rate (Lemma 3.1) over the prompts (from counts: posterior medians, with the "
        "tail-miss rate's 95% range), and each weighting's share of the update to hard "
        "prompts.",
    )
    src = p.add_argument_group("pass rates (one of)")
    src.add_argument("--mu", help="pass rates, comma-separated")
    src.add_argument("--outcomes", help="fgrpo-llm eval's directory or an outcomes_<split>.npy")
    src.add_argument("--counts", help="CSV with columns prompt_id,n,c")
    p.add_argument("--split", help="the split's outcome file in an --outcomes directory")
    p.add_argument("--rho", type=float, default=0.05, help="tau / mu of the rare mode (0.05)")
    sizes = p.add_argument(
        "--group-size",
        dest="group_sizes",
        default="2,4,8,16,32,64,128",
        help="group sizes N, comma-separated (default 2,4,8,16,32,64,128)",
    )
    add_deprecated_alias(p, "--group-sizes", sizes)
    p.add_argument(
        "--weightings",
        default="none,focal:1,maxrl",
        help="comma-separated: none (GRPO), focal:GAMMA (F-GRPO), maxrl",
    )
    p.add_argument("--prompts-per-step", type=int, default=32, help="B, for rollouts per step")
    p.add_argument(
        "--draws",
        type=int,
        default=200,
        help="posterior draws for the tail-miss estimate (their median) and its 95%% range",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the posterior draws")
    p.add_argument("--plot", help="also draw the table to this PNG file")
    add_json_flag(p, "the plan")
    p.set_defaults(func=run_plan)


def _print_plan(res: dict) -> None:
    """The plan as a table of the group sizes, and where its tail misses peak."""
    labels = res["weightings"]
    print(
        f"{res['prompts']} prompts (mean pass rate {res['mean_mu']:.3f}; {res['hard_prompts']} "
        f"hard, pass rate < 1/2), rare mode rho = tau / mu = {res['rho']:g}"
    )
    head = ["N", "rollouts/step", "active groups", "tail-miss rate [95%]"]
    head += [f"hard share: {w}" for w in labels]
    table = []
    for r in res["rows"]:
        tm = f"{r['tail_miss']:.3f}"
        if r["tail_miss_lo"] is not None:
            tm += f" [{r['tail_miss_lo']:.3f}, {r['tail_miss_hi']:.3f}]"
        shares = [
            "-" if r["hard_share"][w] is None else f"{r['hard_share'][w]:.3f}" for w in labels
        ]
        table.append([str(r["N"]), str(r["rollouts_per_step"]), f"{r['active']:.3f}", tm]
                     + shares)  # fmt: skip
    print(f"\n{markdown_table(head, table)}\n")
    if res["peak_N"] is None:
        print("no tail misses at any of the group sizes given (every pass rate 0 or 1, or rho = 1)")
    elif len(res["peak_N_range"]) > 1:
        among = ", ".join(str(N) for N in res["peak_N_range"])
        print(
            f"tail misses peak at N = {res['peak_N']} among the group sizes given, but the pass "
            f"rates' uncertainty (n samples per prompt) does not resolve the peak between N = "
            f"{among} (each holds it in at least 2.5% of the posterior draws)"
        )
    else:
        print(f"tail misses peak at N = {res['peak_N']} among the group sizes given")
