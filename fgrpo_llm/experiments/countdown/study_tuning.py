"""Tuning of the regularised baselines' coefficients on one base of the study, before the
extended plan trains with them.

The paper (Table 3) tunes the entropy bonus over {1e-4, 1e-3} and the KL penalty over
{1e-3, 1e-2} at its scale and keeps 1e-3 for both. Coefficients do not carry over across scales,
so the study tunes them again on its own scale: on the tuning base, at the first RL seed, GRPO at
N = ``group_size`` trains once per value of ``DemoConfig.entropy_grid`` (entropy bonus) and of
``DemoConfig.kl_grid`` (KL penalty); the value with the highest score

    score = (pass@1 + pass@k_max) / 2    (in-domain split, the run's final evaluation)

is chosen (ties: the smaller coefficient), and the extended plan on the other bases trains with
it. The tuning base is kept out of the extended plan's bases, so the claims that compare F-GRPO
with the tuned baselines are not judged on the runs that chose them. The choice is a function of
the tuning runs' saved evaluations, so a resumed study makes the same one; it is written to
OUT/tuning.json.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fgrpo_common.files import write_json
from fgrpo_llm.evaluation.runs import split_pass_at
from fgrpo_llm.experiments.countdown.config import DemoConfig, RunSpec
from fgrpo_llm.experiments.countdown.stages import run_done

__all__ = ["tuning_specs", "choose_coefficients", "tuned_config", "tuning_text"]

#: (plan field, RunSpec field, grid field, words)
KNOBS = (
    ("entropy_coef", "entropy_coef", "entropy_grid", "entropy bonus"),
    ("kl_coef", "kl_coef", "kl_grid", "KL penalty"),
)


def tuning_specs(cfg: DemoConfig, *, seed: int, prefix: str = "") -> list[RunSpec]:
    """GRPO at N = ``group_size`` once per grid value of each regulariser, in
    ``<prefix>tune/<name>``."""
    N = cfg.group_size
    specs = []
    for _, spec_field, grid, _ in KNOBS:
        tag = spec_field.split("_")[0]
        for c in getattr(cfg, grid):
            name = f"grpo_n{N}_{tag}{float(c):g}"
            specs.append(
                RunSpec(name, N, 0.0, None, seed, f"{prefix}tune/{name}", **{spec_field: float(c)})
            )
    return specs


def _score(out_b: Path, spec: RunSpec) -> dict:
    import json

    res = json.loads((out_b / spec.path / "eval" / "eval.json").read_text())
    p1 = split_pass_at(res, "in_domain", 1)
    pk = split_pass_at(res, "in_domain", "max")
    return {"pass@1": p1, "pass@kmax": pk, "score": 0.5 * (p1 + pk)}


def choose_coefficients(out: Path, out_b: Path, cfg: DemoConfig, base: int, seed: int) -> dict:
    """The chosen coefficient per regulariser from the finished tuning runs of base ``base``
    (``out_b``); every run's scores; written to OUT/tuning.json. Raises RuntimeError when a tuning
    run has not finished."""
    specs = tuning_specs(cfg, seed=seed, prefix=f"seed{seed}/")
    missing = [s.path for s in specs if not run_done(out_b, s)]
    if missing:
        raise RuntimeError(f"the tuning runs {missing} of base {base} have not finished")
    result = {
        "base": base,
        "seed": seed,
        "criterion": "(pass@1 + pass@k_max) / 2 on the in-domain split; ties: the smaller value",
        "knobs": {},
    }
    for plan_field, spec_field, grid, words in KNOBS:
        rows = [
            {"value": getattr(s, spec_field), "run": s.path, **_score(out_b, s)}
            for s in specs
            if getattr(s, spec_field)
        ]
        best = max(rows, key=lambda r: (r["score"], -r["value"]))
        result["knobs"][plan_field] = {
            "what": words,
            "grid": [float(c) for c in getattr(cfg, grid)],
            "untuned": float(getattr(cfg, plan_field)),
            "chosen": best["value"],
            "runs": rows,
        }
    write_json(out / "tuning.json", result)
    return result


def tuned_config(cfg: DemoConfig, choice: dict) -> DemoConfig:
    """The plan with the chosen coefficients."""
    return dataclasses.replace(
        cfg, **{field: knob["chosen"] for field, knob in choice["knobs"].items()}
    )


def tuning_text(choice: dict) -> str:
    """The report's paragraph: what was tried, the scores and what was chosen."""
    lines = [
        f"Tuned on base {choice['base']} at RL seed {choice['seed']} (kept out of the extended "
        f"plan's bases), by {choice['criterion']}; one run per value, so a difference below a "
        "few points of pass@1 is within seed noise (see the variance components)."
    ]
    for knob in choice["knobs"].values():
        scores = ", ".join(
            f"{r['value']:g}: pass@1 {r['pass@1']:.3f}, pass@k_max {r['pass@kmax']:.3f}"
            for r in knob["runs"]
        )
        lines.append(
            f"- {knob['what']}: {scores}; chosen **{knob['chosen']:g}** (untuned: "
            f"{knob['untuned']:g}, the paper's value)."
        )
    return "\n".join(lines)
