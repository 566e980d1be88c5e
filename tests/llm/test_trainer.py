"""The training loop: a CPU smoke run of each algorithm, outputs, and resume determinism (fgrpo_llm.trainer)."""

from __future__ import annotations

import json

import pytest
import torch
from _rl_helpers import ToyTask

from fgrpo_llm.checkpoint import latest_checkpoint
from fgrpo_llm.config import TrainConfig
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.trainer import PromptStream, train

TIMING_PREFIX = "time/"


@pytest.fixture(scope="module")
def base_dir(tiny_checkpoint):
    return tiny_checkpoint


def _cfg(base_dir, out, **kw):
    args = dict(base=str(base_dir), out=str(out), steps=3, prompts_per_step=4, group_size=4, max_new_tokens=6,
                lr=1e-2, warmup_steps=2, checkpoint_every=2, progress=False)
    args.update(kw)
    return TrainConfig(**args)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _strip_timing(lines):
    return [{k: v for k, v in line.items() if not k.startswith(TIMING_PREFIX)} for line in lines]


@pytest.mark.parametrize("algo,gamma", [("grpo", 0.0), ("dapo", 0.5), ("cispo", 1.0)])
def test_smoke_run_writes_every_output(base_dir, tmp_path, algo, gamma):
    cfg = _cfg(base_dir, tmp_path / algo, algo=algo, gamma=gamma, num_mini_batches=2, entropy_coef=0.01,
               kl_coef=0.01 if algo == "grpo" else 0.0)
    last = train(cfg, task=ToyTask())
    out = tmp_path / algo
    lines = _lines(out / "metrics.jsonl")
    assert [line["step"] for line in lines] == [1, 2, 3] and last["step"] == 3
    for key in ("reward/mean", "reward/pass_rate", "groups/active_frac", "groups/all_correct_frac",
                "groups/all_wrong_frac", "focal/weight_mean", "policy/entropy", "completion/length_mean",
                "time/rollout_tokens_per_s", "loss/total", "optim/grad_norm", "optim/lr"):
        assert key in lines[-1], key
    clip_key = "cap/high_frac" if algo == "cispo" else "clip/high_frac"
    assert clip_key in lines[-1]
    assert lines[0]["optim/lr"] == pytest.approx(1e-2 / 2) and lines[1]["optim/lr"] == pytest.approx(1e-2)
    assert json.loads((out / "config.json").read_text())["algo"] == algo
    groups = _lines(out / "groups.jsonl")
    assert {g["step"] for g in groups} == {1, 2, 3}
    for g in groups:
        assert g["N"] == 4 and len(g["forms"]) == g["num_correct"]
        assert all(f is not None and f.startswith("1") for f in g["forms"])
    assert latest_checkpoint(out).name == "step_000003"
    model, _ = load_model_and_tokenizer(out / "model")
    base, _ = load_model_and_tokenizer(base_dir)
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), base.parameters()))


def test_dapo_dynamic_sampling_trains_only_active_groups(base_dir, tmp_path):
    cfg = _cfg(base_dir, tmp_path / "d", algo="dapo", steps=2, max_sampling_rounds=2)
    train(cfg, task=ToyTask())
    groups = _lines(tmp_path / "d" / "groups.jsonl")
    assert all(0 < g["num_correct"] < g["N"] for g in groups if g["trained"])
    for step in (1, 2):
        trained = sum(g["trained"] for g in groups if g["step"] == step)
        assert trained <= 4
        assert max(g["round"] for g in groups if g["step"] == step) <= 2
    line = _lines(tmp_path / "d" / "metrics.jsonl")[0]
    assert line["groups/trained"] == sum(g["trained"] for g in groups if g["step"] == 1)


class _Crash(Exception):
    pass


def _crash_at(step_to_crash):
    def hook(model, step):
        if step == step_to_crash:
            raise _Crash
        with torch.no_grad():
            return {"eval/probe": float(sum(p.double().sum() for p in model.parameters()))}
    return hook


@pytest.mark.parametrize("algo", ["grpo", "dapo"])
def test_resume_gives_the_same_metrics_as_an_uninterrupted_run(base_dir, tmp_path, algo):
    kw = dict(algo=algo, steps=4, gamma=0.5, eval_every=1, num_mini_batches=2, checkpoint_every=2)
    straight = tmp_path / "straight"
    train(_cfg(base_dir, straight, **kw), task=ToyTask(), evaluators=[_crash_at(None)])
    stopped = tmp_path / "stopped"
    with pytest.raises(_Crash):  # dies during step 3, after the checkpoint of step 2
        train(_cfg(base_dir, stopped, **kw), task=ToyTask(), evaluators=[_crash_at(3)])
    assert [line["step"] for line in _lines(stopped / "metrics.jsonl")] == [1, 2]
    train(_cfg(base_dir, stopped, **kw), task=ToyTask(), evaluators=[_crash_at(None)], resume=True)
    a, b = _lines(straight / "metrics.jsonl"), _lines(stopped / "metrics.jsonl")
    assert [line["step"] for line in b] == [1, 2, 3, 4]
    assert _strip_timing(a) == _strip_timing(b)
    assert all("eval/probe" in line for line in a)  # evaluator metrics join the step's line
    assert (straight / "groups.jsonl").read_text() == (stopped / "groups.jsonl").read_text()


def test_resume_drops_lines_logged_after_the_checkpoint(base_dir, tmp_path):
    out = tmp_path / "r"
    train(_cfg(base_dir, out, steps=3, checkpoint_every=2, keep_checkpoints=2), task=ToyTask())
    # Pretend the run died after logging step 3 but before its checkpoint.
    import shutil
    shutil.rmtree(out / "checkpoints" / "step_000003")
    with pytest.raises(FileNotFoundError):
        train(_cfg(base_dir, tmp_path / "none", steps=3), task=ToyTask(), resume=True)
    train(_cfg(base_dir, out, steps=3, checkpoint_every=2, keep_checkpoints=2), task=ToyTask(), resume=True)
    assert [line["step"] for line in _lines(out / "metrics.jsonl")] == [1, 2, 3]


def test_resume_refuses_changed_settings_and_fresh_run_refuses_old_dir(base_dir, tmp_path):
    out = tmp_path / "x"
    train(_cfg(base_dir, out, steps=2), task=ToyTask())
    with pytest.raises(ValueError, match="gamma"):
        train(_cfg(base_dir, out, steps=3, gamma=1.0), task=ToyTask(), resume=True)
    with pytest.raises(ValueError, match="already holds a run"):
        train(_cfg(base_dir, out, steps=2), task=ToyTask())


def test_prompt_stream_is_a_deterministic_sequence_of_permutations():
    a = PromptStream(5, seed=3)
    first = a.take(5)
    assert sorted(first) == list(range(5))
    rest = a.take(7)
    b = PromptStream(5, seed=3, cursor=5)
    assert b.take(7) == rest
    assert PromptStream(5, seed=4).take(5) != first or PromptStream(5, seed=5).take(5) != first


def test_saved_config_round_trips_and_bad_values_are_rejected(base_dir, tmp_path):
    from fgrpo_llm.config import load_config

    cfg = _cfg(base_dir, tmp_path / "c", algo="dapo", steps=1)
    train(cfg, task=ToyTask())
    assert load_config(tmp_path / "c" / "config.json") == cfg
    assert (cfg.clip_eps_low, cfg.clip_eps_high, cfg.dynamic_sampling) == (0.2, 0.28, True)
    for bad in (dict(group_size=1), dict(top_p=0.0), dict(lr=0.0), dict(algo="grpo", clip_eps_high=0.3),
                dict(steps=0), dict(adv_std="sample")):
        with pytest.raises(ValueError, match=next(iter(bad.keys())) if "clip" not in str(bad) else "symmetric"):
            _cfg(base_dir, tmp_path / "z", **bad)
