"""Same command, same numbers: a tiny maze study gives identical metrics, tables and reports with
one worker, with two worker processes (runs finishing in any order), and after a run was killed
mid-way and resumed from its checkpoint. Timings live in OUT/timings.json only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fgrpo_llm.experiments.maze.config import make_config
from fgrpo_llm.experiments.maze.pipeline import run_experiment

#: Small enough for seconds per run, large enough that the SFT model solves some mazes, so the
#: RL groups carry a signal and the updates, rewards and pass@k are non-trivial numbers.
TINY = dict(
    grid_size=5,
    num_train=40,
    num_test=4,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    sft_steps=60,
    sft_batch_size=16,
    sft_lr=3e-3,
    rl_steps=3,
    rl_prompts_per_step=4,
    rl_lr=1e-3,
    group_sizes=(2, 4),
    gammas=(0.0, 1.0),
    eval_k_max=4,
    eval_every=1,
    rl_seeds=(0, 1),
    device="cpu",
)
#: Files that must be byte-identical (metrics.jsonl: once the time/* fields are dropped).
SAME = (
    "results.json",
    "table.md",
    "table.csv",
    "report.md",
    "report.json",
    "sft/sft_metrics.jsonl",
    "sft/sft_summary.json",
    "sft/model/model.safetensors",
)
PER_RUN = ("result.json", "groups.jsonl", "run.json", "model/model.safetensors")


def _without_threads(path: Path) -> dict:
    """run.json without the thread count; its segments (one per resume) as the distinct
    environments they ran on (a resumed run has more segments, on one machine the same one)."""
    data = json.loads(path.read_text())
    data.get("environment", {}).pop("torch_threads", None)
    envs = []
    for segment in data.pop("segments", []):
        env = {k: v for k, v in segment["environment"].items() if k != "torch_threads"}
        if env not in envs:
            envs.append(env)
    data["segment_environments"] = envs
    return data


def _metrics(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith("time/")}
        for line in path.read_text().splitlines()
    ]


def _assert_same(a: Path, b: Path) -> None:
    runs_a = sorted(p.parent.relative_to(a) for p in a.glob("rl/*/*/result.json"))
    runs_b = sorted(p.parent.relative_to(b) for p in b.glob("rl/*/*/result.json"))
    assert runs_a == runs_b and len(runs_a) == 2 * 2 * 3
    evals = sorted(p.relative_to(a) for p in a.glob("sft/eval_seed*.json"))
    assert len(evals) == 2
    for rel in [*SAME, *evals, *(r / f for r in runs_a for f in PER_RUN)]:
        if Path(rel).name == "run.json":  # a worker process runs torch on one thread
            assert _without_threads(a / rel) == _without_threads(b / rel), rel
            continue
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    for run in runs_a:
        assert _metrics(a / run / "metrics.jsonl") == _metrics(b / run / "metrics.jsonl"), run
    for name in ("results.json", "report.json", "report.md", "table.md"):
        text = (a / name).read_text()
        assert "wall_s" not in text and "seconds" not in text and "time/" not in text, name


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("maze") / "one_worker"
    results = run_experiment(make_config("reduced", **TINY), out, workers=1, progress=False)
    return out, results


def test_reference_run_is_not_trivial(reference):
    out, results = reference
    lines = [line for p in out.glob("rl/*/*/metrics.jsonl") for line in _metrics(p)]
    assert any(line["groups/active_frac"] > 0 and line["loss/policy"] != 0 for line in lines)
    assert any(r["final"]["eval/test/pass@1"] > 0 for r in results["runs"].values())
    assert all(r["torch_threads"] == 1 for r in results["runs"].values())
    finals = {r["final"]["eval/test/pass@1"] for r in results["runs"].values()}
    metrics = {json.dumps(_metrics(p)) for p in out.glob("rl/*/*/metrics.jsonl")}
    assert len(metrics) > 1 and finals  # the runs differ from each other
    timings = json.loads((out / "timings.json").read_text())
    assert timings["calls"][-1]["workers"] == 1 and timings["calls"][-1]["wall_s"] > 0


def test_two_workers_give_the_numbers_of_one(reference, tmp_path):
    out = tmp_path / "two_workers"
    results = run_experiment(make_config("reduced", **TINY), out, workers=2, progress=False)
    assert all(r["torch_threads"] == 1 for r in results["runs"].values())
    _assert_same(reference[0], out)
    assert json.loads((out / "timings.json").read_text())["calls"][-1]["workers"] == 2


class _Killed(Exception):
    pass


def test_a_run_killed_mid_way_resumes_to_the_same_numbers(reference, tmp_path, monkeypatch):
    import fgrpo_llm.experiments.maze.pipeline as pipeline
    import fgrpo_llm.experiments.maze.stages as maze

    real, calls = maze.evaluate_heldout, []

    def dies_at_the_fourth_call(*args, **kwargs):  # 2 SFT evaluations, then steps 1 and 2
        calls.append(1)
        if len(calls) == 4:
            raise _Killed
        return real(*args, **kwargs)

    out = tmp_path / "killed"
    cfg = make_config("reduced", **TINY)
    for module in (maze, pipeline):  # the RL runs' evaluations and the SFT model's
        monkeypatch.setattr(module, "evaluate_heldout", dies_at_the_fourth_call)
    with pytest.raises(_Killed):
        run_experiment(cfg, out, workers=1, progress=False)
    killed = [p.parent for p in out.glob("rl/*/*/metrics.jsonl")]
    assert len(killed) == 1 and not (killed[0] / "result.json").exists()
    assert [line["step"] for line in _metrics(killed[0] / "metrics.jsonl")] == [1]
    for module in (maze, pipeline):
        monkeypatch.setattr(module, "evaluate_heldout", real)
    run_experiment(cfg, out, workers=1, progress=False)
    _assert_same(reference[0], out)
    assert len(json.loads((out / "timings.json").read_text())["calls"]) == 2
