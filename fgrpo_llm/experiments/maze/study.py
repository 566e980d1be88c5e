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

The claims and their judges are in ``study_claims``, the tables and report text in ``report``.

    results = summarize(cfg, out)       # OUT/results.json, table.*, report.*, maze_*.png
"""

from __future__ import annotations

import json
from pathlib import Path

from fgrpo_common.files import write_json as _write_json
from fgrpo_llm.evaluation.stats import (
    Interval,
    base_level_interval,
    t_interval,
)
from fgrpo_llm.experiments.claims import directional_verdict
from fgrpo_llm.experiments.maze.config import (
    MazeConfig,
    command_for,
    method_name,
    methods,
    plan,
)
from fgrpo_llm.experiments.maze.plots import write_figures
from fgrpo_llm.experiments.maze.report import (  # noqa: F401  (paper_table4: the notebook's name)
    paper_table4,
    table_rows,
    write_report,
    write_table,
)
from fgrpo_llm.experiments.maze.study_claims import CLAIMS, Cells

__all__ = ["summarize", "study", "collect", "unit_interval", "CLAIMS"]


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


def summarize(cfg: MazeConfig, out) -> dict:
    """Collect every finished run into results.json, table.csv/md, report.md/json and the
    figures. Nothing here depends on the order the runs finished in or on any timing."""
    out = Path(out)
    results = {"config": cfg.to_dict(), **collect(cfg, out)}
    paper = paper_table4()
    if results["runs"]:
        rows = table_rows(cfg, results, paper)
        results["table"] = rows
        write_table(rows, out, cfg, results)
        report = study(cfg, results)
        results["study"] = report
        write_report(cfg, report, out)
        write_figures(cfg, results, paper, out)
    _write_json(out / "results.json", results)
    return results
