"""One definition of "correct": the task's ``is_correct``, asked by the trainer, pass@k and the rare
set.

A task with a shaped reward (correct: 0.5 plus a length bonus; wrong: 0.3) must give the same X,
pass@k counts and rare-set membership as its verdicts say, whatever the reward values; and a task
without ``solution_form`` gets one form rule (the stripped completion) in the trainer's group log
and in the rare set, so the tail-miss check recognises rare forms in training groups.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fgrpo_llm.config import TrainConfig
from fgrpo_llm.evaluation.passk import sample_outcomes
from fgrpo_llm.evaluation.rare import build_rare_set
from fgrpo_llm.evaluation.tail_miss import tail_miss_records
from fgrpo_llm.rollout import SamplingParams, sample_completions
from fgrpo_llm.tasks.base import Problem, solution_form
from fgrpo_llm.trainer import train


class ShapedTask:
    """Correct when the completion starts with a digit; a shaped reward that never equals 1 or 0."""

    name = "shaped"
    splits = ("train",)

    def __init__(self, n=6):
        self._problems = [
            Problem(id=f"s{k}", prompt=f"{k}=:", answer=None, split="train") for k in range(n)
        ]

    def problems(self, split):
        return list(self._problems)

    def is_correct(self, problem, completion):
        return completion[:1].isdigit()

    def reward(self, problem, completion):
        return 0.5 + 0.01 * len(completion) if self.is_correct(problem, completion) else 0.3


class NoFormTask(ShapedTask):
    """The same verdicts, binary reward, and no ``solution_form`` method."""

    def reward(self, problem, completion):
        return float(self.is_correct(problem, completion))


def test_solution_form_rule_is_the_stripped_text_when_the_task_has_none():
    task, p = NoFormTask(), NoFormTask().problems("train")[0]
    assert solution_form(task, p, "12 \n") == "12" and solution_form(task, p, "x") is None


def test_trainer_counts_the_verdicts_not_the_reward_values(
    tiny_checkpoint, tmp_path, char_tokenizer
):
    out = tmp_path / "run"
    cfg = TrainConfig(
        base=str(tiny_checkpoint),
        out=str(out),
        steps=2,
        prompts_per_step=3,
        group_size=4,
        max_new_tokens=4,
        lr=1e-3,
        progress=False,
        gamma=1.0,
        checkpoint_every=0,
    )
    train(cfg, task=ShapedTask())
    groups = [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # replay the sampling of step 1 with the same generator to know the completions
    from fgrpo_llm.model import load_model_and_tokenizer
    from fgrpo_llm.trainer import PromptStream

    model, tok = load_model_and_tokenizer(tiny_checkpoint)
    task = ShapedTask()
    idx = PromptStream(len(task.problems("train")), seed=0).take(3)
    batch = sample_completions(
        model,
        tok,
        [task.problems("train")[i].prompt for i in idx],
        num_samples=4,
        sampling=SamplingParams(max_new_tokens=4),
        generator=torch.Generator().manual_seed(0),
    )
    correct = np.array([task.is_correct(None, c) for c in batch.completions]).reshape(3, 4)
    step1 = [g for g in groups if g["step"] == 1]
    assert [g["num_correct"] for g in step1] == correct.sum(1).tolist()
    assert [g["forms"] for g in step1] == [
        [
            c.strip()
            for c, ok in zip(batch.completions[4 * b : 4 * b + 4], correct[b], strict=True)
            if ok
        ]
        for b in range(3)
    ]
    assert metrics[0]["reward/pass_rate"] == pytest.approx(correct.mean())
    assert [g["focal_weight"] for g in step1] == pytest.approx((1 - correct.sum(1) / 4).tolist())


def test_pass_at_k_and_the_rare_set_ask_the_verdict(tiny_model, char_tokenizer):
    task = ShapedTask(4)
    problems = task.problems("train")
    outcomes = sample_outcomes(
        tiny_model,
        char_tokenizer,
        task,
        problems,
        n=8,
        sampling=SamplingParams(max_new_tokens=4),
        generator=torch.Generator().manual_seed(1),
    )
    batch = sample_completions(
        tiny_model,
        char_tokenizer,
        [p.prompt for p in problems],
        num_samples=8,
        sampling=SamplingParams(max_new_tokens=4, batch_size=512),
        generator=torch.Generator().manual_seed(1),
    )
    assert (
        outcomes.tolist()
        == np.array([task.is_correct(None, c) for c in batch.completions]).reshape(4, 8).tolist()
    )
    rare = build_rare_set(
        tiny_model,
        char_tokenizer,
        task,
        problems,
        num_rollouts=8,
        top_fraction=0.5,
        sampling=SamplingParams(max_new_tokens=4),
        generator=torch.Generator().manual_seed(1),
    )
    assert rare.meta["num_correct_pool"] == int(outcomes.sum())
    assert all(task.is_correct(None, t) for t in rare.texts)


def test_a_task_without_forms_gets_one_rule_in_training_logs_and_the_rare_set(
    tiny_checkpoint, tmp_path
):
    from fgrpo_llm.model import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(tiny_checkpoint)
    task = NoFormTask(3)
    # one-token completions: ten possible correct forms, so training groups meet the rare ones
    rare = build_rare_set(
        model,
        tok,
        task,
        task.problems("train"),
        num_rollouts=64,
        top_fraction=0.5,
        sampling=SamplingParams(max_new_tokens=1),
        generator=torch.Generator().manual_seed(0),
    )
    assert rare.forms == [t.strip() for t in rare.texts]
    out = tmp_path / "run"
    train(
        TrainConfig(
            base=str(tiny_checkpoint),
            out=str(out),
            steps=3,
            prompts_per_step=3,
            group_size=8,
            max_new_tokens=1,
            lr=1e-4,
            progress=False,
            checkpoint_every=0,
        ),
        task=task,
    )
    groups = [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]
    assert all(f is not None for g in groups for f in g["forms"])
    rec = tail_miss_records(groups, rare)
    assert rec["hit"].any()  # training groups do land in rare forms found in the base's samples
