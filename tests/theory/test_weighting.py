"""The weighting vocabulary (``fgrpo_theory.weighting``): spellings, the pair (weighting, gamma)
of configs and run files, the table per X = 0..N, and registering a rule."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.weighting import (
    WEIGHTINGS,
    Rule,
    Weighting,
    focal,
    maxrl,
    none,
    parse_weighting,
    register,
    resolve_weighting,
    series,
    unregister,
    weighting_names,
)


@pytest.mark.parametrize(
    "w", [none(), maxrl(), focal(0), focal(0.5), focal(1), focal(0.1), focal(3)]
)
def test_a_weighting_reads_back_from_its_spelling(w):
    assert parse_weighting(str(w)) == w


def test_spellings():
    assert [str(w) for w in (none(), maxrl(), focal(1), focal(0.25))] == [
        "none", "maxrl", "focal:1", "focal:0.25",
    ]  # fmt: skip
    assert parse_weighting("GRPO") == none() and parse_weighting("focal") == focal(1.0)


@pytest.mark.parametrize(
    "weighting, gamma, expected",
    [
        ("focal", 0.5, focal(0.5)),  # a bare name takes the gamma (old configs, --gamma)
        ("focal", 0, focal(0)),
        ("focal:0.5", 0, focal(0.5)),
        ("focal:0.5", 0.5, focal(0.5)),
        (focal(2), 0, focal(2)),
        ("maxrl", 0, maxrl()),
        ("none", 0.0, none()),
    ],
)
def test_resolve_the_pair_of_a_config(weighting, gamma, expected):
    assert resolve_weighting(weighting, gamma) == expected


@pytest.mark.parametrize(
    "weighting, gamma, match",
    [
        ("maxrl", 1.0, "gamma must be 0 with weighting='maxrl'"),
        ("focal:0.5", 1.0, "contradicts"),
        (maxrl(), 0.5, "contradicts"),
        ("ppo", 0.0, "'ppo'"),
        ("maxrl:1", 0.0, "'maxrl:1'"),
    ],
)
def test_resolve_refuses_a_contradiction(weighting, gamma, match):
    with pytest.raises(ValueError, match=match):
        resolve_weighting(weighting, gamma)


@pytest.mark.parametrize("w", [none(), maxrl(), focal(0.5), focal(2)])
def test_the_table_is_w_at_x_over_n(w):
    for N in (1, 2, 7, 64):
        np.testing.assert_array_equal(w.table(N), w(np.arange(N + 1) / N))


def test_series_ignores_gamma_without_an_exponent():
    assert series("maxrl", 1.0) == maxrl() and series("focal", 1.0) == focal(1.0)
    with pytest.raises(ValueError, match="ppo"):
        series("ppo", 0.0)


class _Half(Rule):
    name = "half"

    def weight(self, mu, gamma):
        return np.full_like(mu, 0.5, dtype=np.float64)


def test_a_registered_rule_is_a_weighting_until_removed():
    register(_Half())
    try:
        assert "half" in weighting_names() and "half" not in WEIGHTINGS
        w = parse_weighting("half")
        assert str(w) == "half" and w(0.3) == 0.5 and w.row_name("dapo") == "half-DAPO"
        with pytest.raises(ValueError, match="already registered"):
            register(_Half())
    finally:
        unregister("half")
    with pytest.raises(ValueError, match="'half'"):
        parse_weighting("half")
    with pytest.raises(ValueError, match="built-in"):
        unregister("maxrl")
    with pytest.raises(ValueError, match="lowercase word"):
        register(type("Bad", (_Half,), {"name": "Bad Name"})())
    with pytest.raises(TypeError):
        register("half")


def test_row_names():
    assert [w.row_name(a) for w, a in [(none(), "grpo"), (focal(0), "dapo"), (focal(1), "dapo"),
            (maxrl(), "grpo"), (maxrl(), "cispo")]] == [
        "GRPO", "DAPO", "F-DAPO", "MaxRL", "MaxRL-CISPO",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="maxrl"):
        Weighting("maxrl", 0.5)
