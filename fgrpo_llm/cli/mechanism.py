"""``fgrpo-llm mechanism``: each rare trajectory of a run classed by what training did to its
prompt (never trained U, tail-missed B, sampled S, inactive only I; paper Lemma 3.1), with each
class's Delta NLL and share of the run's Delta NLL_rare (``fgrpo_llm.evaluation.mechanism``).

It reads the run's group log (``groups.jsonl``: our trainer's, or a TRL / verl run's records)
and the exact evaluations of the base and of the run (``fgrpo-llm exact``). By default those are
the study's ``<base_dir>/base_exact/exact_eval.json`` (the base named in the run's config.json)
and ``RUN_DIR/exact/exact_eval.json``.

    fgrpo-llm mechanism runs/study/base0/seed0/grpo_n8 --rare-set runs/study/base0/rare_set.json
    fgrpo-llm mechanism RUN --rare-set R.json --base-exact B/exact_eval.json \
        --run-exact RUN/exact/exact_eval.json --json
"""  # fmt: skip

from __future__ import annotations

import json
from pathlib import Path

from fgrpo_common.cli import add_json_flag, json_result
from fgrpo_llm.evaluation.mechanism import mechanism_report
from fgrpo_llm.evaluation.runs import load_run


def default_base_exact(run_dir: Path) -> Path:
    """The study's base exact file of a run: ``<dir of the base model>/base_exact/...``, the base
    named by the run's config.json; a ValueError when the run does not name one."""
    from fgrpo_llm.experiments.countdown.exact_stage import base_exact_path  # lazy: torch

    path = run_dir / "config.json"
    try:
        base = json.loads(path.read_text()).get("base") if path.is_file() else None
    except (ValueError, AttributeError):
        base = None
    if not isinstance(base, str):
        raise ValueError(
            f"{run_dir} names no base model (config.json 'base'): pass --base-exact FILE"
        )
    return base_exact_path(Path(base).parent)


def _mechanism(args) -> int:
    from fgrpo_llm.evaluation.exact_eval import load_exact_eval, rare_delta_nll  # lazy: torch
    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch
    from fgrpo_llm.experiments.countdown.exact_stage import run_exact_path  # lazy: torch

    run_dir = Path(args.run)
    run = load_run(run_dir)  # checks every group record
    if not run.groups:
        raise ValueError(f"{run_dir} has no group log (groups.jsonl): nothing to class")
    rare = load_rare_set(args.rare_set)
    base_path = Path(args.base_exact) if args.base_exact else default_base_exact(run_dir)
    run_path = Path(args.run_exact) if args.run_exact else run_exact_path(run_dir)
    base, trained = load_exact_eval(base_path), load_exact_eval(run_path)
    if base["rare"]["prompt_ids"] != rare.prompt_ids or base["rare"]["answers"] != rare.texts:
        raise ValueError(f"{base_path} was not made with the rare set {args.rare_set}")
    delta = rare_delta_nll(base, trained, per_token=not args.per_trajectory)
    report = mechanism_report(rare.prompt_ids, rare.forms, run.groups, delta)
    summary = {"run": str(run_dir), "per_token": not args.per_trajectory, **report.summary()}
    if args.json:
        return json_result(args, summary)
    unit = "nats" if args.per_trajectory else "nats/token"
    print(
        f"{run_dir}: Delta NLL_rare {summary['delta_nll_rare']:+.4f} {unit} over "
        f"{summary['trajectories']} rare trajectories"
    )
    names = {"U": "never trained", "B": "tail-missed", "S": "sampled", "I": "inactive only"}
    for c, e in summary["classes"].items():
        mean = "–" if e["mean"] is None else f"{e['mean']:+.4f}"
        iv = "" if e["interval"] is None else f" [{e['interval'][0]:+.4f}, {e['interval'][1]:+.4f}]"
        share = "–" if e["share"] is None else f"{e['share']:.1%}"
        print(
            f"  {c} {names[c]:<14} {e['count']:>5}  mean {mean}{iv}  "
            f"contribution {e['contribution']:+.4f}  share {share}"
        )
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mechanism",
        help="class each rare trajectory by what training did to its prompt (Lemma 3.1)",
        description="Never trained (U), trained in an active group that missed its answer (B), "
        "its answer sampled (S), trained only in inactive groups (I): count, mean Delta NLL and "
        "share of the run's Delta NLL_rare per class.",
    )
    p.add_argument("run", help="run directory (with groups.jsonl)")
    p.add_argument("--rare-set", required=True, help="the base's rare_set.json (App. M.2)")
    p.add_argument("--base-exact", default=None, help="the base's exact_eval.json")
    p.add_argument("--run-exact", default=None, help="the run's exact_eval.json")
    p.add_argument(
        "--per-trajectory",
        action="store_true",
        help="Delta NLL in nats per trajectory (default: per token, divided by |y| as in App. M.2)",
    )
    add_json_flag(p, "the per-class report")
    p.set_defaults(func=_mechanism)
