"""The simulator on every legal config (paper Section 5.1, App. J): Adam's betas at the edges
of their range (beta1 = 0, tiny beta1, beta2 = 0) run in every engine and agree; a policy whose
mass sits on correct actions (Q_pos an ulp above 1 by rounding) is recorded, not rejected; the
focal weight is exact where 1 - mu_hat rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fgrpo_theory.focal import focal_weight
from fgrpo_theory.sim import SimConfig, run_sweep
from fgrpo_theory.sim.sparse import rebase_every

BASE = SimConfig(
    actions=300, correct=30, group_sizes=(4, 64), gammas=(0.0, 1.0), seeds=(0, 1), steps=150,
    lr=0.05,
)  # fmt: skip


@pytest.mark.parametrize("betas", [(0.0, 0.999), (0.0005, 0.999), (0.9, 0.0), (1e-200, 0.5)])
def test_adam_betas_at_the_edges_run_in_every_engine_and_agree(betas):
    """The lazy engines fold Adam's decay into rescaled moments (b1^-d); at small betas they
    rescale more often, and at beta = 0 every step, instead of dividing by zero or overflowing.
    The three numpy-draws engines share the draws, so their records agree run by run."""
    from dataclasses import replace

    cfg = replace(BASE, adam_betas=betas)
    res = {
        e: run_sweep(cfg, engine=e, progress=False).records for e in ("dense", "sparse", "compiled")
    }
    for e in ("sparse", "compiled"):
        for key in ("q_pos", "m_ret", "entropy"):
            assert np.all(np.isfinite(res[e][key]))
            np.testing.assert_allclose(res[e][key], res["dense"][key], rtol=1e-8, atol=1e-10)


def test_rebase_interval_keeps_the_rescaled_moments_finite():
    assert rebase_every(0.9, 0.999) == 100
    assert rebase_every(0.0, 0.999) == 0 and rebase_every(0.9, 0.0) == 0
    d = rebase_every(0.0005, 0.999)
    assert 1 <= d < 100 and 0.0005**-d <= 1e100 < 0.0005 ** -(d + 1)


@pytest.mark.parametrize("engine", ["dense", "sparse", "compiled"])
def test_a_policy_on_the_correct_actions_is_recorded(engine):
    """With a huge lr the policy puts all its mass on correct actions and Q_pos sums to an ulp
    above 1: the run completes with Q_pos in [0, 1]."""
    from dataclasses import replace

    res = run_sweep(replace(BASE, lr=1000.0, steps=50, seeds=(0,)), engine=engine, progress=False)
    q = res.records["q_pos"]
    assert np.all((q >= 0) & (q <= 1)) and q[..., -1].max() == pytest.approx(1.0)


def test_focal_weight_where_one_minus_mu_rounds():
    assert focal_weight(1e-300, 1e300) == pytest.approx(math.exp(-1.0), rel=1e-15)
    assert focal_weight(1e-17, 1e17) == pytest.approx(math.exp(-1.0), rel=1e-15)
    assert focal_weight(1.0, 0.0) == 1.0 and focal_weight(1.0, 2.0) == 0.0
    np.testing.assert_allclose(focal_weight([0.25, 0.5], 3.0), [0.75**3, 0.125], rtol=1e-15)


def test_configs_whose_arithmetic_would_overflow_or_divide_by_zero_are_refused():
    """Rewards beyond 1e100 (squared times N^2 they would overflow) and initial logits that give
    the correct actions no float64 mass (M_ret would be 0/0) are ValueErrors naming the field."""
    from fgrpo_theory.sim import SimConfig

    with pytest.raises(ValueError, match="reward_correct"):
        SimConfig(reward_correct=1e154)
    with pytest.raises(ValueError, match="reward_wrong"):
        SimConfig(reward_wrong=-1e101)
    with pytest.raises(ValueError, match="initial_logits give the correct actions probability 0"):
        SimConfig(actions=1000, correct=10, initial_logits=tuple(np.linspace(-800, 800, 1000)))
    with pytest.raises(ValueError, match="initial logits give the correct actions"):
        SimConfig(anchor_logit=-800.0, correct_logit=-800.0, incorrect_logit=0.0)
    edge = SimConfig(
        actions=300, correct=30, group_sizes=(8,), gammas=(0.0,), steps=5, advantage="grpo",
        reward_correct=1e100, reward_wrong=-1e100,
    )  # fmt: skip
    res = run_sweep(edge, progress=False, engine="dense")  # the bound itself: finite records
    assert all(np.isfinite(res.records[k]).all() for k in ("q_pos", "m_ret"))
