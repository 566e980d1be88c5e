"""fgrpo_theory: the F-GRPO paper's theory in numpy / scipy / sympy (never torch at import).

The closed-form tail-miss probability of Lemma 3.1 and its relatives (``tail_miss``), the focal
weight g = (1 - mu_hat)^gamma and the learning-rate multiplier m_gamma (``focal``, Eq. 11-13),
group-relative advantages (``advantages``), pass@k (``passk``, App. P-Q), the categorical
softmax-policy model (``categorical``: Eq. 5, Eq. 17, Proposition 3.2, Lemma H.1), Monte Carlo
checks (``montecarlo``), sympy derivations (``derivations``) and the multi-step simulator of
Fig. 2 (``sim``). The names below import their module on first use.

    >>> import fgrpo_theory as ft
    >>> round(float(ft.p_tail_miss(0.3, 0.015, 8)), 6)
    0.828423
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fgrpo_common.exports import lazy_exports

try:  # the version of the installed distribution (pyproject.toml's, one for the three packages)
    __version__ = version("fgrpo")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
del PackageNotFoundError, version

#: public name -> the module that defines it
_EXPORTS = {
    "p_tail_miss": "fgrpo_theory.tail_miss",
    "log_p_tail_miss": "fgrpo_theory.tail_miss",
    "p_active": "fgrpo_theory.tail_miss",
    "log_p_active": "fgrpo_theory.tail_miss",
    "p_tail_miss_rho": "fgrpo_theory.tail_miss",
    "log_p_tail_miss_rho": "fgrpo_theory.tail_miss",
    "p_tail_miss_given_active": "fgrpo_theory.tail_miss",
    "expected_tail_miss_count": "fgrpo_theory.tail_miss",
    "stationary_group_size": "fgrpo_theory.tail_miss",
    "peak_group_size": "fgrpo_theory.tail_miss",
    "focal_weight": "fgrpo_theory.focal",
    "focal_advantage_magnitudes": "fgrpo_theory.focal",
    "lr_multiplier": "fgrpo_theory.focal",
    "pass_at_k_exact": "fgrpo_theory.passk",
    "pass_at_k_unbiased": "fgrpo_theory.passk",
    "mean_pass_at_k": "fgrpo_theory.passk",
    "paired_subsampling_test": "fgrpo_theory.passk",
    "null_rejection_rate": "fgrpo_theory.passk",
    "PairedSubsamplingResult": "fgrpo_theory.passk",
    "grpo_advantages": "fgrpo_theory.advantages",
    "mean_centred_advantages": "fgrpo_theory.advantages",
    "focal_advantages": "fgrpo_theory.advantages",
    "focal_group_weights": "fgrpo_theory.advantages",
    "group_success_rate": "fgrpo_theory.advantages",
    "softmax": "fgrpo_theory.categorical",
    "group_stats": "fgrpo_theory.categorical",
    "GroupStats": "fgrpo_theory.categorical",
    "logit_update": "fgrpo_theory.categorical",
    "predicted_delta_q_pos": "fgrpo_theory.categorical",
    "predicted_delta_q_u_pos": "fgrpo_theory.categorical",
    "expected_p_pos_given_k": "fgrpo_theory.categorical",
    "expected_p_neg_given_k": "fgrpo_theory.categorical",
    "expected_s_r_given_k": "fgrpo_theory.categorical",
    "mc_p_active": "fgrpo_theory.montecarlo",
    "mc_p_tail_miss": "fgrpo_theory.montecarlo",
    "SimConfig": "fgrpo_theory.sim",
    "PRESETS": "fgrpo_theory.sim",
    "run_sweep": "fgrpo_theory.sim",
    "run_cached": "fgrpo_theory.sim",
    "SweepResult": "fgrpo_theory.sim",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
del lazy_exports  # (not a public name of this package)
