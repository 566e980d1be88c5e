"""How far sampled estimates of a prompt's success mass mu(x) and rare-event mass tau_E(x) were
from the exact values (``fgrpo_llm.evaluation.exact``).

The rare-correct set (App. M.2, ``fgrpo_llm.evaluation.rare``) estimates mu and tau from M base
rollouts and picks the rare event E(x) from the same rollouts, which biases tau: low for a
"designated" E(x) (the least frequent sampled correct form, the smallest of several counts), high
for an E(x) from the rare-correct set (a form enters only when it was sampled: tau >= 1/M). The
summary measures the bias both ways (``tau_below_frac``, ``tau_above_frac``) and how often the
exact value lies in the sampled proportion's 95% Wilson interval.
"""

from __future__ import annotations

import numpy as np

from fgrpo_common.checks import check_integer, check_probability
from fgrpo_llm.evaluation.stats import wilson_interval

__all__ = ["sampling_error_summary"]


def _mean(x: np.ndarray) -> float | None:
    return float(np.mean(x)) if len(x) else None


def sampling_error_summary(
    mu_sampled, mu_exact, tau_sampled, tau_exact, has_event, num_rollouts=None
) -> dict:
    """How far sampled (mu, tau) were from the exact ones, over prompts (arrays of one length P).

    mu: mean and max of |mu_sampled - mu_exact|, mean of mu_sampled - mu_exact. tau, over the
    prompts with a rare event (``has_event``): mean of tau_sampled - tau_exact, of |...|, mean and
    median of tau_sampled / tau_exact (prompts with tau_exact > 0), and ``tau_below_frac`` /
    ``tau_above_frac``, the shares of prompts whose sampled tau is strictly below / above the
    exact one (the selection bias: E(x) was chosen on the samples that measure it, low for a
    designated E(x), high for one from the rare-correct set). With ``num_rollouts`` (M per
    prompt), also the share of prompts whose exact value lies in the 95% Wilson interval of the
    sampled proportion (about 0.95 for an unbiased estimate). Undefined entries (no prompt to
    average over) are None.
    """
    mu_s = check_probability("mu_sampled", mu_sampled).astype(np.float64).ravel()
    mu_e = check_probability("mu_exact", mu_exact).astype(np.float64).ravel()
    tau_s = check_probability("tau_sampled", tau_sampled).astype(np.float64).ravel()
    tau_e = check_probability("tau_exact", tau_exact).astype(np.float64).ravel()
    ev = np.asarray(has_event, dtype=bool).ravel()
    P = len(mu_s)
    if not (len(mu_e) == len(tau_s) == len(tau_e) == len(ev) == P):
        raise ValueError(
            f"mu_sampled, mu_exact, tau_sampled, tau_exact and has_event need one length, got "
            f"{[len(mu_s), len(mu_e), len(tau_s), len(tau_e), len(ev)]}"
        )
    d_mu = mu_s - mu_e
    ts, te = tau_s[ev], tau_e[ev]
    pos = te > 0
    ratio = ts[pos] / te[pos]
    out = {
        "num_prompts": P,
        "mu_sampled_mean": _mean(mu_s),
        "mu_exact_mean": _mean(mu_e),
        "mu_error_mean": _mean(d_mu),
        "mu_abs_error_mean": _mean(np.abs(d_mu)),
        "mu_abs_error_max": float(np.max(np.abs(d_mu))) if P else None,
        "num_with_event": int(ev.sum()),
        "num_tau_exact_zero": int((~pos).sum()),
        "tau_sampled_mean": _mean(ts),
        "tau_exact_mean": _mean(te),
        "tau_error_mean": _mean(ts - te),
        "tau_abs_error_mean": _mean(np.abs(ts - te)),
        "tau_ratio_mean": _mean(ratio),
        "tau_ratio_median": float(np.median(ratio)) if len(ratio) else None,
        "tau_below_frac": _mean((ts < te).astype(np.float64)),
        "tau_above_frac": _mean((ts > te).astype(np.float64)),
    }
    if num_rollouts is not None:
        M = check_integer("num_rollouts", num_rollouts, minimum=1).astype(np.float64).ravel()
        M = np.broadcast_to(M, (P,)) if M.size == 1 else M
        if len(M) != P:
            raise ValueError(f"num_rollouts needs one entry per prompt ({P}), got {len(M)}")
        lo, hi = wilson_interval(np.round(mu_s * M), M)
        out["mu_in_ci95_frac"] = _mean(((lo <= mu_e) & (mu_e <= hi)).astype(np.float64))
        lo, hi = wilson_interval(np.round(ts * M[ev]), M[ev])
        out["tau_in_ci95_frac"] = _mean(((lo <= te) & (te <= hi)).astype(np.float64))
    return out
