"""One set of sampling settings per run (``fgrpo_llm.rollout.SamplingParams``): the trainer's
rollouts and the run's evaluations sample the same policy (completion length, temperature,
top-p, top-k)."""

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
    assert run_sampling(run / "checkpoints" / "step_000001") == cfg.sampling()  # its checkpoints
    assert json.loads((run / "run.json").read_text())["sampling"] == cfg.sampling().policy()
    assert run_sampling(tiny_checkpoint) is None  # not a run: the caller's defaults
    plan = load_demo_config(fast=True, eval_n=2, eval_max_problems=2, max_new_tokens=4)
    task = task_for_model("countdown", {}, model_dir=tiny_checkpoint)
    results = evaluate_stage(run / "model", run / "eval", plan, task=task)
    assert (results["temperature"], results["top_p"], results["top_k"]) == (0.7, 1.0, 5)
    base = evaluate_stage(tiny_checkpoint, tmp_path / "base_eval", plan, task=task)
    assert (base["temperature"], base["top_k"]) == (1.0, 0)
    out = tmp_path / "cli_eval"
    argv = ["eval", "--model", str(run / "model"), "--samples", "2", "--max-problems", "2",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    saved = json.loads((out / "eval.json").read_text())
    assert (saved["temperature"], saved["top_k"], saved["max_new_tokens"]) == (0.7, 5, 4)
    assert saved["batch_size"] == 1024  # the samples depend on it: recorded, with the seed
    assert main(argv + ["--max-new-tokens", "3"]) == 0  # the flag sets the length
    saved = json.loads((out / "eval.json").read_text())
    assert (saved["temperature"], saved["max_new_tokens"]) == (0.7, 3)
    (run / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        run_sampling(run / "model")


def test_an_engine_runs_recorded_sampling_is_how_eval_samples_its_checkpoint(
    tiny_checkpoint, tmp_path, capsys
):
    """A verl or TRL run keeps its sampling in run.json; `fgrpo-llm eval --run RUN` samples the
    checkpoint that way. A run.json without them, or a bad value, is refused in one line."""
    from fgrpo_llm.cli import main
    from fgrpo_llm.tracking import read_run_info, write_run_info

    run = tmp_path / "verl_run"
    policy = {"max_new_tokens": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 5}
    write_run_info(run, engine="verl", algo="grpo", group_size=4, gamma=1.0, sampling=policy)
    assert read_run_info(run)["sampling"] == policy
    out = tmp_path / "eval"
    argv = ["eval", "--model", str(tiny_checkpoint), "--run", str(run), "--samples", "2",
            "--max-problems", "2", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    saved = json.loads((out / "eval.json").read_text())
    assert (saved["temperature"], saved["top_p"], saved["top_k"]) == (0.7, 0.9, 5)
    assert saved["max_new_tokens"] == 4  # the run's completion length, not the task's
    assert main(argv + ["--max-new-tokens", "3"]) == 0
    saved = json.loads((out / "eval.json").read_text())
    assert (saved["max_new_tokens"], saved["top_k"]) == (3, 5)

    bare = tmp_path / "old_run"
    write_run_info(bare, engine="verl", algo="grpo", group_size=4, gamma=1.0)
    capsys.readouterr()
    assert main(argv[:4] + [str(bare)] + argv[5:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "records no sampling settings" in err[0]
    with pytest.raises(ValueError, match="sampling.top_k"):
        write_run_info(
            bare, engine="verl", algo="grpo", group_size=4, gamma=1.0, sampling={"top_k": "5"}
        )
    with pytest.raises(ValueError, match="unknown keys"):
        write_run_info(
            bare, engine="verl", algo="grpo", group_size=4, gamma=1.0, sampling={"min_p": 0.1}
        )


def test_verl_sampling_reads_the_rollout_settings(tmp_path):
    """verl's rollout section -> SamplingParams: top_k -1 is off (0), an unresolved
    response_length falls back to data.max_response_length (Hydra's saved config.yaml)."""
    from fgrpo_llm.integrations.records import verl_sampling

    config = {
        "data": {"max_response_length": 1024},
        "actor_rollout_ref": {
            "rollout": {
                "temperature": 0.6,
                "top_p": 0.95,
                "top_k": -1,
                "response_length": "${oc.select:data.max_response_length,512}",
            }
        },
    }
    assert verl_sampling(config).policy() == {
        "max_new_tokens": 1024, "temperature": 0.6, "top_p": 0.95, "top_k": 0,
    }  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text(
        "data:\n  max_response_length: 256\nactor_rollout_ref:\n  rollout:\n"
        "    temperature: 1.0\n    top_k: 20\n    response_length: 128\n"
    )
    assert verl_sampling(path).policy() == {
        "max_new_tokens": 128, "temperature": 1.0, "top_p": 1.0, "top_k": 20,
    }  # fmt: skip
    with pytest.raises(ValueError, match="actor_rollout_ref.rollout"):
        verl_sampling({"data": {}})
    bad = {"actor_rollout_ref": {"rollout": {"top_k": -3}}}
    with pytest.raises(ValueError, match="top_k"):
        verl_sampling(bad)
    with pytest.raises(ValueError, match="top_k=2.5"):
        verl_sampling({"actor_rollout_ref": {"rollout": {"top_k": 2.5}}})
    with pytest.raises(ValueError, match="temperature"):
        verl_sampling({"actor_rollout_ref": {"rollout": {"temperature": "hot"}}})
    with pytest.raises(ValueError, match="top_k"):
        verl_sampling({"actor_rollout_ref": {"rollout": {"top_k": float("inf")}}})
    with pytest.raises(FileNotFoundError, match="no_such"):
        verl_sampling(tmp_path / "no_such.yaml")


def _functions(folder: str):
    """(path, function node) for every function defined under ``folder`` of the repository."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                yield path.relative_to(root), node, names


def test_only_sampling_params_holds_the_sampling_settings():
    """Samplers, evaluators and rare-set builders take ``sampling: SamplingParams``: no other
    function of fgrpo_llm has temperature, top_p and top_k among its parameters, and no
    evaluation function takes more than 10."""
    loose = [
        f"{path}:{node.lineno} {node.name}"
        for path, node, names in _functions("fgrpo_llm")
        if {"temperature", "top_p", "top_k"} <= set(names) and node.name != "__init__"
    ]
    assert not loose, loose
    long = [
        f"{path}:{node.lineno} {node.name} ({len(names)})"
        for path, node, names in _functions("fgrpo_llm/evaluation")
        if len(names) > 10
    ]
    assert not long, long


def test_sampling_params_normalise_their_numbers():
    sp = SamplingParams(max_new_tokens=8.0, temperature=1, top_p=1, top_k=0, batch_size=4.0)
    assert sp == SamplingParams(max_new_tokens=8, temperature=1.0, top_p=1.0, batch_size=4)
    assert [type(v) for v in sp.policy().values()] == [int, float, float, int]
    assert type(sp.batch_size) is int
    with pytest.raises(ValueError, match="batch_size"):
        SamplingParams(max_new_tokens=8, batch_size=2.5)


@pytest.mark.parametrize(
    "key, value", [("top_k", 2.7), ("max_new_tokens", 3.5), ("temperature", -1.0), ("top_p", 2.0)]
)
def test_eval_run_refuses_a_bad_recorded_setting_before_the_model_loads(
    tiny_checkpoint, tmp_path, capsys, monkeypatch, key, value
):
    """A run.json edited by hand (``"top_k": 2.7``) is refused, not truncated to 2, and before
    the checkpoint is loaded."""
    from fgrpo_llm import model as model_module
    from fgrpo_llm.cli import main
    from fgrpo_llm.tracking import write_run_info

    run = tmp_path / "verl_run"
    policy = {"max_new_tokens": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 5}
    write_run_info(run, engine="verl", algo="grpo", group_size=4, gamma=1.0, sampling=policy)
    info = json.loads((run / "run.json").read_text())
    info["sampling"][key] = value
    (run / "run.json").write_text(json.dumps(info))

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the run's settings were checked")

    monkeypatch.setattr(model_module, "load_model_and_tokenizer", loaded)
    argv = ["eval", "--model", str(tiny_checkpoint), "--run", str(run), "--samples", "2",
            "--max-problems", "2", "--out", str(tmp_path / "eval")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and "run.json" in err[0]
    assert not (tmp_path / "eval").exists()
