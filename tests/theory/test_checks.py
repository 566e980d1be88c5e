"""The argument checks: one clear error per kind of bad input, one test each."""

import datetime

import numpy as np
import pytest

from fgrpo_common.checks import (
    as_float_array,
    broadcast,
    check_bool_mask,
    check_group_size,
    check_integer,
    check_nonnegative,
    check_probability,
    check_real_scalar,
    check_tau_le_mu,
    single,
)
from fgrpo_theory.focal import focal_weight
from fgrpo_theory.passk import pass_at_k_exact, pass_at_k_unbiased
from fgrpo_theory.tail_miss import p_tail_miss


@pytest.mark.parametrize(
    "value",
    [
        2**63,
        2**64,
        1e19,
        10**400,
        np.uint64(2**63),
        [3, 2**63],
        np.array([2**63], dtype=np.uint64),
        -(2**63) - 1,
    ],
)
def test_integers_of_2_63_and_more_are_rejected_not_wrapped(value):
    with pytest.raises(ValueError, match=r"k must be an integer below 2\*\*63"):
        check_integer("k", value)


def test_integers_below_2_63_are_exact():
    assert check_integer("n", 2**63 - 1).item() == 2**63 - 1  # no detour through float64
    assert check_integer("n", np.array([2**62 + 1])).tolist() == [2**62 + 1]
    assert check_integer("n", [4.0, 8.0]).dtype == np.int64
    with pytest.raises(ValueError, match="n must be an integer >= 1, got n=0"):
        check_integer("n", 0, minimum=1)
    with pytest.raises(ValueError, match="n must be an integer, got n=2.5"):
        check_integer("n", 2.5)
    with pytest.raises(ValueError, match="n must be an integer, got n=inf"):
        check_integer("n", np.inf)


def test_the_issues_pass_at_k_reproducers_are_errors():
    with pytest.raises(ValueError, match="k must be an integer below 2"):
        pass_at_k_exact(0.5, 2**63)  # was -inf
    with pytest.raises(ValueError, match="c must be an integer below 2"):
        pass_at_k_unbiased(100000, 1e19, 256)  # c > n was accepted


@pytest.mark.parametrize(
    "value, kind",
    [
        (True, "bool"),
        (np.True_, "bool"),
        (np.array([True, False]), "bool"),
        ("0.5", "str"),
        (b"0.5", "bytes"),
        (None, "NoneType"),
        (np.datetime64("2020-01-01"), "datetime64"),
        (np.timedelta64(1, "D"), "timedelta64"),
        (0.5 + 0j, "complex"),
        (np.array([0.5, "a"], dtype=object), "object"),
        ([0.5, "x"], "<U"),
        ({"a": 1}, "dict"),
        (datetime.date(2020, 1, 1), "object"),
    ],
)
def test_wrong_types_are_a_type_error_naming_the_argument(value, kind):
    with pytest.raises(TypeError, match="mu"):
        check_probability("mu", value)
    with pytest.raises(TypeError, match="gamma"):
        focal_weight(0.5, value)


def test_masked_arrays_are_refused_rather_than_their_mask_ignored():
    x = np.ma.masked_array([0.5, 7.0], mask=[False, True])  # the masked 7.0 is out of range
    with pytest.raises(TypeError, match="mu must be a plain array, got a masked array"):
        p_tail_miss(x, 0.01, 8)
    with pytest.raises(TypeError, match="correct"):
        check_bool_mask("correct", np.ma.masked_array([True, False]))


def test_object_arrays_of_real_numbers_and_python_ints_are_fine():
    from fractions import Fraction

    np.testing.assert_array_equal(
        as_float_array("x", np.array([Fraction(1, 2), 3], dtype=object)), [0.5, 3.0]
    )
    assert check_integer("n", np.array([2**62, 5], dtype=object)).tolist() == [2**62, 5]
    with pytest.raises(ValueError, match="x is too large for a float64"):
        as_float_array("x", 10**400)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: as_float_array("x", []), "x must not be empty"),
        (
            lambda: as_float_array("x", [[1.0], [2.0, 3.0]]),
            "x must be a number or a rectangular array",
        ),
        (lambda: as_float_array("x", [1.0, np.nan]), "x must not be NaN, got x=nan"),
        (lambda: check_probability("p", 1.5), r"p must lie in \[0, 1\], got p=1.5"),
        (lambda: check_probability("p", 0.0, open_low=True), r"p must lie in \(0, 1\], got p=0.0"),
        (lambda: check_probability("p", 1.0, open_high=True), r"p must lie in \[0, 1\), got p=1.0"),
        (lambda: check_group_size("N", np.inf), "N must be a finite number >= 1, got N=inf"),
        (lambda: check_group_size("N", 0.5), "N must be a finite number >= 1, got N=0.5"),
        (lambda: check_nonnegative("gamma", -1e-300), "gamma must be a finite number >= 0"),
        (lambda: check_real_scalar("eta", np.inf), "eta must be finite, got eta=inf"),
        (
            lambda: check_real_scalar("eta", [1.0, 2.0]),
            r"eta must be a single number, got shape \(2,\)",
        ),
        (lambda: single("k", np.array([1, 2])), "k must be a single number"),
        (lambda: check_bool_mask("correct", [0, 2]), "correct must hold booleans"),
        (
            lambda: check_tau_le_mu(np.array(0.3), np.array(0.4)),
            "tau must be <= mu, got tau=0.4 > mu=0.3",
        ),
        (
            lambda: broadcast(mu=np.zeros(2), tau=np.zeros(3)),
            r"mu, tau cannot be broadcast together",
        ),
    ],
)
def test_messages_name_the_argument_and_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_bool_masks():
    assert check_bool_mask("m", [1, 0]).dtype == bool
    with pytest.raises(TypeError, match="m must be a boolean array"):
        check_bool_mask("m", [0.5, 1.0])
    assert check_real_scalar("x", np.inf, finite=False) == np.inf
