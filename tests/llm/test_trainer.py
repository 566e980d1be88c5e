"""The training loop: a CPU smoke run of each algorithm, outputs, and resume determinism
(fgrpo_llm.trainer)."""

from __future__ import annotations

import json

import pytest
import torch

from fgrpo_llm.checkpoint import latest_checkpoint
from fgrpo_llm.config import TrainConfig
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.trainer import PromptStream, train
from tests.llm._rl_helpers import ToyTask

TIMING_PREFIX = "time/"


@pytest.fixture(scope="module")
def base_dir(tiny_checkpoint):
    return tiny_checkpoint


def _cfg(base_dir, out, **kw):
    args = dict(
        base=str(base_dir),
        out=str(out),
        steps=3,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=6,
        lr=1e-2,
        warmup_steps=2,
        checkpoint_every=2,
        progress=False,
    )
    args.update(kw)
    return TrainConfig(**args)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _strip_timing(lines):
    return [{k: v for k, v in line.items() if not k.startswith(TIMING_PREFIX)} for line in lines]


@pytest.mark.parametrize("algo,gamma", [("grpo", 0.0), ("dapo", 0.5), ("cispo", 1.0)])
def test_smoke_run_writes_every_output(base_dir, tmp_path, algo, gamma):
    cfg = _cfg(
        base_dir,
        tmp_path / algo,
        algo=algo,
        gamma=gamma,
        num_mini_batches=2,
        entropy_coef=0.01,
        kl_coef=0.01 if algo == "grpo" else 0.0,
    )
    last = train(cfg, task=ToyTask())
    out = tmp_path / algo
    lines = _lines(out / "metrics.jsonl")
    assert [line["step"] for line in lines] == [1, 2, 3] and last["step"] == 3
    for key in (
        "reward",
        "reward/pass_rate",
        "groups/active_frac",
        "groups/all_correct_frac",
        "groups/all_wrong_frac",
        "focal/weight_mean",
        "entropy",
        "completions/mean_length",
        "time/rollout_tokens_per_s",
        "loss/total",
        "grad_norm",
        "learning_rate",
    ):
        assert key in lines[-1], key
    clip_key = "cap/high_frac" if algo == "cispo" else "clip_ratio/high_mean"
    assert clip_key in lines[-1]
    assert lines[0]["learning_rate"] == pytest.approx(1e-2 / 2) and lines[1][
        "learning_rate"
    ] == pytest.approx(1e-2)
    assert json.loads((out / "config.json").read_text())["algo"] == algo
    groups = _lines(out / "groups.jsonl")
    assert {g["step"] for g in groups} == {1, 2, 3}
    for g in groups:
        assert g["N"] == 4 and len(g["forms"]) == g["num_correct"]
        assert all(f is not None and f.startswith("1") for f in g["forms"])
    assert latest_checkpoint(out).name == "step_000003"
    model, _ = load_model_and_tokenizer(out / "model")
    base, _ = load_model_and_tokenizer(base_dir)
    assert any(
        not torch.equal(p, q) for p, q in zip(model.parameters(), base.parameters(), strict=True)
    )


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


class _NeverCorrect(ToyTask):
    """Every completion wrong: DAPO's dynamic sampling drops every group."""

    def is_correct(self, problem, completion):
        return False


def test_a_step_without_an_optimizer_step_keeps_the_warm_up_and_warns_nothing(base_dir, tmp_path):
    """Every group dropped: no optimizer step, yet the warm-up advances one step per training
    step; torch's warning about a scheduler step before any optimizer step (true, and intended
    here) is not shown to the user (trainer._step_scheduler)."""
    import warnings

    cfg = _cfg(base_dir, tmp_path / "w", algo="dapo", steps=3, max_sampling_rounds=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(cfg, task=_NeverCorrect())
    assert not [w for w in caught if "lr_scheduler" in str(w.message)]
    lines = _lines(tmp_path / "w" / "metrics.jsonl")
    assert [line["optim/updates"] for line in lines] == [0, 0, 0]
    assert [line["learning_rate"] for line in lines] == [cfg.lr / 2, cfg.lr, cfg.lr]  # warm-up 2


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
    # --resume of a run with no checkpoint (or no run at all) starts from step 0
    fresh = tmp_path / "none"
    train(_cfg(base_dir, fresh, steps=3), task=ToyTask(), resume=True)
    assert [line["step"] for line in _lines(fresh / "metrics.jsonl")] == [1, 2, 3]
    train(
        _cfg(base_dir, out, steps=3, checkpoint_every=2, keep_checkpoints=2),
        task=ToyTask(),
        resume=True,
    )
    assert [line["step"] for line in _lines(out / "metrics.jsonl")] == [1, 2, 3]


def test_resume_refuses_changed_settings_and_fresh_run_refuses_old_dir(base_dir, tmp_path):
    out = tmp_path / "x"
    train(_cfg(base_dir, out, steps=2), task=ToyTask())
    with pytest.raises(ValueError, match="gamma"):
        train(_cfg(base_dir, out, steps=3, gamma=1.0), task=ToyTask(), resume=True)
    with pytest.raises(ValueError, match="already holds a run"):
        train(_cfg(base_dir, out, steps=2), task=ToyTask())


def test_resume_refuses_a_checkpoint_of_other_settings(base_dir, tmp_path):
    """A checkpoint carries the settings it was made with: one copied in from another run (gamma
    1), or a config.json edited since (gamma 1 written over gamma 0), is refused by a resume,
    naming the checkpoint and the setting; the run's own checkpoint resumes."""
    import json
    import shutil

    a, b = tmp_path / "a", tmp_path / "b"
    train(_cfg(base_dir, a, steps=2), task=ToyTask())
    train(_cfg(base_dir, b, steps=2, gamma=1.0), task=ToyTask())
    foreign = a / "checkpoints" / "step_000003"
    shutil.copytree(b / "checkpoints" / "step_000002", foreign)
    with pytest.raises(
        ValueError, match=r"the checkpoint .*step_000003 was made with other .*gamma"
    ):
        train(_cfg(base_dir, a, steps=4), task=ToyTask(), resume=True)
    shutil.rmtree(foreign)
    saved = json.loads((a / "config.json").read_text())
    (a / "config.json").write_text(json.dumps({**saved, "gamma": 1.0}))
    with pytest.raises(ValueError, match=r"step_000002 was made with other settings.*gamma=0.0"):
        train(_cfg(base_dir, a, steps=4, gamma=1.0), task=ToyTask(), resume=True)
    (a / "config.json").write_text(json.dumps(saved))
    train(_cfg(base_dir, a, steps=3), task=ToyTask(), resume=True)


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
    for bad in (
        dict(group_size=1),
        dict(top_p=0.0),
        dict(lr=0.0),
        dict(algo="grpo", clip_eps_high=0.3),
        dict(steps=0),
        dict(adv_std="sample"),
    ):
        with pytest.raises(
            ValueError, match=next(iter(bad.keys())) if "clip" not in str(bad) else "symmetric"
        ):
            _cfg(base_dir, tmp_path / "z", **bad)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_first_update_is_on_policy_with_ratio_one(base_dir, tmp_path, temperature):
    """One mini-batch, one epoch: pi_theta is scored at the sampling temperature, so r = 1 and
    nothing is clipped."""
    line = _lines(
        _run(base_dir, tmp_path / "a", steps=1, temperature=temperature) / "metrics.jsonl"
    )[0]
    assert line["policy/ratio_max"] == pytest.approx(1.0, abs=1e-4)
    assert line["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert (
        line["clip_ratio/low_mean"] == 0
        and line["clip_ratio/high_mean"] == 0
        and line["optim/updates"] == 1
    )


def test_first_update_is_on_policy_under_bf16_autocast(base_dir, tmp_path):
    """Under bf16 autocast (a GPU's default; here on the CPU) the sampler's step-by-step decode
    and the loss's full forward pass round differently (r up to ~1.04 on this base); pi_old is
    then taken from the loss's own pass, so r = 1 again on the first mini-batch."""
    line = _lines(_run(base_dir, tmp_path / "a", steps=1, dtype="bfloat16") / "metrics.jsonl")[0]
    assert line["policy/ratio_max"] == pytest.approx(1.0, abs=1e-6)
    assert line["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-6)


def test_a_base_with_dropout_trains_without_it(base_dir, tmp_path, capsys):
    """Dropout in the policy would make the loss's log-probs another policy's than the
    sampler's (r != 1 on policy): the trainer switches it off and says so; the saved config
    keeps the base's value."""
    from fgrpo_llm.model import save_model_and_tokenizer

    model, tok = load_model_and_tokenizer(base_dir, device="cpu")
    model.config.attention_dropout = 0.1
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.1
    save_model_and_tokenizer(model, tok, tmp_path / "dropout_base")
    run = _run(tmp_path / "dropout_base", tmp_path / "a", steps=1)
    assert "dropout switched off in the policy (attention_dropout=0.1 x" in capsys.readouterr().err
    line = _lines(run / "metrics.jsonl")[0]
    assert line["policy/ratio_max"] == pytest.approx(1.0, abs=1e-4)
    assert load_model_and_tokenizer(run / "model", device="cpu")[0].config.attention_dropout == 0.1


def test_float16_training_is_refused(base_dir, tmp_path):
    from fgrpo_llm.experiments.countdown.base import PretrainConfig

    with pytest.raises(ValueError, match="dtype must be 'auto', 'float32' or 'bfloat16'"):
        _cfg(base_dir, tmp_path / "a", dtype="float16")
    with pytest.raises(ValueError, match="dtype must be 'auto', 'float32' or 'bfloat16'"):
        PretrainConfig(dtype="fp16")


def test_mini_batches_and_epochs_set_the_number_of_updates_and_go_off_policy(base_dir, tmp_path):
    line = _lines(
        _run(base_dir, tmp_path / "a", steps=1, num_mini_batches=2, ppo_epochs=2) / "metrics.jsonl"
    )[0]
    assert line["optim/updates"] == 4
    assert line["policy/ratio_max"] > 1.0 + 1e-3  # later mini-batches see an updated policy


def test_micro_batches_accumulate_to_the_whole_mini_batch_gradient(base_dir, tmp_path):
    """Gradient accumulation: micro-batches of 3 rows (cutting across groups and ragged in tokens)
    give the token-mean gradient of the whole mini-batch: same pre-clip grad norm, loss and updated
    weights."""
    import fgrpo_llm.trainer as trainer

    kw = dict(steps=1, kl_coef=0.05, entropy_coef=0.01, lr=1e-3)
    rows = []
    scored = trainer.token_logprobs_and_entropy

    def counting(model, sequences, *args, **kwargs):
        if torch.is_grad_enabled():  # the loss's forward passes
            rows.append(len(sequences))
        return scored(model, sequences, *args, **kwargs)

    whole = _run(base_dir, tmp_path / "w", **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trainer, "token_logprobs_and_entropy", counting)
        micro = _run(base_dir, tmp_path / "m", micro_batch_size=3, **kw)
    assert rows == [3, 3, 3, 3, 3, 1]  # 16 rows (4 groups of 4) in passes of at most 3
    a, b = _lines(whole / "metrics.jsonl")[0], _lines(micro / "metrics.jsonl")[0]
    assert a["grad_norm"] > 0
    for key in ("grad_norm", "loss/total", "loss/policy", "kl", "entropy"):
        assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-8), key
    pa = load_model_and_tokenizer(whole / "model")[0].parameters()
    pb = load_model_and_tokenizer(micro / "model")[0].parameters()
    for p, q in zip(pa, pb, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)


def _run(base_dir, out, **kw):
    train(_cfg(base_dir, out, **kw), task=ToyTask())
    return out


def test_config_reads_numbers_written_as_strings_and_rejects_wrong_types(tmp_path):
    """PyYAML reads `lr: 1e-4` as the string "1e-4"; a wrong type is a ValueError naming the field,
    not a TypeError."""
    from fgrpo_llm.config import load_config

    f = tmp_path / "c.yaml"
    f.write_text("lr: 1e-4\ngamma: 1\nadam_beta2: 9.5e-1\nsteps: 3\n")
    cfg = load_config(f)
    assert (cfg.lr, cfg.gamma, cfg.adam_beta2, cfg.steps) == (1e-4, 1.0, 0.95, 3)
    for bad in (
        dict(adam_beta1="x"),
        dict(clip_eps_low="x"),
        dict(adv_eps="x"),
        dict(lr=True),
        dict(dynamic_sampling="yes"),
        dict(steps=2.5),
        dict(gamma=float("nan")),
        dict(gamma="nan"),
        dict(lr_match_gamma=float("inf")),
        dict(adv_eps=float("-inf")),
        dict(task_kwargs=[1]),
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TrainConfig(**bad)


def test_resume_survives_a_metrics_line_torn_by_a_crash(base_dir, tmp_path):
    out = tmp_path / "t"
    train(_cfg(base_dir, out, steps=2, checkpoint_every=2), task=ToyTask())
    with open(out / "metrics.jsonl", "a") as f:  # killed while writing step 3's line
        f.write('{"step": 3, "reward/me')
    train(_cfg(base_dir, out, steps=3, checkpoint_every=2), task=ToyTask(), resume=True)
    assert [line["step"] for line in _lines(out / "metrics.jsonl")] == [1, 2, 3]


class _AlwaysRight(ToyTask):
    def is_correct(self, problem, completion):
        return True


@pytest.mark.parametrize("algo", ["grpo", "cispo", "dapo"])
def test_groups_with_equal_rewards_leave_the_weights_unchanged(base_dir, tmp_path, algo):
    """Every group all-correct: A = 0 for every rollout, so (no KL, no entropy bonus, no weight
    decay) the gradient is exactly zero and the policy does not move. DAPO's dynamic sampling
    drops every group (after its refill rounds): the step trains nothing and takes no optimizer
    step."""
    out = tmp_path / algo
    train(_cfg(base_dir, out, algo=algo, steps=2, weight_decay=0.0), task=_AlwaysRight())
    line = _lines(out / "metrics.jsonl")[-1]
    assert line["groups/all_correct_frac"] == 1.0
    if algo == "dapo":
        assert line["groups/trained"] == 0 and line["optim/updates"] == 0
        assert line["sampling/rounds"] > 1  # it tried to refill
    else:
        assert line["grad_norm"] == 0.0 and line["optim/updates"] == 1
    trained, base = (
        load_model_and_tokenizer(out / "model")[0],
        load_model_and_tokenizer(base_dir)[0],
    )
    assert all(
        torch.equal(p, q) for p, q in zip(trained.parameters(), base.parameters(), strict=True)
    )


def test_rng_state_of_another_device_type_is_a_clear_error():
    from fgrpo_llm.checkpoint import capture_rng, restore_rng

    g = torch.Generator().manual_seed(0)
    state = capture_rng(g)
    expected = torch.rand(3, generator=g)
    restore_rng(state, g)
    assert torch.equal(torch.rand(3, generator=g), expected)
    with pytest.raises(ValueError, match="cuda"):
        restore_rng({**state, "torch_generator_device": "cuda"}, g)


def test_optimizer_is_adamw_with_the_configured_betas_decay_and_multiplied_lr(base_dir, tmp_path):
    from scipy.special import beta

    from fgrpo_llm.checkpoint import load_trainer_state

    # m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) at gamma = 1/2
    m_half = beta(1.5, 2.0) / beta(1.5, 1.5)
    out = _run(
        base_dir,
        tmp_path / "o",
        steps=1,
        lr=1e-3,
        lr_multiplier=0.5,
        lr_match_gamma=0.5,
        warmup_steps=0,
    )
    line = _lines(out / "metrics.jsonl")[0]
    assert line["learning_rate"] == pytest.approx(
        1e-3 * 0.5 * m_half
    )  # no warm-up: the full lr at once
    group = load_trainer_state(latest_checkpoint(out))["optimizer"]["param_groups"][0]
    assert group["betas"] == (0.9, 0.999) and group["weight_decay"] == 0.01 and group["eps"] == 1e-8
    assert group["initial_lr"] == pytest.approx(1e-3 * 0.5 * m_half)


def test_focal_metrics_mean_what_the_engines_mean(base_dir, tmp_path):
    """Our trainer's focal keys are the TRL and verl paths' keys with their meaning: recomputed
    by ``fgrpo_llm.integrations.focal`` (the engines' code) from the same groups' X and N, the
    mean of g over all groups (``focal/weight_mean``, inactive ones with their g) and over the
    active ones (``focal/weight_mean_active``, absent when none is)."""
    from fgrpo_llm.integrations.focal import FocalSettings, focal_metrics, group_weights

    out = _run(base_dir, tmp_path / "r", steps=3, group_size=2, prompts_per_step=6, gamma=1.0)
    groups = _lines(out / "groups.jsonl")
    settings = FocalSettings(weighting="focal:1")
    inactive = 0
    for line in _lines(out / "metrics.jsonl"):
        trained = [g for g in groups if g["step"] == line["step"] and g["trained"]]
        scores = [float(j < g["num_correct"]) for g in trained for j in range(g["N"])]
        ids = [k for k, g in enumerate(trained) for _ in range(g["N"])]
        g, X, N, _ = group_weights(scores, ids, settings)  # (G,) as TRL and verl compute them
        engines = focal_metrics(g, X, N)
        ours = {k: v for k, v in line.items() if k.startswith("focal/")}
        assert ours.keys() == engines.keys() and ours == pytest.approx(engines, rel=1e-6)
        inactive += int(((X == 0) | (X == N)).sum())
    assert inactive > 0  # the two means differ on this run, so the test tells them apart
