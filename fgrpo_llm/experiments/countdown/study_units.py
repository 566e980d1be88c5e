"""The study's per-unit table: one row per (base, RL seed, run) with every number the claims
read, written as ``OUT/units.csv`` (committed as ``docs/data/countdown_study_units.csv``), and
the claims judged again from that file alone (``judge_units``), so that every verdict can be
recomputed from the repository.

Columns: the unit (base, kernel family, RL seed), the run (name, cell, label, N, weighting,
gamma, lr scale, lr_match_gamma, prompt pool, entropy and KL coefficients), the claims' metrics
(``study_claims.METRICS``: Delta NLL_rare, in-domain and OOD pass@1 and pass@k_max, the early
tail-miss frequencies) with pass@8 and k_max, the realised mean focal weight over active groups
(the advantage weight g = (1 - X/N)^gamma of Eq. 11, averaged over the trained groups with
0 < X < N; MaxRL's sqrt((1 - X/N) / (X/N)) for a MaxRL run), and, where the run has an exact
evaluation (``<run>/exact/exact_eval.json`` beside the base's ``base_exact/exact_eval.json``),
the exact Delta NLL_rare = mean over rare trajectories of (log p_base - log p_run), the exact
pass@k (which then are the claims' pass@k too: ``exact_metrics``), and the mechanism's classes
(``fgrpo_llm.evaluation.mechanism``: never trained U, tail-missed B, sampled S, inactive only
I), each class's count ``mech_<c>_n`` and summed Delta NLL per token ``mech_<c>_sum``.

    fgrpo-llm study --from-units docs/data/countdown_study_units.csv
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from fgrpo_llm.evaluation.mechanism import CLASSES, mechanism_report
from fgrpo_llm.experiments.countdown.config import DemoConfig
from fgrpo_llm.experiments.countdown.study_claims import METRICS, judge_claims
from fgrpo_llm.experiments.tables import CsvTable
from fgrpo_theory.weighting import resolve_weighting

__all__ = [
    "COLUMNS",
    "EXACT_KS",
    "realised_weight",
    "exact_columns",
    "exact_metrics",
    "mechanism_columns",
    "unit_rows",
    "write_units",
    "read_units",
    "judge_units",
]

#: The exact pass@k columns written per split role.
EXACT_KS = (1, 8, 64)

_RUN = ["base", "family", "seed", "name", "cell", "label", "N", "weighting", "gamma", "lr_scale",
        "lr_match_gamma", "prompt_pool", "entropy_coef", "kl_coef"]  # fmt: skip
_METRIC = [*METRICS, "tail_miss_groups", "tail_miss_steps", "id_pass8", "ood_pass8", "kmax",
           "focal_weight"]  # fmt: skip
_EXACT = ["exact_delta_nll_rare", "exact_delta_nll_rare_per_token", "exact_rare_trajectories"] + [
    f"exact_{role}_pass{k}" for role in ("id", "ood") for k in EXACT_KS
]
_MECH = [f"mech_{c}_{k}" for c in CLASSES for k in ("n", "sum")]
#: Every column of units.csv, in order.
COLUMNS = tuple(_RUN + _METRIC + _EXACT + _MECH)

#: The table's typed columns (ints, text; every other one a float).
TABLE = CsvTable(
    COLUMNS,
    ints={"base", "seed", "N", "prompt_pool", "tail_miss_groups", "tail_miss_steps", "kmax",
          "exact_rare_trajectories", *(f"mech_{c}_n" for c in CLASSES)},
    text={"family", "name", "cell", "label", "weighting"},
)  # fmt: skip


# ----------------------------------------------------------------------------- per-run numbers
def realised_weight(groups: list[dict], *, gamma: float, weighting: str = "focal") -> float | None:
    """Mean advantage weight over the trained active groups (0 < X < N) of a group log:
    g = w(X/N) of the run's weighting (``resolve_weighting(weighting, gamma)``: (1 - X/N)^gamma,
    Eq. 11, 1 for GRPO, or MaxRL's sqrt((1 - X/N) / (X/N))); None when no trained group was
    active."""
    x = np.array(
        [(g["num_correct"], g["N"]) for g in groups if g.get("trained", True)], dtype=np.float64
    ).reshape(-1, 2)
    active = (x[:, 0] > 0) & (x[:, 0] < x[:, 1])
    if not active.any():
        return None
    mu_hat = x[active, 0] / x[active, 1]
    return float(np.mean(resolve_weighting(weighting, gamma)(mu_hat)))


def exact_columns(run_exact: Path, base_exact: Path, ks=EXACT_KS) -> dict:
    """The exact columns of one run from its ``exact_eval.json`` and its base's
    (``fgrpo_llm.evaluation.exact_eval``); empty when the run's file is missing. Delta NLL_rare
    exact = mean over the rare trajectories of (log p_base - log p_run), in nats per trajectory
    (``exact_delta_nll_rare``) and per token (``..._per_token``, App. M.2's normalisation, the
    sampled Delta NLL_rare's); pass@k per split role (in-domain, OOD) for every k of ``ks``."""
    from fgrpo_llm.evaluation.exact_eval import (  # lazy: torch
        exact_delta_nll_rare,
        load_exact_eval,
    )
    from fgrpo_llm.evaluation.passk import split_role  # lazy: torch

    if not Path(run_exact).is_file():
        return {}
    run = load_exact_eval(run_exact)
    out: dict = {}
    for role in ("id", "ood"):
        splits = [
            e
            for name, e in run["splits"].items()
            if split_role(name) == ("ood" if role == "ood" else "in_domain")
        ]
        for k in ks:
            vals = [float(e["pass@k"][str(k)]) for e in splits if str(k) in e["pass@k"]]
            out[f"exact_{role}_pass{k}"] = float(np.mean(vals)) if vals else None
    if Path(base_exact).is_file() and len(run["rare"]["logp"]):  # (an empty rare set: no Delta)
        base = load_exact_eval(base_exact)
        out["exact_rare_trajectories"] = len(run["rare"]["logp"])
        out["exact_delta_nll_rare"] = exact_delta_nll_rare(base, run, per_token=False)
        try:
            out["exact_delta_nll_rare_per_token"] = exact_delta_nll_rare(base, run, per_token=True)
        except ValueError:  # no trajectory lengths recorded
            out["exact_delta_nll_rare_per_token"] = None
    return out


def exact_metrics(cols: dict, kmax: int) -> dict:
    """The claims' pass@k metrics (``id_pass1``, ``id_passk``, ``ood_pass1``, ``ood_passk`` at
    k = ``kmax``, and pass@8) from a run's exact columns (``exact_columns`` with ``kmax`` among its
    ks): exact, with no sampling error; empty when the run has none (the sampled ones stand)."""
    if cols.get("exact_id_pass1") is None:
        return {}
    return {
        f"{role}_{name}": cols.get(f"exact_{role}_pass{k}")
        for role in ("id", "ood")
        for name, k in (("pass1", 1), ("passk", kmax), ("pass8", 8))
    }


def mechanism_columns(groups: list[dict], rare, run_exact: Path, base_exact: Path) -> dict:
    """The mechanism's columns of one run (``ClassTotals.columns``: per class the count and the
    summed exact Delta NLL per token) from its group log, the rare set and the exact evaluations
    of the run and of its base; empty without a group log, a rare trajectory or either
    evaluation."""
    from fgrpo_llm.evaluation.exact_eval import load_exact_eval, rare_delta_nll  # lazy: torch

    if not groups or not len(rare.prompt_ids):
        return {}
    if not Path(run_exact).is_file() or not Path(base_exact).is_file():
        return {}
    base, run = load_exact_eval(base_exact), load_exact_eval(run_exact)
    if base["rare"]["prompt_ids"] != list(rare.prompt_ids):
        raise ValueError(f"{base_exact} was not made with this base's rare set")
    delta = rare_delta_nll(base, run, per_token=True)
    return mechanism_report(rare.prompt_ids, rare.forms, groups, delta).totals().columns()


def unit_rows(numbers: dict, bases: dict) -> list[dict]:
    """The rows of units.csv from the study's ``numbers[name][(base, seed)]`` (each value holding
    the claims' metrics and the run's settings) and ``bases[b]["family"]``; sorted by base, seed
    and name."""
    rows = []
    for name, runs in numbers.items():
        for (b, s), vals in runs.items():
            row = {c: vals.get(c) for c in COLUMNS}
            row.update(base=b, seed=s, name=name, family=bases.get(b, {}).get("family"))
            rows.append(row)
    return sorted(rows, key=lambda r: (r["base"], r["seed"], r["name"]))


def write_units(path, rows: list[dict]) -> Path:
    """Write ``rows`` (:func:`unit_rows`) atomically as CSV with the header :data:`COLUMNS` (an
    empty cell for a missing value; floats written in full, so the file reproduces the study's
    numbers)."""
    return TABLE.write(path, rows)


def read_units(path) -> dict:
    """units.csv -> ``numbers[name][(base, seed)]`` as the claims read it; a ValueError naming a
    file without the study's columns, or the line of a row with text in a number column."""
    numbers: dict = {}
    for _, row in TABLE.read(path, required=("base", "seed", "name", *METRICS),
                             what="a study's units.csv"):  # fmt: skip
        unit = (row.pop("base"), row.pop("seed"))
        numbers.setdefault(row.pop("name"), {})[unit] = row
    return numbers


def plan_from_units(numbers: dict):
    """The plan settings the claims read, from the rows themselves: N = the fit cell's (GRPO
    at lr x 1 on every base) or the F-GRPO run's, its gamma, the sweep's group sizes, the other
    gammas, the regularisers' coefficients, the early window."""

    first = {name: next(iter(runs.values())) for name, runs in numbers.items()}
    fgrpo = [n for n in first if n.startswith("fgrpo_n") and "_" not in n[len("fgrpo_n") :]]
    if len(fgrpo) != 1:
        raise ValueError(f"the units name {len(fgrpo)} main F-GRPO runs (fgrpo_n<N>), need one")
    N = int(first[fgrpo[0]]["N"])
    sweep = sorted(
        {int(v["N"]) for n, v in first.items() if n == f"grpo_n{v['N']}" and int(v["N"]) != N}
    )
    gammas = sorted(
        {
            float(v["gamma"])
            for n, v in first.items()
            if n.startswith(f"fgrpo_n{N}_g") and not v.get("prompt_pool")
        }
    )
    coef = {
        k: next((float(v[k]) for v in first.values() if v.get(k)), getattr(DemoConfig, k))
        for k in ("entropy_coef", "kl_coef")
    }
    steps = next((int(v["tail_miss_steps"]) for v in first.values() if v.get("tail_miss_steps")),
                 DemoConfig.early_steps)  # fmt: skip
    scales = sorted(
        {float(v["lr_scale"]) for v in first.values() if v.get("lr_scale") not in (None, 1.0)}
    )
    return SimpleNamespace(
        group_size=N,
        gamma=float(first[fgrpo[0]]["gamma"]),
        sweep_group_sizes=tuple(sweep),
        extended_gammas=tuple(gammas),
        blind_gammas=(),
        lr_frontier=tuple(scales),
        early_steps=steps,
        prediction_preset=DemoConfig.prediction_preset,
        revisit_visits=DemoConfig.revisit_visits,
        **coef,
    )


def judge_units(path, prediction: dict | None = None) -> list[dict]:
    """Every claim judged from units.csv alone (``prediction``: the simulator's, for claim 10;
    without it claim 10 is not resolved)."""
    numbers = read_units(path)
    return judge_claims(numbers, plan_from_units(numbers), prediction)
