"""``fgrpo-llm train``: a smoke run, resume, config files and clean errors (fgrpo_llm.cli.train)."""

from __future__ import annotations

import json

import pytest

from fgrpo_llm.cli import main

SMALL = [
    "--task",
    "countdown",
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


def _steps(out):
    return [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_train_smoke_then_resume(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(
        [
            "train",
            "--base",
            str(tiny_checkpoint),
            "--algo",
            "cispo",
            "--gamma",
            "0.5",
            "--steps",
            "2",
            "--out",
            str(out),
            *SMALL,
        ]
    )
    assert rc == 0
    assert "trained cispo" in capsys.readouterr().out
    assert _steps(out) == [1, 2]
    saved = json.loads((out / "config.json").read_text())
    assert (
        saved["algo"] == "cispo"
        and saved["gamma"] == 0.5
        and saved["task_kwargs"]["num_test"] == 20
    )
    assert (out / "model" / "config.json").is_file() and (out / "groups.jsonl").is_file()
    assert main(["train", "--out", str(out), "--resume", "--steps", "3", "--no-progress"]) == 0
    assert _steps(out) == [1, 2, 3]


def _eval(model, out=None):
    argv = ["eval", "--model", str(model), "--samples", "2", "--k", "1", "--max-problems", "2"]
    return main([*argv, "--max-new-tokens", "3", *(["--out", str(out)] if out else [])])


def test_model_records_its_step_and_a_longer_run_sets_old_evaluations_aside(
    tiny_checkpoint, tmp_path, capsys
):
    """model/ says which step it holds, eval.json says which step it evaluated, and a run
    resumed to more steps moves the evaluations of the old policy (model/eval, the run's eval/)
    out of the way instead of leaving them beside the new one."""
    out = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--steps", "2", "--out", str(out), *SMALL]
    assert main(argv) == 0
    assert json.loads((out / "model" / "step.json").read_text()) == {"step": 2}
    assert _eval(out / "model") == 0 and _eval(out / "model", out / "eval") == 0
    assert _eval(out / "checkpoints" / "step_000001", tmp_path / "ck") == 0
    assert _eval(tiny_checkpoint, tmp_path / "base") == 0
    for where, step in [(out / "model" / "eval", 2), (out / "eval", 2), (tmp_path / "ck", 1)]:
        assert json.loads((where / "eval.json").read_text())["step"] == step
    assert json.loads((tmp_path / "base" / "eval.json").read_text())["step"] is None
    capsys.readouterr()

    assert main(["train", "--out", str(out), "--resume", "--steps", "3", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "holds the policy of step 2 until this run finishes step 3" in err
    assert json.loads((out / "model" / "step.json").read_text()) == {"step": 3}
    assert not (out / "model" / "eval").exists() and not (out / "eval").exists()
    for moved in (out / "model" / "eval_step_2", out / "eval_step_2"):
        assert json.loads((moved / "eval.json").read_text())["step"] == 2
        assert f"moved to {moved}" in err
    assert (tmp_path / "ck" / "eval.json").is_file()  # another checkpoint's: left alone

    # resumed at the step it reached: the same policy, so its evaluation stays
    assert _eval(out / "model") == 0
    assert main(["train", "--out", str(out), "--resume", "--steps", "3", "--no-progress"]) == 0
    assert json.loads((out / "model" / "eval" / "eval.json").read_text())["step"] == 3

    (out / "model" / "step.json").write_text('{"step": -1}')
    assert _eval(out / "model", tmp_path / "bad") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "step.json" in err[-1] and "step=-1" in err[-1] and "Traceback" not in "".join(err)


def test_config_file_sets_fields_and_flags_override_it(tiny_checkpoint, tmp_path):
    cfg = tmp_path / "c.yaml"
    # `lr: 3e-4` is the string "3e-4" to PyYAML (YAML 1.1 wants a dot); it must still be read as a
    # number
    cfg.write_text(
        f"base: {tiny_checkpoint}\nalgo: dapo\ngamma: 1.0\nsteps: 1\nmax_sampling_rounds: 0\nlr: "
        "3e-4\n"
    )
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--config",
                str(cfg),
                "--gamma",
                "0.25",
                "--out",
                str(out),
                *SMALL,
                "--set",
                "adam_eps=1e-7",
            ]
        )
        == 0
    )
    saved = json.loads((out / "config.json").read_text())
    assert saved["algo"] == "dapo" and saved["gamma"] == 0.25 and saved["clip_eps_high"] == 0.28
    assert saved["lr"] == 3e-4 and saved["adam_eps"] == 1e-7
    assert saved["dynamic_sampling"] is True and saved["max_sampling_rounds"] == 0


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--base", "/nonexistent/base"], "/nonexistent/base"),
        (["--algo", "ppo"], "algo"),
        (["--gamma", "-1"], "gamma"),
        (["--gamma", "nan"], "gamma"),
        (["--group-size", "0"], "group_size"),
        (["--set", "no_such_field=1"], "no_such_field"),
        (
            ["--set", "adam_beta1=x"],
            "adam_beta1",
        ),  # a wrong type: a ValueError, not a TypeError traceback
        (["--resume"], "resume"),
        (["--config", "/nonexistent.yaml"], "nonexistent.yaml"),
        (["--task-arg", "oops"], "KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tiny_checkpoint, tmp_path, capsys, extra, needle):
    args = ["train", "--out", str(tmp_path / "bad"), "--steps", "1", "--no-progress"]
    if "--base" not in extra and "--resume" not in extra:
        args += ["--base", str(tiny_checkpoint)]
    assert main(args + extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not (tmp_path / "bad" / "metrics.jsonl").exists()


def test_missing_base_flag_is_an_error(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "x")]) == 2
    assert "--base" in capsys.readouterr().err


def test_maxrl_weighting_trains_and_is_labelled(tiny_checkpoint, tmp_path, capsys):
    """--weighting maxrl: the run trains with MaxRL's advantages, records the weighting in
    run.json (label "MaxRL N=2") and logs w = sqrt((1 - mu_hat) / mu_hat); with gamma > 0 it is
    one clear error."""
    import json
    import math

    from fgrpo_llm.evaluation.runs import load_run

    out = tmp_path / "m"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(out), "--steps", "2",
            "--prompts-per-step", "4", "--group-size", "2", "--weighting", "maxrl",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    run = load_run(out)
    assert run.label == "MaxRL N=2"
    assert json.loads((out / "run.json").read_text())["weighting"] == "maxrl"
    trained = [g for g in run.groups if g.get("trained")]
    assert trained and all("focal_weight" not in g for g in run.groups)  # not a focal weight
    for g in trained:
        m = g["num_correct"] / g["N"]
        want = math.sqrt((1 - m) / m) if m > 0 else 0.0
        assert g["maxrl_weight"] == pytest.approx(want, rel=1e-6)
    capsys.readouterr()
    bad = [*argv[:4], str(tmp_path / "x"), *argv[5:], "--gamma", "1"]
    assert main(bad) == 2
    assert "weighting='maxrl'" in capsys.readouterr().err
