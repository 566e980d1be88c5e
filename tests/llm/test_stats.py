"""Intervals over seeds and paired differences against scipy and a hand computation; verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Interval,
    base_level_interval,
    clipped,
    combined_verdict,
    format_interval,
    informative,
    paired_difference,
    t_interval,
    verdict_above,
    verdict_below,
    verdict_not_below,
    verdict_within,
    widen,
)


def test_t_interval_by_hand():
    x = [0.40, 0.44, 0.45, 0.43, 0.38]
    mean = sum(x) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / 4)
    half = 2.7764451051977987 * sd / math.sqrt(5)  # t_{0.975, 4}
    iv = t_interval(x)
    assert iv.mean == pytest.approx(mean) and iv.sd == pytest.approx(sd)
    assert (iv.lo, iv.hi) == pytest.approx((mean - half, mean + half))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=12),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_t_interval_matches_scipy(x, confidence):
    x = np.array(x)
    iv = t_interval(x, confidence=confidence)
    if x.std() == 0:
        assert iv.lo == iv.hi == pytest.approx(x.mean())
        return
    lo, hi = stats.t.interval(confidence, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (iv.lo, iv.hi) == pytest.approx((lo, hi), rel=1e-9, abs=1e-12)


def test_paired_difference_is_the_interval_of_the_per_seed_differences():
    a = np.array([0.50, 0.52, 0.47, 0.55])
    b = a - np.array([0.03, 0.02, 0.04, 0.03])  # a shared seed effect, a steady gain
    iv = paired_difference(a, b)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (iv.lo, iv.hi) == pytest.approx((ref.low, ref.high))
    assert iv.lo > 0  # paired: the gain is resolved although the two sets of values overlap
    unpaired = t_interval(a), t_interval(b)
    assert unpaired[0].lo < unpaired[1].hi
    with pytest.raises(ValueError, match="one value per seed"):
        paired_difference([1, 2], [1, 2, 3])


def test_one_seed_has_no_interval_and_bad_input_is_named():
    iv = t_interval([0.3])
    assert iv.mean == 0.3 and math.isnan(iv.lo) and verdict_above(iv) == NOT_RESOLVED
    assert format_interval(iv) == "0.300"
    for bad in ([], [float("nan"), 1.0]):
        with pytest.raises(ValueError, match="values"):
            t_interval(bad)
    with pytest.raises(ValueError, match="confidence"):
        t_interval([1, 2], confidence=1.5)


def test_verdicts():
    up, down, across = (
        Interval(0.1, 0.05, 0.15, 3, 0.02),
        Interval(-0.1, -0.15, -0.05, 3, 0.02),
        Interval(0.0, -0.05, 0.05, 3, 0.02),
    )
    assert (verdict_above(up), verdict_above(down), verdict_above(across)) == (
        HOLDS,
        CONTRADICTED,
        NOT_RESOLVED,
    )
    assert (verdict_below(down), verdict_below(up), verdict_below(across)) == (
        HOLDS,
        CONTRADICTED,
        NOT_RESOLVED,
    )
    # non-inferiority: an interval that merely contains 0 is not enough, one above -margin is
    assert verdict_not_below(across, 0.02) == NOT_RESOLVED
    assert (
        verdict_not_below(across, 0.06) == HOLDS and verdict_not_below(down, 0.02) == CONTRADICTED
    )
    assert verdict_above(up, 0.2) == CONTRADICTED and verdict_below(up, 0.2) == HOLDS
    assert format_interval(down, signed=True) == "-0.100 [-0.150, -0.050]"
    # an interval that touches the threshold (or the margin) decides nothing: strict bounds
    touch = Interval(0.05, 0.0, 0.1, 3, 0.02)
    assert verdict_above(touch) == NOT_RESOLVED and verdict_below(touch, 0.1) == NOT_RESOLVED
    assert verdict_within(Interval(0.0, -0.02, 0.01, 3, 0.01), 0.02) == NOT_RESOLVED
    assert verdict_within(Interval(0.03, 0.02, 0.04, 3, 0.01), 0.02) == NOT_RESOLVED
    assert verdict_within(Interval(0.0, -0.019, 0.019, 3, 0.01), 0.02) == HOLDS


def test_tied_seeds_carry_no_verdict():
    """Three seeds that gave the same difference (a discrete metric: 4 of 64 mazes each time)
    have sd 0 and a zero-width t interval, which is not a 95% interval of anything: no verdict
    rests on it, nor on values tied up to the rounding of the differences that made them. A
    spread of 1e-4 is a spread."""
    tied = paired_difference([68.75, 70.3125, 65.625], [62.5, 64.0625, 59.375])  # +6.25 each
    assert tied.sd == 0 and tied.lo == tied.hi == 6.25
    rounded = paired_difference([0.45, 0.46, 0.47], [0.1, 0.11, 0.12])  # 0.35 up to rounding
    assert 0 < rounded.sd < 1e-15
    for iv in (tied, rounded):
        assert not informative(iv)
        assert verdict_above(iv) == verdict_below(iv) == NOT_RESOLVED
        assert verdict_not_below(iv, 0.02) == verdict_within(iv, 1e3) == NOT_RESOLVED
        assert combined_verdict([(verdict_above, iv)]) == NOT_RESOLVED
    real = paired_difference([0.4001, 0.4, 0.4002], [0.1, 0.1, 0.1])
    assert informative(real) and verdict_above(real) == HOLDS


def test_the_wilson_interval_is_scipys():
    """One Wilson interval for the project (fgrpo_llm.evaluation.stats.wilson_interval), against
    scipy.stats.binomtest(...).proportion_ci("wilson"), for scalars and arrays."""
    from scipy.stats import binomtest

    from fgrpo_llm.evaluation.stats import wilson_interval

    cases = [(0, 1), (0, 10), (3, 10), (10, 10), (1, 1000), (500, 1000), (7, 13)]
    for k, n in cases:
        ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = wilson_interval(k, n)
        assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12, abs=1e-15)
    k, n = np.array([c[0] for c in cases]), np.array([c[1] for c in cases])
    lo, hi = wilson_interval(k, n)
    assert lo.shape == (len(cases),) and all(lo <= k / n) and all(k / n <= hi)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_a_claim_over_parts_holds_in_each_and_is_contradicted_at_the_bonferroni_level():
    """Holds only when every part holds (95% each); contradicted only when a part is contradicted
    in its interval widened to 1 - 0.05 / m: one part just below 0 at 95% among four is not a
    contradiction (4 chances of a false one at 2.5% each), one far below is."""
    from scipy.stats import t as student_t

    def part(mean, n=4, sd=0.02):
        half = float(student_t.ppf(0.975, n - 1)) * sd / n**0.5
        return Interval(mean, mean - half, mean + half, n, sd)

    up, just_below, far_below = part(0.05), part(-0.035), part(-0.2)
    assert widen(just_below, 0.9875).lo < just_below.lo and widen(just_below, 0.95) == just_below
    assert verdict_above(just_below) == CONTRADICTED  # alone, at 95%
    assert combined_verdict([(verdict_above, up), (verdict_above, up)]) == HOLDS
    parts = [(verdict_above, just_below)] + [(verdict_above, part(0.0))] * 3
    assert combined_verdict(parts) == NOT_RESOLVED
    assert combined_verdict([(verdict_above, just_below)]) == CONTRADICTED  # m = 1: no widening
    assert combined_verdict([(verdict_above, far_below)] + parts[1:]) == CONTRADICTED
    assert combined_verdict([(verdict_above, up), (verdict_above, None)]) == NOT_RESOLVED
    assert combined_verdict([]) == NOT_RESOLVED
    # the family's false-alarm rate: 4 null parts, 8,000 families, at most 2.5% contradicted
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8_000, 4, 4))  # (families, parts, bases)
    m, sd = x.mean(axis=2), x.std(axis=2, ddof=1)
    q = float(student_t.ppf(0.975, 3))
    false = sum(
        combined_verdict(
            (verdict_above, Interval(a, a - q * b / 2, a + q * b / 2, 4, b))
            for a, b in zip(mi, si, strict=True)
        )
        == CONTRADICTED
        for mi, si in zip(m, sd, strict=True)
    )
    assert false / 8_000 <= 0.03  # unadjusted: 1 - 0.975^4 = 9.6%


def test_an_interval_is_cut_to_the_range_of_its_mean_and_keeps_its_verdicts():
    """A fraction over two values: the t interval reaches past [0, 1]; cut, it keeps mean, sd and
    every verdict against a threshold inside the range."""
    x = [0.1, 0.9]
    raw = t_interval(x)
    assert raw.lo < 0.0 and raw.hi > 1.0  # t_{0.975, 1} = 12.7: far past both ends
    iv = t_interval(x, bounds=(0.0, 1.0))
    assert (iv.lo, iv.hi) == (0.0, 1.0)
    assert (iv.mean, iv.sd, iv.n, iv.confidence) == (raw.mean, raw.sd, raw.n, raw.confidence)
    assert base_level_interval({(0, 0): 0.1, (1, 0): 0.9}, bounds=(0.0, 1.0)) == iv
    d = paired_difference([0.9, 0.2, 0.95], [0.1, 0.9, 0.05], bounds=(-1.0, 1.0))
    assert -1.0 == d.lo < d.mean < d.hi == 1.0
    for v in ([0.02, 0.05, 0.97], [0.30, 0.32, 0.99], [0.5, 0.51, 0.52]):
        for t in (0.0, 0.25, 0.5, 0.98, 1.0):
            a, b = t_interval(v), t_interval(v, bounds=(0.0, 1.0))
            assert verdict_above(b, t) == verdict_above(a, t)
            assert verdict_below(b, t) == verdict_below(a, t)
    inside = t_interval([0.4, 0.5, 0.45])  # an interval inside the range is left as it is
    assert clipped(inside, (0.0, 1.0)) == inside
    assert clipped(inside, None) == inside
    one = t_interval([1.5], bounds=(0.0, 1.0))  # undefined stays undefined (and the mean as is)
    assert one.mean == 1.5 and math.isnan(one.lo) and math.isnan(one.hi)
    below = clipped(Interval(-3.0, -5.0, -1.0, 3, 1.0), (0.0, 1.0))  # wholly outside: a point
    assert below.lo == below.hi == 0.0
    for bad in ((1.0, 0.0), (0.0, math.nan), ("low", 1.0), (0.0,), 1.0):
        with pytest.raises(ValueError, match=r"bounds="):
            t_interval([0.5], bounds=bad)  # named even where one value leaves nothing to cut
