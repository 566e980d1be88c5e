"""The fast demo end to end (``fgrpo-llm demo --fast``): every stage runs, the report names every
section and its figures exist, and a rerun resumes instead of recomputing."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

pytest.importorskip("torch")

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.experiments.countdown.config import (  # noqa: E402
    DemoConfig,
    RunSpec,
    load_demo_config,
    run_specs,
)


@pytest.fixture(scope="module")
def fast_demo(tmp_path_factory):
    """``fgrpo-llm demo --fast --workers 2``'s output folder, made once for this module's
    tests: theory and the base's pass@k run in the side process, the runs in a pool."""
    out = tmp_path_factory.mktemp("fast_demo") / "demo"
    assert main(["demo", "--out", str(out), "--fast", "--workers", "2"]) == 0
    return out


def test_fast_demo_end_to_end_and_resume(fast_demo, capsys):
    out = fast_demo
    report = (out / "report.md").read_text()
    for heading in (
        "## Theory",
        "## Base model",
        "## Rare-correct set",
        "## Training",
        "## pass@k",
        "## Cross-check: tail miss",
        "## Cross-check: group-size sweep",
        "## Learning-rate-matched control",
        "## Coverage against the base (Yue et al.)",
        "## Environment",
    ):
        assert heading in report
    for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report):
        assert (out / target).is_file(), target
    summary = json.loads((out / "demo_summary.json").read_text())
    assert set(summary["evals"]) == {"base", "grpo_n4", "fgrpo_n4", "grpo_n4_lrmatched", "grpo_n2"}
    assert {"GRPO N=4", "F-GRPO N=4", "GRPO N=4 (lr x0.50)", "GRPO N=2"} == set(summary["runs"])
    config = json.loads((out / "fgrpo_n4" / "config.json").read_text())
    assert config["gamma"] == 1.0 and config["group_size"] == 4
    # the demo's base records what made it, as a study's bases do
    assert "torch_cpu_capability" in json.loads((out / "base" / "environment.json").read_text())
    control = json.loads((out / "grpo_n4_lrmatched" / "config.json").read_text())
    assert (
        control["gamma"] == 0.0 and control["group_size"] == 4 and control["lr_match_gamma"] == 1.0
    )
    assert control["steps"] == config["steps"] and control["seed"] == config["seed"]
    # the control is compared with F-GRPO and GRPO, but is not a point of the group-size sweep
    validation = json.loads((out / "validate" / "validation.json").read_text())
    assert [r["label"] for r in validation["controls"]] == ["GRPO N=4 (lr x0.50)"]
    assert "GRPO N=4 (lr x0.50)" not in [r["label"] for r in validation["sweep"]]
    control_text = report.split("## Learning-rate-matched control")[1]
    assert "GRPO N=4 (lr x0.50)" in control_text and control_text.count("\n- ") == 3
    metrics = [
        json.loads(line) for line in (out / "grpo_n4" / "metrics.jsonl").read_text().splitlines()
    ]
    assert any("rare/delta_nll" in m for m in metrics)  # the evaluator hook ran inside training
    # no wall times
    assert (out / "timings.md").is_file() and not re.search(r"\b\d+(\.\d+)? ?(s|min)\b", report)

    stamp = {
        p: p.stat().st_mtime_ns
        for p in [
            out / "base" / "config.json",
            out / "rare_set.json",
            out / "grpo_n4" / "metrics.jsonl",
            out / "base_eval" / "eval.json",
        ]
    }
    capsys.readouterr()
    assert main(["demo", "--out", str(out), "--fast"]) == 0  # resumes: nothing is recomputed
    assert {p: p.stat().st_mtime_ns for p in stamp} == stamp
    assert "report:" in capsys.readouterr().out
    # a rerun with another plan neither reuses these results nor records its plan over them
    plan = (out / "demo_config.json").read_text()
    changed = out.parent / "lr.yaml"
    changed.write_text("lr: 0.05\n")
    assert main(["demo", "--out", str(out), "--fast", "--config", str(changed)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other settings: lr=" in err[0] and "(now 0.05)" in err[0], err
    # so are another evaluation and another rare set (they were reused silently once)
    fast = json.loads(plan)
    for text, said in (
        (f"eval_n: {2 * fast['eval_n']}", "base_eval was made with other settings: n="),
        (f"rare_rollouts: {fast['rare_rollouts'] + 1}", "rare_set.json was made with other"),
        (f"batch_size: {fast['batch_size'] + 1}", "other settings: batch_size="),
    ):
        changed.write_text(text + "\n")
        assert main(["demo", "--out", str(out), "--fast", "--config", str(changed)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
    assert (out / "demo_config.json").read_text() == plan
    assert {p: p.stat().st_mtime_ns for p in stamp} == stamp


def test_run_specs_lr_matched_control():
    specs = run_specs(DemoConfig(group_size=8, gamma=0.5, sweep_group_sizes=(2, 8, 16)))
    assert specs == [
        RunSpec("grpo_n8", 8, 0.0),
        RunSpec("fgrpo_n8", 8, 0.5),
        RunSpec("grpo_n8_lrmatched", 8, 0.0, lr_match_gamma=0.5),
        RunSpec("grpo_n2", 2, 0.0),
        RunSpec("grpo_n16", 16, 0.0),
    ]
    assert all(s.lr_match_gamma is None for s in run_specs(DemoConfig(lr_matched_control=False)))
    # gamma = 0: m_0 = 1, so the control would repeat the GRPO run
    assert all(s.lr_match_gamma is None for s in run_specs(DemoConfig(gamma=0.0)))


def test_the_demo_plan_is_the_study_plan_without_grpo_at_n32(tmp_path):
    """The demo's runs are the study's seed-0 runs (same names, same settings), less GRPO at N = 32,
    and a config file can put that run back."""
    demo, study = load_demo_config(for_demo=True), load_demo_config()
    demo_specs, study_specs = run_specs(demo), run_specs(study)
    assert [s.name for s in study_specs if s not in demo_specs] == ["grpo_n32"]
    assert all(s in study_specs for s in demo_specs) and len(demo_specs) == 6
    # every other field is the study's
    assert dataclasses.replace(demo, sweep_group_sizes=study.sweep_group_sizes) == study
    cfg_file = tmp_path / "with32.yaml"
    cfg_file.write_text("sweep_group_sizes: [2, 4, 16, 32]\n")
    assert run_specs(load_demo_config(cfg_file, for_demo=True)) == study_specs


def test_the_demo_command_runs_the_demo_plan(tmp_path, monkeypatch):
    """`fgrpo-llm demo` (what `make demo` runs) hands run_demo the demo's plan."""
    from fgrpo_llm.experiments.countdown import pipeline as demo_module

    seen = []

    def fake_run_demo(out, cfg):
        seen.append(cfg)
        return {"report": str(out), "total_seconds": 0.0, "evals": {}, "runs": {}}

    monkeypatch.setattr(demo_module, "run_demo", fake_run_demo)
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert seen == [load_demo_config(for_demo=True)]
    assert seen[0].sweep_group_sizes == (2, 4, 16)


def test_demo_config_validation(tmp_path, capsys):
    with pytest.raises(ValueError, match="steps"):
        DemoConfig(steps=0)
    with pytest.raises(ValueError, match="lr_matched_control"):
        DemoConfig(lr_matched_control="yes")
    with pytest.raises(ValueError, match="unknown demo config"):
        load_demo_config(fast=True, nonsense=1)
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text("rare_top_fraction: 2\n")
    assert main(["demo", "--out", str(tmp_path / "x"), "--config", str(cfg_file)]) == 2
    assert "rare_top_fraction" in capsys.readouterr().err


def test_the_plan_gives_the_same_numbers_with_one_worker_and_with_two(tmp_path, fast_demo):
    """Every run is a function of its seed and settings: the worker count and the order in which
    runs finish change no metric, group record, evaluation or report line (the fast demo with
    two workers against the same plan, its theory stage left out, with one)."""
    from fgrpo_llm.experiments.countdown.pipeline import run_demo

    a, b = tmp_path / "w1", fast_demo
    run_demo(a, load_demo_config(fast=True, theory=False, workers=1))
    compared = 0
    for f in sorted(a.rglob("*")):
        rel = f.relative_to(a)
        if f.suffix not in (".jsonl", ".json", ".md", ".npy") or rel.name in (
            "timings.md",
            "demo_summary.json",
            "demo_config.json",
        ):
            continue
        if f.name.startswith(("trainer_state", "manifest")):
            continue
        text_a, text_b = f.read_bytes(), (b / rel).read_bytes()
        if rel.suffix == ".jsonl":  # timings aside
            text_a, text_b = (_untimed(x) for x in (text_a, text_b))
        elif rel.name == "eval.json" or rel.name == "rare_set.json":
            text_a, text_b = (
                _without_threads(
                    x.replace(str(a).encode(), b"OUT").replace(str(b).encode(), b"OUT")
                )
                for x in (text_a, text_b)
            )
        elif rel.name in ("config.json", "base_summary.json", "run_settings.json"):
            text_a, text_b = (_untimed_json(x, a, b) for x in (text_a, text_b))
        elif rel.name == "run.json":  # a worker process runs torch on one thread
            text_a, text_b = (_without_threads(x) for x in (text_a, text_b))
        elif rel.name == "report.md":  # the settings differ (workers, theory), and theory ran once
            text_a, text_b = (
                _sections(x, drop=("Configuration", "Theory")) for x in (text_a, text_b)
            )
        assert text_a == text_b, rel
        compared += 1
    assert compared > 20


def _untimed(raw: bytes) -> list:
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "perf/"))}
        for line in raw.splitlines()
    ]


def _sections(raw: bytes, drop) -> list:
    """A report's sections, less those whose heading is in ``drop``."""
    parts = raw.decode().split("\n## ")
    return [p for p in parts if p.split("\n", 1)[0].strip() not in drop]


def _without_threads(raw: bytes) -> dict:
    data = json.loads(raw)
    data.get("environment", {}).pop("torch_threads", None)
    return data


def _untimed_json(raw: bytes, a, b):
    data = json.loads(raw.decode().replace(str(a), "OUT").replace(str(b), "OUT"))
    return (
        {k: v for k, v in data.items() if not k.startswith(("time/", "perf/"))}
        if isinstance(data, dict)
        else data
    )


def test_the_demo_quotes_the_seed_spread_the_study_measured(tmp_path):
    """The note beside each single-seed comparison quotes the study's spread (the shipped copy),
    says plainly when none was measured, and a damaged spread file counts as none."""
    import json

    from fgrpo_llm.experiments.countdown.pipeline import SEED_SPREAD, load_seed_spread
    from fgrpo_llm.experiments.countdown.report import seed_spread_note

    shipped = load_seed_spread()
    assert shipped is not None and SEED_SPREAD.is_file()
    assert "fgrpo-llm study" in shipped["command"]
    note = seed_spread_note(shipped)
    assert f"Delta NLL_rare {shipped['sd']['delta_nll_rare']:.3f}" in note
    # the shipped spread is over bases of both kernel families, and says so
    assert shipped["num_bases"] >= 6 and f"Over {shipped['num_bases']} bases" in note
    between = shipped["between_base_sd"]["delta_nll_rare"]
    assert "between bases" in note and f"Delta NLL_rare {between:.3f}" in note
    # a spread over the seeds of one base says that the base-to-base spread is missing
    one_base = {"command": "fgrpo-llm study", "num_seeds": 4, "sd": {"delta_nll_rare": 0.031}}
    assert "Over 4 RL seeds of one base" in seed_spread_note(one_base)
    assert "not measured" in seed_spread_note(one_base)
    assert "has not been measured" in seed_spread_note(None)
    bad = tmp_path / "spread.json"
    bad.write_text("{not json")
    assert load_seed_spread(bad) is None
    bad.write_text(json.dumps({"sd": [1, 2]}))
    assert load_seed_spread(bad) is None
    bad.write_text(json.dumps({"sd": {}, "between_base_sd": 3}))
    assert load_seed_spread(bad) is None
    assert load_seed_spread(tmp_path / "missing.json") is None


def test_the_cpu_config_file_is_what_make_demo_runs():
    """The demo_cpu preset says it is `make demo`'s plan written out: read on the study's
    defaults (no demo plan applied), it gives the demo's plan field for field."""
    from pathlib import Path

    path = Path(__file__).parents[2] / "fgrpo_llm/experiments/countdown/presets/demo_cpu.yaml"
    assert load_demo_config(path) == load_demo_config(for_demo=True)
