"""The paper's Maze claims (Section 5.2, Table 4) and their judges: each reads the paired
differences F-GRPO - X of ``maze.study`` (one :class:`Cells`) and returns a verdict with its
evidence per F-GRPO gamma.

    (a) F-GRPO has a smaller early pass@K dip than GRPO      d(dip) < 0
    (b) F-GRPO has a better final pass@1 than GRPO, every N   d(pass@1) > 0
    (c) F-GRPO has a better final pass@K than GRPO, every N   d(pass@K) > 0
    (d) the lr-matched control (GRPO at lr * m_gamma) does not reproduce F-GRPO's gains

    verdict, evidence = CLAIMS[0].judge(Cells(cfg, by))
"""

from __future__ import annotations

from dataclasses import dataclass

from fgrpo_llm.evaluation.stats import (
    HOLDS,
    NOT_RESOLVED,
    Interval,
    combined_verdict,
)
from fgrpo_llm.experiments.claims import Claim, control_verdict, directional_verdict
from fgrpo_llm.experiments.maze.config import MazeConfig, method_name

__all__ = ["Cells", "CLAIMS"]


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
