"""One way to check a configuration (``fgrpo_common.fields``): the rules, and that every config
class of both packages declares a rule for each of its fields."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fgrpo_common.fields import (
    Boolean,
    Choice,
    Integer,
    Mapping,
    Optional,
    Real,
    Sequence,
    Text,
    dataclass_from_dict,
)


@pytest.mark.parametrize(
    "rule,value,expected",
    [
        (Integer(1), 5, 5),
        (Integer(1), "5", 5),
        (Integer(0), np.int64(3), 3),
        (Real(), "1e-4", 1e-4),
        (Real(0), 2, 2.0),
        (Real(), np.float32(0.5), 0.5),
        (Choice(("a", "b")), "b", "b"),
        (Boolean(), False, False),
        (Text(), "x", "x"),
        (Mapping(), {}, {}),
        (Sequence(Integer(0)), [1, 2], (1, 2)),
        (Optional(Integer()), None, None),
        (Real(finite=False), float("inf"), float("inf")),
        (Integer(0), np.array(3), 3),
        (Real(), np.array(0.5), 0.5),
        (Sequence(Real(), length=2), np.array([1, 2]), (1.0, 2.0)),
    ],
)
def test_a_rule_returns_the_canonical_value(rule, value, expected):
    assert rule("f", value) == expected and type(rule("f", value)) is type(expected)


@pytest.mark.parametrize(
    "rule,value",
    [
        (Integer(1), 0),
        (Integer(), 3.0),
        (Integer(), True),
        (Integer(), "2.5"),
        (Real(), float("nan")),
        (Real(), float("inf")),
        (Real(), True),
        (Real(0, open_low=True), 0),
        (Real(0, 1, open_high=True), 1.0),
        (Real(), "x"),
        (Choice(("a",)), "b"),
        (Boolean(), 1),
        (Text(), ""),
        (Text(), 3),
        (Mapping(), [1]),
        (Sequence(Integer()), "12"),
        (Sequence(Integer()), []),
        (Sequence(Integer(), distinct=True), [1, 1]),
        (Sequence(Integer(0)), [1, -1]),
        (Optional(Integer(1)), 0),
        (Real(), 10**400),
        (Sequence(Real(), length=2), [1.0]),
        (Sequence(Integer()), np.array(5)),
        (Optional(Sequence(Integer(0))), [1, -1]),
    ],
)
def test_a_bad_value_is_one_value_error_naming_the_field(rule, value):
    with pytest.raises(ValueError, match=r"^f(\[\d\])? must be .*, got f"):
        rule("f", value)


def test_messages_write_integer_bounds_out_and_name_a_bad_item():
    with pytest.raises(ValueError, match=r"^f must be an integer >= 2 and <= 134217728, got f=1$"):
        Integer(2, 2**27)("f", 1)
    with pytest.raises(ValueError, match=r"^f\[1\] must be an integer >= 0, got f\[1\]=-1$"):
        Optional(Sequence(Integer(0)))("f", [1, -1])  # the item, not "None or ..."
    with pytest.raises(ValueError, match=r"^f must be a finite number, got f=\(0\.0, .*\.\.\.$"):
        Real()("f", (0.0,) * 1000)  # a long value is cut


def _config_classes():
    from fgrpo_llm.config import RULES, TrainConfig
    from fgrpo_llm.experiments.countdown.base import PRETRAIN_RULES, PretrainConfig
    from fgrpo_llm.experiments.countdown.config import DEMO_RULES, DemoConfig
    from fgrpo_llm.experiments.maze.config import MAZE_RULES, MazeConfig
    from fgrpo_theory.sim.config import SIM_RULES, SimConfig

    return [
        (TrainConfig, RULES),
        (PretrainConfig, PRETRAIN_RULES),
        (DemoConfig, DEMO_RULES),
        (MazeConfig, MAZE_RULES),
        (SimConfig, SIM_RULES),
    ]


def test_every_config_field_has_a_rule():
    pytest.importorskip("torch")
    for cls, rules in _config_classes():
        assert {f.name for f in dataclasses.fields(cls)} == set(rules), cls.__name__


def test_dataclass_from_dict_names_unknown_keys():
    @dataclasses.dataclass
    class C:
        a: int = 1

    assert dataclass_from_dict(C, {"a": 2}) == C(2)
    with pytest.raises(ValueError, match=r"unknown thing key\(s\) \['b'\]"):
        dataclass_from_dict(C, {"b": 2}, what="thing")
    with pytest.raises(ValueError, match="mapping"):
        dataclass_from_dict(C, [1], what="thing")
