"""The Maze study over seeds: intervals, paired differences and verdicts on the paper's Table 4.

Reads the runs of ``fgrpo_llm.experiments.maze`` (one SFT model, every (method, N) run once per
RL seed s = 1..S) and reports, per run, the mean over seeds and a 95% Student-t interval
(``fgrpo_llm.evaluation.stats.t_interval``) of

    final pass@1,   final pass@K   (K = eval_k_max, the last evaluated step),
    dip = max_t (pass@K(0) - pass@K(t))^+   the largest drop of pass@K below the SFT model's over
          the evaluated steps t of the run (the paper's early pass@K dip; 0 when it never fell),

and the paired differences d_s = x_s(F-GRPO) - x_s(other) (same seed, same SFT model, same
held-out mazes scored with the same random numbers; ``paired_difference``). The paper's claims
(Section 5.2, Table 4) get a verdict each, decided from those intervals (``verdict_above`` /
``verdict_below``):

    (a) F-GRPO has a smaller early pass@K dip than GRPO      d(dip) < 0
    (b) F-GRPO has a better final pass@1 than GRPO, every N   d(pass@1) > 0
    (c) F-GRPO has a better final pass@K than GRPO, every N   d(pass@K) > 0
    (d) the lr-matched control (GRPO at lr * m_gamma) does not reproduce F-GRPO's gains:
        F-GRPO - control is in F-GRPO's favour wherever (a)-(c) found a gain over GRPO.

A claim about every N (and every F-GRPO gamma) holds when it holds in every cell, is
contradicted when it is contradicted in at least one, and is not resolved at this scale
otherwise. Each cell is a separate 95% interval (no correction for the number of cells).

    results = summarize(cfg, out)       # OUT/results.json, table.*, report.*, maze_*.png
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fgrpo_common.files import write_json as _write_json
from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Interval,
    base_level_interval,
    combined_verdict,
    format_interval,
    informative,
    t_interval,
)
from fgrpo_llm.experiments.claims import Claim, control_verdict, directional_verdict
from fgrpo_llm.experiments.maze.config import (
    PAPER_TABLE,
    MazeConfig,
    command_for,
    method_name,
    methods,
    plan,
)
from fgrpo_llm.experiments.maze.plots import write_figures
from fgrpo_llm.experiments.paper import load_paper_results

__all__ = [
    "summarize",
    "study",
    "collect",
    "write_report",
    "table_rows",
    "paper_table4",
    "CLAIMS",
]


def _metrics(cfg: MazeConfig) -> dict[str, tuple[str, str]]:
    """Study metric -> (label, the direction F-GRPO should win in: "above" / "below")."""
    K = cfg.eval_k_max
    return {
        "pass@1": ("final pass@1", "above"),
        f"pass@{K}": (f"final pass@{K}", "above"),
        "dip": (f"largest pass@{K} dip", "below"),
    }


def _value(cfg: MazeConfig, result: dict, metric: str) -> float:
    """One run's value of a study metric, in percentage points."""
    if metric == "dip":
        return 100 * result["dips"][f"dip/pass@{cfg.eval_k_max}"]
    return 100 * result["final"][f"eval/test/{metric}"]


def collect(cfg: MazeConfig, out: Path) -> dict:
    """Every finished run and SFT evaluation under ``out``: ``{"sft": {seed: eval},
    "runs": {key: result}}``, in the fixed order of
    :func:`fgrpo_llm.experiments.maze.config.plan`."""
    sft, runs = {}, {}
    for s in cfg.rl_seeds:
        path = out / "sft" / f"eval_seed{s}.json"
        if path.is_file():
            sft[str(s)] = json.loads(path.read_text())
    for run in plan(cfg):
        path = out / "rl" / run.key / "result.json"
        if path.is_file():
            runs[run.key] = json.loads(path.read_text())
    return {"sft": sft, "runs": runs}


def unit(run: dict) -> tuple[int, int]:
    """A run's (base, RL seed); a single-base experiment's runs are base 0's."""
    return int(run.get("base", 0)), int(run["seed"])


def sft_units(results: dict) -> dict:
    """``{(base, seed): SFT evaluation}``: keys "s" (one base) or "b/s" (``maze.bases``)."""
    out = {}
    for key, e in results["sft"].items():
        b, _, s = str(key).rpartition("/")
        out[(int(b or 0), int(s))] = e
    return out


def _per_seed(cfg: MazeConfig, results: dict, method: str, N: int, metric: str) -> dict:
    """{(base, seed): value} of one (method, N) over the units that finished."""
    return {
        unit(r): _value(cfg, r, metric)
        for r in results["runs"].values()
        if r["method"] == method and r["N"] == N
    }


#: The range of every study metric (percentage points): intervals are cut to it, a difference of
#: two to (-100, 100) (``stats.clipped``).
PERCENT = (0.0, 100.0)


def unit_interval(values: dict, *, over_bases: bool = False, bounds=PERCENT) -> Interval:
    """Over bases in a study pooled over several SFT models (``over_bases``: each base's seeds
    averaged first, ``base_level_interval``; undefined with one base), else over the RL seeds of
    the one SFT model; cut to ``bounds``."""
    if over_bases:
        return base_level_interval(values, bounds=bounds)
    return t_interval([values[u] for u in sorted(values)], bounds=bounds)


def _paired(a: dict, b: dict, *, over_bases: bool = False) -> Interval | None:
    """a - b paired within each (base, seed) both finished, then :func:`unit_interval` (None:
    no unit in common)."""
    units = sorted(set(a) & set(b))
    if not units:
        return None
    return unit_interval(
        {u: a[u] - b[u] for u in units}, over_bases=over_bases, bounds=(-100.0, 100.0)
    )


def _iv(iv: Interval | None) -> dict | None:
    return None if iv is None else iv.to_dict()


@dataclass(frozen=True)
class Cells:
    """What the Maze claims' judges read: the paired differences by (a, b, N, metric), each with
    its verdict, and the settings that name the cells (gammas, group sizes)."""

    cfg: MazeConfig
    by: dict

    def metric(self, key: str) -> str:
        """The study metric of claim (a), (b) or (c)."""
        return {"a": "dip", "b": "pass@1", "c": f"pass@{self.cfg.eval_k_max}"}[key]

    def verdict(self, a: str, b: str, N: int, metric: str) -> str:
        return self.by[(a, b, N, metric)]["verdict"]

    def part(self, a: str, b: str, N: int, metric: str) -> tuple:
        """The cell as a ``(judge, interval)`` part of a claim (``combined_verdict``)."""
        direction = self.by[(a, b, N, metric)]["direction"]
        return (lambda iv: directional_verdict(iv, direction)), self.interval(a, b, N, metric)

    def interval(self, a: str, b: str, N: int, metric: str) -> Interval | None:
        """The paired difference a - b of a cell (None when missing)."""
        row = self.by.get((a, b, N, metric))
        return Interval(**row["difference"]) if row and row["difference"] else None


def _gain_over_grpo(key: str):
    """The judge of claim (a), (b) or (c): F-GRPO - GRPO on the claim's metric in every cell
    (F-GRPO gamma, N)."""

    def judge(s: Cells) -> tuple[str, dict]:
        metric, grpo = s.metric(key), method_name(0.0)
        per_gamma, parts = {}, []
        for gamma in [g for g in s.cfg.gammas if g > 0]:
            fgrpo = method_name(gamma)
            cell = {N: s.verdict(fgrpo, grpo, N, metric) for N in s.cfg.group_sizes}
            mine = [s.part(fgrpo, grpo, N, metric) for N in s.cfg.group_sizes]
            parts += mine
            per_gamma[f"{gamma:g}"] = {
                "verdict": combined_verdict(mine),
                "cells": {str(N): v for N, v in cell.items()},
            }
        return combined_verdict(parts), {"metric": metric, "per_gamma": per_gamma}

    return judge


def _control_judge(s: Cells) -> tuple[str, dict]:
    """Claim (d): in every cell where (a)-(c) found a gain of F-GRPO over GRPO, does the control
    reproduce it (:func:`fgrpo_llm.experiments.claims.control_verdict`)? Every gamma must
    agree for the claim to hold or be contradicted."""
    grpo, per_gamma = method_name(0.0), {}
    for gamma in s.cfg.lr_matched_gammas:
        fgrpo, control = method_name(gamma), method_name(0.0, gamma)
        gains = [
            (N, m)
            for N in s.cfg.group_sizes
            for m in map(s.metric, "abc")
            if s.verdict(fgrpo, grpo, N, m) == HOLDS
        ]
        judged = [
            (
                s.by[(fgrpo, grpo, N, m)]["direction"],
                s.interval(fgrpo, grpo, N, m),
                s.interval(fgrpo, control, N, m),
                s.interval(control, grpo, N, m),
            )
            for N, m in gains
        ]
        cell = {f"N={N} {m}": s.verdict(fgrpo, control, N, m) for N, m in gains}
        per_gamma[f"{gamma:g}"] = {
            "verdict": control_verdict(judged),
            "cells": cell,
            "gains": len(gains),
        }
    metric = "the metrics of (a)-(c) where F-GRPO's gain over GRPO holds"
    verdicts = [v["verdict"] for v in per_gamma.values()]
    verdict = verdicts[0] if verdicts and len(set(verdicts)) == 1 else NOT_RESOLVED
    return verdict, {"metric": metric, "per_gamma": per_gamma}


_EVERY_CELL = (
    "Holds when every cell (every N, every F-GRPO gamma) holds in its 95% interval, is "
    "contradicted when at least one cell is contradicted at the Bonferroni level for the number "
    "of cells (so that many cells do not multiply the chance of a false 'contradicted'), and is "
    "otherwise not resolved at this scale."
)

#: The paper's Maze claims (Section 5.2, Table 4): statement, rule, judge.
CLAIMS = (
    Claim(
        "a", "F-GRPO has a smaller early pass@K dip than GRPO", _EVERY_CELL, _gain_over_grpo("a")
    ),
    Claim(
        "b",
        "F-GRPO has a better final pass@1 than GRPO at every N",
        _EVERY_CELL,
        _gain_over_grpo("b"),
    ),
    Claim(
        "c",
        "F-GRPO has a better final pass@K than GRPO at every N",
        _EVERY_CELL,
        _gain_over_grpo("c"),
    ),
    Claim(
        "d",
        "the lr-matched control (GRPO at lr x m_gamma) does not reproduce F-GRPO's gains",
        "Looks at the cells where (a)-(c) found a gain of F-GRPO over GRPO and compares F-GRPO "
        "with the lr-matched control at the same gamma and N: holds when F-GRPO beats the "
        "control (paired interval on F-GRPO's side) in every such cell; is contradicted when in "
        "every such cell the control beats GRPO and comes within half the gain of F-GRPO "
        "(F-GRPO - control within +-0.5 x gain) or beats it; is not resolved otherwise, "
        "including when F-GRPO has no established gain to reproduce. Every gamma must agree.",
        _control_judge,
    ),
)


def study(cfg: MazeConfig, results: dict) -> dict:
    """Intervals per run, paired differences and the four verdicts (a JSON-ready dict). Pooled
    over SFT models (``results["bases"]``, ``maze.bases``), every interval is over bases."""
    pooled = "bases" in results
    metrics = _metrics(cfg)
    K = cfg.eval_k_max
    rows = []
    for N in cfg.group_sizes:
        for gamma, matched in methods(cfg):
            method = method_name(gamma, matched)
            row = {"method": method, "gamma": gamma, "lr_match_gamma": matched, "N": N}
            for metric in metrics:
                values = _per_seed(cfg, results, method, N, metric)
                one_base = len({b for b, _ in values}) <= 1  # units: seeds, or (base, seed)
                row["seeds"] = [u[1] if one_base else list(u) for u in sorted(values)]
                row[metric] = _iv(unit_interval(values, over_bases=pooled)) if values else None
                row[f"{metric} per seed"] = [values[u] for u in sorted(values)]
            rows.append(row)
    sft = {}
    for k in (1, K):
        values = {u: 100 * e[f"eval/test/pass@{k}"] for u, e in sft_units(results).items()}
        sft[f"pass@{k}"] = _iv(unit_interval(values, over_bases=pooled)) if values else None

    def paired_rows(a: str, b: str, role: str, gamma: float, N: int) -> list[dict]:
        """a - b at group size N for every metric, paired by seed, with its verdict."""
        rows = []
        for metric, (label, direction) in metrics.items():
            iv = _paired(
                _per_seed(cfg, results, a, N, metric),
                _per_seed(cfg, results, b, N, metric),
                over_bases=pooled,
            )
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "role": role,
                    "gamma": gamma,
                    "N": N,
                    "metric": metric,
                    "label": label,
                    "direction": direction,
                    "difference": _iv(iv),
                    "verdict": directional_verdict(iv, direction),
                }
            )
        return rows

    diffs = []
    grpo = method_name(0.0)
    for gamma in [g for g in cfg.gammas if g > 0]:
        fgrpo = method_name(gamma)
        others = [("GRPO", grpo)]
        if gamma in cfg.lr_matched_gammas:
            others.append(("control", method_name(0.0, gamma)))
        for N in cfg.group_sizes:
            for role, other in others:
                diffs += paired_rows(fgrpo, other, role, gamma, N)
        if gamma in cfg.lr_matched_gammas:  # does a lower lr alone move GRPO? (control - GRPO)
            for N in cfg.group_sizes:
                diffs += paired_rows(method_name(0.0, gamma), grpo, "control vs GRPO", gamma, N)
    by = {(d["a"], d["b"], d["N"], d["metric"]): d for d in diffs}
    cells = Cells(cfg, by)
    claims = {}
    for c in CLAIMS:
        verdict, evidence = c.judge(cells)
        claims[c.key] = {"claim": c.text, **evidence, "verdict": verdict, "rule": c.rule}
    return {
        "seeds": list(cfg.rl_seeds),
        "bases": sorted({unit(r)[0] for r in results["runs"].values()}),
        "K": K,
        "sft": sft,
        "runs": rows,
        "differences": diffs,
        "claims": claims,
        "command": command_for(cfg),
    }


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


def _write_table(rows: list[dict], out: Path, cfg: MazeConfig, results: dict) -> None:
    with open(out / "table.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    cols = list(rows[0])

    def fmt(v):
        return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))

    S = len(results["sft"])
    sft = [f"pass@{k} {_sft_mean(results, k):.1f}" for k in (1, cfg.eval_k_max)] if S else ["-"]
    lines = [
        f"Held-out maze pass@k (%), mean over {S} RL seed(s), {cfg.num_test} mazes, grid "
        f"{cfg.grid_size}x{cfg.grid_size}, {cfg.rl_steps} RL steps, preset {cfg.preset}; "
        "SFT model: " + ", ".join(sft),
        "'paper' columns: Table 4 of the paper (17x17, 20K steps, 256 mazes, n=1024), "
        "side by side only. Intervals and verdicts: report.md.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]
    K = cfg.eval_k_max
    lines += [
        "",
        "Largest drop of held-out pass@k below the SFT model's (step 0) during RL, its "
        "step, and the final change (points), per run.",
        "",
        f"| seed | run | pass@1 dip | step | pass@1 change | pass@{K} dip | step | "
        f"pass@{K} change |",
        "|---|---|---|---|---|---|---|---|",
    ]
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
                str(d[f"dip_step/pass@{k}"]) if dip > 0 else "-",
                f"{100 * d[f'change/pass@{k}']:+.1f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    (out / "table.md").write_text("\n".join(lines) + "\n")


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


def _difference_rows(differences: list[dict], K: int) -> list[str]:
    """One table row per paired difference A - B at N (F-GRPO against GRPO, then against the
    control, then control against GRPO; by gamma and N): each metric's difference and verdict."""
    roles = {"GRPO": 0, "control": 1, "control vs GRPO": 2}
    seen = []
    for d in sorted(differences, key=lambda d: (d["gamma"], roles[d["role"]], d["N"])):
        if (d["a"], d["b"], d["N"]) not in seen:
            seen.append((d["a"], d["b"], d["N"]))
    by = {(d["a"], d["b"], d["N"], d["metric"]): d for d in differences}
    rows = []
    for a, b, N in seen:
        cells = []
        for metric in ("pass@1", f"pass@{K}", "dip"):
            d = by[(a, b, N, metric)]
            cells.append(f"{_fi(d['difference'], signed=True)} {_short(d['verdict'])}")
        rows.append(f"| {a} - {b} | {N} | " + " | ".join(cells) + " |")
    return rows


def write_report(cfg: MazeConfig, report: dict, out: Path) -> Path:
    """OUT/report.json (everything, strict JSON) and OUT/report.md (tables and verdicts)."""
    _write_json(out / "report.json", report)
    K = cfg.eval_k_max
    S = len(report["seeds"])
    bases = len(report.get("bases") or [0])
    title = (
        f"# Maze study: {bases} SFT models (bases) x {S} RL seed(s) x every (method, N)"
        if bases > 1
        else f"# Maze study: {S} RL seed(s) x every (method, N), one SFT model"
    )
    lines = [
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
        "",
        f"## Per run: mean over {'bases' if bases > 1 else 'seeds'} [95% t interval], points",
        "",
        f"| method | N | {'runs (bases x seeds)' if bases > 1 else 'seeds'} | final pass@1 | "
        f"final pass@{K} | largest pass@{K} dip |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        lines.append(
            f"| {r['method']} | {r['N']} | {len(r['seeds'])} | {_fi(r['pass@1'])} | "
            f"{_fi(r[f'pass@{K}'])} | {_fi(r['dip'])} |"
        )
    lines += [
        "",
        "## Paired differences F-GRPO - X (same seed, SFT model, mazes), points",
        "",
        "Verdict per cell: is the difference on F-GRPO's side (dip below 0, pass@k above 0)?"
        " The rows control - GRPO show what the lower learning rate alone does (there + "
        "means the control beats GRPO).",
        "",
        f"| A - B | N | final pass@1 | final pass@{K} | largest pass@{K} dip |",
        "|---|---|---|---|---|",
    ]
    lines += _difference_rows(report["differences"], K)
    lines += ["", "(+ holds, - contradicted, ? not resolved at this scale)"]
    if any(_tied(d["difference"]) for d in report["differences"]):
        lines += [
            "",
            f"\\* zero width: every seed gave the same value. pass@{K} moves in steps "
            f"of 100/{cfg.num_test} = {100 / cfg.num_test:.1f} points (one held-out maze), "
            f"so {S} seeds can tie exactly. Such an interval carries no verdict (not "
            "resolved): a tie does not show that the spread is 0 (more seeds would show it).",
        ]
    lines += ["", "## Verdicts on the paper's Maze claims (Table 4)", ""]
    for c, claim in report["claims"].items():
        lines.append(f"**({c}) {claim['claim']}: {claim['verdict']}.**")
        lines.append("")
        for gamma, v in claim["per_gamma"].items():
            lines.append(f"- gamma = {gamma}: {v['verdict']}" + _cells_text(c, gamma, v, report))
        if not claim["per_gamma"]:
            lines.append("- no F-GRPO gamma to judge (no lr-matched control or no F-GRPO run)")
        lines.append("")
    lines += _rule_text(cfg, bases)
    if S < 2 and bases < 2:
        lines += [
            "",
            "One seed: no interval, so no claim can be resolved; run with "
            "`--seeds 0,1,2` (or more).",
        ]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


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


def summarize(cfg: MazeConfig, out) -> dict:
    """Collect every finished run into results.json, table.csv/md, report.md/json and the
    figures. Nothing here depends on the order the runs finished in or on any timing."""
    out = Path(out)
    results = {"config": cfg.to_dict(), **collect(cfg, out)}
    paper = paper_table4()
    if results["runs"]:
        rows = table_rows(cfg, results, paper)
        results["table"] = rows
        _write_table(rows, out, cfg, results)
        report = study(cfg, results)
        results["study"] = report
        write_report(cfg, report, out)
        write_figures(cfg, results, paper, out)
    _write_json(out / "results.json", results)
    return results
