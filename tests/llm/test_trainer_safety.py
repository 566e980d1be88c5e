"""Training survives what breaks runs: NaN, kills at any moment, damaged checkpoints, crafted files.

- Non-finite loss, gradient or weight: the run stops at that step with ``TrainingDiverged``, and
  no checkpoint or final model holds a non-finite weight.
- SIGKILL before the first checkpoint, during a checkpoint write, during the final save, and at
  random moments: ``--resume`` (repeated as often as it is killed) ends with metrics, group logs
  and weights identical to an uninterrupted run.
- A damaged latest checkpoint falls back to the previous one, saying so; none left: one error.
- Resume never unpickles: a checkpoint holding only an old pickle file is refused, unexecuted.
- Resume semantics: --steps below the step reached is refused, a moved run directory resumes,
  ``--config`` on resume applies resumable fields and refuses the others, ``python -m
  fgrpo_llm.cli`` runs.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from fgrpo_llm.checkpoint import CorruptCheckpoint, list_checkpoints
from fgrpo_llm.cli import main
from fgrpo_llm.config import TrainConfig
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.trainer import TrainingDiverged, train
from tests.llm._rl_helpers import ToyTask

ROOT = Path(__file__).resolve().parents[2]


def _cfg(base, out, **kw):
    args = dict(
        base=str(base),
        out=str(out),
        steps=4,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=6,
        lr=1e-2,
        warmup_steps=1,
        checkpoint_every=2,
        progress=False,
        gamma=0.5,
    )
    args.update(kw)
    return TrainConfig(**args)


def _metrics(out):
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith("time/")}
        for line in (Path(out) / "metrics.jsonl").read_text().splitlines()
    ]


def _weights(path):
    return [p.detach().clone() for p in load_model_and_tokenizer(path)[0].parameters()]


def _same_run(a, b):
    assert _metrics(a) == _metrics(b)
    assert (Path(a) / "groups.jsonl").read_text() == (Path(b) / "groups.jsonl").read_text()
    for p, q in zip(_weights(Path(a) / "model"), _weights(Path(b) / "model"), strict=True):
        assert torch.equal(p, q)


# ----------------------------------------------------------------------------- NaN / inf
def _all_finite(path) -> bool:
    return all(torch.isfinite(p).all() for p in load_model_and_tokenizer(path)[0].parameters())


def test_nan_loss_stops_the_run_at_that_step_and_saves_nothing_non_finite(
    tiny_checkpoint, tmp_path, monkeypatch
):
    import fgrpo_llm.trainer as trainer

    real = trainer.policy_loss
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        loss, m = real(*args, **kwargs)
        calls["n"] += 1
        return (loss * float("nan"), m) if calls["n"] >= 2 else (loss, m)  # step 2 goes NaN

    monkeypatch.setattr(trainer, "policy_loss", poisoned)
    out = tmp_path / "nan"
    with pytest.raises(TrainingDiverged, match="step 2: the loss"):
        train(_cfg(tiny_checkpoint, out, checkpoint_every=1), task=ToyTask())
    assert not (out / "model").exists()
    assert [s for s, _ in list_checkpoints(out)] == [1] and _all_finite(list_checkpoints(out)[0][1])
    assert [line["step"] for line in _metrics(out)] == [1]


def test_non_finite_gradient_stops_before_the_optimizer_step(
    tiny_checkpoint, tmp_path, monkeypatch
):
    monkeypatch.setattr(
        torch.nn.utils, "clip_grad_norm_", lambda params, max_norm: torch.tensor(float("inf"))
    )
    with pytest.raises(TrainingDiverged, match="step 1: the gradient"):
        train(_cfg(tiny_checkpoint, tmp_path / "g"), task=ToyTask())
    assert not (tmp_path / "g" / "model").exists() and not list_checkpoints(tmp_path / "g")


def test_a_learning_rate_that_overflows_the_weights_is_caught_and_the_cli_says_so(
    tiny_checkpoint, tmp_path, capsys
):
    out = tmp_path / "inf"
    rc = main(
        [
            "train",
            "--base",
            str(tiny_checkpoint),
            "--out",
            str(out),
            "--lr",
            "3e37",
            "--set",
            "grad_clip=0",
            "--set",
            "warmup_steps=0",
            "--steps",
            "3",
            "--group-size",
            "4",
            "--prompts-per-step",
            "2",
            "--max-new-tokens",
            "4",
            "--no-progress",
            "--task-arg",
            "num_test=20",
            "--task-arg",
            "num_ood=10",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "became NaN or inf" in err or "beyond 1e+15" in err  # inf, or finite but overflowing
    assert not (out / "model").exists() and not list_checkpoints(out)


def test_saving_a_non_finite_model_is_refused(tiny_checkpoint, tmp_path):
    from fgrpo_llm.model import save_model_and_tokenizer

    model, tok = load_model_and_tokenizer(tiny_checkpoint)
    with torch.no_grad():
        next(model.parameters())[0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        save_model_and_tokenizer(model, tok, tmp_path / "m")
    assert not (tmp_path / "m").exists()


# ----------------------------------------------------------------------------- kills
DRIVER = textwrap.dedent("""
    import os, signal, sys, json
    sys.path.insert(0, {root!r})
    from tests.llm._rl_helpers import ToyTask
    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.trainer import train
    import fgrpo_llm.checkpoint as ck, fgrpo_llm.tracking as tr, fgrpo_common.files as fl
    kill_at = json.loads(sys.argv[2])  # {{"hook": name, "call": k}} or {{}}
    calls = {{"n": 0}}
    def killer(real):
        def wrapped(*a, **k):
            calls["n"] += 1
            if calls["n"] == kill_at.get("call"):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        return wrapped
    hook = kill_at.get("hook")
    if hook == "manifest":   # inside a checkpoint write, before the rename
        ck._write_manifest = killer(ck._write_manifest)
    elif hook == "log":      # after a step's work, as its metrics line is written
        tr.MetricsLogger.log = killer(tr.MetricsLogger.log)
    elif hook == "rename":   # the final model save, files written, not yet renamed
        fl.os.replace = killer(fl.os.replace)
    cfg = TrainConfig(**json.loads(sys.argv[1]))
    train(cfg, task=ToyTask(), resume=True)
""")


def _drive(cfg: dict, kill_at: dict, *, timeout: float | None = None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(root=str(ROOT)), json.dumps(cfg), json.dumps(kill_at)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr.read().decode()[-3000:])
    return proc.returncode


def _kill_cfg(base, out):
    return dict(
        base=str(base),
        out=str(out),
        steps=5,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=6,
        lr=1e-2,
        warmup_steps=1,
        checkpoint_every=2,
        keep_checkpoints=1,
        progress=False,
        gamma=0.5,
        seed=3,
    )


@pytest.fixture(scope="module")
def straight_run(tiny_checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    assert _drive(_kill_cfg(tiny_checkpoint, out), {}) == 0
    return out


@pytest.mark.parametrize(
    "kill_at",
    [
        {"hook": "log", "call": 1},  # before the first checkpoint
        {"hook": "manifest", "call": 2},  # during a later checkpoint write
        pytest.param(
            {"hook": "manifest", "call": 1}, marks=pytest.mark.slow
        ),  # during the first checkpoint write
        # the final model save: the renames of 3 checkpoints (steps 2, 4, 5) come first, then
        # model/'s
        pytest.param({"hook": "rename", "call": 4}, marks=pytest.mark.slow),
    ],
    ids=[
        "before-first-checkpoint",
        "second-checkpoint-write",
        "first-checkpoint-write",
        "final-model-save",
    ],
)
def test_a_kill_at_a_chosen_moment_then_resume_equals_an_uninterrupted_run(
    tiny_checkpoint, tmp_path, straight_run, kill_at
):
    out = tmp_path / "run"
    cfg = _kill_cfg(tiny_checkpoint, out)
    assert _drive(cfg, kill_at) == -signal.SIGKILL
    assert _drive(cfg, {}) == 0
    _same_run(straight_run, out)
    # leftovers of the kill were cleaned up
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]


@pytest.mark.slow
def test_kills_at_random_moments_then_resume_equal_an_uninterrupted_run(
    tiny_checkpoint, tmp_path, straight_run
):
    rng = np.random.default_rng(0)
    for trial in range(6):
        out = tmp_path / f"run{trial}"
        cfg = _kill_cfg(tiny_checkpoint, out)
        for _ in range(3):  # kill after random delays (start-up included), then let it finish
            _drive(cfg, {}, timeout=float(rng.uniform(3.0, 15.0)))
        assert _drive(cfg, {}) == 0
        _same_run(straight_run, out)


# ---------------------------------------------------------------------- damaged checkpoints, pickle
@pytest.mark.parametrize(
    "damage",
    [
        "model.safetensors",
        pytest.param("trainer_state.safetensors", marks=pytest.mark.slow),
        pytest.param("config.json", marks=pytest.mark.slow),
    ],
)
def test_a_damaged_latest_checkpoint_falls_back_to_the_previous_one(
    tiny_checkpoint, tmp_path, capsys, damage
):
    straight = tmp_path / "straight"
    train(_cfg(tiny_checkpoint, straight, steps=6), task=ToyTask())
    out = tmp_path / "damaged"
    train(_cfg(tiny_checkpoint, out, steps=4), task=ToyTask())
    target = list_checkpoints(out)[-1][1] / damage
    target.write_bytes(target.read_bytes()[: max(1, target.stat().st_size // 2)])  # truncated
    train(_cfg(tiny_checkpoint, out, steps=6), task=ToyTask(), resume=True)
    err = capsys.readouterr().err
    assert "skipping damaged checkpoint step_000004" in err and "step_000002" in err
    _same_run(straight, out)


def test_a_manifest_of_the_wrong_shape_is_a_damaged_checkpoint(tmp_path):
    """A manifest that is not a map of file entries, or that leaves out the trainer state (then
    a truncated state would verify), marks its checkpoint damaged (resume falls back to the
    previous one) instead of raising AttributeError or SafetensorError."""
    from fgrpo_llm.checkpoint import MANIFEST, load_trainer_state, verify_checkpoint

    ckpt = tmp_path
    for files in ([], {"config.json": 5}, {}, {"config.json": {}, "trainer_state.json": {}}):
        (ckpt / MANIFEST).write_text(json.dumps({"files": files}))
        with pytest.raises(CorruptCheckpoint, match=MANIFEST):
            verify_checkpoint(ckpt)
    (ckpt / "trainer_state.json").write_text("{}")
    (ckpt / "trainer_state.safetensors").write_bytes(b"\x08\x00\x00")  # truncated
    with pytest.raises(CorruptCheckpoint, match="unreadable trainer state"):
        load_trainer_state(ckpt)


def test_every_checkpoint_damaged_is_one_clear_error(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "r"
    train(_cfg(tiny_checkpoint, out, steps=4), task=ToyTask())
    for _, ckpt in list_checkpoints(out):
        (ckpt / "trainer_state.json").write_text("{}")
    with pytest.raises(CorruptCheckpoint, match="every checkpoint"):
        train(_cfg(tiny_checkpoint, out, steps=6), task=ToyTask(), resume=True)
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume", "--steps", "6", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "every checkpoint" in err[0]  # one line, naming both checkpoints
    assert "step_000002" in err[0] and "step_000004" in err[0]


class _Payload:
    def __reduce__(self):
        return (Path.touch, (Path(os.environ["FGRPO_PWNED"]),))


def test_resume_never_unpickles_a_crafted_checkpoint(tiny_checkpoint, tmp_path, monkeypatch):
    out = tmp_path / "r"
    train(_cfg(tiny_checkpoint, out, steps=2), task=ToyTask())
    marker = tmp_path / "pwned"
    monkeypatch.setenv("FGRPO_PWNED", str(marker))
    for _, ckpt in list_checkpoints(out):  # an attacker swaps the state for a pickle
        (ckpt / "trainer_state.json").unlink()
        (ckpt / "trainer_state.safetensors").unlink()
        with open(ckpt / "trainer_state.pt", "wb") as fh:
            pickle.dump({"step": 2, "x": _Payload()}, fh)
    with pytest.raises(CorruptCheckpoint):
        train(_cfg(tiny_checkpoint, out, steps=3), task=ToyTask(), resume=True)
    assert not marker.exists()
    package = "\n".join(p.read_text() for p in (ROOT / "fgrpo_llm").rglob("*.py"))
    assert "weights_only=False" not in package and "pickle.load" not in package


# ----------------------------------------------------------------------------- resume semantics
def test_resume_cannot_stop_before_the_step_already_reached(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "r"
    train(_cfg(tiny_checkpoint, out, steps=4), task=ToyTask())
    saved = (out / "config.json").read_text()
    with pytest.raises(ValueError, match="already reached step 4"):
        train(_cfg(tiny_checkpoint, out, steps=2), task=ToyTask(), resume=True)
    assert (out / "config.json").read_text() == saved  # not rewritten as if it had run 2 steps


def test_a_moved_run_directory_resumes(tiny_checkpoint, tmp_path):
    straight = tmp_path / "straight"
    train(_cfg(tiny_checkpoint, straight, steps=4), task=ToyTask())
    first = tmp_path / "first"
    train(_cfg(tiny_checkpoint, first, steps=2), task=ToyTask())
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(str(first), str(moved))
    train(_cfg(tiny_checkpoint, moved, steps=4), task=ToyTask(), resume=True)
    _same_run(straight, moved)
    assert json.loads((moved / "config.json").read_text())["out"] == str(moved)


SMALL = [
    "--task-arg",
    "num_test=20",
    "--task-arg",
    "num_ood=10",
    "--group-size",
    "2",
    "--prompts-per-step",
    "2",
    "--max-new-tokens",
    "4",
    "--no-progress",
    "--checkpoint-every",
    "1",
]


def test_resume_with_a_config_file_applies_resumable_fields_and_refuses_others(
    tiny_checkpoint, tmp_path, capsys
):
    out = tmp_path / "r"
    assert (
        main(["train", "--base", str(tiny_checkpoint), "--out", str(out), "--steps", "2", *SMALL])
        == 0
    )
    more = tmp_path / "more.yaml"
    more.write_text("steps: 3\ncheckpoint_every: 3\n")
    assert (
        main(["train", "--out", str(out), "--resume", "--config", str(more), "--no-progress"]) == 0
    )
    saved = json.loads((out / "config.json").read_text())
    assert saved["steps"] == 3 and saved["checkpoint_every"] == 3
    other = tmp_path / "other.yaml"
    other.write_text("steps: 4\ngamma: 0.7\n")
    capsys.readouterr()
    assert (
        main(["train", "--out", str(out), "--resume", "--config", str(other), "--no-progress"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gamma" in err and "0.7" in err


def test_unknown_task_argument_is_one_line_naming_it(tiny_checkpoint, tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--base",
                str(tiny_checkpoint),
                "--out",
                str(tmp_path / "x"),
                "--steps",
                "1",
                "--task-arg",
                "no_such_arg=3",
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no_such_arg" in err


def test_python_dash_m_runs_the_cli():
    proc = subprocess.run(
        [sys.executable, "-m", "fgrpo_llm.cli", "eval", "--model", "/nonexistent"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert (
        proc.returncode == 2
        and len(proc.stderr.strip().splitlines()) == 1
        and "Traceback" not in proc.stderr
    )
