"""The Maze study's words: the Table-4-shaped table beside the paper's (``OUT/table.md``,
``OUT/table.csv``) and the report of intervals, paired differences and verdicts
(``OUT/report.md``, ``OUT/report.json``), from the results and the study of ``maze.study``.
Every table through ``fgrpo_llm.experiments.tables``; every file written atomically.

    write_table(table_rows(cfg, results, paper_table4()), out, cfg, results)
    write_report(cfg, study(cfg, results), out)
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from fgrpo_common.files import atomic_write_text
from fgrpo_common.files import write_json as _write_json
from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    Interval,
    format_interval,
    informative,
)
from fgrpo_llm.experiments.maze.config import PAPER_TABLE, MazeConfig, method_name, methods
from fgrpo_llm.experiments.maze.study_claims import CLAIMS
from fgrpo_llm.experiments.paper import load_paper_results
from fgrpo_llm.experiments.tables import MISSING, cell, table_lines

__all__ = ["paper_table4", "table_rows", "write_table", "write_report", "verdict_lines"]


# -- the Table-4-shaped table (means beside the paper's) ------------------------------------------


def paper_table4() -> dict | None:
    """The paper's Table 4 (``fgrpo_llm.experiments.paper``), or None when it is not in the file
    (the tables then show "-"). Side-by-side only: never a result of this project."""
    return load_paper_results().get(PAPER_TABLE)


def table_rows(cfg: MazeConfig, results: dict, paper: dict | None) -> list[dict]:
    """Rows shaped like Table 4: one per (metric, N), one column per method, our mean over seeds
    beside the paper's (percent)."""
    big = [k for k in (128, 256) if k <= cfg.eval_k_max] or [cfg.eval_k_max]
    metric_list = ["pass@1"] + [f"pass@{k}" for k in big]
    if cfg.eval_k_max not in big:
        metric_list.append(f"pass@{cfg.eval_k_max}")
    rows = []
    for metric in metric_list:
        for N in cfg.group_sizes:
            row = {"metric": metric, "N": N}
            for gamma, matched in methods(cfg):
                method = method_name(gamma, matched)
                values = [
                    100 * r["final"][f"eval/test/{metric}"]
                    for r in results["runs"].values()
                    if r["method"] == method and r["N"] == N
                ]
                row[f"ours {method}"] = round(float(np.mean(values)), 1) if values else None
            for gamma in cfg.gammas:
                method = method_name(gamma)
                values = (paper or {}).get(metric, {}).get(method)
                row[f"paper {method}"] = (
                    values[paper["N"].index(N)] if values and N in paper["N"] else None
                )
            rows.append(row)
    return rows


def _sft_mean(results: dict, k: int) -> float:
    return float(np.mean([100 * e[f"eval/test/pass@{k}"] for e in results["sft"].values()]))


def write_table(rows: list[dict], out: Path, cfg: MazeConfig, results: dict) -> None:
    """OUT/table.csv (the rows) and OUT/table.md (the rows beside the paper's, then each run's
    largest dip), both atomic."""
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "table.csv", buf.getvalue())
    lines = _means_table(rows, cfg, results) + ["", *_dips_table(cfg, results)]
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")


def _means_table(rows: list[dict], cfg: MazeConfig, results: dict) -> list[str]:
    """The Table-4-shaped means (percent) under a caption that names the scale."""
    cols = list(rows[0])
    S = len(results["sft"])
    sft = [f"pass@{k} {_sft_mean(results, k):.1f}" for k in (1, cfg.eval_k_max)] if S else [MISSING]
    return [
        f"Held-out maze pass@k (%), mean over {S} RL seed(s), {cfg.num_test} mazes, grid "
        f"{cfg.grid_size}x{cfg.grid_size}, {cfg.rl_steps} RL steps, preset {cfg.preset}; "
        "SFT model: " + ", ".join(sft),
        "'paper' columns: Table 4 of the paper (17x17, 20K steps, 256 mazes, n=1024), "
        "side by side only. Intervals and verdicts: report.md.",
        "",
        *table_lines(cols, [[cell(r[c], 1) for c in cols] for r in rows]),
    ]


def _dips_table(cfg: MazeConfig, results: dict) -> list[str]:
    """Per run: the largest drop of pass@1 and pass@K below the SFT model's, its step, the
    final change (points)."""
    K = cfg.eval_k_max
    rows = []
    for run in results["runs"].values():
        d = run["dips"]
        cells = [
            f"{run['base']}/{run['seed']}" if "base" in run else str(run["seed"]),
            f"{run['method']} N={run['N']}",
        ]
        for k in (1, K):
            dip = d[f"dip/pass@{k}"]
            cells += [
                f"{100 * dip:.1f}",
                str(d[f"dip_step/pass@{k}"]) if dip > 0 else MISSING,
                f"{100 * d[f'change/pass@{k}']:+.1f}",
            ]
        rows.append(cells)
    heads = ["seed", "run", "pass@1 dip", "step", "pass@1 change"]
    heads += [f"pass@{K} dip", "step", f"pass@{K} change"]
    return [
        "Largest drop of held-out pass@k below the SFT model's (step 0) during RL, its "
        "step, and the final change (points), per run.",
        "",
        *table_lines(heads, rows),
    ]


# -- the report ----------------------------------------------------------------------------------


def _fi(iv: dict | None, *, signed: bool = False) -> str:
    """``mean [lo, hi]`` in points; ``*`` marks a zero-width interval from tied seeds."""
    text = format_interval(None if iv is None else Interval(**iv), 1, signed=signed)
    return text + "*" if _tied(iv) else text


def _tied(iv: dict | None) -> bool:
    """Every seed gave the same value (S >= 2; up to rounding): the t interval has zero width
    and carries no verdict (``stats.informative``)."""
    return iv is not None and iv["n"] >= 2 and not informative(Interval(**iv))


def _rule_text(cfg: MazeConfig, bases: int = 1) -> list[str]:
    K = cfg.eval_k_max
    unit = (
        " Intervals take the SFT model (the base) as the unit: a run's values are averaged over "
        "its base's RL seeds, then the 95% Student-t interval is over the "
        f"{bases} base means (mean -/+ t_(0.975, K-1) sd / sqrt(K)). A difference F-GRPO - X is "
        "paired within (base, seed): the same SFT model, held-out mazes and evaluation random "
        "numbers, then averaged within each base the same way."
    )
    return [
        "How each verdict is decided. Every number is in percentage points. A run's value per "
        "seed is its held-out pass@1 and pass@" + f"{K} at the last step, and its largest pass@{K}"
        " dip: the largest drop of pass@" + f"{K} below the SFT model's value (step 0, same seed's"
        " evaluation) over the evaluated steps (0 when it never fell)."
        + (
            unit
            if bases > 1
            else " Intervals are 95% Student-t intervals over the RL seeds (mean -/+ "
            "t_{0.975, S-1} sd / sqrt(S)) and hold for this one SFT model. A difference F-GRPO - X"
            " is paired: per seed, the same SFT model, the same held-out mazes and the same "
            "evaluation random numbers, then the t interval of the S differences."
        ),
        "",
        "- A cell (one gamma, one N) holds when the whole interval of the paired difference lies "
        "on F-GRPO's side of 0 (dip: below 0; pass@1, pass@K: above 0), is contradicted when the "
        "whole interval lies on the other side, and is not resolved when it contains 0 or has "
        "zero width (tied seeds: a tie does not show that the spread is 0).",
    ] + [f"- ({c.key}) {c.rule}" for c in CLAIMS]


def _intro_lines(cfg: MazeConfig, report: dict) -> list[str]:
    """The title, the scale, the command and the SFT model's pass@1 and pass@K."""
    K = cfg.eval_k_max
    S = len(report["seeds"])
    bases = len(report.get("bases") or [0])
    title = (
        f"# Maze study: {bases} SFT models (bases) x {S} RL seed(s) x every (method, N)"
        if bases > 1
        else f"# Maze study: {S} RL seed(s) x every (method, N), one SFT model"
    )
    return [
        title,
        "",
        f"Paper Section 5.2 / Table 4 at our CPU scale: grid {cfg.grid_size}x{cfg.grid_size} "
        f"({cfg.cells}x{cfg.cells} cells), {cfg.num_train} training mazes, {cfg.num_test} held-out"
        f" mazes, model hidden {cfg.hidden_size} x {cfg.num_layers} layers, SFT {cfg.sft_steps} "
        f"steps, RL {cfg.rl_steps} steps x {cfg.rl_prompts_per_step} mazes at lr {cfg.rl_lr:g}, "
        f"K = {K} samples per maze, RL seed(s) {', '.join(map(str, report['seeds']))}; "
        f"{cfg.threads} torch thread(s) per run.",
        "",
        "Reproduce: `" + report["command"] + "`",
        "",
        f"SFT model (step 0, mean over the {'bases' if bases > 1 else 'seeds'}' evaluations): "
        "pass@1 "
        f"{_fi(report['sft']['pass@1'])}, pass@{K} {_fi(report['sft'][f'pass@{K}'])}.",
    ]


def _runs_lines(cfg: MazeConfig, report: dict) -> list[str]:
    """Per run: the mean [95% t interval] of final pass@1, final pass@K and the largest dip."""
    K = cfg.eval_k_max
    over = "bases" if len(report.get("bases") or [0]) > 1 else "seeds"
    heads = ["method", "N", "runs (bases x seeds)" if over == "bases" else "seeds"]
    heads += ["final pass@1", f"final pass@{K}", f"largest pass@{K} dip"]
    rows = [
        [r["method"], r["N"], len(r["seeds"]), _fi(r["pass@1"]), _fi(r[f"pass@{K}"]), _fi(r["dip"])]
        for r in report["runs"]
    ]
    return [
        f"## Per run: mean over {over} [95% t interval], points",
        "",
        *table_lines(heads, rows),
    ]


def _differences_lines(cfg: MazeConfig, report: dict) -> list[str]:
    """The paired differences F-GRPO - X per N with each cell's verdict, and what a tie means."""
    K = cfg.eval_k_max
    roles = {"GRPO": 0, "control": 1, "control vs GRPO": 2}
    seen = []
    for d in sorted(report["differences"], key=lambda d: (d["gamma"], roles[d["role"]], d["N"])):
        if (d["a"], d["b"], d["N"]) not in seen:
            seen.append((d["a"], d["b"], d["N"]))
    by = {(d["a"], d["b"], d["N"], d["metric"]): d for d in report["differences"]}

    def one(d: dict) -> str:
        return f"{_fi(d['difference'], signed=True)} {_short(d['verdict'])}"

    metrics = ("pass@1", f"pass@{K}", "dip")
    rows = [[f"{a} - {b}", N] + [one(by[(a, b, N, m)]) for m in metrics] for a, b, N in seen]
    heads = ["A - B", "N", "final pass@1", f"final pass@{K}", f"largest pass@{K} dip"]
    lines = [
        "## Paired differences F-GRPO - X (same seed, SFT model, mazes), points",
        "",
        "Verdict per cell: is the difference on F-GRPO's side (dip below 0, pass@k above 0)?"
        " The rows control - GRPO show what the lower learning rate alone does (there + "
        "means the control beats GRPO).",
        "",
        *table_lines(heads, rows),
        "",
        "(+ holds, - contradicted, ? not resolved at this scale)",
    ]
    if any(_tied(d["difference"]) for d in report["differences"]):
        lines += [
            "",
            f"\\* zero width: every seed gave the same value. pass@{K} moves in steps "
            f"of 100/{cfg.num_test} = {100 / cfg.num_test:.1f} points (one held-out maze), "
            f"so {len(report['seeds'])} seeds can tie exactly. Such an interval carries no "
            "verdict (not resolved): a tie does not show that the spread is 0 (more seeds would "
            "show it).",
        ]
    return lines


def verdict_lines(report: dict) -> list[str]:
    """Each claim's verdict, per F-GRPO gamma with the cells behind it."""
    lines = ["## Verdicts on the paper's Maze claims (Table 4)", ""]
    for c, claim in report["claims"].items():
        lines.append(f"**({c}) {claim['claim']}: {claim['verdict']}.**")
        lines.append("")
        for gamma, v in claim["per_gamma"].items():
            lines.append(f"- gamma = {gamma}: {v['verdict']}" + _cells_text(c, gamma, v, report))
        if not claim["per_gamma"]:
            lines.append("- no F-GRPO gamma to judge (no lr-matched control or no F-GRPO run)")
        lines.append("")
    return lines


def write_report(cfg: MazeConfig, report: dict, out: Path, *, extra: str = "") -> Path:
    """OUT/report.json (everything, strict JSON) and OUT/report.md (tables and verdicts, then
    ``extra``: the pooled study's sections, ``maze.bases``), both atomic."""
    _write_json(out / "report.json", report)
    S = len(report["seeds"])
    bases = len(report.get("bases") or [0])
    lines = _intro_lines(cfg, report) + [""] + _runs_lines(cfg, report) + [""]
    lines += _differences_lines(cfg, report) + [""] + verdict_lines(report)
    lines += _rule_text(cfg, bases)
    if S < 2 and bases < 2:
        lines += [
            "",
            "One seed: no interval, so no claim can be resolved; run with "
            "`--seeds 0,1,2` (or more).",
        ]
    return atomic_write_text(out / "report.md", "\n".join(lines) + "\n" + extra)


def _short(verdict: str) -> str:
    return {HOLDS: "(+)", CONTRADICTED: "(-)"}.get(verdict, "(?)")


def _cells_text(c: str, gamma: str, v: dict, report: dict) -> str:
    """The numbers behind one gamma's verdict: each cell's paired interval."""
    by = {(d["gamma"], d["role"], d["N"], d["metric"]): d for d in report["differences"]}
    g = float(gamma)
    if c == "d":
        if not v["cells"]:
            return (
                " (F-GRPO has no established gain over GRPO here, so there is nothing for "
                "the control to reproduce)"
            )
        parts = []
        for name, verdict in v["cells"].items():
            N, metric = name.split(" ")
            d = by[(g, "control", int(N[2:]), metric)]
            parts.append(
                f"{name}: F-GRPO - control {_fi(d['difference'], signed=True)} ({verdict})"
            )
        return "; " + "; ".join(parts)
    metric = report["claims"][c]["metric"]
    parts = []
    for N, verdict in v["cells"].items():
        d = by[(g, "GRPO", int(N), metric)]
        parts.append(f"N={N}: F-GRPO - GRPO {_fi(d['difference'], signed=True)} ({verdict})")
    return "; " + "; ".join(parts)
