"""The tail-miss check: Lemma 3.1 against what real training groups did.

A training group of size N is *active* when 0 < X < N; it is a *tail miss* when it is active and
none of its N rollouts lands in the prompt's rare event E(x) (paper Section 3, Lemma 3.1). With the
per-prompt base (mu, tau) of the rare-correct set (``fgrpo_llm.evaluation.rare``),

    P(B_{E,N}) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N      (``fgrpo_theory.tail_miss``).

Every run logs each sampled group to ``groups.jsonl`` ({step, prompt_id, N, num_correct, forms});
a group *hits* E(x) when one of its correct forms is in E(x). :func:`tail_miss_records` pairs each
logged group with its prediction; :func:`summarise_tail_miss` compares the observed frequency
with the mean prediction per N (Wilson intervals for the observation, the Bernoulli-sum range of
the prediction).

    rec = tail_miss_records(run.groups, rare_set, max_step=50)
    rows = summarise_tail_miss(rec)          # one row per N: observed, predicted, agrees
"""

from __future__ import annotations

import math

import numpy as np

from fgrpo_common.checks import check_integer
from fgrpo_llm.evaluation.stats import Z95, wilson_interval
from fgrpo_theory.tail_miss import p_active, p_tail_miss

__all__ = [
    "Z95",
    "tail_miss_records",
    "wilson_interval",
    "summarise_tail_miss",
    "calibration_bins",
    "predicted_curve",
    "plot_tail_miss_vs_N",
    "plot_predicted_vs_observed",
]


def tail_miss_records(
    groups: list[dict], rare_set, *, max_step: int | None = None, exact: bool | None = None
) -> dict[str, np.ndarray]:
    """Per logged group (of a prompt with a rare event E(x)): observed flags and Lemma 3.1.

    ``exact``: predict with the exact base (mu, tau) of each prompt (``mu_exact``, ``tau_exact`` in
    the rare set, ``fgrpo_llm.evaluation.exact``) instead of the sampled estimates; None (the
    default) uses them whenever the rare set has them.

    Returns arrays ``step, N, active, hit, tail_miss`` (observed) and ``p_active, p_tail_miss``
    (predicted at the prompt's base (mu, tau)), plus ``mu, tau, num_rollouts`` (the rollouts the
    estimates came from), ``prompt_id`` (object array) and ``exact`` (whether (mu, tau) are).
    """
    exact = rare_set.has_exact if exact is None else exact
    rows = []
    for g in groups:
        step = int(g.get("step", 0))
        if max_step is not None and step > max_step:
            continue
        info = rare_set.prompts.get(str(g["prompt_id"]))
        if not info or not info.get("rare_forms"):
            continue
        N = int(g["N"])
        X = int(g["num_correct"])
        rare = set(info["rare_forms"])
        hit = any(f is not None and str(f) in rare for f in g.get("forms") or [])
        active = 0 < X < N
        mu, tau = (info["mu_exact"], info["tau_exact"]) if exact else (info["mu"], info["tau"])
        M = int(info.get("num_rollouts") or 0)
        rows.append(
            (
                step,
                N,
                active,
                hit,
                active and not hit,
                float(mu),
                float(tau),
                M,
                str(g["prompt_id"]),
            )
        )
    if not rows:
        empty = np.zeros(0)
        return {
            "step": empty.astype(int),
            "N": empty.astype(int),
            "active": empty.astype(bool),
            "hit": empty.astype(bool),
            "tail_miss": empty.astype(bool),
            "p_active": empty,
            "p_tail_miss": empty,
            "mu": empty,
            "tau": empty,
            "num_rollouts": empty.astype(int),
            "exact": empty.astype(bool),
            "prompt_id": np.zeros(0, dtype=object),
        }
    step, N, active, hit, miss, mu, tau, M, pid = map(np.array, zip(*rows, strict=True))
    return {
        "step": step.astype(int),
        "N": N.astype(int),
        "active": active.astype(bool),
        "hit": hit.astype(bool),
        "tail_miss": miss.astype(bool),
        "mu": mu,
        "tau": tau,
        "num_rollouts": M.astype(int),
        "exact": np.full(len(rows), bool(exact)),
        "p_active": np.asarray(p_active(mu, N), dtype=np.float64),
        "p_tail_miss": np.asarray(p_tail_miss(mu, tau, N), dtype=np.float64),
        "prompt_id": pid.astype(object),
    }


def _exact(records, sel) -> bool:
    """Whether the predictions of the groups ``sel`` use exact (mu, tau) (records without the
    flag: yes, no estimation error is known)."""
    flag = records.get("exact")
    return True if flag is None else bool(np.asarray(flag)[sel].all())


def _estimation_sd(records, sel, N: int, *, bootstrap: int, seed: int) -> float:
    """The sd of the mean prediction over the groups ``sel`` that comes from estimating each
    prompt's (mu, tau) from its M base rollouts: a parametric bootstrap (each prompt's M
    rollouts re-drawn multinomially over E, C minus E and not-C, as ``predicted_curve``). 0 for
    exact (mu, tau), or records without the rollout counts."""
    M_all = records.get("num_rollouts")
    if _exact(records, sel) or M_all is None or bootstrap < 1:
        return 0.0
    pids, first, inv = np.unique(records["prompt_id"][sel], return_index=True, return_inverse=True)
    mu, tau = records["mu"][sel][first], records["tau"][sel][first]  # (P,)
    M = M_all[sel][first].astype(np.int64)  # (P,)
    if (M < 1).any():
        return 0.0
    mu_b, tau_b = _resampled_mu_tau(mu, tau, M, bootstrap, np.random.default_rng(seed))  # (B, P)
    means = np.mean(p_tail_miss(mu_b[:, inv], tau_b[:, inv], N), axis=1)  # (B,)
    return float(means.std(ddof=1)) if bootstrap > 1 else 0.0


def _resampled_mu_tau(mu, tau, M, draws: int, rng: np.random.Generator):
    """``draws`` parametric bootstrap copies of the sampled (mu, tau) of P prompts, each (draws,
    P): each prompt's M rollouts re-drawn multinomially over E, C minus E and not-C."""
    probs = np.stack([tau, mu - tau, 1 - mu], axis=1).clip(0, 1)  # (P, 3)
    probs = probs / probs.sum(axis=1, keepdims=True)
    counts = rng.multinomial(M, probs, size=(draws, len(M)))  # (draws, P, 3)
    return (counts[..., 0] + counts[..., 1]) / M, counts[..., 0] / M


def summarise_tail_miss(
    records: dict[str, np.ndarray], *, bootstrap: int = 200, seed: int = 0
) -> list[dict]:
    """One row per N: observed tail-miss / active frequencies (Wilson 95% CI) against the mean
    Lemma 3.1 prediction, with the 95% range of the observed frequency if the prediction is right
    (a sum of independent Bernoulli(p_i): mean sum p_i, variance sum p_i (1 - p_i); with sampled
    (mu, tau), plus the variance of the prediction from estimating them, by a seeded parametric
    bootstrap of ``bootstrap`` draws, ``prediction_sd``). ``agrees``: the prediction lies in the
    observation's interval, or the observation in that range. With sampled (mu, tau) the check
    is approximate still: E(x) was chosen on the samples that measure it (a rare-set form only
    when it was sampled, which biases its tau upwards; a designated one as the least frequent
    form, downwards); the exact (mu, tau) of ``fgrpo_llm.evaluation.exact`` avoid both."""
    out = []
    for N in sorted(set(records["N"].tolist())):
        sel = records["N"] == N
        G = int(sel.sum())
        miss = int(records["tail_miss"][sel].sum())
        act = int(records["active"][sel].sum())
        p = records["p_tail_miss"][sel]
        pred = float(p.mean())
        pred_sd = _estimation_sd(records, sel, int(N), bootstrap=bootstrap, seed=seed)
        sd = math.sqrt(float((p * (1 - p)).sum())) / G
        if pred_sd > 0:
            sd = math.hypot(sd, pred_sd)
        lo, hi = wilson_interval(miss, G)
        out.append(
            {
                "N": int(N),
                "groups": G,
                "observed": miss / G,
                "observed_lo": lo,
                "observed_hi": hi,
                "predicted": pred,
                "predicted_lo": max(0.0, pred - Z95 * sd),
                "predicted_hi": min(1.0, pred + Z95 * sd),
                "observed_active": act / G,
                "predicted_active": float(records["p_active"][sel].mean()),
                "prediction_sd": pred_sd,
                "exact": _exact(records, sel),
                "agrees": bool(lo <= pred <= hi or pred - Z95 * sd <= miss / G <= pred + Z95 * sd),
            }
        )
    return out


def calibration_bins(records: dict[str, np.ndarray], *, bins: int = 5) -> list[dict]:
    """Groups binned by predicted P(B) (quantile bins): mean predicted vs observed (Wilson CI)."""
    p = records["p_tail_miss"]
    if len(p) == 0:
        return []
    edges = np.unique(np.quantile(p, np.linspace(0, 1, bins + 1)))
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, max(len(edges) - 2, 0))
    out = []
    for b in range(max(len(edges) - 1, 1)):
        sel = which == b
        G = int(sel.sum())
        if G == 0:
            continue
        miss = int(records["tail_miss"][sel].sum())
        lo, hi = wilson_interval(miss, G)
        out.append(
            {
                "predicted": float(p[sel].mean()),
                "observed": miss / G,
                "observed_lo": lo,
                "observed_hi": hi,
                "groups": G,
            }
        )
    return out


def predicted_curve(
    rare_set, Ns, *, bootstrap: int = 200, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Mean over the rare-set prompts of Lemma 3.1 at each N. With sampled (mu, tau), a 95% band
    from a parametric bootstrap of the estimates (each prompt's M rollouts re-drawn multinomially
    over E, C minus E and not-C); with the exact values of ``fgrpo_llm.evaluation.exact`` there is
    no estimation error and the band is the curve itself."""
    ids, mu, tau = rare_set.mu_tau()
    Ns = check_integer("Ns", Ns, minimum=1).ravel()
    if not ids:
        nan = np.full(len(Ns), np.nan)
        return {"N": Ns, "mean": nan, "lo": nan, "hi": nan}
    M = np.array([rare_set.prompts[i]["num_rollouts"] for i in ids])

    def curve(mu_, tau_):
        return np.array([float(np.mean(p_tail_miss(mu_, tau_, int(n)))) for n in Ns])

    mean = curve(mu, tau)
    if rare_set.has_exact:
        return {"N": Ns, "mean": mean, "lo": mean.copy(), "hi": mean.copy()}
    mu_b, tau_b = _resampled_mu_tau(mu, tau, M, int(bootstrap), rng)  # (B, P)
    draws = np.array([curve(m, t) for m, t in zip(mu_b, tau_b, strict=True)])  # (B, len(Ns))
    draws = draws if len(draws) else mean[None, :]
    return {
        "N": Ns,
        "mean": mean,
        "lo": np.quantile(draws, 0.025, axis=0),
        "hi": np.quantile(draws, 0.975, axis=0),
    }


def plot_tail_miss_vs_N(ax, curve: dict, summaries: dict[str, list[dict]]):
    """Lemma 3.1 mean prediction against N (line and band) with observed frequencies (points).

    The band (the 95% range from estimating (mu, tau), :func:`predicted_curve`) is drawn only
    when it has a width: with the exact (mu, tau) it is the curve itself, and the line says so
    instead of listing a band the figure does not show."""
    artists = []
    mean = np.asarray(curve["mean"], dtype=float)
    if np.isfinite(mean).any():
        lo, hi = (np.asarray(curve[k], dtype=float) for k in ("lo", "hi"))
        band = not (np.allclose(lo, mean, equal_nan=True) and np.allclose(hi, mean, equal_nan=True))
        label = "Lemma 3.1 at base (mu, tau)" + ("" if band else ", no estimation band")
        artists.append(ax.plot(curve["N"], mean, color="k", label=label)[0])
        if band:
            artists.append(
                ax.fill_between(
                    curve["N"], lo, hi, color="k", alpha=0.15, label="95% band (estimate)"
                )
            )
    else:
        artists.append(
            ax.text(0.5, 0.5, "no prompt with a rare event", ha="center", transform=ax.transAxes)
        )
    for i, (name, rows) in enumerate(summaries.items()):
        if not rows:
            continue
        x = np.array([r["N"] for r in rows], dtype=float) * (1 + 0.04 * i)
        y = np.array([r["observed"] for r in rows])
        err = np.array(
            [
                [r["observed"] - r["observed_lo"] for r in rows],
                [r["observed_hi"] - r["observed"] for r in rows],
            ]
        )
        artists.append(ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, label=f"observed: {name}"))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel("P(tail miss)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    return artists


def plot_predicted_vs_observed(ax, points: list[dict], *, label_key: str = "label"):
    """Observed against predicted tail-miss frequency (Wilson 95% bars), y = x diagonal."""
    artists = [ax.plot([0, 1], [0, 1], color="k", lw=1, ls="--", label="y = x")[0]]
    for pt in points:
        err = [[pt["observed"] - pt["observed_lo"]], [pt["observed_hi"] - pt["observed"]]]
        xerr = None
        if "predicted_lo" in pt:
            xerr = [[pt["predicted"] - pt["predicted_lo"]], [pt["predicted_hi"] - pt["predicted"]]]
        artists.append(
            ax.errorbar(
                [pt["predicted"]],
                [pt["observed"]],
                yerr=err,
                xerr=xerr,
                fmt="o",
                capsize=3,
                label=pt.get(label_key),
            )
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted P(tail miss) (Lemma 3.1)")
    ax.set_ylabel("observed frequency")
    ax.grid(alpha=0.3)
    return artists
