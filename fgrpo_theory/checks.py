"""Argument checks shared by the library and the CLIs (public: other packages import it).

Every public function validates its inputs with these helpers so that bad input
(N < 1, tau > mu, gamma < 0, NaN, an empty list) raises a ``ValueError`` that names
the argument and the offending value. The CLIs turn that error into one line on
stderr and exit status 2.
"""

from __future__ import annotations

import numpy as np


def _first_bad(x: np.ndarray, bad: np.ndarray):
    """The first offending element of ``x`` where ``bad`` is true, as a Python scalar."""
    return np.asarray(x)[bad].ravel()[0].item()


def as_float_array(name: str, value) -> np.ndarray:
    """``value`` as a float64 array; rejects empty input and NaN."""
    try:
        x = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric, got {value!r}") from err
    if x.size == 0:
        raise ValueError(f"{name} must not be empty, got {value!r}")
    nan = np.isnan(x)
    if nan.any():
        raise ValueError(f"{name} must not be NaN, got {name}={_first_bad(x, nan)}")
    return x


def check_probability(name: str, value, *, open_low: bool = False, open_high: bool = False) -> np.ndarray:
    """A probability array in [0, 1] (optionally open at either end)."""
    x = as_float_array(name, value)
    bad = (x <= 0 if open_low else x < 0) | (x >= 1 if open_high else x > 1)
    if bad.any():
        lo = "(0" if open_low else "[0"
        hi = "1)" if open_high else "1]"
        raise ValueError(f"{name} must lie in {lo}, {hi}, got {name}={_first_bad(x, bad)}")
    return x


def check_group_size(name: str, value) -> np.ndarray:
    """Group sizes: finite numbers >= 1 (integers for discrete use; floats allowed for the
    continuous relaxation)."""
    x = as_float_array(name, value)
    bad = ~np.isfinite(x) | (x < 1)
    if bad.any():
        raise ValueError(f"{name} must be >= 1, got {name}={_first_bad(x, bad)}")
    return x


def check_integer(name: str, value, *, minimum: int = 0) -> np.ndarray:
    """Integer-valued array with every element >= ``minimum``."""
    x = as_float_array(name, value)
    bad = ~np.isfinite(x) | (x != np.round(x)) | (x < minimum)
    if bad.any():
        raise ValueError(f"{name} must be an integer >= {minimum}, got {name}={_first_bad(x, bad)}")
    return x.astype(np.int64)


def check_nonnegative(name: str, value) -> np.ndarray:
    """Finite values >= 0 (for example the focal exponent gamma)."""
    x = as_float_array(name, value)
    bad = ~np.isfinite(x) | (x < 0)
    if bad.any():
        raise ValueError(f"{name} must be >= 0, got {name}={_first_bad(x, bad)}")
    return x


def check_tau_le_mu(mu: np.ndarray, tau: np.ndarray) -> None:
    """The rare-correct mass is part of the correct mass: tau <= mu."""
    mu_b, tau_b = np.broadcast_arrays(mu, tau)
    bad = tau_b > mu_b
    if bad.any():
        raise ValueError(
            f"tau must be <= mu, got tau={_first_bad(tau_b, bad)} > mu={_first_bad(mu_b, bad)}"
        )
