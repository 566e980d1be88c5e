"""Pretraining: demonstration distribution, config validation, a smoke run, the CLI."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from fgrpo_llm.cli import main
from fgrpo_llm.config import read_config_file
from fgrpo_llm.experiments.countdown.base import (
    CONFIG_NAME,
    METRICS_NAME,
    DemonstrationStream,
    PretrainConfig,
    lr_multiplier,
    pretrain,
    sample_demonstration,
    skewed_weights,
)
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.tasks.base import Problem
from fgrpo_llm.tasks.countdown import CountdownAnswer

TINY = dict(
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    batch_size=16,
    num_test=20,
    num_ood=4,
    eval_prompts=4,
    eval_samples=2,
    log_every=1,
    warmup_steps=2,
)


def test_skewed_weights_follow_the_power_law():
    w = skewed_weights(5, 1.5)
    assert w.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(w / w[0], 1.0 / np.arange(1, 6) ** 1.5)
    np.testing.assert_allclose(skewed_weights(4, 0.0), 0.25)


def test_lr_schedule_warms_up_then_decays_to_the_floor():
    cfg = PretrainConfig(warmup_steps=10, lr_schedule="cosine", min_lr_ratio=0.1)
    assert lr_multiplier(0, 0.0, cfg) == pytest.approx(0.1)  # warm-up: (step + 1) / 10
    assert lr_multiplier(20, 0.0, cfg) == pytest.approx(1.0)
    assert lr_multiplier(20, 0.5, cfg) == pytest.approx(0.55)
    assert lr_multiplier(20, 1.0, cfg) == pytest.approx(0.1) == lr_multiplier(20, 3.0, cfg)
    assert lr_multiplier(20, 0.7, PretrainConfig(lr_schedule="constant")) == 1.0


def test_demonstrations_are_skewed_with_reversed_and_wrong_fractions():
    solutions, wrong = ["a", "b", "c", "d"], ["x", "y"]
    rng = np.random.default_rng(0)
    n = 20000
    counts = Counter(
        sample_demonstration(
            solutions, wrong, rng, rank_exponent=1.5, reverse_fraction=0.1, wrong_fraction=0.15
        )
        for _ in range(n)
    )
    w = skewed_weights(4, 1.5)
    expected = {s: 0.85 * (0.9 * w[k] + 0.1 * w[3 - k]) for k, s in enumerate(solutions)}
    expected.update(x=0.075, y=0.075)
    for key, p in expected.items():
        assert counts[key] / n == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / n) + 1e-3), key
    assert counts["a"] > counts["b"] > counts["c"]  # common and rare correct forms


def test_demonstration_batches_are_correct_and_match_the_tokenizer(countdown_task, char_tokenizer):
    cfg = PretrainConfig(
        batch_size=64,
        wrong_fraction=0.0,
        ood_fraction=0.0,
        **{k: v for k, v in TINY.items() if k != "batch_size"},
    )
    stream = DemonstrationStream(countdown_task, char_tokenizer, cfg, np.random.default_rng(0))
    input_ids, mask, labels = stream.batch()
    assert input_ids.shape[0] == 64 and input_ids.shape == mask.shape == labels.shape
    for ids, m, lab in zip(input_ids, mask, labels, strict=True):
        seq = ids[m.bool()].tolist()
        text = char_tokenizer.decode(seq, skip_special_tokens=True)
        prompt, completion = text.split(":")
        problem = next(p for p in countdown_task.problems("train") if p.prompt == prompt + ":")
        assert countdown_task.reward(problem, completion) == 1.0  # wrong_fraction = 0
        assert seq == char_tokenizer(text).input_ids + [char_tokenizer.eos_token_id]
        target = lab[lab != -100].tolist()
        assert (
            char_tokenizer.decode(target, skip_special_tokens=True) == completion
            and target[-1] == 2
        )


def test_ood_fraction_adds_correct_four_number_demonstrations_outside_the_ood_split(
    countdown_task, char_tokenizer
):
    cfg = PretrainConfig(
        batch_size=200,
        wrong_fraction=0.0,
        ood_fraction=0.5,
        **{k: v for k, v in TINY.items() if k != "batch_size"},
    )
    stream = DemonstrationStream(countdown_task, char_tokenizer, cfg, np.random.default_rng(0))
    input_ids, mask, _ = stream.batch()
    ood_prompts = {p.prompt for p in countdown_task.problems("ood")}
    four = 0
    for ids, m in zip(input_ids, mask, strict=True):
        text = char_tokenizer.decode(ids[m.bool()].tolist(), skip_special_tokens=True)
        prompt, completion = text.split(":")
        numbers, target = prompt.split("=")
        if len(numbers.split()) == 4:
            four += 1
            assert prompt + ":" not in ood_prompts
            answer = CountdownAnswer(tuple(int(n) for n in numbers.split()), int(target))
            problem = Problem(id="x", prompt=prompt + ":", answer=answer, split="ood")
            assert countdown_task.reward(problem, completion) == 1.0
    assert 60 <= four <= 140  # about half of 200


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0),
        dict(batch_size=0),
        dict(wrong_fraction=1.5),
        dict(ood_fraction=-0.1),
        dict(max_steps=0),
        dict(dtype="int8"),
        dict(seed=-1),
        dict(eval_prompts=300),
        dict(device="tpu"),
        dict(seconds=float("nan")),
        dict(lr_schedule="linear"),
        dict(min_lr_ratio=2.0),
    ],
)
def test_bad_config_is_value_error(kwargs):
    with pytest.raises(ValueError):
        PretrainConfig(**kwargs)


def test_config_file_round_trip_and_unknown_keys(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("seconds: 5\nlr: 0.001\n")
    assert PretrainConfig.from_dict(read_config_file(path)) == PretrainConfig(seconds=5, lr=0.001)
    path.write_text(json.dumps({"lrr": 1}))
    with pytest.raises(ValueError, match="lrr"):
        PretrainConfig.from_dict(read_config_file(path))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        read_config_file(tmp_path / "missing.json")


def test_pretrain_smoke_run_lowers_loss_and_writes_a_loadable_checkpoint(tmp_path):
    cfg = PretrainConfig(max_steps=30, lr=1e-2, **TINY)
    summary = pretrain(cfg, tmp_path / "base", progress=False)
    lines = [json.loads(x) for x in (tmp_path / "base" / METRICS_NAME).read_text().splitlines()]
    losses = [x["train/loss"] for x in lines if "train/grad_norm" in x]
    assert len(losses) == 30 and np.mean(losses[-5:]) < 0.7 * losses[0]
    assert summary["step"] == 30 and 0.0 <= summary["eval/test/pass@1"] <= 1.0
    assert json.loads((tmp_path / "base" / CONFIG_NAME).read_text()) == json.loads(
        json.dumps(cfg.__dict__)
    )
    model, tok = load_model_and_tokenizer(tmp_path / "base")
    assert model.config.hidden_size == 32 and tok("1 2=3:").input_ids[0] == tok.bos_token_id


def test_an_existing_base_survives_a_refused_or_failed_pretraining(tmp_path, monkeypatch):
    """OUT holding a base of other settings (runs may point to it) is refused before anything is
    written; a pretraining with the same settings that fails at the end (the disk full as the
    weights are written) leaves the base's settings and log as they were: both are written with
    the weights."""
    import dataclasses

    import fgrpo_llm.experiments.countdown.base as base_module

    cfg = PretrainConfig(max_steps=2, **{**TINY, "eval_prompts": 0})
    base = tmp_path / "base"
    pretrain(cfg, base, progress=False)
    before = {p.name: p.read_bytes() for p in base.iterdir() if p.is_file()}
    with pytest.raises(ValueError, match=r"holds a base model made with other settings: seed=0"):
        pretrain(dataclasses.replace(cfg, seed=7), base, progress=False)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(base_module, "save_model_and_tokenizer", full_disk)
    with pytest.raises(OSError, match="No space left"):
        pretrain(cfg, base, progress=False)
    after = {p.name: p.read_bytes() for p in base.iterdir() if p.is_file() and p.name[0] != "."}
    assert after == before


def test_pretrain_is_deterministic_for_a_step_budget(tmp_path):
    cfg = PretrainConfig(max_steps=3, **{**TINY, "eval_prompts": 0})
    a = pretrain(cfg, tmp_path / "a", progress=False)
    b = pretrain(cfg, tmp_path / "b", progress=False)
    assert a["train/loss"] == b["train/loss"] and a["stopped_by"] == "step budget"


def test_the_default_pretraining_has_no_time_cap_and_a_slow_machine_gets_the_same_base(
    tmp_path, monkeypatch
):
    """The default config sets no wall-clock cap, and the learning-rate schedule counts steps: a run
    on a machine whose clock runs 1000 times faster than its work (every step "takes" 100 s) still
    makes every step and ends with the same weights."""
    import time as _time

    import torch

    assert PretrainConfig().seconds == 0
    cfg = PretrainConfig(max_steps=5, **{**TINY, "eval_prompts": 0})
    pretrain(cfg, tmp_path / "fast", progress=False)
    clock = {"t": 0.0}

    def slow_clock():
        clock["t"] += 100.0
        return clock["t"]

    monkeypatch.setattr(_time, "perf_counter", slow_clock)
    summary = pretrain(cfg, tmp_path / "slow", progress=False)
    monkeypatch.undo()
    assert summary["step"] == 5 and summary["stopped_by"] == "step budget"
    fast, _ = load_model_and_tokenizer(tmp_path / "fast")
    slow, _ = load_model_and_tokenizer(tmp_path / "slow")
    assert all(torch.equal(p, q) for p, q in zip(fast.parameters(), slow.parameters(), strict=True))


def test_a_time_cap_a_user_asks_for_is_reported_when_hit(tmp_path, capsys):
    summary = pretrain(
        PretrainConfig(max_steps=10_000, seconds=0.5, **{**TINY, "eval_prompts": 0}),
        tmp_path / "capped",
        progress=False,
    )
    assert summary["step"] < 10_000 and summary["stopped_by"].startswith("time cap (0.5 s)")
    assert "stopped by the time cap" in capsys.readouterr().err


def test_cli_pretrain_and_errors(tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**TINY, "eval_prompts": 0}))
    assert (
        main(
            [
                "pretrain",
                "--out",
                str(tmp_path / "run"),
                "--config",
                str(cfg),
                "--steps",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "saved to" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / CONFIG_NAME).read_text())["max_steps"] == 2
    # the base records what made it, as a study's bases do (environment.json)
    from fgrpo_llm.environment import ENVIRONMENT_FILE, environment

    env = json.loads((tmp_path / "run" / ENVIRONMENT_FILE).read_text())
    assert ENVIRONMENT_FILE == "environment.json" and set(env) == set(environment(env["device"]))
    assert env["torch_cpu_capability"] and env["device"] in ("cpu", "cuda")
    assert (
        main(["pretrain", "--out", str(tmp_path / "x"), "--config", str(tmp_path / "none.yaml")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.yaml" in err
    assert (
        main(["pretrain", "--out", str(tmp_path / "x"), "--config", str(cfg), "--seconds", "-1"])
        == 2
    )
    assert "seconds" in capsys.readouterr().err
    (tmp_path / "afile").write_text("")
    assert main(["pretrain", "--out", str(tmp_path / "afile"), "--steps", "1"]) == 2


def test_the_sft_loop_logs_where_asked_and_stops_before_a_non_finite_step(char_tokenizer):
    """The one SFT loop (Countdown base and Maze SFT): ``log_at`` picks the logged steps, the
    loss falls on a repeated batch, and a NaN loss raises before the optimizer moves a weight."""
    import torch

    from fgrpo_llm.model import build_tiny_model
    from fgrpo_llm.sft import pad_sft_rows, sft_loop

    model = build_tiny_model(char_tokenizer, hidden_size=16, num_layers=1, num_heads=2, seed=0)
    ids = char_tokenizer("1 2=3:3")["input_ids"]
    batch = pad_sft_rows([(ids, 5)] * 4, char_tokenizer.pad_token_id)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    seen = []
    done = sft_loop(
        model, opt, lambda: batch, steps=6, device="cpu", log=seen.append,
        log_at=lambda step: step % 3 == 0, progress=False,
    )  # fmt: skip
    assert [r["step"] for r in seen] == [3, 6] and done["steps"] == 6
    assert done["stopped_by"] == "step budget" and seen[-1]["loss"] < seen[0]["loss"]
    assert seen[-1]["tokens"] == 6 * int(batch[1].sum()) and seen[-1]["lr"] == 1e-2
    with torch.no_grad():
        next(model.parameters())[0, 0] = float("nan")
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(FloatingPointError, match="diverged at step 1"):
        sft_loop(model, opt, lambda: batch, steps=2, device="cpu", progress=False)
    # no weight moved (the NaN one compared as 0)
    for a, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(torch.nan_to_num(a.detach()), torch.nan_to_num(b))


def test_the_sft_loss_is_the_completion_tokens_mean_nll_by_hand(char_tokenizer):
    """completion_loss(pad_sft_rows(...)) = -(1/|O|) sum over completion tokens o_t of
    log pi(o_t | <t), written out per row: rows of different lengths and prompt lengths,
    right padding and the prompt left out."""
    import torch

    from fgrpo_llm.model import build_tiny_model
    from fgrpo_llm.sft import completion_loss, pad_sft_rows

    model = build_tiny_model(char_tokenizer, hidden_size=16, num_layers=1, num_heads=2, seed=0)
    rows = [(char_tokenizer("1 2=3:3")["input_ids"], 5), (char_tokenizer("4=:4+0")["input_ids"], 3)]
    batch = pad_sft_rows(rows, char_tokenizer.pad_token_id)
    terms = []
    with torch.no_grad():
        for ids, P in rows:
            logq = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
            terms += [-logq[t - 1, ids[t]] for t in range(P, len(ids))]
        loss = completion_loss(model, *batch)
    assert len(rows[0][0]) != len(rows[1][0])  # one row is padded
    assert float(loss) == pytest.approx(float(torch.stack(terms).mean()), rel=1e-5)
