"""The study with the base as a random factor: intervals over bases and variance components
against hand computations, the task runner's per-task environment, the design's checks, and the
fast study end to end (2 bases, one per kernel family, x 2 RL seeds)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from fgrpo_llm.evaluation.stats import (
    base_level_interval,
    variance_components,
    welch_difference,
)
from fgrpo_llm.experiments.countdown.config import load_demo_config
from fgrpo_llm.experiments.countdown.study import StudyDesign, study_specs
from fgrpo_llm.experiments.runner import Task, TaskFailed, run_tasks


# ----------------------------------------------------------------------------- statistics
def test_the_base_level_interval_is_the_t_interval_of_the_base_means():
    """Base 0 has seeds 1 and 3, base 1 one seed (4), base 2 seeds 6 and 8: base means 2, 4, 7;
    worked by hand: mean 13/3, sd sqrt(19/3), t_{0.975, 2} = 4.302652729749462."""
    values = {(0, 0): 1.0, (0, 1): 3.0, (1, 0): 4.0, (2, 0): 6.0, (2, 1): 8.0}
    iv = base_level_interval(values)
    mean, sd = 13 / 3, math.sqrt(19 / 3)
    half = 4.302652729749462 * sd / math.sqrt(3)
    assert iv.n == 3
    assert iv.mean == pytest.approx(mean, rel=1e-12)
    assert iv.sd == pytest.approx(sd, rel=1e-12)
    assert (iv.lo, iv.hi) == pytest.approx((mean - half, mean + half), rel=1e-9)
    # a base with more seeds counts once: the seeds' mean, not each seed
    assert base_level_interval({(0, 0): 0.0, (0, 1): 0.0, (0, 2): 0.0, (1, 0): 4.0}).mean == 2.0
    with pytest.raises(ValueError, match="values"):
        base_level_interval({})


def test_variance_components_by_hand_and_on_a_simulated_design():
    """Bases {1, 3}, {4, 6}, {7, 11}: within SS = 2 + 2 + 8 = 12 over 3 degrees of freedom, so
    sigma_seed^2 = 4; base means 2, 5, 9 have variance 37/3, less 4 / 2: sigma_base^2 = 31/3."""
    values = {(0, 0): 1, (0, 1): 3, (1, 0): 4, (1, 1): 6, (2, 0): 7, (2, 1): 11}
    vc = variance_components(values)
    assert vc.within_sd == pytest.approx(2.0, rel=1e-12)
    assert vc.between_sd == pytest.approx(math.sqrt(31 / 3), rel=1e-12)
    assert (vc.bases, vc.units) == (3, 6)
    assert vc.total_sd == pytest.approx(math.sqrt(4 + 31 / 3), rel=1e-12)
    # no spread between bases beyond the seeds': sigma_base is floored at 0
    assert variance_components({(0, 0): 0, (0, 1): 2, (1, 0): 0, (1, 1): 2}).between_sd == 0.0
    # one seed per base: the two parts are confounded; one run's spread is the values' sd
    one = variance_components({(0, 0): 1, (1, 0): 2, (2, 0): 4})
    assert math.isnan(one.within_sd) and math.isnan(one.between_sd)
    assert one.total_sd == pytest.approx(np.std([1, 2, 4], ddof=1))
    # K = 400 bases with 1 to 3 seeds, sigma_base = 1, sigma_seed = 0.5: recovered within ~10%
    rng = np.random.default_rng(0)
    sim = {}
    for b in range(400):
        u = rng.normal(0.0, 1.0)
        for s in range(1 + b % 3):
            sim[(b, s)] = 3.0 + u + rng.normal(0.0, 0.5)
    vc = variance_components(sim)
    assert vc.between_sd == pytest.approx(1.0, rel=0.1)
    assert vc.within_sd == pytest.approx(0.5, rel=0.1)


def test_welch_difference_matches_scipy():
    a, b = [1.0, 2.0, 3.5], [2.0, 5.0, 6.0, 9.0]
    iv = welch_difference(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval()
    assert (iv.lo, iv.hi) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert iv.mean == pytest.approx(np.mean(a) - np.mean(b))
    assert math.isnan(welch_difference([1.0], [2.0, 3.0]).lo)  # one base on a side: undefined


# ----------------------------------------------------------------------------- the runner
def _write_env(path, name):
    with open(path, "w") as f:
        f.write(str(os.environ.get(name)))


def _fail():
    raise RuntimeError("this task fails")


def test_each_task_runs_under_its_own_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_RUNNER_VAR", "parent")
    tasks = [
        Task("set", _write_env, (tmp_path / "set", "FGRPO_RUNNER_VAR"), {"FGRPO_RUNNER_VAR": "x"}),
        Task(
            "unset",
            _write_env,
            (tmp_path / "unset", "FGRPO_RUNNER_VAR"),
            {"FGRPO_RUNNER_VAR": None},
        ),
        Task("inherit", _write_env, (tmp_path / "inherit", "FGRPO_RUNNER_VAR")),
    ]
    done = [task.name for task, _ in run_tasks(tasks, workers=2)]
    assert sorted(done) == ["inherit", "set", "unset"]
    assert (tmp_path / "set").read_text() == "x"
    assert (tmp_path / "unset").read_text() == "None"
    assert (tmp_path / "inherit").read_text() == "parent"
    assert os.environ["FGRPO_RUNNER_VAR"] == "parent"  # this process's environment is restored


def test_a_failed_task_cancels_the_queue_and_is_named(tmp_path, capfd):
    env = {"FGRPO_RUNNER_VAR": "child"}  # forces a process per task
    tasks = [
        Task("ok", _write_env, (tmp_path / "ok", "FGRPO_RUNNER_VAR"), env),
        Task("bad", _fail, (), env),
        Task("never", _write_env, (tmp_path / "never", "FGRPO_RUNNER_VAR"), env),
    ]
    with pytest.raises(TaskFailed, match="task bad failed"):
        list(run_tasks(tasks, workers=1))
    assert (tmp_path / "ok").exists() and not (tmp_path / "never").exists()
    assert "this task fails" in capfd.readouterr().err  # the child's traceback
    with pytest.raises(ValueError, match="workers"):
        list(run_tasks([], workers=0))


# ----------------------------------------------------------------------------- the design
def test_the_design_checks_its_fields():
    assert StudyDesign().family(0) == "default" and StudyDesign().family(1) == "other"
    assert [StudyDesign().family(b) for b in range(6)].count("other") == 3
    for kwargs, word in (
        ({"bases": (0, 0)}, "bases"),
        ({"seeds": ()}, "seed"),
        ({"bases": (0, 1), "sweep_bases": (2,)}, "sweep_bases"),
        ({"bases": (0, 1), "families": ("default",)}, "families"),
        ({"bases": (0,), "sweep_bases": (), "families": ("avx",)}, "avx"),
        ({"seeds": (-1,)}, "seeds"),
        ({"bases": (0, 1), "extended_bases": (1,), "tune_base": 2}, "tune_base"),
        ({"bases": (0, 1), "extended_bases": (0,), "tune_base": True}, "tune_base"),
        ({"bases": (0, 1), "extended_bases": (1,), "tune_base": 1}, "not be among extended"),
        ({"bases": (0, 1), "tune_base": 0}, "no extended_bases"),
    ):
        with pytest.raises(ValueError, match=word):
            StudyDesign(**kwargs)


def test_every_base_trains_the_core_and_sweep_bases_the_sweep():
    cfg = load_demo_config()
    design = StudyDesign(bases=(0, 1), seeds=(3, 4), sweep_bases=(1,))
    core = study_specs(cfg, design, 0, cells=("fit", "published"))
    assert sorted((s.name, s.seed) for s in core) == sorted(
        (name, seed) for name in ("grpo_n8", "fgrpo_n8", "grpo_n8_lrmatched") for seed in (3, 4)
    )
    sweep = [s for s in study_specs(cfg, design, 1, cells=("fit", "published")) if s not in core]
    # N = 32 no base had trained before the forecast: a blind cell on every base
    assert sorted(s.N for s in sweep) == [2, 4, 16] and {s.seed for s in sweep} == {3}


def test_bad_study_arguments_are_one_line_errors(tmp_path, capsys):
    """One line on stderr naming the bad value, exit 2, no traceback: through ``python -m`` for
    the first (the entry point), in this process for the others (the same ``main``)."""
    from fgrpo_llm.cli import main

    cases = [
        (["--families", "default,bogus"], "bogus"),
        (["--bases", "0,1", "--sweep-bases", "7"], "sweep_bases"),
        (["--seeds", "a"], "--seeds"),
    ]
    for i, (argv, word) in enumerate(cases):
        full = ["study", "--fast", "--out", str(tmp_path / "x"), *argv]
        if i == 0:
            proc = subprocess.run(
                [sys.executable, "-m", "fgrpo_llm.cli", *full], capture_output=True, text=True
            )
            code, err = proc.returncode, proc.stderr
        else:
            try:
                code = main(full)
            except SystemExit as exit_:
                code = exit_.code
            err = capsys.readouterr().err
        assert code == 2, err
        assert word in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
        assert not (tmp_path / "x").exists()  # nothing written


def test_the_spread_file_is_checked_before_any_training(tmp_path, capsys, monkeypatch):
    """``--spread-file`` is checked as the other output files are, before the study starts (it
    used to fail at the end of a long study): a directory or a folder that cannot be made is one
    line, exit 2; a new folder is made."""
    import fgrpo_llm.cli.study as command
    from fgrpo_llm.cli import main

    ran = []
    monkeypatch.setattr(command, "run_study", lambda *a, **k: ran.append(1) or {"claims": []})
    (tmp_path / "afile").write_text("x")
    argv = ["study", "--fast", "--bases", "0", "--seeds", "0", "--out", str(tmp_path / "x")]
    for spread, word in [
        (tmp_path, "is a directory"),
        (tmp_path / "afile" / "s.json", "exists and is not a directory"),
    ]:
        assert main([*argv, "--spread-file", str(spread)]) == 2
        err = capsys.readouterr().err
        assert word in err and "--spread-file" in err and len(err.strip().splitlines()) == 1
    assert not ran and not (tmp_path / "x").exists()  # nothing trained, nothing written
    assert main([*argv, "--spread-file", str(tmp_path / "new" / "s.json")]) == 0
    assert ran == [1] and (tmp_path / "new").is_dir()
    monkeypatch.undo()  # run_study from Python checks it first too
    from fgrpo_llm.experiments.countdown.study import StudyDesign, run_study

    with pytest.raises(ValueError, match="spread_file .*is a directory"):
        run_study(tmp_path / "y", load_demo_config(fast=True), StudyDesign(), spread_file=tmp_path)
    assert not (tmp_path / "y").exists()


def _study(out, extended: bool) -> list[str]:
    """The fast study's argv: both kernel families (one base each) x 2 RL seeds, and, when
    ``extended``, the extended plan on base 1 with its coefficients tuned on base 0."""
    argv = ["study", "--out", str(out), "--fast", "--bases", "0,1", "--seeds", "0,1"]
    argv += ["--cells", "fit,published"]
    argv += ["--sweep-bases", "", "--extended-bases", "1" if extended else "", "--workers", "2"]
    return argv + (["--tune-base", "0"] if extended else [])


def _check_two_bases(out, result) -> None:
    """What both fast studies show: every run under its base's kernels, the variance components
    of every metric, the family comparison, the report's sections, every claim."""
    from fgrpo_llm.environment import kernel_family_env

    assert result["design"]["families"] == {"0": "default", "1": "other"}
    caps = {b: info["environment"]["torch_cpu_capability"] for b, info in result["bases"].items()}
    other = kernel_family_env("other")["ATEN_CPU_CAPABILITY"].upper()
    assert caps["1"] == other and caps["0"] != other
    for unit in result["per_unit"]:  # every run under its base's kernels
        assert unit["environment"]["torch_cpu_capability"] == caps[str(unit["base"])]
    comps = {(c["what"], c["metric"]): c for c in result["variance_components"]}
    grpo = comps[("GRPO N=4", "id_pass1")]
    assert (grpo["bases"], grpo["units"]) == (2, 4)
    assert math.isfinite(grpo["between_sd"]) and math.isfinite(grpo["within_sd"])
    assert ("F-GRPO - GRPO", "delta_nll_rare") in comps or ("F-GRPO - GRPO", "id_pass1") in comps
    assert result["kernel_family"] and all(r["bases"] == [1, 1] for r in result["kernel_family"])
    report = (out / "report.md").read_text()
    for section in ("## Verdicts", "## Bases", "## Variance components", "## Kernel family"):
        assert section in report
    assert other in report
    spread = json.loads((out / "seed_spread.json").read_text())
    assert spread["num_bases"] == 2 and "between_base_sd" in spread
    assert [c["claim"] for c in result["claims"]] == list(range(1, 13))
    # every claim judged again from OUT/units.csv alone prints what the report prints
    from fgrpo_llm.experiments.countdown.study_units import judge_units

    again = {c["claim"]: c for c in judge_units(out / "units.csv")}
    assert again[2]["evidence"] in report
    for c in result["claims"]:
        if c["claim"] == 10:  # needs the simulator's prediction besides
            continue
        assert (again[c["claim"]]["verdict"], again[c["claim"]]["evidence"]) == (
            c["verdict"],
            c["evidence"],
        )
    assert "## The lr frontier (claim 5)" in report
    assert "## The mechanism per rare trajectory (claims 11, 12)" in report
    # Countdown lists every answer: each base and each run evaluated exactly, in its worker;
    # the mechanism's classes (where the rare set is not empty) add up to the run's Delta NLL
    for b in (0, 1):
        assert (out / f"base{b}" / "base_exact" / "exact_eval.json").is_file()
    runs = [m.parent for m in out.glob("base*/seed*/**/model")]
    assert len(runs) >= len(result["per_unit"])
    assert all((run / "exact" / "exact_eval.json").is_file() for run in runs)
    for row in result["per_unit"]:  # the claims' pass@k are the exact ones
        assert row["id_pass1"] == row["exact_id_pass1"] is not None
        assert row["ood_pass1"] == row["exact_ood_pass1"] is not None
    for row in (r for r in result["per_unit"] if r.get("mech_U_n") is not None):
        total = sum(row[f"mech_{c}_sum"] for c in "UBSI")
        assert total / row["exact_rare_trajectories"] == pytest.approx(
            row["exact_delta_nll_rare_per_token"]
        )


def test_fast_study_two_bases_two_seeds(tmp_path, capsys):
    """Both kernel families (one base each) x 2 RL seeds: every run under its base's kernels,
    the variance components of every metric, the family comparison, every claim; a rerun
    trains nothing. (The extended plan: the slow test below.)"""
    from fgrpo_llm.cli import main

    out = tmp_path / "study"
    argv = _study(out, extended=False)
    assert main(argv) == 0
    result = json.loads((out / "study.json").read_text())
    _check_two_bases(out, result)
    assert not (out / "tuning.json").exists()
    capsys.readouterr()
    assert main(argv) == 0  # resumes: nothing to prepare or train
    assert "(0 to prepare), 0 runs to train" in capsys.readouterr().err


@pytest.mark.slow
def test_fast_study_with_the_extended_plan_tuned_on_the_other_base(tmp_path, capsys):
    """The fast study with the extended plan on base 1, its coefficients tuned on base 0: the
    simulator's prediction beside claims 8-10, the tuned coefficients in the extended runs; a
    rerun trains nothing. (About two minutes on two cores: slow.)"""
    from fgrpo_llm.cli import main

    out = tmp_path / "study"
    argv = _study(out, extended=True)
    assert main(argv) == 0
    result = json.loads((out / "study.json").read_text())
    _check_two_bases(out, result)
    report = (out / "report.md").read_text()
    # the extended plan on base 1: MaxRL, the regularised baselines, other gammas, claims 8-10
    names = {u["name"] for u in result["per_unit"] if u["base"] == 1}
    assert {"maxrl_n4", "grpo_n4_entropy", "grpo_n4_kl", "fgrpo_n4_g0.5", "fgrpo_n4_g2"} <= names
    prediction = json.loads((out / "simulator_prediction.json").read_text())
    assert set(prediction["m_ret"]) == {"GRPO", "F-GRPO gamma=0.5", "F-GRPO gamma=1",
                                        "F-GRPO gamma=2", "MaxRL"}  # fmt: skip
    # the tuning runs on base 0 chose the coefficients the extended runs on base 1 trained with
    tuning = json.loads((out / "tuning.json").read_text())
    assert tuning == result["tuning"] and tuning["base"] == 0
    for field, tag in (("entropy_coef", "entropy"), ("kl_coef", "kl")):
        knob = tuning["knobs"][field]
        assert [r["value"] for r in knob["runs"]] == knob["grid"]
        best = max(r["score"] for r in knob["runs"])
        assert knob["chosen"] == min(r["value"] for r in knob["runs"] if r["score"] == best)
        saved = json.loads((out / "base1" / "seed0" / f"grpo_n4_{tag}" / "config.json").read_text())
        assert saved[field] == knob["chosen"]
        assert (out / "base0" / "seed0" / "tune" / f"grpo_n4_{tag}{knob['grid'][0]:g}").is_dir()
    assert "## Tuning of the regularised baselines" in report
    assert not {u["name"] for u in result["per_unit"] if u["base"] == 0} & names - {
        "grpo_n4", "fgrpo_n4", "grpo_n4_lrmatched"}  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0  # resumes: nothing to prepare or train
    err = capsys.readouterr().err
    assert "(0 to prepare), 0 runs to train" in err and "0 runs of the extended plan" in err


def _sleep_and_record(path):
    import time

    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)


def test_a_terminated_runner_stops_its_tasks(tmp_path):
    """SIGTERM to the process running the tasks stops the tasks' processes too: a killed study
    leaves no run training on (and holding its run's lock)."""
    import signal
    import time

    script = (
        "import sys; from fgrpo_llm.experiments.runner import Task, run_tasks\n"
        "from tests.llm.test_study_design import _sleep_and_record\n"
        f"t = Task('sleep', _sleep_and_record, ({str(tmp_path / 'pid')!r},), {{'X_RUNNER': '1'}})\n"
        "list(run_tasks([t], workers=1))\n"
    )
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=root)
    pid_file = tmp_path / "pid"
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    child = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the task's process outlived the runner")


def test_the_extended_plan_trains_maxrl_the_regularised_baselines_and_other_gammas(tmp_path):
    from fgrpo_llm.experiments.countdown.stages import train_config_for

    cfg = load_demo_config()
    design = StudyDesign(bases=(0, 1), seeds=(3, 4), sweep_bases=(), extended_bases=(1,))
    assert all(s.weighting == "focal" for s in study_specs(cfg, design, 0))
    extended = [s for s in study_specs(cfg, design, 1) if s not in study_specs(cfg, design, 0)]
    by_name = {s.name: s for s in extended}
    assert sorted(by_name) == sorted(
        ["maxrl_n8", "grpo_n8_entropy", "grpo_n8_kl", "fgrpo_n8_g0.5", "fgrpo_n8_g2"]
    )
    assert {s.seed for s in extended} == {3} and {s.N for s in extended} == {8}
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text("{}")
    tc = {name: train_config_for(tmp_path, cfg, spec) for name, spec in by_name.items()}
    assert tc["maxrl_n8"].weighting == "maxrl" and tc["maxrl_n8"].gamma == 0.0
    assert tc["grpo_n8_entropy"].entropy_coef == cfg.entropy_coef == 1e-3
    assert tc["grpo_n8_kl"].kl_coef == cfg.kl_coef == 1e-3
    assert tc["fgrpo_n8_g2"].gamma == 2.0 and tc["fgrpo_n8_g0.5"].gamma == 0.5
    for name in ("fgrpo_n8_g2", "grpo_n8_kl", "maxrl_n8"):
        assert tc[name].entropy_coef == 0.0 or name == "grpo_n8_entropy"
    with pytest.raises(ValueError, match="extended_bases"):
        StudyDesign(bases=(0,), extended_bases=(5,))


def test_the_plans_per_run_settings_cannot_be_overridden():
    from fgrpo_llm.experiments.countdown.config import DemoConfig

    for key in ("gamma", "entropy_coef", "weighting"):
        with pytest.raises(ValueError, match=key):
            DemoConfig(train_overrides={key: 0.0})
    with pytest.raises(ValueError, match="entropy_coef"):
        DemoConfig(entropy_coef=0.0)  # a baseline without its bonus would be GRPO again
