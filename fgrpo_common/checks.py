"""Argument checks shared by the library and the CLIs (public: other packages import it).

Every public function validates its inputs with these helpers, so that bad input raises one
clear error that names the argument and the offending value:

- ``TypeError`` for a value of the wrong kind: a bool, a string, a date, a complex number, an
  object array of non-numbers, ``None``, or a masked array (its mask would be ignored);
- ``ValueError`` for a number outside its domain: NaN, an infinity where a finite value is
  needed, N < 1, tau > mu, gamma < 0, an integer of 2^63 or more (it would wrap in int64), an
  empty or ragged list.

The CLIs turn either error into one line on stderr and exit status 2.

    >>> check_integer("k", 8)
    array(8)
    >>> check_integer("k", 2**63)
    Traceback (most recent call last):
    ...
    ValueError: k must be an integer below 2**63, got k=9223372036854775808
"""

from __future__ import annotations

import math
import numbers

import numpy as np

#: Integers are held as int64; 2**63 and above would wrap to negative numbers.
INT64_LIMIT = 2**63
#: Characters of a value's repr quoted in an error message.
_REPR_CHARS = 80


def _short(value) -> str:
    """repr(value), cut to a readable length for an error message."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _first_bad(x: np.ndarray, bad: np.ndarray):
    """The first offending element of ``x`` where ``bad`` is true, as a Python scalar."""
    item = np.asarray(x)[bad].ravel()[0]
    return item.item() if isinstance(item, np.generic) else item


def is_finite_number(v) -> bool:
    """A finite int or float (numpy's float64 included), not a bool: a number read from JSON or
    YAML, checked as is."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_real_number(item) -> bool:
    """A real number that is not a bool (bool is a subclass of int in Python)."""
    return isinstance(item, numbers.Real) and not isinstance(item, (bool, np.bool_))


def _numeric_array(name: str, value) -> np.ndarray:
    """``value`` as an ndarray of real numbers (int, uint, float or an object array of real
    Python numbers, such as integers too large for int64); TypeError for anything else."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must be a plain array, got a masked array (its mask would be "
            f"ignored): pass {name}.filled(...) or {name}.compressed()"
        )
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)):
        raise TypeError(
            f"{name} must be a number or an array of numbers, got "
            f"{type(value).__name__} {name}={_short(value)}"
        )
    try:
        x = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(
            f"{name} must be a number or a rectangular array of numbers, got {name}={_short(value)}"
        ) from None
    kind = x.dtype.kind
    if kind in "iuf":
        return x
    if kind == "b":
        raise TypeError(f"{name} must be a number, not a bool, got {name}={_short(value)}")
    if kind == "O" and x.size and all(_is_real_number(item) for item in x.flat):
        return x
    raise TypeError(f"{name} must be real numbers, got dtype {x.dtype} {name}={_short(value)}")


def as_float_array(name: str, value) -> np.ndarray:
    """``value`` as a float64 array; rejects wrong types, empty input and NaN (not infinity)."""
    x = _numeric_array(name, value)
    if x.size == 0:
        raise ValueError(f"{name} must not be empty, got {name}={_short(value)}")
    try:
        x = x.astype(np.float64)
    except OverflowError:
        raise ValueError(f"{name} is too large for a float64, got {name}={_short(value)}") from None
    nan = np.isnan(x)
    if nan.any():
        raise ValueError(f"{name} must not be NaN, got {name}={_first_bad(x, nan)}")
    return x


def check_real_scalar(name: str, value, *, finite: bool = True) -> float:
    """One real number (not a bool) as a Python float; NaN (and, by default, +-inf) rejected."""
    v = float(single(name, as_float_array(name, value)))
    if finite and not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {name}={v}")
    return v


def single(name: str, x: np.ndarray):
    """The one element of a checked array as a Python scalar; ValueError unless it has one."""
    if x.size != 1:
        raise ValueError(f"{name} must be a single number, got shape {x.shape}")
    return x.ravel()[0].item()


def check_probability(
    name: str, value, *, open_low: bool = False, open_high: bool = False
) -> np.ndarray:
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
        raise ValueError(f"{name} must be a finite number >= 1, got {name}={_first_bad(x, bad)}")
    return x


def check_integer(name: str, value, *, minimum: int = 0) -> np.ndarray:
    """Integer-valued array (int64) with every element >= ``minimum`` and below 2**63.

    Integer input is compared exactly (no detour through float64, which would round integers
    above 2**53); float input must be finite and integer-valued.
    """
    x = _numeric_array(name, value)
    if x.size == 0:
        raise ValueError(f"{name} must not be empty, got {name}={_short(value)}")
    kind = x.dtype.kind
    if kind == "f":
        nan = np.isnan(x)
        if nan.any():
            raise ValueError(f"{name} must be an integer, got {name}=nan")
        bad = ~np.isfinite(x) | (x != np.round(x))
        if bad.any():
            raise ValueError(f"{name} must be an integer, got {name}={_first_bad(x, bad)}")
        big = np.abs(x) >= INT64_LIMIT
    elif kind == "O":
        items = list(x.flat)
        bad = [v for v in items if isinstance(v, float) and not (np.isfinite(v) and v == int(v))]
        bad += [v for v in items if not isinstance(v, (numbers.Integral, float))]
        if bad:
            raise ValueError(f"{name} must be an integer, got {name}={_short(bad[0])}")
        big = np.array([abs(int(v)) >= INT64_LIMIT for v in items]).reshape(x.shape)
    elif kind == "u":
        big = x > INT64_LIMIT - 1
    else:
        big = np.zeros(x.shape, dtype=bool)
    if big.any():
        raise ValueError(f"{name} must be an integer below 2**63, got {name}={_first_bad(x, big)}")
    xi = (
        x.astype(np.int64)
        if kind != "O"
        else np.array([int(v) for v in x.flat], dtype=np.int64).reshape(x.shape)
    )
    low = xi < minimum
    if low.any():
        raise ValueError(
            f"{name} must be an integer >= {minimum}, got {name}={_first_bad(xi, low)}"
        )
    return xi


def check_nonnegative(name: str, value) -> np.ndarray:
    """Finite values >= 0 (for example the focal exponent gamma)."""
    x = as_float_array(name, value)
    bad = ~np.isfinite(x) | (x < 0)
    if bad.any():
        raise ValueError(f"{name} must be a finite number >= 0, got {name}={_first_bad(x, bad)}")
    return x


def check_bool_mask(name: str, value) -> np.ndarray:
    """A boolean array (or integers that are all 0 or 1); other types raise TypeError."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"{name} must be a plain boolean array, got a masked array")
    try:
        x = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(
            f"{name} must be a rectangular boolean array, got {name}={_short(value)}"
        ) from None
    if x.dtype.kind == "b":
        return x
    if x.dtype.kind in "iu":
        bad = (x != 0) & (x != 1)
        if bad.any():
            raise ValueError(f"{name} must hold booleans (or 0/1), got {name}={_first_bad(x, bad)}")
        return x.astype(bool)
    raise TypeError(f"{name} must be a boolean array, got dtype {x.dtype} {name}={_short(value)}")


def broadcast(**arrays: np.ndarray) -> list[np.ndarray]:
    """np.broadcast_arrays of the named arrays; a ValueError naming them when the shapes clash."""
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        shapes = ", ".join(f"{k}{np.shape(v)}" for k, v in arrays.items())
        names = ", ".join(arrays)
        raise ValueError(f"{names} cannot be broadcast together: shapes {shapes}") from None


def check_tau_le_mu(mu: np.ndarray, tau: np.ndarray) -> None:
    """The rare-correct mass is part of the correct mass: tau <= mu."""
    mu_b, tau_b = broadcast(mu=mu, tau=tau)
    bad = tau_b > mu_b
    if bad.any():
        raise ValueError(
            f"tau must be <= mu, got tau={_first_bad(tau_b, bad)} > mu={_first_bad(mu_b, bad)}"
        )
