"""``fgrpo-llm ... --json`` on tiny inputs: one JSON document on stdout and nothing else, for every
subcommand that prints results (the walk over both commands' flags: ``tests/test_cli_surface.py``);
the demo's configurations by preset name; ``--samples``, the old ``--n``.
"""

from __future__ import annotations

import json

import pytest

from fgrpo_llm.cli import main
from fgrpo_llm.cli.common import config_presets, resolve_config

TINY_EVAL = ["--k", "1,2", "--max-problems", "2", "--max-new-tokens", "3", "--no-progress"]
TINY_TRAIN = [
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
    "--steps",
    "2",
    "--no-progress",
]


def _json(capfd) -> object:
    out, err = capfd.readouterr()
    return json.loads(out)  # raises unless stdout is exactly one JSON document


def test_eval_and_compare_json(tiny_checkpoint, tmp_path, capfd):
    out = tmp_path / "ev"
    argv = ["eval", "--model", str(tiny_checkpoint), "--samples", "2", *TINY_EVAL]
    assert main([*argv, "--out", str(out), "--json"]) == 0
    res = _json(capfd)
    assert set(res["splits"]) == {"test", "ood"} and res["n"] == 2
    assert set(res["files"]) >= {"json", "csv"}
    cmp = ["compare", str(out), str(out), "--m", "1", "--iterations", "20", "--k", "1"]
    assert main([*cmp, "--json"]) == 0
    assert "test" in _json(capfd)


def test_eval_n_is_a_deprecated_samples(tiny_checkpoint, tmp_path, capfd):
    argv = ["eval", "--model", str(tiny_checkpoint), "--n", "2", *TINY_EVAL, "--json"]
    assert main([*argv, "--out", str(tmp_path / "ev")]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["n"] == 2
    assert [line for line in err.splitlines() if "deprecated" in line] == [
        "fgrpo-llm eval: warning: --n is deprecated and will be removed in a future release; "
        "use --samples"
    ]


def test_rare_set_train_and_validate_json(tiny_checkpoint, tmp_path, capfd):
    rare = tmp_path / "rare.json"
    argv = ["rare-set", "--base", str(tiny_checkpoint), "--out", str(rare), "--prompts", "2"]
    assert main([*argv, "--rollouts", "4", "--max-new-tokens", "4", "--no-progress", "--json"]) == 0
    summary = _json(capfd)
    assert summary["file"] == str(rare) and summary["prompts"] == 2
    run = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(run), *TINY_TRAIN, "--json"]
    assert main(argv) == 0
    trained = _json(capfd)
    assert trained["steps"] == 2 and "reward" in trained["last"]
    argv = ["validate", "--rare-set", str(rare), "--run", str(run), "--out", str(tmp_path / "v")]
    assert main([*argv, "--json"]) == 0
    assert _json(capfd)["report"].endswith("report.md")


@pytest.mark.slow
def test_pretrain_json(tmp_path, capfd):
    argv = ["pretrain", "--out", str(tmp_path / "base"), "--steps", "1", "--no-progress"]
    assert main([*argv, "--device", "cpu", "--json"]) == 0
    assert _json(capfd)["out"] == str(tmp_path / "base")


def test_the_demo_configurations_resolve_by_name(tmp_path, capsys):
    from fgrpo_llm.experiments.countdown.config import load_demo_config

    presets = config_presets()
    assert {"gpu_full", "demo_cpu"} <= set(presets)
    assert resolve_config("gpu_full") == resolve_config("gpu_full.yaml") == str(presets["gpu_full"])
    assert load_demo_config(resolve_config("gpu_full")).device == "cuda"
    mine = tmp_path / "gpu_full"  # a file of that name wins over the preset
    mine.write_text("seed: 3\n")
    assert resolve_config(str(mine)) == str(mine)
    with pytest.raises(
        ValueError, match=r"--config 'nope' is neither a file nor a preset .*gpu_full"
    ):
        resolve_config("nope")
    argv = ["demo", "--out", str(tmp_path / "d"), "--config", "nope", "--device", "cpu"]
    assert main(argv) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "d").exists()


@pytest.mark.slow
def test_demo_json(tmp_path, capfd):
    argv = ["demo", "--out", str(tmp_path / "d"), "--fast", "--workers", "1", "--device", "cpu"]
    assert main([*argv, "--no-progress", "--json"]) == 0
    assert _json(capfd)["report"]


@pytest.mark.slow
def test_maze_json(tmp_path, capfd):
    tiny = ["--grid-size", "7", "--num-train", "60", "--num-test", "3", "--hidden-size", "32"]
    tiny += ["--num-layers", "1", "--num-heads", "2", "--sft-steps", "3", "--sft-batch-size", "4"]
    tiny += ["--rl-steps", "1", "--prompts-per-step", "2", "--group-size", "2", "--gamma", "0"]
    tiny += ["--lr-matched-gammas", ",", "--k-max", "2", "--eval-every", "1", "--workers", "1"]
    argv = ["maze", "--out", str(tmp_path / "m"), *tiny, "--device", "cpu", "--no-progress"]
    assert main([*argv, "--json"]) == 0
    assert _json(capfd)["runs"]
