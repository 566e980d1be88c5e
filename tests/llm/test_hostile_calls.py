"""Calls a user makes that used to go wrong quietly or with a traceback: the library's train()
taking the base's task settings (so the test split stays out of training) and refusing another
task than the base's, one-line errors for a diverged pretraining, out-of-range seeds and learning
rates, a non-positive validation window."""

from __future__ import annotations

import json

import pytest

import fgrpo_llm.trainer as trainer
from fgrpo_llm.cli import main
from fgrpo_llm.config import TrainConfig


def test_train_from_python_takes_the_bases_task_settings(tmp_path, monkeypatch):
    """train(TrainConfig(base=...)) as the README shows reads the base's pretrain_config.json,
    as `fgrpo-llm train` does: a base pretrained with task seed 5 trains on seed 5's split."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "pretrain_config.json").write_text(json.dumps({"task_seed": 5, "num_test": 7}))
    seen = {}
    monkeypatch.setattr(trainer, "_train", lambda cfg, *a: seen.setdefault("cfg", cfg))
    trainer.train(TrainConfig(base=str(base), out=str(tmp_path / "run")))
    assert seen["cfg"].task_kwargs == {"seed": 5, "num_test": 7, "num_ood": 200}
    given = TrainConfig(base=str(base), out=str(tmp_path / "run2"), task_kwargs={"seed": 1})
    seen.clear()
    trainer.train(given)
    assert seen["cfg"].task_kwargs == {"seed": 1}  # what the caller says wins
    with pytest.raises(TypeError, match="TrainConfig"):
        trainer.train("runs/x")


def _bases(tmp_path) -> dict:
    """Bases that record their task: the built-in Countdown base (pretrain_config.json), a maze
    SFT model (task.json), a trained maze run's final model (the run's config.json); and one that
    records none (any Hugging Face checkpoint)."""
    countdown = tmp_path / "countdown"
    countdown.mkdir()
    (countdown / "pretrain_config.json").write_text(json.dumps({"task_seed": 0}))
    maze = tmp_path / "maze_sft" / "model"
    maze.mkdir(parents=True)
    (maze / "task.json").write_text(json.dumps({"task": "maze"}))
    run = tmp_path / "maze_run"
    (run / "model").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"base": str(maze), "task": "maze"}))
    (run / "run.json").write_text("{}")
    plain = tmp_path / "plain"
    plain.mkdir()
    plain_run = tmp_path / "plain_run"  # a run of such a checkpoint may go on to another task
    (plain_run / "checkpoints" / "step_4").mkdir(parents=True)
    (plain_run / "config.json").write_text(json.dumps({"base": str(plain), "task": "boxed_math"}))
    (plain_run / "run.json").write_text("{}")
    return {
        "countdown": countdown,
        "maze": maze,
        "run": run / "model",
        "plain": plain,
        "plain_run": plain_run / "checkpoints" / "step_4",
    }


def test_train_refuses_a_task_other_than_the_one_the_base_was_made_for(tmp_path, monkeypatch):
    """A base made for Countdown is not trained on maze, nor a maze base on Countdown (both
    tasks named); a base that records no task takes any task."""
    from fgrpo_llm.tasks.for_model import recorded_task

    bases = _bases(tmp_path)
    assert {k: recorded_task(b) for k, b in bases.items()} == {
        "countdown": "countdown",
        "maze": "maze",
        "run": "maze",
        "plain": None,
        "plain_run": None,
    }
    assert recorded_task("Qwen/not-a-local-dir") is None  # a hub name: no run around it
    seen = []
    monkeypatch.setattr(trainer, "_train", lambda cfg, *a: seen.append(cfg.task))
    for name, task, made_for in [
        ("countdown", "maze", "countdown"),
        ("maze", "countdown", "maze"),
        ("run", "countdown", "maze"),
    ]:
        cfg = TrainConfig(base=str(bases[name]), out=str(tmp_path / "out"), task=task)
        with pytest.raises(ValueError, match=f"made for task '{made_for}', not task '{task}'"):
            trainer.train(cfg)
    for name, task in [
        ("countdown", "countdown"),
        ("maze", "maze"),
        ("plain", "maze"),
        ("plain_run", "maze"),
    ]:
        trainer.train(TrainConfig(base=str(bases[name]), out=str(tmp_path / name), task=task))
    assert seen == ["countdown", "maze", "maze", "maze"]
    (bases["maze"] / "task.json").write_text("[]")
    with pytest.raises(ValueError, match="task.json is damaged"):
        trainer.train(TrainConfig(base=str(bases["maze"]), out=str(tmp_path / "o"), task="maze"))


@pytest.mark.parametrize("name, task", [("countdown", "maze"), ("maze", "countdown")])
def test_the_commands_refuse_another_task_than_the_bases_in_one_line(tmp_path, capsys, name, task):
    base, out = _bases(tmp_path)[name], tmp_path / "out"
    for argv in (
        ["train", "--base", str(base), "--out", str(out)],
        ["eval", "--model", str(base), "--out", str(out)],  # nor evaluated on it
        ["rare-set", "--base", str(base), "--out", str(out / "rare.json")],
    ):
        assert main([*argv, "--task", task]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"made for task '{name}', not task '{task}'" in err[0], err
        assert not out.exists()


def test_a_diverged_pretraining_is_one_line(monkeypatch, tmp_path, capsys):
    import fgrpo_llm.experiments.countdown.base as base  # the command imports it when it runs

    def diverge(*args, **kwargs):
        raise FloatingPointError("pretrain diverged at step 2 (loss nan)")

    monkeypatch.setattr(base, "pretrain", diverge)
    assert main(["pretrain", "--out", str(tmp_path / "b"), "--steps", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "diverged at step 2" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize(
    "fields, needle",
    [
        ({"seed": 10**23}, "seed must be an integer >= 0 and <= 9223372036854775807"),
        ({"lr": 1e300, "lr_multiplier": 1e300}, "effective learning rate"),
        ({"lr_match_gamma": 1e300}, "effective learning rate"),
    ],
)
def test_configs_that_torch_or_the_optimizer_cannot_take_are_refused(fields, needle):
    with pytest.raises(ValueError, match=needle):
        TrainConfig(base="b", out="o", **fields)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["validate", "--early-steps", "0"], "--early-steps must be >= 1"),
        (["validate", "--early-steps", "-5"], "--early-steps must be >= 1"),
    ],
)
def test_validate_windows_must_hold_a_step(tmp_path, capsys, argv, needle):
    out = tmp_path / "v"
    rare = str(tmp_path / "r.json")
    assert main([*argv, "--run", str(tmp_path), "--rare-set", rare, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert not out.exists()


def test_resume_drops_a_torn_last_line_but_names_a_damaged_one_before_it(tmp_path):
    from fgrpo_llm.tracking import truncate_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n{"ste')  # killed mid-write
    truncate_jsonl(path, max_step=2)
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n'
    path.write_text('{"step": 1}\n{"st#p": 2\n{"step": 3}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2 is damaged"):
        truncate_jsonl(path, max_step=3)
    assert path.read_text() == '{"step": 1}\n{"st#p": 2\n{"step": 3}\n'  # nothing dropped


@pytest.mark.parametrize("command", ["rare-set", "compare"])
def test_an_output_file_that_is_a_directory_is_refused_before_any_work(
    tiny_checkpoint, tmp_path, capsys, command
):
    taken = tmp_path / "taken"
    taken.mkdir()
    argv = (
        ["rare-set", "--base", str(tiny_checkpoint), "--out", str(taken)]
        if command == "rare-set"
        else ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(taken)]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a directory; give a file path" in err[0], err


def test_pretrain_and_train_refuse_each_others_directories(tiny_checkpoint, tmp_path, capsys):
    """pretrain saves a base by replacing its whole --out, so a directory holding anything but a
    base (a run) is refused before any work; train refuses a model's directory as its --out
    (fresh or --resume) instead of reading the model's config.json as a run's settings."""
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"algo": "grpo"}\n')
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    before = _files(run)
    assert main(["pretrain", "--out", str(run), "--steps", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no base model" in err[0] and "config.json" in err[0], err
    assert _files(run) == before  # (and an OS lock file, .lock, which stays by design)

    model = tmp_path / "model"
    shutil.copytree(tiny_checkpoint, model)
    before = _files(model)
    for extra in ([], ["--resume"]):
        argv = ["train", "--base", str(tiny_checkpoint), "--out", str(model), "--steps", "1"]
        assert main([*argv, "--no-progress", *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "holds a model" in err[0] and "not a training run" in err[0], err
    assert _files(model) == before


def _files(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir() if not p.name.startswith(".")}


def test_tensorboard_asked_for_without_the_package_is_refused_up_front(
    tiny_checkpoint, tmp_path, capsys, monkeypatch
):
    import sys

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import raises ImportError
    out = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(out), "--steps", "1"]
    assert main([*argv, "--tensorboard", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "report_to='tensorboard' needs the tensorboard package" in err[0], err
    assert not out.exists()
