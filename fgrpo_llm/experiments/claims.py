"""What the verdicts of both studies (Countdown, ``countdown.study_claims``; Maze,
``maze.study``) share: the :class:`Claim` each study declares its claims with, a claim's record,
the verdict of a one-sided claim from its interval, the "not run" verdict, and the sentence on the
kernel family's effect.

A claim is a statement of the paper with a verdict decided from 95% intervals
(``fgrpo_llm.evaluation.stats``): **holds** when the interval lies on the claimed side of 0,
**contradicted** when it lies on the other side, **not resolved** when it contains 0 or has zero
width (tied seeds, ``stats.informative``), and **not run** when the design did not train the runs
the claim needs. Each study lists its claims
as data, in order:

    CLAIMS = (Claim(2, "F-GRPO at N = {N} has a lower Delta NLL_rare than GRPO", RULE, judge_2),
              ...)
    records = [c.record(study, N=8) for c in CLAIMS]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Interval,
    verdict_above,
    verdict_below,
    verdict_within,
)

__all__ = [
    "NOT_RUN",
    "REPRODUCED_SHARE",
    "Claim",
    "claim",
    "control_verdict",
    "directional_verdict",
    "family_verdict",
]

#: The verdict of a claim whose runs the design did not train (no sweep, no extended plan).
NOT_RUN = "not run"

#: The lr-matched control reproduces a gain of F-GRPO over GRPO when it comes within this share
#: of the gain of F-GRPO (Countdown claim 5, Maze claim (d)): equivalence within half the gain.
REPRODUCED_SHARE = 0.5


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and how it is judged.

    ``text`` (the paper's statement) and ``rule`` (how the verdict is decided) may hold
    ``{name}`` fields, filled from the study's settings; ``judge(study) -> (verdict, evidence)``
    reads the study's numbers (whatever object the study passes) and returns the verdict and the
    numbers behind it."""

    key: int | str
    text: str
    rule: str
    judge: Callable[[Any], tuple[str, Any]]

    def record(self, study, **values) -> dict:
        """The claim's record (:func:`claim`), judged on ``study``, its text and rule filled
        from ``values``."""
        verdict, evidence = self.judge(study)
        return claim(
            self.key, self.text.format(**values), verdict, evidence, self.rule.format(**values)
        )


def claim(number, text: str, verdict: str, evidence: str, rule: str) -> dict:
    """One claim's record: its number, the paper's statement, the verdict, the numbers behind it
    and the rule that decided it."""
    return {"claim": number, "text": text, "verdict": verdict, "evidence": evidence, "rule": rule}


def directional_verdict(iv: Interval | None, direction: str) -> str:
    """The verdict on "the effect is above 0" (``direction="above"``) or "below 0" from its
    interval; not resolved without one."""
    if direction not in ("above", "below"):
        raise ValueError(f"direction must be 'above' or 'below', got direction={direction!r}")
    if iv is None:
        return NOT_RESOLVED
    return verdict_above(iv, 0.0) if direction == "above" else verdict_below(iv, 0.0)


def control_verdict(gains) -> str:
    """Does the lr-matched control fail to reproduce F-GRPO's gains (paper Table 3)?

    ``gains``: one ``(direction, gain, fc, cg)`` per gain of F-GRPO over GRPO, ``gain`` the
    F-GRPO - GRPO interval (resolved in ``direction``, "above" or "below"), ``fc`` F-GRPO -
    control and ``cg`` control - GRPO (None when missing). A gain is *kept* when F-GRPO beats
    the control (``fc`` resolved in ``direction``); *reproduced* when the control beats GRPO
    (``cg`` resolved in ``direction``) and comes within :data:`REPRODUCED_SHARE` of the gain of
    F-GRPO (``fc`` within +-share x |gain|) or beats it (``fc`` resolved the other way). An
    ``fc`` that merely contains 0, wider than that, reproduces nothing. Holds if every gain is
    kept, contradicted if every gain is reproduced, not resolved otherwise (and without a
    gain)."""
    gains = list(gains)
    kept = reproduced = 0
    for direction, gain, fc, cg in gains:
        f_side = directional_verdict(fc, direction)
        if f_side == HOLDS:
            kept += 1
        elif directional_verdict(cg, direction) == HOLDS and fc is not None:
            close = verdict_within(fc, REPRODUCED_SHARE * abs(gain.mean)) == HOLDS
            reproduced += close or f_side == CONTRADICTED
    if gains and kept == len(gains):
        return HOLDS
    if gains and reproduced == len(gains):
        return CONTRADICTED
    return NOT_RESOLVED


def family_verdict(rows: list[dict], resolved: list[str]) -> str:
    """One sentence on whether the kernel family explains anything beyond the bases' spread."""
    if not rows:
        return "Not computed: both families need a prepared base with runs."
    if resolved:
        return (
            f"**Resolved** for: {'; '.join(resolved)} ({len(resolved)} of {len(rows)} intervals; "
            f"at 95% each, about {0.05 * len(rows):.1f} would exclude 0 by chance alone)."
        )
    if all(not math.isfinite(r["difference"]["lo"]) for r in rows):
        return "No interval: each family needs two bases or more."
    return (
        "**No difference is resolved**: at this many bases nothing can be attributed to the "
        "kernel family beyond base-to-base variation (a difference smaller than the intervals "
        "would go unseen)."
    )
