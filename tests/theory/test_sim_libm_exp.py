"""``fgrpo_theory.sim.libm_exp``: numba's twin of glibc's exp is bit for bit ``np.exp`` on this
machine (which the compiled engine's byte-identical CSVs rest on), over the simulator's range,
the whole finite range, tiny and special inputs and random bit patterns."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.sim import libm_exp


def _check(x: np.ndarray) -> None:
    out = np.empty_like(x)
    libm_exp.exp_array(x, out)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.exp(x)
    bad = ~((out == ref) | (np.isnan(out) & np.isnan(ref)))
    assert not bad.any(), (x[bad][:5], out[bad][:5], ref[bad][:5])


@pytest.fixture(scope="module", autouse=True)
def _needs_the_twin():
    if not libm_exp.matches_numpy():
        pytest.skip("numpy's exp here is not glibc's FMA exp; the engine uses math.exp")


def test_the_simulators_range_and_the_finite_range():
    rng = np.random.default_rng(11)
    _check(rng.uniform(-60.0, 31.0, 2_000_000))
    _check(rng.uniform(-745.2, 709.8, 1_000_000))


def test_tiny_huge_special_and_random_bit_patterns():
    rng = np.random.default_rng(12)
    _check(rng.standard_normal(500_000) * 10.0 ** rng.uniform(-320, 2.9, 500_000))
    _check(rng.integers(0, 2**63, 500_000, dtype=np.uint64).view(np.float64))
    _check(-rng.integers(0, 2**63, 500_000, dtype=np.uint64).view(np.float64))
    _check(
        np.array(
            [
                0.0,
                -0.0,
                np.inf,
                -np.inf,
                np.nan,
                512.0,
                -512.0,
                709.782712893384,
                709.7827128933841,
                -745.1332191019411,
                -745.1332191019412,
                2.0**-54,
                -(2.0**-54),
                2.0**-55,
                5e-324,
                -5e-324,
                1.0,
                -1.0,
            ]
        )
    )


def test_the_compiled_engine_uses_the_twin_here():
    from fgrpo_theory.sim import compiled

    assert compiled.fast_exp_here() and compiled.unavailable_reason() is None


@pytest.mark.slow
def test_one_hundred_million_values():
    rng = np.random.default_rng(13)
    for _ in range(20):
        scale = 10.0 ** rng.uniform(-17, 2.8, 1_000_000)
        _check(
            np.concatenate(
                [
                    rng.uniform(-60, 31, 2_000_000),
                    rng.uniform(-745.2, 709.8, 1_000_000),
                    rng.standard_normal(1_000_000) * scale,
                    rng.integers(0, 2**63, 1_000_000, dtype=np.uint64).view(np.float64),
                ]
            )
        )
