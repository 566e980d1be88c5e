"""Hostile input to every ``fgrpo-llm`` subcommand: one stderr line, exit status 2, no traceback.

Unwritable or odd output paths, files of the wrong JSON shape or nested too deeply to parse, NaN
in a config, out-of-range numbers, unknown task arguments, a model directory without a tokenizer,
a run directory without ``run.json``: each is refused before any long work starts.
"""

from __future__ import annotations

import json
import shutil

import pytest

from fgrpo_llm.cli import main

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_checkpoint):
    d = tmp_path_factory.mktemp("hostile")
    notok = d / "notok"
    notok.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_checkpoint / name, notok / name)
    (d / "afile").write_text("x")
    (d / "list.json").write_text("[1, 2]")
    (d / "deep.json").write_text(DEEP)
    (d / "nan.json").write_text('{"lr": NaN}')
    (d / "ev").mkdir()
    (d / "ev" / "eval.json").write_text("[1]")
    (d / "ev2").mkdir()
    (d / "ev2" / "eval.json").write_text(
        json.dumps(
            {
                "n": 4,
                "ks": [1],
                "splits": {
                    "test": {
                        "role": "in_domain",
                        "num_problems": 1,
                        "problem_ids": ["a"],
                        "counts": [1],
                        "pass@1": 0.25,
                    }
                },
            }
        )
    )
    (d / "norun").mkdir()
    (d / "norun" / "groups.jsonl").write_text("{}\n")
    (d / "run").mkdir()
    (d / "run" / "run.json").write_text(
        json.dumps({"engine": "fgrpo", "algo": "grpo", "group_size": 4, "gamma": 0})
    )
    (d / "run" / "groups.jsonl").write_text(DEEP[:100_000] + DEEP[-100_000:] + "\n")
    (d / "rare.json").write_text("[]")
    (d / "dup.yaml").write_text(f"base: {tiny_checkpoint}\nsteps: 1\nsteps: 2\n")
    (d / "dup2.yaml").write_text(f"base: {tiny_checkpoint}\ngroup-size: 4\ngroup_size: 8\n")
    (d / "latin1.yaml").write_bytes(b"base: caf\xe9\n")
    (d / "intbase.yaml").write_text("base: 5\n")
    return {"D": str(d), "B": str(tiny_checkpoint)}


CASES = [
    "pretrain --out {D}/afile",
    "pretrain --out /proc/nope/x --steps 1",
    "pretrain --out {D}/p --steps -1",
    "pretrain --out {D}/p --seconds nan",
    "pretrain --out {D}/p --config {D}/list.json",
    "pretrain --out {D}/p --config {D}/deep.json",
    "pretrain --out {D}/p --dtype bogus",
    "pretrain --out {D}/p --device bogus",
    "train --base {B} --out {D}/afile",
    "train --base {B} --out /proc/nope/x",
    "train --base {B} --out {D}/t --config {D}/list.json",
    "train --base {B} --out {D}/t --config {D}/deep.json",
    "train --base {B} --out {D}/t --config {D}/nan.json",
    "train --base {B} --out {D}/t --set lr=abc",
    "train --base {B} --out {D}/t --set x",
    "train --base {B} --out {D}/t --task-arg num_test=abc",
    "train --base {B} --out {D}/t --task bogus",
    "train --base {B} --out {D}/t --rare-set {D}/rare.json --eval-every 1",
    "train --base {D}/notok --out {D}/t",
    "train --base {D}/afile --out {D}/t",
    "train --base {B} --out {D}/t --set task_kwargs={{a:1}}",
    "train --base {B} --out {D}/t --device meta",
    "train --out {D}/t --config {D}/dup.yaml",
    "train --out {D}/t --config {D}/dup2.yaml",
    "train --out {D}/t --config {D}/latin1.yaml",
    "train --out {D}/t --config {D}/intbase.yaml",
    "eval --model {B} --samples 2 --out {D}/e --device mps",
    "demo --out {D}/dm --device meta",
    "eval --model {D}/missing",
    "eval --model {D}/afile",
    "eval --model {B} --samples 0",
    "eval --model {B} --k 0",
    "eval --model {B} --k abc",
    "eval --model {B} --splits bogus",
    "eval --model {B} --max-problems -1",
    "eval --model {B} --out /proc/nope/x --samples 2 --max-problems 1",
    "eval --model {B} --task-arg zz=1",
    "eval --model {B} --batch-size 0 --samples 2",
    "eval --model {B} --max-new-tokens 0",
    "eval --model {D}/notok",
    "compare {D}/x {D}/y",
    "compare {D}/ev {D}/ev",
    "compare {D}/ev2 {D}/ev2",
    "compare {D}/ev2 {D}/ev2 --m 0",
    "compare {D}/ev2 {D}/ev2 --iterations 0",
    "compare {D}/ev2 {D}/ev2 --k abc",
    "compare {D}/ev2 {D}/ev2 --m 1 --iterations 1000000000000000",
    "rare-set --base {B} --out {D}/r.json --prompts 0",
    "rare-set --base {B} --out {D}/r.json --rollouts 0",
    "rare-set --base {B} --out {D}/r.json --top 2",
    "rare-set --base {B} --out {D}/r.json --top nan",
    "rare-set --base {B} --out /proc/nope/r.json --prompts 1 --rollouts 2",
    "rare-set --base {B} --out {D}/r.json --split bogus",
    "validate --rare-set {D}/rare.json --run {D}/run --out {D}/v",
    "validate --rare-set {D}/deep.json --run {D}/run --out {D}/v",
    "validate --rare-set {D}/missing.json --run {D}/run --out {D}/v",
    "validate --rare-set {D}/rare.json --out {D}/v",
    "validate --rare-set {D}/rare.json --run {D}/norun --out {D}/v",
    "validate --rare-set {D}/rare.json --run {D}/run --out {D}/v --early-steps -1",
    "validate --rare-set {D}/rare.json --run {D}/run --out {D}/v --paper-results {D}/list.json",
    "maze --out {D}/m --preset bogus",
    "maze --out {D}/m --group-size abc",
    "maze --out {D}/afile",
    "maze --out {D}/m --config {D}/list.json",
    "maze --out {D}/m --gamma x,y",
    "maze --out {D}/m --bases=",
    "demo --out {D}/afile",
    "demo --out {D}/d --config {D}/list.json",
    "demo --out {D}/d --workers 0",
    "demo --out {D}/d --config {D}/deep.json",
]


@pytest.mark.parametrize("case", CASES)
def test_hostile_input_is_one_line_and_exit_2(hostile, case, capsys):
    argv = case.format(**hostile).split()
    try:
        rc = main(argv)
    except SystemExit as exit_:  # argparse's own usage errors
        rc = exit_.code
    assert rc == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0] and err[0].startswith("fgrpo-llm"), err


def test_config_file_errors_name_the_file_and_the_field(hostile, tmp_path, capsys):
    """A key given twice (in either spelling), text that is not UTF-8 and a base that is not a
    path are named; out may come from the config file, as --help says."""
    d = hostile["D"]
    cases = {
        "dup.yaml": "duplicate key 'steps' (line 3)",
        "dup2.yaml": "sets group_size twice (as 'group-size' and 'group_size')",
        "latin1.yaml": "latin1.yaml: 'utf-8' codec can't decode",
        "intbase.yaml": "base must be a directory path, got base=5",
    }
    for name, message in cases.items():
        assert main(["train", "--out", str(tmp_path / "t"), "--config", f"{d}/{name}"]) == 2
        assert message in capsys.readouterr().err
    from fgrpo_llm.config import read_config_file

    merged = tmp_path / "merge.yaml"  # a merge (<<) overridden by the mapping's own key (YAML)
    merged.write_text("task_kwargs:\n  <<: {grid_size: 9, num_test: 8}\n  grid_size: 11\n")
    assert read_config_file(merged) == {"task_kwargs": {"grid_size": 11, "num_test": 8}}
    cfg = tmp_path / "with_out.yaml"
    cfg.write_text(f"out: {tmp_path / 'from_file'}\nbase: {d}/afile\n")
    assert main(["train", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "--out is required" not in err and "afile" in err
