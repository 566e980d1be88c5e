"""One set of sampling settings per run (``fgrpo_llm.rollout.SamplingParams``): the trainer's
rollouts and the run's evaluations sample the same policy (temperature, top-p, top-k)."""

from __future__ import annotations

import json

import pytest

from fgrpo_llm.config import TrainConfig, run_sampling
from fgrpo_llm.rollout import SamplingParams


def test_sampling_params_check_their_fields():
    sp = SamplingParams(max_new_tokens=8, temperature=0.7, top_p=0.9, top_k=5)
    assert sp.policy() == {"max_new_tokens": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 5}
    for kwargs, word in (
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 4, "temperature": -1.0}, "temperature"),
        ({"max_new_tokens": 4, "top_p": 0.0}, "top_p"),
        ({"max_new_tokens": 4, "top_k": -2}, "top_k"),
        ({"max_new_tokens": 4, "batch_size": 0}, "batch_size"),
    ):
        with pytest.raises(ValueError, match=word):
            SamplingParams(**kwargs)
    with pytest.raises(TypeError, match="max_new_tokens"):
        SamplingParams(max_new_tokens="8")


def test_a_runs_evaluation_samples_the_policy_it_trained(tiny_checkpoint, tmp_path):
    """A run trained at temperature 0.7 with top-k 5: its pass@k evaluation (the plan's stage)
    uses both, and so does `fgrpo-llm eval`; a base is sampled with the defaults."""
    from fgrpo_llm.cli import main
    from fgrpo_llm.experiments.countdown.config import load_demo_config
    from fgrpo_llm.experiments.countdown.stages import evaluate_stage
    from fgrpo_llm.tasks.for_model import task_for_model
    from fgrpo_llm.trainer import train

    run = tmp_path / "run"
    cfg = TrainConfig(
        base=str(tiny_checkpoint), out=str(run), steps=1, prompts_per_step=2, group_size=2,
        max_new_tokens=4, temperature=0.7, top_k=5, progress=False,
    )  # fmt: skip
    assert cfg.sampling().policy() == {
        "max_new_tokens": 4, "temperature": 0.7, "top_p": 1.0, "top_k": 5,
    }  # fmt: skip
    train(cfg)
    assert run_sampling(run / "model") == cfg.sampling()
    assert run_sampling(tiny_checkpoint) is None  # not a run: the caller's defaults
    plan = load_demo_config(fast=True, eval_n=2, eval_max_problems=2, max_new_tokens=4)
    task = task_for_model("countdown", {}, model_dir=tiny_checkpoint)
    results = evaluate_stage(run / "model", run / "eval", plan, task=task)
    assert (results["temperature"], results["top_p"], results["top_k"]) == (0.7, 1.0, 5)
    base = evaluate_stage(tiny_checkpoint, tmp_path / "base_eval", plan, task=task)
    assert (base["temperature"], base["top_k"]) == (1.0, 0)
    out = tmp_path / "cli_eval"
    argv = ["eval", "--model", str(run / "model"), "--n", "2", "--max-problems", "2",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    saved = json.loads((out / "eval.json").read_text())
    assert (saved["temperature"], saved["top_k"]) == (0.7, 5)
    (run / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        run_sampling(run / "model")
