"""The forecast's inputs from a study base (``experiments.countdown.forecast_inputs``): the base's
answer distributions computed once, cached as gzipped JSON and read back equal; a cache made
under other settings refused. (The run's prompt order is tested on a tiny run in
``test_mechanism``.)"""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.evaluation.answers import answer_distributions  # noqa: E402
from fgrpo_llm.experiments.countdown.config import DemoConfig  # noqa: E402
from fgrpo_llm.experiments.countdown.forecast_inputs import (  # noqa: E402
    BASE_ANSWERS,
    answers_from_json,
    answers_to_json,
    base_answers,
)
from fgrpo_llm.model import build_tiny_model, save_model_and_tokenizer  # noqa: E402
from fgrpo_llm.rollout import SamplingParams  # noqa: E402
from fgrpo_llm.tasks.countdown import CountdownTask  # noqa: E402
from fgrpo_theory.forecast import PromptAnswers  # noqa: E402
from tests.llm.conftest import TINY  # noqa: E402


class SmallTrainCountdown(CountdownTask):
    """Countdown with only the first ``n`` training prompts (a fast stand-in for 5,985)."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        self.n = n

    def problems(self, split):
        out = super().problems(split)
        return out[: self.n] if split == "train" else out


def test_json_round_trip_keeps_minus_infinity():
    pa = PromptAnswers(
        "p",
        ("1+2", "2+1"),
        (("1", "+", "2"), ("2", "+", "1")),
        np.array([math.log(0.25), -np.inf]),
        np.array([True, False]),
    )
    d = json.loads(json.dumps(answers_to_json(pa), allow_nan=False))
    back = answers_from_json(d)
    assert back.answers == pa.answers and back.tokens == pa.tokens
    assert np.array_equal(back.logp, pa.logp) and np.array_equal(back.correct, pa.correct)
    with pytest.raises(ValueError, match="answers record"):
        answers_from_json({"prompt_id": "p"})


def test_base_answers_computed_once_and_cached(tmp_path, char_tokenizer):
    torch.set_num_threads(1)
    model = build_tiny_model(char_tokenizer, seed=0, **TINY)
    save_model_and_tokenizer(model, char_tokenizer, tmp_path / "base")
    task = SmallTrainCountdown(3, seed=0, num_test=20, num_ood=10)
    cfg = DemoConfig(max_new_tokens=8, eval_max_problems=2, batch_size=256)
    got = base_answers(tmp_path, cfg, task=task)
    assert set(got) == {"train", "test", "ood"}
    assert [len(v) for v in got.values()] == [3, 2, 2]
    want = answer_distributions(
        model.eval(), char_tokenizer, task, task.problems("ood")[:2], sampling=SamplingParams(8)
    )
    for a, d in zip(got["ood"], want, strict=True):
        assert a.answers == d.answers.answers
        assert np.allclose(a.logp, d.answers.logp, atol=1e-6)
    path = tmp_path / BASE_ANSWERS
    raw = json.loads(gzip.decompress(path.read_bytes()))  # plain gzipped JSON, no pickle
    assert raw["format"] == 1 and raw["meta"]["sampling"]["max_new_tokens"] == 8
    stamp = path.stat().st_mtime_ns
    again = base_answers(tmp_path, cfg, task=task)
    assert path.stat().st_mtime_ns == stamp  # read, not recomputed
    assert all(
        np.array_equal(a.logp, b.logp) for k in got for a, b in zip(got[k], again[k], strict=True)
    )
    with pytest.raises(ValueError, match="other sampling settings or problems"):
        base_answers(tmp_path, DemoConfig(max_new_tokens=9, eval_max_problems=2), task=task)
