"""The trainer's prompt pool (``TrainConfig.prompt_pool``, the study's revisit arm): a run draws
its prompts from the first P problems of its split only, each visited about steps x B / P times;
without a pool every problem can be drawn (fgrpo_llm.trainer)."""

from __future__ import annotations

import json

import pytest

from fgrpo_llm.config import TrainConfig
from fgrpo_llm.trainer import train
from tests.llm._rl_helpers import ToyTask


def _prompts(base, out, **kw) -> list[str]:
    cfg = TrainConfig(base=str(base), out=str(out), steps=3, prompts_per_step=4, group_size=2,
                      max_new_tokens=4, progress=False, checkpoint_every=0, **kw)  # fmt: skip
    task = ToyTask()
    train(cfg, task=task)
    return [json.loads(line)["prompt_id"] for line in (out / "groups.jsonl").open()]


def test_a_pool_draws_only_its_first_problems_and_revisits_them(tiny_checkpoint, tmp_path):
    problems = [p.id for p in ToyTask().problems("train")]
    assert len(problems) > 3
    pooled = _prompts(tiny_checkpoint, tmp_path / "pool", prompt_pool=3)
    assert set(pooled) == set(problems[:3]) and len(pooled) == 12  # each prompt 4 times
    assert all(pooled.count(p) == 4 for p in problems[:3])
    free = _prompts(tiny_checkpoint, tmp_path / "free")
    assert set(free) - set(problems[:3])  # without a pool the others are drawn too


def test_a_pool_must_be_a_positive_count():
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="prompt_pool"):
            TrainConfig(prompt_pool=bad)
