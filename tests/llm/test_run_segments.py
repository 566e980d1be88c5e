"""run.json keeps one environment per segment of a run: a fresh run starts one, each resume
appends one (from the step it resumed at), an old run.json with a single environment still
reads as one segment; ``fgrpo-llm validate`` warns when a run's segments ran on different CPU
families (their numbers differ by the kernels' rounding, not only by the method)."""

from __future__ import annotations

import json

from fgrpo_llm.environment import segment_differences
from fgrpo_llm.evaluation.runs import load_run
from fgrpo_llm.tracking import read_run_info, run_segments, write_run_info

AVX2 = {"cpu": "AMD EPYC", "torch_cpu_capability": "AVX2", "torch": "2.13"}
AVX512 = {"cpu": "Intel Xeon", "torch_cpu_capability": "AVX512", "torch": "2.13"}
KW = dict(engine="fgrpo", algo="grpo", group_size=4, gamma=1.0)


def test_each_resume_appends_an_environment(tmp_path):
    run = tmp_path / "r"
    write_run_info(run, environment=AVX2, **KW)
    write_run_info(run, environment=AVX512, resumed_at=50, **KW)
    write_run_info(run, environment=AVX2, resumed_at=80, **KW)
    segs = run_segments(read_run_info(run))
    assert [(s["from_step"], s["environment"]["cpu"]) for s in segs] == [
        (0, "AMD EPYC"), (50, "Intel Xeon"), (80, "AMD EPYC")
    ]  # fmt: skip
    assert read_run_info(run)["environment"] == AVX2  # the latest, as before
    # resumed again from an earlier step: the segments after it are replaced
    write_run_info(run, environment=AVX512, resumed_at=60, **KW)
    assert [s["from_step"] for s in run_segments(read_run_info(run))] == [0, 50, 60]
    # a fresh run (not resumed) starts over
    write_run_info(run, environment=AVX2, **KW)
    assert [s["from_step"] for s in run_segments(read_run_info(run))] == [0]


def test_an_old_run_json_with_one_environment_reads_as_one_segment(tmp_path):
    run = tmp_path / "old"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({**KW, "lr_scale": 1.0, "environment": AVX2}))
    assert run_segments(read_run_info(run)) == [{"from_step": 0, "environment": AVX2}]
    assert load_run(run).segments == [{"from_step": 0, "environment": AVX2}]


def test_segments_on_different_cpu_families_are_named():
    same = [{"from_step": 0, "environment": AVX2}, {"from_step": 9, "environment": dict(AVX2)}]
    assert segment_differences(same) == []
    mixed = [{"from_step": 0, "environment": AVX2}, {"from_step": 9, "environment": AVX512}]
    lines = segment_differences(mixed)
    assert lines and any("torch_cpu_capability" in x and "AVX512" in x for x in lines)
    assert any("step 9" in x for x in lines)


def test_validate_warns_about_a_run_resumed_on_another_cpu_family(tmp_path, capsys):
    from fgrpo_llm.cli import main

    run = tmp_path / "r"
    write_run_info(run, environment=AVX2, **KW)
    write_run_info(run, environment=AVX512, resumed_at=50, **KW)
    even = tmp_path / "even"
    write_run_info(even, environment=AVX2, **KW)
    write_run_info(even, environment=AVX2, resumed_at=50, **KW)
    argv = ["validate", "--rare-set", str(tmp_path / "none.json"), "--out", str(tmp_path / "v")]
    main([*argv, "--run", str(run), "--run", str(even)])  # refused later: no rare set
    err = capsys.readouterr().err
    assert f"--run {run} was resumed on another CPU family" in err and "AVX512" in err
    assert f"--run {even} was resumed" not in err
    assert not (tmp_path / "v").exists()
