"""The fast demo end to end (``fgrpo-llm demo --fast``): every stage runs, the report names every
section and its figures exist, and a rerun resumes instead of recomputing."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("torch")

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.demo import DemoConfig, load_demo_config  # noqa: E402


def test_fast_demo_end_to_end_and_resume(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--fast"]) == 0
    report = (out / "report.md").read_text()
    for heading in ("## Theory", "## Base model", "## Rare-correct set", "## Training", "## pass@k",
                    "## Cross-check: tail miss", "## Cross-check: group-size sweep"):
        assert heading in report
    for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report):
        assert (out / target).is_file(), target
    summary = json.loads((out / "demo_summary.json").read_text())
    assert set(summary["evals"]) == {"base", "grpo_n4", "fgrpo_n4", "grpo_n2"}
    assert {"GRPO N=4", "F-GRPO N=4", "GRPO N=2"} == set(summary["runs"])
    config = json.loads((out / "fgrpo_n4" / "config.json").read_text())
    assert config["gamma"] == 1.0 and config["group_size"] == 4
    metrics = [json.loads(line) for line in (out / "grpo_n4" / "metrics.jsonl").read_text().splitlines()]
    assert any("rare/delta_nll" in m for m in metrics)  # the evaluator hook ran inside training
    assert "report:" in capsys.readouterr().out

    stamp = {p: p.stat().st_mtime_ns for p in [out / "base" / "config.json", out / "rare_set.json",
                                                out / "grpo_n4" / "metrics.jsonl", out / "base_eval" / "eval.json"]}
    assert main(["demo", "--out", str(out), "--fast"]) == 0  # resumes: nothing is recomputed
    assert {p: p.stat().st_mtime_ns for p in stamp} == stamp


def test_demo_config_validation(tmp_path, capsys):
    with pytest.raises(ValueError, match="steps"):
        DemoConfig(steps=0)
    with pytest.raises(ValueError, match="unknown demo config"):
        load_demo_config(fast=True, nonsense=1)
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text("rare_top_fraction: 2\n")
    assert main(["demo", "--out", str(tmp_path / "x"), "--config", str(cfg_file)]) == 2
    assert "rare_top_fraction" in capsys.readouterr().err
