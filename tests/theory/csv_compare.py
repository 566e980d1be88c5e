"""Helpers for the simulator's tests: CSVs compared to the digits they print, and the compiled
engine's exp perturbed."""

from __future__ import annotations

import contextlib

import numpy as np


def assert_csv_close(text: str, ref: str, *, rtol: float = 1e-5) -> None:
    """Two sweep CSVs (N, gamma, seed, then values printed to 6 significant digits) hold the
    same rows and values equal to their printed precision: a value an ulp away from a rounding
    boundary may print one unit of the sixth digit apart, on another CPU or engine."""
    a = [line.split(",") for line in text.strip().splitlines()]
    b = [line.split(",") for line in ref.strip().splitlines()]
    assert a[0] == b[0], (a[0], b[0])
    assert [r[:3] for r in a] == [r[:3] for r in b]
    va = np.array([[float(v) for v in r[3:]] for r in a[1:]])
    vb = np.array([[float(v) for v in r[3:]] for r in b[1:]])
    np.testing.assert_allclose(va, vb, rtol=rtol, atol=1e-12)


@contextlib.contextmanager
def exp_scale(scale: float):
    """The compiled engine's exp multiplied by ``scale`` (an ulp off 1) inside the block."""
    from fgrpo_theory.sim import compiled

    old = compiled.EXP_SCALE
    compiled.EXP_SCALE = scale
    try:
        yield
    finally:
        compiled.EXP_SCALE = old
