"""The Maze study over several SFT models (bases): intervals over bases against a hand
computation, and a tiny two-base run, one base per kernel family, end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from fgrpo_llm.experiments.maze.config import make_config, method_name, plan
from fgrpo_llm.experiments.maze.study import study

K = 8
CFG = make_config("reduced", rl_seeds=(0, 1), group_sizes=(4,), gammas=(0.0, 1.0), eval_k_max=K)
GRPO, FGRPO = method_name(0.0), method_name(1.0)


def _pooled(value, bases=(0, 1, 2)):
    """Synthetic pooled results: ``value(method, base, seed) -> pass@1`` as a fraction."""
    runs, sft = {}, {}
    for b in bases:
        for run in plan(CFG):
            p1 = value(run.method, b, run.seed)
            runs[f"base{b}/{run.key}"] = {
                "method": run.method,
                "N": run.N,
                "seed": run.seed,
                "base": b,
                "final": {"eval/test/pass@1": p1, f"eval/test/pass@{K}": 0.7},
                "dips": {f"dip/pass@{K}": 0.1},
            }
        for s in CFG.rl_seeds:
            sft[f"{b}/{s}"] = {"eval/test/pass@1": 0.3, f"eval/test/pass@{K}": 0.8}
    return {"sft": sft, "runs": runs, "bases": {str(b): "default" for b in bases}}


def test_pooled_intervals_take_the_base_as_the_unit():
    """Base shifts 0, 0.1, 0.3 and seed shifts 0, 0.02: the interval of a run is the t interval
    of its three base means (2 degrees of freedom), not of the six (base, seed) values."""
    shift = {0: 0.0, 1: 0.1, 2: 0.3}
    gain = {0: 0.05, 1: 0.03, 2: 0.06}

    def value(method, b, s):
        return 0.4 + shift[b] + 0.02 * s + (gain[b] if method == FGRPO else 0.0)

    report = study(CFG, _pooled(value))
    assert report["bases"] == [0, 1, 2]
    row = [r for r in report["runs"] if r["method"] == GRPO][0]
    means = np.array([100 * (0.4 + shift[b] + 0.01) for b in (0, 1, 2)])
    half = sps.t.ppf(0.975, 2) * means.std(ddof=1) / math.sqrt(3)
    assert row["pass@1"]["n"] == 3
    assert row["pass@1"]["mean"] == pytest.approx(means.mean())
    assert row["pass@1"]["hi"] == pytest.approx(means.mean() + half)
    (cell,) = [
        d for d in report["differences"] if (d["a"], d["b"], d["metric"]) == (FGRPO, GRPO, "pass@1")
    ]
    d = np.array([100 * gain[b] for b in (0, 1, 2)])  # base and seed shifts cancel when paired
    half_d = sps.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert cell["difference"]["mean"] == pytest.approx(d.mean())
    assert cell["difference"]["lo"] == pytest.approx(d.mean() - half_d)


def test_tiny_maze_over_two_bases_one_per_kernel_family(tmp_path):
    from fgrpo_llm.cli import main
    from fgrpo_llm.environment import kernel_family_env

    out = tmp_path / "maze"
    argv = [
        "maze",
        "--out",
        str(out),
        "--bases",
        "0,1",
        "--no-progress",
        "--workers",
        "1",
        "--grid-size",
        "7",
        "--num-train",
        "60",
        "--num-test",
        "3",
        "--hidden-size",
        "32",
        "--num-layers",
        "1",
        "--num-heads",
        "2",
        "--sft-steps",
        "3",
        "--sft-batch-size",
        "4",
        "--rl-steps",
        "2",
        "--prompts-per-step",
        "2",
        "--group-size",
        "2",
        "--gamma",
        "0,1",
        "--k-max",
        "4",
        "--eval-every",
        "1",
        "--device",
        "cpu",
    ]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["bases"] == {"0": "default", "1": "other"}
    assert {r["base"] for r in results["runs"].values()} == {0, 1}
    envs = {b: json.loads((out / f"base{b}" / "environment.json").read_text()) for b in (0, 1)}
    caps = {b: env["torch_cpu_capability"] for b, env in envs.items()}
    assert {env["device"] for env in envs.values()} == {"cpu"}  # the device it ran on
    other = kernel_family_env("other")["ATEN_CPU_CAPABILITY"].upper()
    assert caps[1] == other and caps[0] != other
    report = (out / "report.md").read_text()
    assert "2 SFT models (bases)" in report
    for section in ("## Bases", "## Variance components", "## Kernel family"):
        assert section in report
    assert "--bases 0,1" in report
    comps = results["study"]["variance_components"]
    assert comps and all(c["bases"] == 2 for c in comps)
    from fgrpo_llm.experiments.maze.config import MazeConfig
    from fgrpo_llm.experiments.maze.units import judge_units, read_units

    rows = read_units(out / "units.csv")  # every pooled run, judged again from the file alone
    assert len(rows) == len(results["runs"]) and {r["family"] for r in rows} == {"default", "other"}
    cfg = MazeConfig.from_dict(results["config"])
    assert judge_units(out / "units.csv", cfg) == results["study"]["claims"]


@pytest.mark.parametrize(
    "extra,word",
    [
        (["--bases", "0,1", "--seed", "3"], "--seed"),
        (["--families", "other"], "--families"),
        (["--bases", "0,1", "--families", "default,bogus"], "bogus"),
        (["--bases", "0,0"], "bases"),
    ],
)
def test_bad_base_arguments_are_one_line_errors(tmp_path, capsys, extra, word):
    from fgrpo_llm.cli import main

    assert main(["maze", "--out", str(tmp_path / "m"), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0] and "Traceback" not in err[0]
