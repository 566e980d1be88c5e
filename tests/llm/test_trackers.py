"""``report_to``: our trainer's metrics go to metrics.jsonl always and to TensorBoard or trackio
when asked (fgrpo_llm.trackers), each tested on a fake module in place of the optional package."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from fgrpo_llm.cli import main
from fgrpo_llm.config import TrainConfig
from fgrpo_llm.trackers import REPORT_TO, open_tracker, require_tracker
from fgrpo_llm.tracking import MetricsLogger


@pytest.fixture
def fake_trackio(monkeypatch):
    """A stand-in for the trackio package that records its calls."""
    calls = []
    module = types.ModuleType("trackio")
    module.init = lambda **kw: calls.append(("init", kw))
    module.log = lambda metrics, step=None: calls.append(("log", step, metrics))
    module.finish = lambda: calls.append(("finish",))
    monkeypatch.setitem(sys.modules, "trackio", module)
    return calls


@pytest.fixture
def fake_tensorboard(monkeypatch):
    calls = []

    class SummaryWriter:
        def __init__(self, log_dir, purge_step=None):
            calls.append(("open", log_dir, purge_step))

        def add_scalar(self, key, value, step):
            calls.append(("scalar", key, value, step))

        def close(self):
            calls.append(("close",))

    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = SummaryWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", module)
    return calls


def _log_two_steps(out, report_to, start_step=0):
    logger = MetricsLogger(
        out, total_steps=start_step + 2, start_step=start_step, report_to=report_to,
        config={"gamma": 1.0}, progress=False,
    )  # fmt: skip
    logger.log(start_step + 1, {"reward": 0.5, "grad_norm": float("nan"), "n": torch.tensor(3)})
    logger.log(start_step + 2, {"reward": 0.75, "flag": True, "name": "x"})
    logger.close()


def test_trackio_gets_every_finite_number_and_metrics_jsonl_is_still_written(
    tmp_path, fake_trackio
):
    out = tmp_path / "run1"
    out.mkdir()
    _log_two_steps(out, "trackio")
    assert fake_trackio == [
        ("init", {"project": "fgrpo", "name": "run1", "config": {"gamma": 1.0}, "resume": "never"}),
        ("log", 1, {"reward": 0.5, "n": 3.0}),  # NaN, bools and text are not numbers to plot
        ("log", 2, {"reward": 0.75}),
        ("finish",),
    ]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2] and lines[1]["reward"] == 0.75
    fake_trackio.clear()
    _log_two_steps(out, "trackio", start_step=2)  # a resumed run continues its tracker's run
    assert fake_trackio[0][1]["resume"] == "allow"


def test_tensorboard_writes_scalars_under_out_and_purges_the_steps_a_resume_redoes(
    tmp_path, fake_tensorboard
):
    _log_two_steps(tmp_path, "tensorboard", start_step=4)
    assert fake_tensorboard == [
        ("open", str(tmp_path / "tensorboard"), 5),
        ("scalar", "reward", 0.5, 5),
        ("scalar", "n", 3.0, 5),
        ("scalar", "reward", 0.75, 6),
        ("close",),
    ]


def test_none_opens_no_tracker_and_a_missing_package_is_one_clear_error(tmp_path, monkeypatch):
    assert REPORT_TO == ("none", "tensorboard", "trackio")
    assert require_tracker("none") is None and open_tracker("none", tmp_path) is None
    monkeypatch.setitem(sys.modules, "trackio", None)  # import raises ImportError
    with pytest.raises(ValueError, match=r"report_to='trackio' needs the trackio package.*"
                       r"fgrpo\[trackio\]"):  # fmt: skip
        require_tracker("trackio")
    with pytest.raises(ValueError, match="report_to must be one of"):
        require_tracker("wandb")


def test_config_reads_report_to_and_the_old_tensorboard_switch(tmp_path):
    base = dict(base="b", out=str(tmp_path))
    assert TrainConfig(**base).report_to == "none"
    old = TrainConfig(**base, tensorboard=True)
    assert old.report_to == "tensorboard" and old.tensorboard is False
    assert TrainConfig.from_dict(old.to_dict()) == old
    with pytest.raises(ValueError, match="report_to"):
        TrainConfig(**base, report_to="wandb")
    with pytest.raises(ValueError, match="tensorboard must be False with report_to='trackio'"):
        TrainConfig(**base, tensorboard=True, report_to="trackio")


def test_cli_report_to_trackio_without_the_package_stops_before_any_work(
    tiny_checkpoint, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "trackio", None)
    out = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(out), "--steps", "1"]
    assert main([*argv, "--report-to", "trackio", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'trackio>=0.4'" in err[0], err
    assert not out.exists()


def test_a_training_run_reports_each_step_to_the_tracker(tiny_checkpoint, tmp_path, fake_trackio):
    from fgrpo_llm.trainer import train
    from tests.llm._rl_helpers import ToyTask

    cfg = TrainConfig(
        base=str(tiny_checkpoint), out=str(tmp_path / "r"), steps=2, prompts_per_step=2,
        group_size=2, max_new_tokens=4, progress=False, report_to="trackio",
    )  # fmt: skip
    train(cfg, task=ToyTask())
    logged = [c for c in fake_trackio if c[0] == "log"]
    assert [c[1] for c in logged] == [1, 2] and all("reward" in c[2] for c in logged)
    assert fake_trackio[0][1]["config"]["report_to"] == "trackio" and fake_trackio[-1] == (
        "finish",
    )
