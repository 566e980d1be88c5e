"""TRL: FocalGRPOTrainer through TRL's real advantage and loss code on a tiny model, a simulated
two-process batch whose group straddles the processes, the version pin, and the callbacks."""

from __future__ import annotations

import re
import warnings

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

import trl.trainer.grpo_trainer as grpo_module  # noqa: E402
from datasets import Dataset  # noqa: E402

import fgrpo_llm.integrations.trl.trainer as trainer_module  # noqa: E402
from fgrpo_llm.advantages import focal_weight, grpo_advantages  # noqa: E402
from fgrpo_llm.integrations.focal import FocalSettings  # noqa: E402
from fgrpo_llm.integrations.trl import (  # noqa: E402
    FocalGRPOConfig,
    FocalGRPOTrainer,
    check_trl_version,
    local_focal_weights,
    method_args,
)
from fgrpo_llm.losses import policy_loss  # noqa: E402
from fgrpo_llm.model import build_tiny_model  # noqa: E402
from fgrpo_llm.tasks.countdown import ALPHABET  # noqa: E402
from fgrpo_llm.tokenizer import build_char_tokenizer  # noqa: E402

TOK = build_char_tokenizer(ALPHABET)
RECORDS = trainer_module.RUN_RECORDS_DIR  # the run records' directory inside output_dir


def target_reward(completions, target, **kwargs):
    """The reward is the dataset's ``target`` column: fixed outcomes, whatever the model samples."""
    return [float(t) for t in target]


def _trainer(
    tmp_path, *, algo="grpo", gamma=1.0, G=4, reward_funcs=None, eval_dataset=None, **overrides
):
    model = build_tiny_model(
        TOK, hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=64, seed=0
    )
    ds = Dataset.from_dict(
        {"prompt": ["1 2=3:"] * 4, "prompt_id": [f"p{i}" for i in range(4)], "target": [1] * 4}
    )
    kwargs = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=G,
        num_generations=G,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        logging_steps=1,
        save_strategy="no",
        focal_gamma=gamma,
        focal_algo=algo,
        seed=0,
        **method_args(algo),
    )
    kwargs.update(overrides)
    args = FocalGRPOConfig(**kwargs)
    trainer = FocalGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs or [target_reward],
        args=args,
        train_dataset=ds,
        eval_dataset=eval_dataset,
        processing_class=TOK,
    )
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop; _compute_loss reads it
    return trainer


def _jsonl(path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]


def _rows(targets, start=0):
    return [
        {"prompt": "1 2=3:", "prompt_id": f"q{(start + i) // 4}", "target": t}
        for i, t in enumerate(targets)
    ]


def test_version_pin_is_enforced():
    assert check_trl_version() == trl.__version__
    for bad in ("1.15.0", "1.17.0", "0.27.0"):
        with pytest.raises(ImportError, match="tested with trl"):
            check_trl_version(bad)


def test_split_group_weight_comes_from_rewards_of_both_processes(tmp_path, monkeypatch):
    """Process 1 of 2 holds rows 6..11 of a 12-row batch of groups of 4: group 1 (rows 4..7)
    straddles the processes. Its weight must use all four rewards, as TRL's own advantage does."""
    trainer = _trainer(tmp_path, gamma=1.0, G=4)
    other = [1, 0, 0, 0, 1, 1]  # process 0's rewards (rows 0..5)
    local = [1, 0, 0, 1, 1, 1]  # ours (rows 6..11)
    other_t = torch.tensor(other, dtype=torch.float32)[:, None]
    monkeypatch.setattr(
        grpo_module, "gather", lambda t: torch.cat([other_t.to(t), t]) if t.shape[0] == 6 else t
    )
    monkeypatch.setattr(
        trainer_module,
        "gather_object",
        lambda x: [("q0", None)] * 6 + list(x) if len(x) == 6 else list(x),
    )
    monkeypatch.setattr(type(trainer.accelerator), "process_index", property(lambda self: 1))
    trainer.model.train()
    out = trainer._generate_and_score_completions(_rows(local, start=6))
    R = torch.tensor(other + local, dtype=torch.float32).reshape(3, 4)  # (B, N) over both processes
    g = focal_weight(R.mean(1), gamma=1.0)  # (B,)
    expected = (g[:, None] * grpo_advantages(R, std="bessel", eps=1e-4)).reshape(-1)[6:]
    torch.testing.assert_close(out["advantages"], expected, rtol=1e-5, atol=1e-6)
    # what a per-process weight would have given for the straddling group: 1 - 2/2 = 0 instead of
    # 1 - 3/4
    assert out["advantages"][:2].abs().min() > 0.1
    g_local, X, N = local_focal_weights(
        torch.cat([other_t, torch.tensor(local, dtype=torch.float32)[:, None]]),
        num_generations=4,
        process_index=1,
        local_size=6,
        settings=FocalSettings(gamma=1.0),
    )
    assert X.tolist() == [3, 3, 3, 3, 3, 3] and N.tolist() == [4] * 6
    assert g_local.dtype == torch.float64
    assert torch.allclose(g_local, torch.full((6,), 0.25, dtype=torch.float64))


@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_single_process_advantages_are_trl_grpo_times_g(tmp_path, gamma):
    trainer = _trainer(tmp_path, gamma=gamma, G=4)
    trainer.model.train()
    targets = [1, 0, 0, 0]
    out = trainer._generate_and_score_completions(_rows(targets))
    R = torch.tensor([targets], dtype=torch.float32)
    expected = (focal_weight(R.mean(1), gamma=gamma)[:, None] * grpo_advantages(R, eps=1e-4))[0]
    torch.testing.assert_close(out["advantages"], expected, rtol=1e-5, atol=1e-6)
    # the completions table TRL logs for the trackers shows the advantages the loss uses
    logged = torch.tensor(list(trainer._logs["advantages"]))
    torch.testing.assert_close(logged, expected, rtol=1e-5, atol=1e-6)
    if gamma == 0:
        eps_diff = (grpo_advantages(R, eps=1e-4) - grpo_advantages(R, eps=1e-6)).abs().max().item()
        print(f"TRL advantage eps 1e-4 vs ours/verl 1e-6: max |A diff| {eps_diff:.3g}")


def test_evaluation_groups_rows_by_num_generations_eval(tmp_path):
    """In eval mode TRL normalises per group of ``num_generations_eval`` rows, so X and g count
    those groups: rewards (1, 0 | 1, 1) in groups of 2 give g = 1/2 and 0, not the g = 1/4 of one
    group of ``num_generations`` = 4; an evaluation batch adds nothing to groups.jsonl."""
    from fgrpo_llm.evaluation.runs import load_run

    trainer = _trainer(tmp_path, gamma=1.0, G=4, num_generations_eval=2)
    trainer.model.eval()
    targets = [1, 0, 1, 1]
    out = trainer._generate_and_score_completions(_rows(targets))
    R = torch.tensor(targets, dtype=torch.float32).reshape(2, 2)  # (B, N) in groups of 2
    g = focal_weight(R.mean(1), gamma=1.0)  # (B,) = (1/2, 0)
    expected = (g[:, None] * grpo_advantages(R, eps=1e-4)).reshape(-1)
    torch.testing.assert_close(out["advantages"], expected, rtol=1e-5, atol=1e-6)
    trainer.recorder.close()
    assert load_run(tmp_path / "out" / RECORDS).groups == []


@pytest.mark.parametrize("algo", ["grpo", "dapo", "cispo"])
def test_trl_loss_equals_ours_on_identical_tensors(tmp_path, algo):
    trainer = _trainer(tmp_path, algo=algo, gamma=1.0, G=4)
    trainer.model.train()
    inputs = trainer._generate_and_score_completions(_rows([1, 0, 0, 1]))
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    T = inputs["completion_ids"].shape[1]
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, att, T)
    gen = torch.Generator().manual_seed(0)
    old = logps + (torch.rand(logps.shape, generator=gen) - 0.5)  # ratios in e^[-0.5, 0.5]
    inputs["old_per_token_logps"] = old
    trainer.model.zero_grad()
    loss_trl = trainer._compute_loss(trainer.model, inputs)
    loss_trl.backward()
    g_trl = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    trainer.model.zero_grad()
    new, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, att, T)
    kwargs = {
        "grpo": dict(clip_eps_low=0.2, clip_eps_high=0.2),
        "dapo": dict(clip_eps_low=0.2, clip_eps_high=0.28),
        "cispo": dict(is_eps_low=1.0, is_eps_high=5.0),
    }[algo]
    loss_ours, _ = policy_loss(
        algo, new, old, inputs["advantages"], inputs["completion_mask"].bool(), **kwargs
    )
    loss_ours.backward()
    d_loss = abs(loss_trl.item() - loss_ours.item())
    d_grad = max(
        (p.grad - g_trl[n]).abs().max().item()
        for n, p in trainer.model.named_parameters()
        if n in g_trl
    )
    print(
        f"TRL {algo} ({method_args(algo)['loss_type']}): |loss diff| {d_loss:.3g}, max |grad diff| "
        f"{d_grad:.3g}"
    )
    assert d_loss < 1e-6 and d_grad < 1e-6


def test_trl_cispo_default_cap_scales_the_gradient(tmp_path):
    """TRL's CISPO clamps the weight at epsilon_high, default epsilon = 0.2: the on-policy loss is
    0.2 x ours."""
    trainer = _trainer(tmp_path, algo="cispo", gamma=0.0, G=4, epsilon_high=None)  # TRL's default
    assert trainer.epsilon_high == 0.2
    trainer.model.train()
    inputs = trainer._generate_and_score_completions(_rows([1, 0, 0, 1]))
    loss_trl = trainer._compute_loss(trainer.model, inputs)  # on-policy: ratio 1, clamped to 0.2
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, att, inputs["completion_ids"].shape[1]
    )
    ours, _ = policy_loss(
        "cispo", logps, logps.detach(), inputs["advantages"], inputs["completion_mask"].bool()
    )
    print(
        "TRL cispo with default epsilon_high: loss ratio TRL / ours = "
        f"{loss_trl.item() / ours.item():.4f}"
    )
    assert loss_trl.item() == pytest.approx(0.2 * ours.item(), rel=1e-5)


def test_config_focal_weighting_takes_every_spelling(tmp_path):
    """focal_weighting reads as fgrpo_theory.weighting does ("focal:0.5", "none", "maxrl")."""
    kw = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    spelled = FocalGRPOConfig(**kw, focal_weighting="focal:0.5").focal_settings()
    assert spelled == FocalGRPOConfig(**kw, focal_gamma=0.5).focal_settings()
    assert str(spelled.w) == "focal:0.5"
    none = FocalGRPOConfig(**kw, focal_weighting="none").focal_settings()
    assert none.weight_is_one and str(none.w) == "none"
    with pytest.raises(ValueError, match="no exponent"):
        FocalGRPOConfig(**kw, focal_weighting="none", focal_gamma=1.0)


def test_config_rejects_bad_focal_settings(tmp_path):
    with pytest.raises(ValueError, match="gamma"):
        FocalGRPOConfig(output_dir=str(tmp_path), focal_gamma=-1.0, report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match="focal_algo"):
        FocalGRPOConfig(output_dir=str(tmp_path), focal_algo="ppo", report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match="algo"):
        method_args("ppo")
    for bad, needle in [
        (dict(focal_gamma=True), "gamma must be a finite number, got gamma=True"),
        (dict(focal_reward_correct=True), "reward_correct must be a finite number"),
        (dict(focal_lr_scale=-1.0), "focal_lr_scale must be a finite number > 0"),
        (dict(focal_lr_scale=float("nan")), "focal_lr_scale"),
        (dict(focal_weighting="maxrl", focal_gamma=1.0), "weighting='maxrl' (it has no exponent)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(needle)):
            FocalGRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **bad)
    # the label and the loss: TRL's defaults are GRPO's loss; DAPO's needs its clip-higher
    kw = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        FocalGRPOConfig(**kw)
        FocalGRPOConfig(**kw, focal_algo="dapo", **method_args("dapo"))
    assert not [w for w in shown if "records the run as" in str(w.message)]
    with pytest.warns(UserWarning, match=re.escape("epsilon_high=0.2 (its: 0.28)")):
        FocalGRPOConfig(**kw, focal_algo="dapo")


def test_cpu_example_end_to_end(tmp_path):
    """examples/trl_countdown_cpu.py: tiny base, rare set, FocalGRPOTrainer steps with both
    callbacks; its run directory is read by the cross-check and its checkpoint by our evaluation."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import fgrpo_llm.evaluation.passk as passk
    from fgrpo_llm.evaluation.rare import delta_nll_rare, load_rare_set
    from fgrpo_llm.evaluation.runs import load_run
    from fgrpo_llm.model import load_model_and_tokenizer
    from fgrpo_llm.rollout import SamplingParams
    from fgrpo_llm.tasks.countdown import CountdownTask

    example = Path(__file__).resolve().parents[2] / "examples" / "trl_countdown_cpu.py"
    proc = subprocess.run(
        [sys.executable, str(example), "--out", str(tmp_path), "--steps", "4", "--gamma", "1.0"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    assert summary["steps"] == 4 and set(summary["pass@k"]) >= {
        "eval_pass@1/test",
        "eval_pass@8/test",
    }
    run = load_run(tmp_path / "run")
    assert run.engine == "trl" and run.label == "F-GRPO N=8"
    assert len(run.groups) == 4 * 4 and all(g["N"] == 8 for g in run.groups)
    # the policy TRL sampled, kept for `fgrpo-llm eval --run` (the example's GRPOConfig)
    sampling = json.loads((tmp_path / "run" / "run.json").read_text())["sampling"]
    assert sampling == {"max_new_tokens": 12, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
    assert {g["step"] for g in run.groups} == {1, 2, 3, 4}
    assert run.delta_nll_rare == pytest.approx(summary["rare"]["rare/delta_nll"])
    # the saved checkpoint goes through fgrpo-llm eval's and rare-set's code path
    model, tok = load_model_and_tokenizer(tmp_path / "final", device="cpu")
    task = CountdownTask(seed=0, num_test=16, num_ood=8)
    results, _ = passk.evaluate_model(
        model,
        tok,
        task,
        splits=["test"],
        n=4,
        ks=[1, 4],
        max_problems=4,
        sampling=SamplingParams(max_new_tokens=12),
        generator=torch.Generator().manual_seed(0),
    )
    assert 0.0 <= results["splits"]["test"]["pass@1"] <= 1.0
    rare = load_rare_set(tmp_path / "rare_set.json")
    # the last in-training value is the saved checkpoint's (both in float32: the example sets
    # bf16=False)
    assert delta_nll_rare(model, rare, pad_token_id=tok.pad_token_id) == pytest.approx(
        summary["rare"]["rare/delta_nll"], abs=1e-6
    )


def format_reward(completions, **kwargs):
    """A format reward that every completion earns."""
    return [1.0] * len(completions)


def test_two_reward_functions_need_the_correct_one_named(tmp_path):
    with pytest.raises(ValueError, match="focal_correct_reward is required with 2 reward"):
        _trainer(tmp_path, reward_funcs=[format_reward, target_reward])
    with pytest.raises(ValueError, match="'accuracy' is not the reward functions"):
        _trainer(
            tmp_path, reward_funcs=[format_reward, target_reward], focal_correct_reward="accuracy"
        )
    with pytest.raises(ValueError, match="not an index"):
        _trainer(tmp_path, reward_funcs=[format_reward, target_reward], focal_correct_reward=2)


@pytest.mark.parametrize("choice", ["target_reward", 1, "1"])  # "1": from a command line
def test_x_comes_from_the_verifier_column_alone(tmp_path, choice):
    """A format reward that is always 1 beside an accuracy reward that is always 0: every group
    has X = 0 (not X = N, as the summed reward against the halfway threshold gave), so g = 1
    and groups.jsonl records num_correct = 0."""
    from fgrpo_llm.evaluation.runs import load_run

    trainer = _trainer(
        tmp_path, reward_funcs=[format_reward, target_reward], focal_correct_reward=choice
    )
    assert trainer.focal_columns == (1,)
    trainer.model.train()
    rows = [{**r, "target": 0} for r in _rows([0] * 4)]
    trainer._generate_and_score_completions(rows)
    trainer.recorder.close()
    run = load_run(tmp_path / "out" / RECORDS)
    assert [g["num_correct"] for g in run.groups] == [0]
    assert trainer._metrics["train"]["focal/weight_mean"] == [1.0]


def math_reward(completions, task, target, **kwargs):
    """A verifier of the 'math' rows (the dataset's ``target``); None for the others."""
    return [float(t) if k == "math" else None for k, t in zip(task, target, strict=True)]


def code_reward(completions, task, target, **kwargs):
    """A verifier of the 'code' rows; None for the others."""
    return [float(t) if k == "code" else None for k, t in zip(task, target, strict=True)]


def test_several_verifiers_each_score_their_own_rows(tmp_path):
    """A multi-task dataset: with both verifiers named, each group's X counts its task's
    verifier (3 of 4 in both); with one named, the other task's group counts X = 0, g = 1,
    and a warning says so."""
    import numpy as np

    from fgrpo_llm.evaluation.runs import load_run

    targets = [1, 1, 1, 0]
    rows = [
        {**r, "task": "math" if i < 4 else "code"}
        for i, r in enumerate(_rows(targets) + _rows(targets, start=4))
    ]
    both = _trainer(
        tmp_path / "both",
        reward_funcs=[math_reward, code_reward],
        focal_correct_reward="math_reward,code_reward",
        per_device_train_batch_size=8,
    )
    assert both.focal_columns == (0, 1)
    both.model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        both._generate_and_score_completions(rows)
    both.recorder.close()
    both_run = load_run(tmp_path / "both" / "out" / RECORDS)
    assert [g["num_correct"] for g in both_run.groups] == [3, 3]
    assert both._metrics["train"]["focal/weight_mean"] == [pytest.approx(0.25)]

    one = _trainer(
        tmp_path / "one",
        reward_funcs=[math_reward, code_reward],
        focal_correct_reward="math_reward",
        per_device_train_batch_size=8,
    )
    one.model.train()
    with pytest.warns(RuntimeWarning, match=r"1 group\(s\) .* no score .*'math_reward'"):
        one._generate_and_score_completions(rows)
    one.recorder.close()
    assert [g["num_correct"] for g in load_run(tmp_path / "one" / "out" / RECORDS).groups] == [3, 0]
    assert one._metrics["train"]["focal/weight_mean"] == [pytest.approx(np.mean([0.25, 1.0]))]


def test_the_verifiers_are_named_once_each():
    from fgrpo_llm.integrations.trl.trainer import correct_reward_columns

    names = ["math", "code", "format"]
    assert correct_reward_columns("math, code", names) == (0, 1)
    assert correct_reward_columns(["code", 2], names) == (1, 2)
    assert correct_reward_columns("1", names) == (1,)
    with pytest.raises(ValueError, match="twice"):
        correct_reward_columns("math,0", names)
    with pytest.raises(ValueError, match="at least one"):
        correct_reward_columns([], names)
    with pytest.raises(ValueError, match="'maths' is not"):
        correct_reward_columns("maths,code", names)


def test_a_resumed_run_records_each_step_once(tmp_path):
    """Resuming from the checkpoint of step 2 drops the records of steps 3 and 4 before the
    steps are trained again: groups.jsonl and metrics.jsonl hold each step once."""

    out = tmp_path / "out"

    def run(max_steps, resume):
        t = _trainer(
            tmp_path,
            max_steps=max_steps,
            save_strategy="steps",
            save_steps=2,
            per_device_train_batch_size=4,
        )
        t.train(resume_from_checkpoint=True if resume else None)
        t.recorder.close()

    run(4, False)
    assert (out / "checkpoint-2").is_dir()
    import shutil

    shutil.rmtree(out / "checkpoint-4")  # the run is taken back to its step-2 checkpoint
    run(4, True)
    steps = [line["step"] for line in _jsonl(out / RECORDS / "groups.jsonl")]
    assert sorted(steps) == [1, 2, 3, 4]
    metric_steps = [line["step"] for line in _jsonl(out / RECORDS / "metrics.jsonl")]
    assert len(metric_steps) == len(set(metric_steps)) == 4


def test_a_new_run_into_the_same_directory_starts_its_records_afresh(tmp_path):
    """A second run that does not resume, into an output_dir that holds an earlier run's
    records: its records replace the earlier ones (they used to be appended, and the earlier
    run's groups counted under the new run's run.json)."""
    import json

    out = tmp_path / "out"
    for gamma in (1.0, 0.5):
        t = _trainer(tmp_path, gamma=gamma, max_steps=2)
        t.recorder.log_metrics(0, {"eval_pass@1/test": 0.5})  # an earlier evaluation on start
        t.train()
        t.recorder.close()
    steps = [line["step"] for line in _jsonl(out / RECORDS / "groups.jsonl")]
    assert sorted(set(steps)) == [1, 2] and len(steps) == 2  # one group of 4 per step
    metric_steps = [line["step"] for line in _jsonl(out / RECORDS / "metrics.jsonl")]
    assert sorted(metric_steps) == [1, 2]
    assert json.loads((out / RECORDS / "run.json").read_text())["gamma"] == 0.5


def test_callback_metrics_reach_the_trainers_loggers(tmp_path):
    """The callbacks log through Trainer.log: every reporting callback's on_log sees
    rare/delta_nll and eval_pass@k, and they land in log_history and metrics.jsonl."""

    import numpy as np
    from transformers import TrainerCallback

    from fgrpo_llm.evaluation.rare import RareSet
    from fgrpo_llm.integrations.trl import DeltaNLLRareCallback, PassAtKCallback
    from fgrpo_llm.tasks.countdown import CountdownTask

    seen = []

    class Tracker(TrainerCallback):  # what TensorBoard / trackio / W&B callbacks receive
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs or {}))

    trainer = _trainer(tmp_path, max_steps=2, per_device_train_batch_size=4)
    trainer.add_callback(Tracker())
    ids = TOK("1 2=3:")["input_ids"] + TOK("3")["input_ids"]
    rare = RareSet(["p0"], [ids], [len(ids) - 1], ["3"], [None], np.zeros(1), {})
    DeltaNLLRareCallback(rare, every_steps=1).attach(trainer)
    trainer.train()
    logged = [d for d in seen if "rare/delta_nll" in d]
    assert len(logged) == 2 and all(np.isfinite(d["rare/delta_nll"]) for d in logged)
    assert sum("rare/delta_nll" in h for h in trainer.state.log_history) == 2
    passk = PassAtKCallback(CountdownTask(seed=0, num_test=3, num_ood=2), TOK, n=2).attach(trainer)
    passk._emit(trainer.state, passk.evaluate(trainer.model, 2))
    assert {"eval_pass@1/test", "eval_pass@2/test"} <= set(seen[-1])
    trainer.recorder.close()
    lines = _jsonl(tmp_path / "out" / RECORDS / "metrics.jsonl")
    assert sum("rare/delta_nll" in m for m in lines) == 2
    assert any("eval_pass@1/test" in m for m in lines)
    # the callback's log at a step's end leaves that step's own training log in place
    assert [m["step"] for m in lines if "loss" in m] == [1, 2]
    assert sum("loss" in d for d in seen) == 2


def test_an_empty_rare_set_warns_and_logs_nothing():
    import numpy as np

    from fgrpo_llm.evaluation.rare import RareSet
    from fgrpo_llm.integrations.trl import DeltaNLLRareCallback

    empty = RareSet([], [], [], [], [], np.zeros(0), {})
    with pytest.warns(RuntimeWarning, match="empty"):
        cb = DeltaNLLRareCallback(empty)
    assert cb.evaluate(None, 3) == {}


def test_fsdp_is_refused_at_attach_time(tmp_path):
    from fgrpo_llm.integrations.trl import PassAtKCallback
    from fgrpo_llm.tasks.countdown import CountdownTask

    trainer = _trainer(tmp_path)
    trainer.is_fsdp_enabled = True
    with pytest.raises(ValueError, match="FSDP"):
        PassAtKCallback(CountdownTask(seed=0, num_test=2, num_ood=1), TOK).attach(trainer)


def test_pass_at_k_does_not_depend_on_the_process_count(tmp_path):
    """Problem p is sampled with its own generator: two 'processes' (shards 0 and 1 of 2)
    together give the one-process counts."""
    from fgrpo_llm.integrations.trl import PassAtKCallback
    from fgrpo_llm.tasks.countdown import CountdownTask

    trainer = _trainer(tmp_path)
    task = CountdownTask(seed=0, num_test=5, num_ood=2)
    cb = PassAtKCallback(task, TOK, n=4).attach(trainer)
    whole = cb.evaluate(trainer.model, 7)
    parts = []
    for rank in (0, 1):
        cb._shard = lambda rank=rank: (rank, 2)
        cb._gather = lambda items, parts=parts: parts.extend(items) or list(parts)
        cb.evaluate(trainer.model, 7)
    assert sorted(p for p, _ in parts) == [0, 1, 2, 3, 4]
    assert cb.history[-1] == {"step": 7, **whole}


def test_the_callbacks_gather_every_processs_share(tmp_path, monkeypatch):
    """Process 1 of 2 scores its share of a two-trajectory rare set (trajectory 1), sends it
    through accelerate's ``gather_object`` (here a stand-in that puts process 0's NLL of
    trajectory 0 first) and averages over both processes' values, not its own alone."""
    import accelerate.utils
    import numpy as np

    from fgrpo_llm.evaluation.rare import RareSet
    from fgrpo_llm.integrations.trl import DeltaNLLRareCallback

    trainer = _trainer(tmp_path)
    prompt = TOK("1 2=3:")["input_ids"]
    ids = [prompt + TOK("3")["input_ids"], prompt + TOK("1")["input_ids"]]
    rare = RareSet(["p0", "p1"], ids, [len(prompt)] * 2, ["3", "1"], [None] * 2, np.zeros(2), {})
    cb = DeltaNLLRareCallback(rare).attach(trainer)
    sent = []

    def gather_object(items):
        sent.append(list(items))
        return [(0, 5.0), *items]

    monkeypatch.setattr(accelerate.utils, "gather_object", gather_object)
    monkeypatch.setattr(type(trainer.accelerator), "num_processes", property(lambda self: 2))
    monkeypatch.setattr(type(trainer.accelerator), "process_index", property(lambda self: 1))
    metrics = cb.evaluate(trainer.model, 1)
    assert len(sent) == 1 and [i for i, _ in sent[0]] == [1]  # this process's share only
    assert metrics["rare/nll"] == pytest.approx((5.0 + sent[0][0][1]) / 2)


def test_pass_at_k_samples_under_the_trainers_own_settings(tmp_path, monkeypatch):
    """Attached without ``sampling``, the callback takes the trainer's (max_completion_length,
    temperature, top_p, top_k) and hands them to the sampler; given ``sampling``, it keeps it;
    settings our sampler cannot apply are named in a warning."""
    import fgrpo_llm.integrations.trl.callbacks as callbacks_module
    from fgrpo_llm.integrations.trl import PassAtKCallback, trl_sampling
    from fgrpo_llm.rollout import SamplingParams
    from fgrpo_llm.tasks.countdown import CountdownTask

    trainer = _trainer(tmp_path, temperature=0.7, top_p=0.9, top_k=5, max_completion_length=6)
    task = CountdownTask(seed=0, num_test=2, num_ood=1)
    cb = PassAtKCallback(task, TOK, n=2).attach(trainer)
    want = SamplingParams(max_new_tokens=6, temperature=0.7, top_p=0.9, top_k=5)
    assert cb.sampling == want == trl_sampling(trainer.args)
    seen = []
    real = callbacks_module.sample_correct_counts

    def spy(*args, **kwargs):
        seen.append(kwargs["sampling"].policy())
        return real(*args, **kwargs)

    monkeypatch.setattr(callbacks_module, "sample_correct_counts", spy)
    cb.evaluate(trainer.model, 1)
    assert seen and all(s == want.policy() for s in seen)
    mine = SamplingParams(max_new_tokens=3, temperature=0.0)
    assert PassAtKCallback(task, TOK, n=2, sampling=mine).attach(trainer).sampling == mine
    with pytest.raises(TypeError, match="SamplingParams"):
        PassAtKCallback(task, TOK, sampling={"temperature": 1.0})
    # generation_kwargs override the config's fields in TRL's generator, so in the record too
    trainer.args.generation_kwargs = {"temperature": 0.5, "top_k": 3, "max_new_tokens": 4}
    assert trl_sampling(trainer.args) == SamplingParams(
        max_new_tokens=4, temperature=0.5, top_p=0.9, top_k=3
    )
    trainer.args.generation_kwargs = {"max_tokens": 5}  # vLLM's name for the length
    assert trl_sampling(trainer.args).max_new_tokens == 5
    trainer.args.generation_kwargs = {"do_sample": False}
    with pytest.warns(RuntimeWarning, match="do_sample"):
        trl_sampling(trainer.args)
    trainer.args.generation_kwargs = None
    trainer.args.repetition_penalty = 1.1
    with pytest.warns(RuntimeWarning, match="repetition_penalty"):
        trl_sampling(trainer.args)


def _run_example(out, *launcher):
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "trl_countdown_cpu.py"
    argv = [*launcher, str(example), "--out", str(out), "--steps", "3", "--gamma", "1.0"]
    argv = argv if launcher else [sys.executable, *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_two_processes(tmp_path):
    """The CPU example in two processes (torch's launcher: gloo on the CPU; accelerate's own
    `launch --cpu` starts one process unless given an MPI hostfile): the records hold each step
    once with both processes' groups, the focal weight TRL applied (the mean logged as
    focal/weight_mean) is (1 - X/N)^gamma of the recorded groups, and both callbacks logged
    finite values, every process taking part (no hang)."""
    import json
    import math
    import socket
    import sys

    from fgrpo_llm.evaluation.runs import load_run

    with socket.socket() as sock:  # a free port for the processes' rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _run_example(
        tmp_path, sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_addr", "127.0.0.1", "--master_port", str(port),
    )  # fmt: skip
    assert '"processes": 2' in proc.stdout
    run = load_run(tmp_path / "run")
    assert {g["step"] for g in run.groups} == {1, 2, 3}
    per_step = {s: [g for g in run.groups if g["step"] == s] for s in (1, 2, 3)}
    assert all(len(gs) == 2 * 4 for gs in per_step.values())  # 4 prompts per process and step
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    weights = {m["step"]: m["focal/weight_mean"] for m in metrics if "focal/weight_mean" in m}
    for step, w in weights.items():
        gs = per_step[step]
        expected = sum((1 - g["num_correct"] / g["N"]) ** 1.0 for g in gs) / len(gs)
        assert w == pytest.approx(expected, abs=1e-6), step
    assert weights
    evals = [m for m in metrics if "eval_pass@1/test" in m]
    assert evals and all(0.0 <= m["eval_pass@1/test"] <= 1.0 for m in evals)
    rare = [m["rare/delta_nll"] for m in metrics if "rare/delta_nll" in m]
    size = len(json.loads((tmp_path / "rare_set.json").read_text())["trajectories"])
    if size:  # every 2 steps and at the evaluation (an empty set logs nothing, by design)
        assert len(rare) >= 2 and all(math.isfinite(v) for v in rare)
    else:
        assert rare == []


def test_maxrl_weighting_multiplies_trls_advantage(tmp_path):
    """focal_weighting='maxrl': TRL's GRPO advantage times sqrt((1 - mu_hat) / mu_hat), and
    the run is recorded as MaxRL."""
    import json

    trainer = _trainer(tmp_path, gamma=0.0, G=4, focal_weighting="maxrl")
    trainer.model.train()
    targets = [1, 0, 0, 0]
    out = trainer._generate_and_score_completions(_rows(targets))
    R = torch.tensor([targets], dtype=torch.float32)
    w = ((1 - 0.25) / 0.25) ** 0.5
    expected = (w * grpo_advantages(R, eps=1e-4))[0]
    torch.testing.assert_close(out["advantages"], expected, rtol=1e-5, atol=1e-6)
    assert json.loads((tmp_path / "out" / RECORDS / "run.json").read_text())["weighting"] == "maxrl"


def test_a_chat_dataset_keeps_the_system_prompt(tmp_path):
    """``task_dataset(chat=True)``: boxed math's system prompt and problem as messages, so the
    prompt TRL renders is the one pass@k and the rare set sample (not the problem alone)."""
    from fgrpo_llm.integrations.trl import task_dataset
    from fgrpo_llm.tasks import chat_messages
    from fgrpo_llm.tasks.boxed_math import SYSTEM_PROMPT, BoxedMathTask

    (tmp_path / "train.jsonl").write_text('{"problem": "What is 1+1?", "answer": "2"}\n')
    task = BoxedMathTask(path=tmp_path / "train.jsonl")
    chat = task_dataset(task, "train", chat=True)
    p = task.problems("train")[0]
    assert (
        chat["prompt"][0]
        == chat_messages(p)
        == [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "What is 1+1?"},
        ]
    )
    assert task_dataset(task, "train")["prompt"][0] == p.prompt  # text: exactly ours


def test_callbacks_measure_once_per_step_and_can_pick_the_best_model(tmp_path):
    """Evaluations on two datasets at one step: pass@k and Delta NLL_rare are measured once (and
    logged once), and their values join the evaluation's metrics, so ``metric_for_best_model``
    can name them (transformers raised a KeyError before)."""
    import numpy as np

    from fgrpo_llm.evaluation.rare import RareSet
    from fgrpo_llm.integrations.trl import DeltaNLLRareCallback, PassAtKCallback
    from fgrpo_llm.tasks.countdown import CountdownTask

    ds = Dataset.from_dict(
        {"prompt": ["1 2=3:"] * 4, "prompt_id": [f"p{i}" for i in range(4)], "target": [1] * 4}
    )
    trainer = _trainer(
        tmp_path,
        eval_dataset={"a": ds, "b": ds},
        max_steps=2,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="steps",
        save_steps=1,
        load_best_model_at_end=True,
        metric_for_best_model="pass@2/test",
        per_device_eval_batch_size=4,
    )
    passk = PassAtKCallback(CountdownTask(seed=0, num_test=2, num_ood=1), TOK, n=2).attach(trainer)
    ids = TOK("1 2=3:")["input_ids"] + TOK("3")["input_ids"]
    rare = RareSet(["p0"], [ids], [len(ids) - 1], ["3"], [None], np.zeros(1), {})
    nll = DeltaNLLRareCallback(rare, every_steps=1).attach(trainer)
    trainer.train()
    assert [h["step"] for h in passk.history] == [1, 2]
    assert [h["step"] for h in nll.history] == [1, 2]
    logged = [h for h in trainer.state.log_history if "eval_pass@2/test" in h]
    assert [h["step"] for h in logged] == [1, 2]
    assert trainer.state.best_metric == max(h["eval_pass@2/test"] for h in passk.history)


def test_the_rare_callback_warns_under_mixed_precision(tmp_path):
    import numpy as np

    from fgrpo_llm.evaluation.rare import RareSet
    from fgrpo_llm.integrations.trl import DeltaNLLRareCallback

    trainer = _trainer(tmp_path)
    trainer.args.bf16 = True  # (a CPU run cannot be built with it; the callback reads the flag)
    rare = RareSet(["p0"], [[1, 2, 3]], [2], ["3"], [None], np.zeros(1), {})
    with pytest.warns(RuntimeWarning, match="bf16"):
        DeltaNLLRareCallback(rare).attach(trainer)


def length_reward(completions, **kwargs):
    """A length reward in [0.5, 1]: no verdict, every completion at or above the halfway cut."""
    return [0.5 + min(len(c), 50) / 100 for c in completions]


def test_a_length_reward_warns_at_the_first_step(tmp_path):
    """A reward that is not a verdict marks every completion correct (X = N, g = 0): the model
    would never move. The first step says so once (both findings in one warning); under
    focal_strict_rewards the first step stops with a ValueError."""
    trainer = _trainer(tmp_path / "warn", reward_funcs=[length_reward], max_steps=2)
    with pytest.warns(RuntimeWarning, match="does not read as right or wrong") as shown:
        trainer.train()
    ours = [w for w in shown if "does not read as right or wrong" in str(w.message)]
    assert len(ours) == 1  # once, though both steps show it
    text = str(ours[0].message)
    assert "neither reward_wrong=0 nor reward_correct=1" in text
    assert "every group's focal weight is 0" in text and "focal_strict_rewards=True" in text
    strict = _trainer(
        tmp_path / "strict", reward_funcs=[length_reward], max_steps=2, focal_strict_rewards=True
    )
    with pytest.raises(ValueError, match="does not read as right or wrong"):
        strict.train()
    assert strict.state.global_step == 0  # stopped in the first step


def test_a_verdict_reward_trains_without_the_warning(tmp_path):
    """0/1 rewards (here every group all correct, TRL's advantages 0): no finding."""
    trainer = _trainer(tmp_path, max_steps=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        trainer.train()


def test_without_args_the_trainer_builds_its_default_config(tmp_path, monkeypatch):
    """As TRL's ``GRPOTrainer(model, reward_funcs, train_dataset=...)``: a default config named
    after the model, here FocalGRPOConfig; its gamma 0 is plain GRPO, and a warning says so.
    (TRL's default config asks for bf16, which transformers allows on a GPU only unless
    use_cpu is set: the check is told bf16 is available, as on a GPU.)"""
    import transformers.training_args

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    model = build_tiny_model(
        TOK, hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=64, seed=0
    )
    model.config._name_or_path = "local/tiny-countdown"
    ds = Dataset.from_dict({"prompt": ["1 2=3:"] * 8, "target": [1] * 8})
    with pytest.warns(UserWarning, match="focal:0: g = 1 for every group.*plain GRPO"):
        trainer = FocalGRPOTrainer(model, [target_reward], train_dataset=ds, processing_class=TOK)
    assert type(trainer.args) is FocalGRPOConfig
    assert trainer.args.output_dir == "tiny-countdown-F-GRPO"
    with pytest.raises(TypeError, match="FocalGRPOConfig"):
        FocalGRPOTrainer(model, [target_reward], args=trl.GRPOConfig("x"), train_dataset=ds)


def band_reward(completions, **kwargs):
    """A verifier scoring wrong 0.4999999999 and correct 0.5000000001: the first completion of
    each group of 4 correct. In float32 both are 0.5."""
    return [0.5000000001 if i % 4 == 0 else 0.4999999999 for i in range(len(completions))]


def test_correctness_is_counted_on_the_verifiers_own_values(tmp_path):
    """TRL keeps rewards in float32, where 0.4999999999 and 0.5000000001 are both 0.5 (>= the
    halfway threshold: X = N, g = 0); X is counted on the reward function's own values: X = 1 of
    4, g = 3/4."""
    from fgrpo_llm.evaluation.runs import load_run

    trainer = _trainer(
        tmp_path,
        reward_funcs=[band_reward],
        focal_reward_wrong=0.4999999999,
        focal_reward_correct=0.5000000001,
    )
    trainer.model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the rewards are the verifier's two values
        trainer._generate_and_score_completions(_rows([1, 1, 1, 1]))
    trainer.recorder.close()
    assert [g["num_correct"] for g in load_run(tmp_path / "out" / RECORDS).groups] == [1]
    assert trainer._metrics["train"]["focal/weight_mean"] == [0.75]


def first_of_four_reward(completions, **kwargs):
    """1 for the first completion of each group of 4, else 0: every group active, X = 1."""
    return [1.0 if i % 4 == 0 else 0.0 for i in range(len(completions))]


def test_the_focal_metrics_mean_one_thing_in_metrics_jsonl(tmp_path):
    """metrics.jsonl of a TRL run: focal/weight_mean is the mean of g over every group of the
    step, focal/weight_mean_active over the active ones, and with no active group the active
    mean is absent (never NaN)."""
    import json
    import math

    def lines(run):
        path = run / "out" / RECORDS / "metrics.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()]

    active = _trainer(tmp_path / "a", reward_funcs=[first_of_four_reward], max_steps=2)
    active.train()
    active.recorder.close()
    steps = [m for m in lines(tmp_path / "a") if "loss" in m]
    assert len(steps) == 2
    for m in steps:
        assert m["focal/weight_mean"] == pytest.approx(0.75)
        assert m["focal/weight_mean_active"] == pytest.approx(0.75)
    # every group all correct: g = 0 everywhere, no active group
    idle = _trainer(tmp_path / "i", max_steps=2)
    idle.train()
    idle.recorder.close()
    steps = [m for m in lines(tmp_path / "i") if "loss" in m]
    assert len(steps) == 2
    for m in steps:
        assert m["focal/weight_mean"] == 0.0 and "focal/weight_mean_active" not in m
        assert all(not (isinstance(v, float) and math.isnan(v)) for v in m.values())


def test_the_model_card_names_f_grpo_and_its_paper(tmp_path):
    """TRL's own model card for a FocalGRPOTrainer run: trained with F-GRPO, the paper arXiv
    2602.06717 cited, the f-grpo tag."""
    trainer = _trainer(tmp_path)
    trainer.create_model_card(model_name="tiny-f-grpo")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "trained with F-GRPO" in card and "2602.06717" in card
    assert "Don't Let Your Policy Learn the Obvious and Forget the Rare" in card
    assert "- f-grpo" in card and "trained with GRPO" not in card


def test_push_to_hub_leaves_the_run_records_out(tmp_path, monkeypatch):
    """push_to_hub uploads output_dir under transformers' ignore patterns: the model and its card
    go, the run records (in <output_dir>/_fgrpo_run) stay."""
    import transformers.trainer as hf_trainer
    from huggingface_hub.utils import filter_repo_objects

    calls = []

    class FakeApi:
        def upload_folder(self, **kwargs):
            calls.append(kwargs)

    monkeypatch.setattr(hf_trainer, "hf_api", lambda: FakeApi())
    trainer = _trainer(tmp_path, max_steps=1)
    trainer.train()
    trainer.hub_model_id = "someone/tiny-f-grpo"
    trainer.push_to_hub(blocking=True)
    (call,) = calls
    root = tmp_path / "out"
    files = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    sent = set(filter_repo_objects(files, ignore_patterns=call["ignore_patterns"]))
    assert {"README.md", "model.safetensors"} <= sent
    records = {f for f in files if f.startswith(RECORDS + "/")}
    assert {f"{RECORDS}/run.json", f"{RECORDS}/groups.jsonl"} <= records
    assert not records & sent
    # records put inside output_dir under a name the patterns do not cover: a warning
    with pytest.warns(UserWarning, match="push_to_hub would upload the run records"):
        _trainer(tmp_path / "b", focal_run_dir=str(tmp_path / "b" / "out" / "records"))


RECIPE = (
    trainer_module.Path(__file__).resolve().parents[2] / "examples" / "trl_qwen25_05b_gsm8k.yaml"
)


def _launch(cwd, *args):
    import os
    import subprocess
    import sys

    root = str(RECIPE.parents[1])
    return subprocess.run(
        [sys.executable, "-m", "fgrpo_llm.integrations.trl.launch", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": root},
    )


def _launch_here(monkeypatch, capsys, cwd, *args):
    """The launcher's main in this process: (exit status, stdout, stderr)."""
    from fgrpo_llm.integrations.trl.launch import main

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_launcher_dry_runs_the_shipped_recipe(tmp_path, monkeypatch, capsys):
    """``python -m fgrpo_llm.integrations.trl.launch --config <the shipped GPU recipe>
    --dry_run true`` on the CPU: TRL's parser reads the recipe into F-GRPO's classes, the reward
    functions, task files and rare set are checked, and the accelerate command it would start is
    printed; --accelerate_config and --num_processes go to accelerate as with ``trl grpo``; a bad
    value is one line and exit status 2."""
    import json

    import numpy as np

    from fgrpo_llm.evaluation.rare import RareSet, save_rare_set

    data = tmp_path / "data" / "gsm8k"
    data.mkdir(parents=True)
    for split, n in (("train", 3), ("test", 2)):
        rows = [{"problem": f"Tom has {i} apples and buys 2. How many?", "answer": str(i + 2)}
                for i in range(n)]  # fmt: skip
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rare_path = tmp_path / "runs" / "trl_qwen25_05b_gsm8k" / "rare_set.json"
    rare_path.parent.mkdir(parents=True)
    save_rare_set(RareSet(["p0"], [[1, 2, 3]], [2], ["3"], [None], np.zeros(1), {}), rare_path)

    done = _launch(tmp_path, "--config", str(RECIPE), "--dry_run", "true")
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads(done.stdout)
    assert (plan["trainer"], plan["config"]) == ("FocalGRPOTrainer", "FocalGRPOConfig")
    assert plan["model"].endswith("Qwen2.5-0.5B-Instruct")
    assert plan["generation"]["use_vllm"] and plan["generation"]["vllm_mode"] == "colocate"
    assert plan["focal"]["gamma"] == 1.0 and plan["focal"]["strict_rewards"] is True
    assert plan["reward_funcs"] == plan["focal"]["correct_reward"] == ["boxed_math_reward"]
    assert plan["data"] == {"train": 3, "test": 2}
    assert (
        plan["callbacks"]["pass@k"]["n"] == 16 and plan["callbacks"]["delta_nll_rare"]["size"] == 1
    )
    assert plan["records_dir"].endswith("f-grpo/_fgrpo_run") and plan["notes"] == []
    assert plan["command"] == [
        "accelerate", "launch", "-m", "fgrpo_llm.integrations.trl.grpo_script",
        "--config", str(RECIPE),
    ]  # fmt: skip
    # in this process from here on (one import of TRL): accelerate's flags and TRL's accelerate
    # presets, as `trl grpo` takes them
    code, out, err = _launch_here(
        monkeypatch, capsys, tmp_path, "--config", str(RECIPE), "--accelerate_config", "zero2",
        "--num_processes", "2", "--focal_gamma", "0", "--dry_run", "true",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    plan = json.loads(out)
    command = plan["command"]
    assert command[:3] == ["accelerate", "launch", "--config_file"]
    assert command[3].endswith("accelerate_configs/zero2.yaml")
    assert command[4:6] == ["--num_processes", "2"] and command[-2:] == ["--focal_gamma", "0"]
    assert plan["notes"] == ["weighting focal:0: g = 1 for every group, so the run is plain GRPO"]
    for bad, needle in (
        (["--focal_gamma", "-1"], "gamma must be >= 0"),
        (["--reward_funcs", "nope"], "reward function 'nope'"),
        (["--focal_correct_reward", "format"], "'format' is not the reward functions"),
    ):
        code, out, err = _launch_here(
            monkeypatch, capsys, tmp_path, "--config", str(RECIPE), *bad, "--dry_run", "true"
        )
        assert code == 2 and out == "", err[-2000:]
        lines = [x for x in err.splitlines() if x.startswith("fgrpo-trl: error:")]
        assert len(lines) == 1 and needle in lines[0], err
    rare_path.unlink()
    code, _, err = _launch_here(
        monkeypatch, capsys, tmp_path, "--config", str(RECIPE), "--dry_run", "true"
    )
    assert code == 2 and "build it first" in err


def test_the_launcher_trains_through_accelerate_on_cpu(tmp_path):
    """The launcher for real, on the CPU: the shipped recipe with a local tiny model (a character
    tokenizer with a chat template) and CPU overrides (no vLLM, float32, one step) goes through
    ``accelerate launch`` to the training script, which trains FocalGRPOTrainer with both
    callbacks and leaves the model and the run records."""
    import json
    import string

    import numpy as np

    from fgrpo_llm.evaluation.rare import RareSet, save_rare_set
    from fgrpo_llm.evaluation.runs import load_run

    tok = build_char_tokenizer(string.printable)
    tok.chat_template = (
        "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}A:{% endif %}"
    )
    model = build_tiny_model(
        tok, hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=1024, seed=0
    )
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    for split, n in (("train", 4), ("test", 2)):
        rows = [{"problem": f"What is {i}+1?", "answer": str(i + 1)} for i in range(n)]
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = tok("What is 1+1?")["input_ids"] + tok("2")["input_ids"]
    rare = RareSet(["p0"], [ids], [len(ids) - 1], ["2"], [None], np.zeros(1), {})
    save_rare_set(rare, tmp_path / "rare.json")
    done = _launch(
        tmp_path, "--config", str(RECIPE), "--model_name_or_path", "model",
        "--task_train_file", "train.jsonl", "--task_test_file", "test.jsonl",
        "--rare_set", "rare.json", "--rare_every_steps", "1", "--output_dir", "out",
        "--use_vllm", "false", "--use_cpu", "true", "--bf16", "false", "--dtype", "float32",
        "--attn_implementation", "eager", "--max_steps", "1", "--eval_steps", "1",
        "--save_steps", "1", "--per_device_train_batch_size", "8", "--num_generations", "4",
        "--gradient_accumulation_steps", "1", "--max_completion_length", "8",
        "--passk_n", "2", "--passk_ks", "1", "2", "--passk_max_problems", "2",
        "--per_device_eval_batch_size", "4", "--focal_strict_rewards", "false",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "out" / "model.safetensors").is_file()
    records = tmp_path / "out" / RECORDS
    run = load_run(records)
    assert run.engine == "trl" and len(run.groups) == 2 and all(g["N"] == 4 for g in run.groups)
    lines = _jsonl(records / "metrics.jsonl")
    assert any("focal/weight_mean" in m for m in lines)
    assert any("eval_pass@2/test" in m for m in lines) and any("rare/delta_nll" in m for m in lines)
