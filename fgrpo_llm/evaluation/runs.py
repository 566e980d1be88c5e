"""Reading a training run directory: the contract every engine's run meets.

The tail-miss cross-check and the sweep tables read a run directory, whichever engine wrote it
(our trainer, the verl plug-in or the TRL trainer of ``fgrpo_llm.integrations``):

- ``run.json``: ``{"engine": "fgrpo" | "verl" | "trl", "algo": "grpo" | "dapo" | "cispo",
  "group_size": N, "gamma": gamma, "lr_scale": effective lr / configured lr,
  "lr_match_gamma": the gamma of the learning-rate-matched control or null}``
  (``fgrpo_llm.tracking.write_run_info`` writes it);
- ``groups.jsonl``: one line per sampled group, ``{"step", "prompt_id", "N", "num_correct",
  "forms", "trained"}`` (``forms``: the solution form of each correct completion);
- optionally ``metrics.jsonl`` (the last finite ``rare/delta_nll`` is the run's Delta NLL_rare) and
  ``eval/eval.json`` (pass@k, ``fgrpo_llm.evaluation.passk``).

    run = load_run("runs/demo/grpo_n8")
    run.label, run.N, len(run.groups)        # ("GRPO N=8", 8, 4800)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from fgrpo_common.files import read_jsonl
from fgrpo_llm.tracking import check_group_record, read_run_info, run_segments
from fgrpo_theory.weighting import Weighting, resolve_weighting

__all__ = ["RunInfo", "run_label", "is_base_lr", "load_run", "split_pass_at"]


def split_pass_at(results: dict, role: str, k) -> float | None:
    """Mean pass@k over the splits of one ``role`` ("in_domain" or "ood") of an evaluation's
    results (``eval/eval.json``); ``k="max"``: the largest k evaluated. None when no split of that
    role has it."""
    kk = max(results["ks"]) if k == "max" else int(k)
    vals = [
        float(e[f"pass@{kk}"])
        for e in results["splits"].values()
        if e["role"] == role and f"pass@{kk}" in e
    ]
    return math.fsum(vals) / len(vals) if vals else None


@dataclass
class RunInfo:
    """What the cross-check needs from one training run directory."""

    path: Path
    label: str
    algo: str
    N: int | None
    gamma: float
    groups: list[dict] = field(default_factory=list)
    delta_nll_rare: float | None = None
    eval: dict | None = None
    steps: int | None = None
    lr_scale: float = 1.0
    """Effective lr / configured lr: lr_multiplier * m_gamma (when ``lr_match_gamma`` is set)."""
    lr_match_gamma: float | None = None
    """The gamma whose m_gamma scaled the lr (the low-LR control), or None."""
    engine: str = "fgrpo"
    """Which trainer wrote the run."""
    environment: dict | None = None
    """What the run ran on (``fgrpo_llm.environment``), when recorded."""
    segments: list = field(default_factory=list)
    """One ``{"from_step", "environment"}`` per segment (each resume starts one)."""
    weighting: str = "focal"
    """The advantage weighting's rule (``fgrpo_theory.weighting``): "focal" (GRPO at gamma = 0,
    F-GRPO above), "none" (GRPO), "maxrl", ..."""
    entropy_coef: float = 0.0
    """The entropy bonus's coefficient (0: none), when recorded."""
    kl_coef: float = 0.0
    """The KL penalty's coefficient (0: none), when recorded."""

    @property
    def sweep_point(self) -> bool:
        """A point of the group-size sweep: GRPO or F-GRPO at its configured lr, with no entropy
        bonus or KL penalty (the controls and regularised baselines are compared apart)."""
        grpo = Weighting(self.weighting, self.gamma).rule.grpo_family  # GRPO or F-GRPO
        plain = grpo and not self.entropy_coef and not self.kl_coef
        return plain and is_base_lr(self.lr_scale)


def run_label(
    algo: str,
    N: int | None,
    gamma: float,
    lr_scale: float = 1.0,
    weighting: str = "focal",
    *,
    entropy_coef: float = 0.0,
    kl_coef: float = 0.0,
) -> str:
    """The paper's row name: ``"GRPO N=8"`` for gamma = 0, ``"F-GRPO N=8"`` otherwise,
    ``"MaxRL N=8"`` (``"MaxRL-DAPO N=8"`` with another loss) for the MaxRL weighting
    (``weighting`` a rule's name taking ``gamma``, or its spelling); a run with
    an entropy bonus or a KL penalty gets ``" + entropy"`` / ``" + KL"``, one at a scaled learning
    rate (the low-LR control) ``" (lr x0.50)"``."""
    name = resolve_weighting(weighting, gamma).row_name(algo)  # "GRPO", "F-DAPO", "MaxRL"
    name = f"{name} N={N}" if N is not None else name
    name += " + entropy" if entropy_coef else ""
    name += " + KL" if kl_coef else ""
    return name if is_base_lr(lr_scale) else f"{name} (lr x{lr_scale:.2f})"


def is_base_lr(lr_scale: float) -> bool:
    """True when a run trained at its configured lr (lr_scale = 1): a point of the group-size
    sweep."""
    return abs(float(lr_scale) - 1.0) <= 1e-9


def _last_delta_nll(rows: list[dict]) -> tuple[float | None, int | None]:
    delta, steps = None, None
    for row in rows:
        value = row.get("rare/delta_nll")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            delta = float(value)
        if isinstance(row.get("step"), int):
            steps = row["step"]
    return delta, steps


def load_run(run_dir, *, label: str | None = None, eval_dir=None) -> RunInfo:
    """Read ``run.json``, ``groups.jsonl``, ``metrics.jsonl`` (the last ``rare/delta_nll``) and
    ``eval/eval.json`` (or ``eval_dir/eval.json``) of one run."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory not found: {run_dir}")
    info = read_run_info(run_dir)
    groups = (
        read_jsonl(run_dir / "groups.jsonl", what="group log")
        if (run_dir / "groups.jsonl").is_file()
        else []
    )
    for i, g in enumerate(groups, 1):  # the rules the writers follow (tracking.group_record)
        check_group_record(g, f"{run_dir / 'groups.jsonl'}:{i}")
    delta, steps = None, None
    if (run_dir / "metrics.jsonl").is_file():
        delta, steps = _last_delta_nll(read_jsonl(run_dir / "metrics.jsonl", what="metrics log"))
    eval_path = (Path(eval_dir) if eval_dir else run_dir / "eval") / "eval.json"
    results = None
    if eval_path.is_file():
        from fgrpo_llm.evaluation.passk import load_eval  # lazy: torch

        results = load_eval(eval_path.parent)[0]
    N, gamma, lr_scale = (
        int(info["group_size"]),
        float(info["gamma"]),
        float(info.get("lr_scale", 1.0)),
    )
    match = info.get("lr_match_gamma")
    weighting = resolve_weighting(info.get("weighting", "focal"), gamma).kind  # the rule's name
    penalties = {k: float(info.get(k, 0.0)) for k in ("entropy_coef", "kl_coef")}
    return RunInfo(
        path=run_dir,
        label=label or run_label(info["algo"], N, gamma, lr_scale, weighting, **penalties),
        algo=info["algo"],
        N=N,
        gamma=gamma,
        groups=groups,
        delta_nll_rare=delta,
        eval=results,
        steps=steps,
        lr_scale=lr_scale,
        lr_match_gamma=None if match is None else float(match),
        engine=info["engine"],
        environment=info.get("environment"),
        segments=run_segments(info),
        weighting=weighting,
        **penalties,
    )
