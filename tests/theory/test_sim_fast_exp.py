"""``fgrpo_theory.sim.fast_exp``, the compiled engine's vectorised exp: within 1 ulp of the true
exp (mpmath at 120 bits) over the simulator's range and the whole finite range, libm's values
for special inputs, and the same bits from the array and the scalar form."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from fgrpo_theory.sim import fast_exp


def _ulps(x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - exp(x)| in units of the last place of exp(x), exp by mpmath."""
    mpmath.mp.prec = 120
    out = np.empty(x.size)
    for i, (xi, gi) in enumerate(zip(x.tolist(), got.tolist(), strict=True)):
        true = mpmath.exp(mpmath.mpf(xi))
        out[i] = float(abs(mpmath.mpf(gi) - true) / mpmath.mpf(float(np.spacing(float(true)))))
    return out


def test_within_one_ulp_of_the_true_exp():
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.uniform(-60.0, 31.0, 200_000),  # the simulator's shifted logits
            rng.uniform(-708.0, 709.0, 100_000),
            rng.normal(0.0, 1e-9, 20_000),
        ]
    )
    got = np.empty_like(x)
    fast_exp.exp_array(x, got)
    libm = np.array([math.exp(v) for v in x.tolist()])
    # libm's exp is within half an ulp or so: the true error is checked where ours is farthest
    far = np.argsort(-np.abs(got - libm) / np.spacing(libm))[:300]
    assert _ulps(x[far], got[far]).max() <= 1.0
    assert (np.abs(got - libm) <= 2 * np.spacing(libm)).all()


def test_special_inputs_are_libms_and_the_scalar_form_agrees():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 709.78, -745.13, -720.0, 1e-300, 5e-324])
    got = np.empty_like(x)
    fast_exp.exp_array(x, got)
    with np.errstate(over="ignore"):
        ref = np.array([math.exp(v) if not math.isnan(v) else math.nan for v in x.tolist()])
    np.testing.assert_array_equal(got, ref)
    y = np.random.default_rng(6).uniform(-700.0, 700.0, 1000)
    arr = np.empty_like(y)
    fast_exp.exp_array(y, arr)
    assert [fast_exp.exp1(v) for v in y.tolist()] == arr.tolist()
