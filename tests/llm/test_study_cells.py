"""The study's cells (``study_cells``): which runs are fit, published and blind; the runs the
study had before keep their names, paths and settings; the forecast gate before a blind run;
the revisit arm's prompt pool; and one blind cell trained end to end with tiny budgets."""

import json
import subprocess

import pytest

from fgrpo_llm.experiments.countdown.config import load_demo_config, revisit_pool, run_specs
from fgrpo_llm.experiments.countdown.study import StudyDesign, study_specs
from fgrpo_llm.experiments.countdown.study_cells import (
    CELLS,
    cell_specs,
    committed_forecast,
    parse_cells,
)


def test_the_cells_of_the_default_design():
    cfg = load_demo_config()
    design = StudyDesign(bases=(0, 1, 2), seeds=(0, 1))  # sweep bases: 0 and 1
    for b in design.bases:
        cells = cell_specs(cfg, design, b)
        names = {c: sorted((s.name, s.seed) for s in specs) for c, specs in cells.items()}
        assert names["fit"] == [("grpo_n8", 0)]
        assert set(names["published"]) >= {("fgrpo_n8", 0), ("grpo_n8", 1), ("fgrpo_n8", 1)}
        published_sweep = {n for n, _ in names["published"] if n in {"grpo_n2", "grpo_n16"}}
        assert published_sweep == ({"grpo_n2", "grpo_n16"} if b < 2 else set())
        blind = set(names["blind"])
        # the lr frontier on every seed; N = 32, gamma 0.25 and 3, the revisit arm on the first
        assert {(f"grpo_n8_lr{x}", s) for x in ("0.9", "0.75") for s in (0, 1)} <= blind
        assert {("grpo_n32", 0), ("fgrpo_n8_g0.25", 0), ("fgrpo_n8_g3", 0)} <= blind
        assert {("grpo_n8_pool1200", 0), ("fgrpo_n8_pool1200", 0)} <= blind
        assert ({("grpo_n2", 0), ("grpo_n4", 0), ("grpo_n16", 0)} <= blind) == (b == 2)
        paths = [s.path for specs in cells.values() for s in specs]
        assert len(paths) == len(set(paths))  # no run in two cells
    assert revisit_pool(cfg) == 150 * 32 // 4 == 1200


def test_the_training_order_completes_verdicts_first(tmp_path):
    """An interrupted study holds whole verdicts: the fit cell, then the lr frontier's units at
    the first seed (F-GRPO, the control, GRPO at every lr scale), the revisit arm, the frontier
    at the second seed, the other blind cells, and the published sweep and tuning runs last."""
    from fgrpo_llm.experiments.countdown.study import _tasks

    cfg = load_demo_config()
    design = StudyDesign(bases=(0, 1, 2), seeds=(0, 1), extended_bases=(1,), tune_base=0)
    _, runs = _tasks(tmp_path, cfg, design, extended=False, cells=CELLS)
    names = [t.name.split("/", 1)[1] for t in runs]
    frontier = {"grpo_n8", "fgrpo_n8", "grpo_n8_lrmatched", "grpo_n8_lr0.9", "grpo_n8_lr0.75"}

    def span(pred):
        idx = [i for i, n in enumerate(names) if pred(n)]
        return min(idx), max(idx)

    fit = span(lambda n: n == "seed0/grpo_n8")
    first = span(lambda n: n.startswith("seed0/") and n[6:] in frontier and n != "seed0/grpo_n8")
    revisit = span(lambda n: "_pool" in n)
    second = span(lambda n: n.startswith("seed1/"))
    rest = span(lambda n: n.startswith("seed0/") and n[6:] not in frontier and "_pool" not in n)
    assert fit[1] < first[0] and first[1] < revisit[0] < revisit[1] < second[0]
    assert second[1] < rest[0]
    blind = {f"base{b}/{s.path}" for b in design.bases for s in cell_specs(cfg, design, b)["blind"]}
    tail = [t.name for t in runs[rest[0] :]]  # the sweep, the other gammas and the tuning runs
    in_blind = [name in blind for name in tail]
    assert in_blind == sorted(in_blind, reverse=True)  # the blind ones before the published ones
    assert any(in_blind) and not all(in_blind)


def test_the_runs_the_study_had_keep_their_names_paths_and_settings(tmp_path):
    """Every run of the plan before the cells existed (the core for every seed, the sweep on the
    sweep bases) is in a cell under the same path, with the same TrainConfig; a run saved before
    prompt_pool existed is still accepted as the plan's."""
    from fgrpo_llm.experiments.countdown.stages import run_done, train_config_for

    cfg = load_demo_config()
    design = StudyDesign(bases=(0, 1), seeds=(0, 1))
    old = {
        (s.path, s)
        for seed in design.seeds
        for s in run_specs(cfg, seed=seed, prefix=f"seed{seed}/")
        if s.N == 8 or seed == 0
    }
    now = {s.path: s for s in study_specs(cfg, design, 0)}
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text("{}")
    for path, spec in old:
        assert path in now and now[path] == spec
        saved = train_config_for(tmp_path, cfg, spec).to_dict()
        assert saved.pop("prompt_pool") is None and saved["lr_multiplier"] == 1.0
        run = tmp_path / spec.path
        (run / "model").mkdir(parents=True)
        (run / "model" / "config.json").write_text("{}")
        (run / "groups.jsonl").write_text("")
        (run / "config.json").write_text(json.dumps(saved))  # as an older trainer wrote it
        run_done(tmp_path, spec, cfg)  # accepted: no ValueError
    lr = next(s for s in study_specs(cfg, design, 0) if s.name == "grpo_n8_lr0.75")
    pool = next(s for s in study_specs(cfg, design, 0) if s.name == "fgrpo_n8_pool1200")
    assert train_config_for(tmp_path, cfg, lr).effective_lr == pytest.approx(0.75e-4)
    tc = train_config_for(tmp_path, cfg, pool)
    assert tc.prompt_pool == 1200 and tc.gamma == 1.0 and tc.effective_lr == pytest.approx(1e-4)


def test_cells_parse_and_refuse_unknown_names():
    assert parse_cells("all") == CELLS
    assert parse_cells("blind,fit") == ("fit", "blind")
    for bad in ("", "fit,bogus"):
        with pytest.raises(ValueError, match="--cells"):
            parse_cells(bad)


def _git(repo, *args):
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def _committed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    forecast = repo / "forecast.json"
    forecast.write_text('{"cells": []}')
    _git(repo, "add", "forecast.json")
    _git(repo, "commit", "-qm", "forecast")
    return forecast


def test_a_forecast_counts_only_when_committed_as_it_is(tmp_path):
    forecast = _committed(tmp_path)
    record = committed_forecast(forecast)
    assert len(record["commit"]) == 40 and len(record["sha256"]) == 64
    forecast.write_text('{"cells": [1]}')  # changed after its commit
    with pytest.raises(ValueError, match="differs from its last commit"):
        committed_forecast(forecast)
    loose = tmp_path / "repo" / "loose.json"
    loose.write_text("{}")
    with pytest.raises(ValueError, match="not committed"):
        committed_forecast(loose)
    with pytest.raises(ValueError, match="not found"):
        committed_forecast(tmp_path / "none.json")


def test_blind_runs_are_refused_without_a_forecast_before_anything_is_written(tmp_path, capsys):
    from fgrpo_llm.cli import main

    out = tmp_path / "study"
    code = main(["study", "--fast", "--bases", "0", "--seeds", "0", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "blind cells" in err and "--forecast" in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.slow
def test_one_blind_cell_trains_after_the_fit_cell_with_tiny_budgets(tmp_path, capsys):
    """Fast study, one base and seed: the fit cell, then the blind cells with the forecast given
    (here only the revisit arm: no other lr scale, gamma or group size); the revisit runs draw
    their prompts from the pool of the first P training problems, each several times; units.csv
    holds one row per run and says its cell. (About a minute on one core: slow.)"""
    from fgrpo_llm.cli import main

    out = tmp_path / "study"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"lr_frontier": [], "blind_gammas": [], "sweep_group_sizes": []}))
    argv = ["study", "--fast", "--config", str(plan), "--bases", "0", "--seeds", "0"]
    argv += ["--out", str(out), "--workers", "1"]
    assert main([*argv, "--cells", "fit"]) == 0
    assert not (out / "base0" / "seed0" / "grpo_n4_pool8").exists()
    forecast = _committed(tmp_path)
    assert main([*argv, "--cells", "blind", "--forecast", str(forecast)]) == 0
    cfg = load_demo_config(plan, fast=True)
    pool = revisit_pool(cfg)
    assert pool == cfg.rare_prompts == 8  # 3 steps x 4 prompts / 4 visits = 3: the rare set's 8
    from fgrpo_llm.experiments.countdown.stages import task_for

    first = {p.id for p in task_for(out / "base0" / "base").problems("train")[:pool]}
    for name in ("grpo_n4_pool8", "fgrpo_n4_pool8"):
        run = out / "base0" / "seed0" / name
        assert json.loads((run / "config.json").read_text())["prompt_pool"] == pool
        ids = [json.loads(line)["prompt_id"] for line in (run / "groups.jsonl").open()]
        assert set(ids) <= first and len(ids) == 12 > len(set(ids))  # 12 visits, 8 prompts
    rows = (out / "units.csv").read_text().splitlines()
    cells = {r.split(",")[3]: r.split(",")[4] for r in rows[1:]}
    assert cells == {"grpo_n4": "fit", "grpo_n4_pool8": "blind", "fgrpo_n4_pool8": "blind"}
    record = json.loads((out / "forecast_record.json").read_text())
    assert record[0]["runs"] == ["base0/seed0/grpo_n4_pool8", "base0/seed0/fgrpo_n4_pool8"]
