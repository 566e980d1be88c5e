"""The study's forecast (``experiments.countdown.forecast_study``): the prompt order a run will
have, computed without training, is the order a trained run logs (pool and epochs included);
a run's settings become the model's schedule; and, slow, ``fgrpo-llm forecast fit`` and
``score`` on a fast study of one base."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.config import TrainConfig  # noqa: E402
from fgrpo_llm.experiments.countdown.forecast_inputs import run_order  # noqa: E402
from fgrpo_llm.experiments.countdown.forecast_study import (  # noqa: E402
    planned_order,
    run_config,
    schedule_of,
)
from fgrpo_llm.model import build_tiny_model, save_model_and_tokenizer  # noqa: E402
from fgrpo_llm.trainer import train  # noqa: E402
from tests.llm.conftest import TINY  # noqa: E402
from tests.llm.test_forecast_inputs import SmallTrainCountdown  # noqa: E402


def test_the_planned_order_is_the_order_a_trained_run_logs(tmp_path, char_tokenizer):
    """2 steps x 3 prompts over a pool of 4 of 6 training prompts: the second step crosses into
    the pool's second epoch; the order computed from the config alone equals the run's log."""
    torch.set_num_threads(1)
    save_model_and_tokenizer(
        build_tiny_model(char_tokenizer, seed=0, **TINY), char_tokenizer, tmp_path / "base"
    )
    task = SmallTrainCountdown(6, seed=0, num_test=4, num_ood=4)
    cfg = TrainConfig(
        base=str(tmp_path / "base"),
        out=str(tmp_path / "run"),
        steps=2,
        prompts_per_step=3,
        group_size=2,
        max_new_tokens=8,
        seed=5,
        prompt_pool=4,
        warmup_steps=0,
        eval_every=0,
        progress=False,
    )
    train(cfg, task=task)
    logged = run_order(tmp_path / "run")
    planned = planned_order(task, run_config(tmp_path / "run"))
    assert planned == logged
    pool = {p.id for p in task.problems("train")[:4]}
    assert len(planned) == 2 and {p for s in planned for p in s} <= pool
    other_seed = planned_order(task, TrainConfig.from_dict({**cfg.to_dict(), "seed": 6}))
    assert other_seed != planned


def test_a_runs_settings_become_the_models_schedule():
    tc = TrainConfig(
        lr=2e-4,
        lr_multiplier=0.75,
        gamma=3.0,
        group_size=16,
        warmup_steps=7,
        weight_decay=0.02,
        adam_beta2=0.99,
        adv_std="population",
        adv_eps=1e-4,
    )
    run = schedule_of(tc, [["a", "b"]])
    assert run.lr == pytest.approx(1.5e-4) and run.group_size == 16
    assert run.weighting.kind == "focal" and run.weighting.gamma == 3.0
    assert run.optimizer.betas == (0.9, 0.99) and run.optimizer.weight_decay == 0.02
    assert run.optimizer.warmup_steps == 7 and run.adv_std == "population" and run.adv_eps == 1e-4
    assert schedule_of(TrainConfig(), [["a"]]).weighting.kind == "none"
    assert schedule_of(TrainConfig(weighting="maxrl"), [["a"]]).weighting.kind == "maxrl"
    with pytest.raises(ValueError, match="dynamic sampling"):
        planned_order(None, TrainConfig(algo="dapo"))


def test_forecast_fit_refuses_an_unwritable_out_before_any_work(tmp_path, capsys):
    from fgrpo_llm.cli import main

    (tmp_path / "study").mkdir()
    (tmp_path / "dir").mkdir()
    assert main(["forecast", "fit", str(tmp_path / "study"), "--out", str(tmp_path / "dir")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--out" in err
    study = str(tmp_path / "study")
    assert main(["forecast", "fit", study, "--out", str(tmp_path / "f.json")]) == 2
    assert "not a study directory" in capsys.readouterr().err


def _hand_made_rare_set(out_b, cfg_b, k: int = 6) -> None:
    """Replace the base's (empty) rare set by the least likely correct answer of each of the
    first k training prompts that have one, from its exact answers; drop the exact evaluations
    so that they are made again with it."""
    from transformers import AutoTokenizer

    from fgrpo_llm.experiments.countdown.forecast_inputs import base_answers
    from fgrpo_llm.experiments.countdown.stages import task_for

    task = task_for(out_b / "base")
    answers = base_answers(out_b, cfg_b, task=task)
    tok = AutoTokenizer.from_pretrained(out_b / "base")
    prompts = {p.id: p for p in task.problems("train")}
    data = json.loads((out_b / "rare_set.json").read_text())
    trajs = []
    for pa in answers["train"][:200]:
        ok = np.flatnonzero(pa.correct & np.isfinite(pa.logp))
        if ok.size == 0 or pa.prompt_id not in data["prompts"]:
            continue
        i = int(ok[np.argmin(pa.logp[ok])])
        x = tok(prompts[pa.prompt_id].prompt, add_special_tokens=False)["input_ids"]
        y = tok(pa.answers[i], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        trajs.append(
            {
                "prompt_id": pa.prompt_id,
                "token_ids": x + y,
                "prompt_length": len(x),
                "text": pa.answers[i],
                "form": None,
                "base_nll": float(-pa.logp[i] / len(y)),
            }
        )
        if len(trajs) == k:
            break
    data["trajectories"] = trajs
    (out_b / "rare_set.json").write_text(json.dumps(data))
    shutil.rmtree(out_b / "base_exact", ignore_errors=True)
    for run in out_b.glob("seed*/*/exact"):
        shutil.rmtree(run)
    assert trajs and all(math.isfinite(t["base_nll"]) for t in trajs)


@pytest.mark.slow
def test_forecast_fit_and_score_on_a_fast_study(tmp_path, capsys):
    """A fast study of one base (its fit cell trained; the base's exact answers on all 5,985
    training prompts take minutes of CPU: slow); ``forecast fit`` writes a valid
    forecast.json whose fit-cell prediction is the fitted model's, every other cell predicted on
    the order it will have; ``forecast score`` reports the blind cells as not trained."""
    from fgrpo_llm.cli import main
    from fgrpo_theory.forecast import read_forecast

    out, plan = tmp_path / "study", tmp_path / "plan.json"
    plan.write_text(json.dumps({"lr_frontier": [0.75], "blind_gammas": [3.0]}))
    argv = ["study", "--fast", "--config", str(plan), "--bases", "0", "--seeds", "0"]
    assert main([*argv, "--out", str(out), "--workers", "1", "--cells", "fit"]) == 0
    capsys.readouterr()
    from fgrpo_llm.experiments.countdown.forecast_study import study_plan
    from fgrpo_llm.experiments.countdown.study import base_config

    cfg, _ = study_plan(out)
    _hand_made_rare_set(out / "base0", base_config(cfg, 0))  # the fast base finds none
    path = tmp_path / "forecast.json"
    assert main(["forecast", "fit", str(out), "--out", str(path), "--json", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    doc = read_forecast(path)
    fit = next(c for c in doc["cells"] if c["stage"] == "fit")
    assert fit["run"] == "seed0/grpo_n4" and summary["bases"] == [0]
    # the fit's own prediction of its unit (same seed, same draws) is the one written
    want = doc["fit_predictions"]["base0"]
    assert fit["predicted"]["delta_nll_rare"] == pytest.approx(want["delta_nll_rare"], rel=1e-12)
    assert fit["per_rare"] and sum(fit["per_rare"]) / len(fit["per_rare"]) == pytest.approx(
        want["delta_nll_rare"], rel=1e-9
    )
    stages = {c["cell"]: c["stage"] for c in doc["cells"]}
    assert stages["grpo_n4_lr0.75"] == "blind" and stages["fgrpo_n4_g3"] == "blind"
    assert {c["cell"] for c in doc["nulls"]["untied"]["cells"]} == set(stages)
    assert len(fit["per_rare"]) == len(doc["fit_cells"][0]["measured"]["per_rare"])
    score = tmp_path / "score"
    assert (
        main(
            [
                "forecast",
                "score",
                str(out),
                "--forecast",
                str(path),
                "--out",
                str(score),
                "--json",
                "--no-progress",
                "--bootstrap",
                "50",
            ]
        )
        == 0
    )
    s = json.loads(capsys.readouterr().out)
    assert s["blind"]["verdict"].startswith("not resolved: 0 of ")
    assert (score / "score.json").is_file() and (score / "forecast_score.png").is_file()
    assert "| (i) sign, pass at >= 0.8 |" in (score / "score.md").read_text()
