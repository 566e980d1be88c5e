"""The forecast of a Countdown study scored against the runs it predicted (``forecast.json``
from :mod:`forecast_study`), by the rules fixed before the blind cells trained.

Every score is on paired contrasts against the unit's GRPO N = 8 lr x 1 run (the fit cell of the
same base): measured C = m(cell) - m(fit), predicted C = p(cell) - p(fit), for Delta NLL_rare
(nats per token), in-domain pass@1 and OOD pass@64. Blind cells are scored first, the held-out
but already published cells second, apart.

(i)   sign: among the contrasts whose LLM interval over bases (Student t, 95%) excludes 0, the
      share whose predicted sign agrees; pass at >= 0.8;
(ii)  rank: Spearman rho of predicted and measured cell means of Delta NLL_rare; pass at
      rho >= 0.7 with its bootstrap-over-bases interval (95%, percentile) above 0;
(iii) calibration: the least-squares slope of measured on predicted Delta NLL_rare contrasts
      over (cell, base); pass when its bootstrap-over-bases interval holds 1 and excludes 0;
(iv)  skill: per base, the mean squared error of the Delta NLL_rare contrasts, model against each
      null (constant: C = 0; lr-only: k lr_scale w_bar; untied: s_phi = 0); pass when the paired
      difference null - model has its t interval over bases above 0, for every null.

Verdict: "the theory forecasts the LLM" when (i)-(iv) pass; "the theory fails" when it loses to
the lr-only null (the paired interval lies below 0) or (i)'s share is below 0.5; otherwise
"partly", naming what passed; "not resolved: k of n blind cells trained" while cells are
missing.

    fgrpo-llm forecast score runs/study --forecast docs/data/forecast.json --out runs/score
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import spearmanr

from fgrpo_llm.evaluation.stats import paired_difference, t_interval
from fgrpo_llm.experiments.tables import fmt, markdown_table

__all__ = [
    "QUANTITIES",
    "contrasts",
    "sign_score",
    "rank_score",
    "calibration_score",
    "skill_score",
    "verdict",
    "score_stage",
    "score_forecast",
    "score_table",
    "plot_cells",
    "plot_rare",
]

#: The quantities a contrast is taken of.
QUANTITIES = ("delta_nll_rare", "pass@1", "pass@64")
D = "delta_nll_rare"
NULLS = ("constant", "lr_only", "untied")


def contrasts(rows: list[dict], stage: str) -> list[dict]:
    """The contrasts of the ``stage``'s cells against the fit cell of the same base, for every
    (cell, base) measured on both sides. ``rows``: {"cell", "base", "stage", "predicted",
    "measured" (None: not trained), "nulls": {"lr_only": D, "untied": {...}}}."""
    ref = {r["base"]: r for r in rows if r["stage"] == "fit" and r.get("measured")}
    out = []
    for r in rows:
        f = ref.get(r["base"])
        if r["stage"] != stage or not r.get("measured") or f is None:
            continue
        c = {"cell": r["cell"], "base": r["base"]}
        c["measured"] = {q: r["measured"][q] - f["measured"][q] for q in QUANTITIES}
        c["predicted"] = {q: r["predicted"][q] - f["predicted"][q] for q in QUANTITIES}
        c["nulls"] = {
            "constant": 0.0,
            "lr_only": r["nulls"]["lr_only"] - f["nulls"]["lr_only"],
            "untied": r["nulls"]["untied"][D] - f["nulls"]["untied"][D],
        }
        out.append(c)
    return out


def _by_cell(cs: list[dict]) -> dict:
    cells: dict = {}
    for c in cs:
        cells.setdefault(c["cell"], []).append(c)
    return cells


def sign_score(cs: list[dict]) -> dict:
    """(i): per cell and quantity, the LLM's t interval over bases; the share of those excluding
    0 whose mean predicted contrast has the measured sign."""
    judged, agree, rows = 0, 0, []
    for cell, group in _by_cell(cs).items():
        for q in QUANTITIES:
            m = [c["measured"][q] for c in group]
            p = float(np.mean([c["predicted"][q] for c in group]))
            iv = t_interval(m)
            counted = iv.excludes(0.0)
            ok = bool(counted and np.sign(p) == np.sign(iv.mean))
            judged, agree = judged + int(counted), agree + int(ok)
            rows.append(
                {
                    "cell": cell,
                    "quantity": q,
                    "measured": iv.to_dict(),
                    "predicted": p,
                    "counted": counted,
                    "agrees": ok,
                }
            )
    share = agree / judged if judged else math.nan
    return {
        "share": share,
        "judged": judged,
        "agree": agree,
        "passed": bool(share >= 0.8),
        "contrasts": rows,
    }


def _cell_means(cs: list[dict], bases) -> tuple[np.ndarray, np.ndarray]:
    """(cells,) predicted and measured cell means of the Delta NLL_rare contrast over ``bases``
    (a multiset: the bootstrap's draw), cells without a base in it dropped."""
    weight = {b: bases.count(b) for b in set(bases)}
    pm, mm = [], []
    for group in _by_cell(cs).values():
        w = np.array([weight.get(c["base"], 0) for c in group], dtype=float)
        if w.sum() == 0:
            continue
        pm.append(np.average([c["predicted"][D] for c in group], weights=w))
        mm.append(np.average([c["measured"][D] for c in group], weights=w))
    return np.array(pm), np.array(mm)


def _bases(cs: list[dict]) -> list[str]:
    return sorted({c["base"] for c in cs})


def _boot(cs, stat, *, n_boot: int, seed: int) -> tuple[float, float]:
    """The 95% percentile interval of ``stat(bases)`` over bases drawn with replacement."""
    bases, rng = _bases(cs), np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        v = stat(list(rng.choice(bases, size=len(bases), replace=True)))
        if math.isfinite(v):
            vals.append(v)
    if len(vals) < 2:
        return math.nan, math.nan
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


def _rho(cs, bases) -> float:
    p, m = _cell_means(cs, bases)
    if p.size < 3 or np.ptp(p) == 0 or np.ptp(m) == 0:
        return math.nan
    return float(spearmanr(p, m).statistic)


def rank_score(cs: list[dict], *, n_boot: int = 2000, seed: int = 0) -> dict:
    """(ii): Spearman rho of predicted and measured cell means, bootstrap over bases."""
    rho = _rho(cs, _bases(cs))
    lo, hi = _boot(cs, lambda b: _rho(cs, b), n_boot=n_boot, seed=seed)
    ok = math.isfinite(rho) and rho >= 0.7 and math.isfinite(lo) and lo > 0
    return {"rho": rho, "lo": lo, "hi": hi, "cells": len(_by_cell(cs)), "passed": bool(ok)}


def _slope(cs, bases) -> float:
    weight = {b: bases.count(b) for b in set(bases)}
    w = np.array([weight.get(c["base"], 0) for c in cs], dtype=float)
    x = np.array([c["predicted"][D] for c in cs])
    y = np.array([c["measured"][D] for c in cs])
    if w.sum() == 0:
        return math.nan
    xm, ym = np.average(x, weights=w), np.average(y, weights=w)
    sxx = np.sum(w * (x - xm) ** 2)
    return float(np.sum(w * (x - xm) * (y - ym)) / sxx) if sxx > 0 else math.nan


def calibration_score(cs: list[dict], *, n_boot: int = 2000, seed: int = 0) -> dict:
    """(iii): the slope of measured on predicted contrasts, bootstrap over bases."""
    slope = _slope(cs, _bases(cs)) if cs else math.nan
    lo, hi = _boot(cs, lambda b: _slope(cs, b), n_boot=n_boot, seed=seed) if cs else (math.nan,) * 2
    ok = math.isfinite(lo) and lo <= 1.0 <= hi and (lo > 0 or hi < 0)
    return {"slope": slope, "lo": lo, "hi": hi, "passed": bool(ok)}


def skill_score(cs: list[dict]) -> dict:
    """(iv): per base the MSE of the Delta NLL_rare contrasts, model and each null; the paired
    difference null - model over bases (t interval)."""
    bases = _bases(cs)
    mse = {name: [] for name in ("model", *NULLS)}
    for b in bases:
        group = [c for c in cs if c["base"] == b]
        m = np.array([c["measured"][D] for c in group])
        mse["model"].append(float(np.mean((np.array([c["predicted"][D] for c in group]) - m) ** 2)))
        for name in NULLS:
            mse[name].append(float(np.mean((np.array([c["nulls"][name] for c in group]) - m) ** 2)))
    out = {"mse": {k: float(np.mean(v)) if v else math.nan for k, v in mse.items()}, "nulls": {}}
    for name in NULLS:
        if len(bases) >= 2:
            iv = paired_difference(mse[name], mse["model"]).to_dict()
        else:
            iv = {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": len(bases)}
        out["nulls"][name] = {
            **iv,
            "passed": bool(math.isfinite(iv["lo"]) and iv["lo"] > 0),
            "loses": bool(math.isfinite(iv["hi"]) and iv["hi"] < 0),
        }
    out["passed"] = all(v["passed"] for v in out["nulls"].values())
    return out


def verdict(scores: dict, *, trained: int, cells: int, stage: str = "blind") -> str:
    """The verdict of one stage's scores (``score_stage``'s)."""
    if cells == 0:
        return f"no {stage} cells in the forecast"
    if trained < cells:
        return f"not resolved: {trained} of {cells} {stage} cells trained"
    if scores["skill"]["nulls"]["lr_only"]["loses"]:
        return "the theory fails (the lr-only null forecasts better)"
    share = scores["sign"]["share"]
    if math.isfinite(share) and share < 0.5:
        return f"the theory fails (sign agreement {share:.2f} < 0.5)"
    passed = [name for name in ("sign", "rank", "calibration", "skill") if scores[name]["passed"]]
    if len(passed) == 4:
        return "the theory forecasts the LLM"
    return "partly: " + (", ".join(passed) + " passed" if passed else "nothing passed")


def score_stage(rows: list[dict], stage: str, *, n_boot: int = 2000, seed: int = 0) -> dict:
    """Scores (i)-(iv) and the verdict of one stage ("blind" or "published")."""
    names = sorted({r["cell"] for r in rows if r["stage"] == stage})
    cs = contrasts(rows, stage)
    done = sorted({c["cell"] for c in cs})
    scores = {
        "sign": sign_score(cs),
        "rank": rank_score(cs, n_boot=n_boot, seed=seed),
        "calibration": calibration_score(cs, n_boot=n_boot, seed=seed),
        "skill": skill_score(cs),
    }
    return {
        **scores,
        "cells": {n: ("trained" if n in done else "not trained") for n in names},
        "bases": _bases(cs),
        "verdict": verdict(scores, trained=len(done), cells=len(names), stage=stage),
        "contrasts": cs,
    }


def score_forecast(rows: list[dict], *, n_boot: int = 2000, seed: int = 0) -> dict:
    """{"blind": score_stage, "published": score_stage}, blind first."""
    return {s: score_stage(rows, s, n_boot=n_boot, seed=seed) for s in ("blind", "published")}


def _pass(ok: bool) -> str:
    return "passes" if ok else "fails"


def _interval(x: float, lo: float, hi: float) -> str:
    return f"{fmt(x, 2)} [{fmt(lo, 2)}, {fmt(hi, 2)}]"


def _stage_column(st: dict) -> list[str]:
    """One stage's cells of :func:`score_table`, rows (i)-(iv), the trained cells, the verdict."""
    sign, rank, cal, skill = st["sign"], st["rank"], st["calibration"], st["skill"]
    trained = [n for n, state in st["cells"].items() if state == "trained"]
    if sign["judged"]:
        i = f"{sign['agree']} of {sign['judged']} resolved contrasts agree: {_pass(sign['passed'])}"
    else:
        i = "no contrast's interval excludes 0"
    if rank["rho"] is None or not math.isfinite(rank["rho"]):
        ii = f"{rank['cells']} cells: not defined"
    else:
        ii = (f"{_interval(rank['rho'], rank['lo'], rank['hi'])} over {rank['cells']} cells: "
              f"{_pass(rank['passed'])}")  # fmt: skip
    iii = f"{_interval(cal['slope'], cal['lo'], cal['hi'])}: {_pass(cal['passed'])}"
    mse = skill["mse"]
    beats = [n.replace("_", "-") for n in NULLS if skill["nulls"][n]["passed"]]
    loses = [n.replace("_", "-") for n in NULLS if skill["nulls"][n]["loses"]]
    iv = f"model {fmt(mse['model'], 4)}; " + ", ".join(
        f"{n.replace('_', '-')} {fmt(mse[n], 4)}" for n in NULLS
    )
    iv += "; beats " + (", ".join(beats) if beats else "no null")
    if loses:
        iv += "; loses to " + ", ".join(loses)
    return [i, ii, iii, iv, f"{len(trained)} of {len(st['cells'])}: " + ", ".join(trained),
            f"**{st['verdict']}**"]  # fmt: skip


def score_table(scores: dict) -> str:
    """The scores of :func:`score_forecast` as one markdown table: a row per score (i)-(iv),
    the trained cells and the verdict; a column per stage (blind first, then the held-out
    published cells). The MSE are per base, averaged; a null is beaten (or loses) when the
    paired interval over bases of null - model lies above (below) 0."""
    rows = [
        "(i) sign, pass at >= 0.8",
        "(ii) rank, Spearman rho >= 0.7 with its interval above 0",
        "(iii) calibration slope, interval holds 1 and excludes 0",
        "(iv) skill, MSE of the Delta NLL_rare contrasts below each null's",
        "cells trained",
        "verdict",
    ]
    stages = [s for s in ("blind", "published") if s in scores]
    cols = [_stage_column(scores[s]) for s in stages]
    headers = ["score", *(f"{s} cells" for s in stages)]
    return markdown_table(headers, [[r, *(c[k] for c in cols)] for k, r in enumerate(rows)])


def plot_cells(ax, stage_scores: dict, *, label: str = "") -> None:
    """Predicted against measured Delta NLL_rare contrasts, one point per cell (mean over
    bases), the diagonal y = x."""
    if not stage_scores["contrasts"]:
        ax.text(0.5, 0.5, "no trained cells", ha="center", va="center", transform=ax.transAxes)
    for cell, group in _by_cell(stage_scores["contrasts"]).items():
        x = np.mean([c["predicted"][D] for c in group])
        y = np.mean([c["measured"][D] for c in group])
        ax.scatter([x], [y], s=25)
        ax.annotate(cell, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    _diagonal(ax)
    ax.set_xlabel("predicted Delta NLL_rare - GRPO N=8 (nats/token)")
    ax.set_ylabel("measured (nats/token)")
    ax.set_title(f"per cell {label}".strip(), fontsize=9)


def plot_rare(ax, predicted, measured) -> None:
    """Predicted against measured Delta NLL of each rare trajectory (every trained held-out
    cell)."""
    ax.scatter(np.asarray(predicted, float), np.asarray(measured, float), s=3, alpha=0.3)
    _diagonal(ax)
    ax.set_xlabel("predicted Delta NLL (nats/token)")
    ax.set_ylabel("measured Delta NLL (nats/token)")
    ax.set_title("per rare trajectory", fontsize=9)


def _diagonal(ax) -> None:
    lo = min(ax.get_xlim()[0], ax.get_ylim()[0])
    hi = max(ax.get_xlim()[1], ax.get_ylim()[1])
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
