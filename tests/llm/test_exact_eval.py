"""The exact evaluation file (``fgrpo_llm.evaluation.exact_eval``, ``fgrpo-llm exact``, the
study's ``exact_stage``): its keys, the rare trajectories' log-probabilities against the rare
set's own NLL, and Delta NLL_rare against the sampled-set evaluator (``rare.delta_nll_rare``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.evaluation.exact_eval import (  # noqa: E402
    EXACT_EVAL,
    evaluate_exact,
    exact_delta_nll_rare,
    load_exact_eval,
    rare_delta_nll,
    write_exact_eval,
)
from fgrpo_llm.evaluation.rare import build_rare_set, delta_nll_rare, save_rare_set  # noqa: E402
from fgrpo_llm.experiments.countdown.config import DemoConfig  # noqa: E402
from fgrpo_llm.experiments.countdown.exact_stage import (  # noqa: E402
    base_exact_path,
    exact_delta_nll_rare_of,
    exact_eval_stage,
    run_exact_path,
)
from fgrpo_llm.model import save_model_and_tokenizer  # noqa: E402
from fgrpo_llm.rollout import SamplingParams  # noqa: E402
from tests.llm.test_exact_mu_tau import train_toward_mixture  # noqa: E402

T = 8


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def problems(countdown_task):
    return [p for p in countdown_task.problems("test") if len(countdown_task.solutions(p)) >= 4][:2]


@pytest.fixture(scope="module")
def trained(char_tokenizer, countdown_task, problems):
    return train_toward_mixture(char_tokenizer, countdown_task, problems)


@pytest.fixture(scope="module")
def rare(trained, char_tokenizer, countdown_task, problems):
    return build_rare_set(
        trained,
        char_tokenizer,
        countdown_task,
        problems,
        num_rollouts=100,
        top_fraction=0.2,
        sampling=SamplingParams(max_new_tokens=T),
        generator=torch.Generator().manual_seed(0),
    )


def perturbed(model, seed: int = 1):
    """A copy of ``model`` with every weight moved by a little noise (a 'trained run')."""
    import copy

    other = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return other


def test_file_keys_and_reload(trained, char_tokenizer, countdown_task, rare, tmp_path):
    results = evaluate_exact(
        trained,
        char_tokenizer,
        countdown_task,
        sampling=SamplingParams(T),
        rare_set=rare,
        ks=(1, 8, 64),
        max_problems=2,
    )
    results["environment"] = {"device": "cpu"}
    path = write_exact_eval(results, tmp_path)
    data = json.loads(path.read_text())
    assert data["format"] == 1 and set(data["splits"]) == {"test", "ood"}
    for entry in data["splits"].values():
        assert entry["problems"] == 2
        assert set(entry["pass@k"]) == {"1", "8", "64"}
        assert 0.0 <= entry["malformed_mass"] <= 1.0
        p = [entry["pass@k"][k] for k in ("1", "8", "64")]
        assert p == sorted(p)
    r = data["rare"]
    assert r["trajectories"] == len(rare) > 0
    assert r["prompt_ids"] == rare.prompt_ids and r["answers"] == rare.texts
    assert len(r["logp"]) == len(rare) and all(v < 0 for v in r["logp"])
    assert "environment" in data
    back = load_exact_eval(tmp_path)
    assert isinstance(back["rare"]["logp"], np.ndarray)


def test_rare_logp_is_the_rare_sets_own_nll(trained, char_tokenizer, countdown_task, rare):
    """Under the base at temperature 1, log pi(y | x) = -|y| * nll_base(y | x) (App. M.2)."""
    results = evaluate_exact(
        trained,
        char_tokenizer,
        countdown_task,
        sampling=SamplingParams(T),
        rare_set=rare,
        splits=["test"],
        max_problems=1,
    )
    lengths = np.array(results["rare"]["lengths"])
    assert np.allclose(results["rare"]["logp"], -lengths * rare.base_nll, atol=1e-4)


def test_delta_nll_matches_the_sampled_set_evaluator(trained, char_tokenizer, countdown_task, rare):
    """Per token, the exact Delta NLL_rare of a moved model is ``rare.delta_nll_rare``; per
    trajectory it is |y| times larger here (every answer has 5 characters + EOS); 0 for the
    base against itself."""
    run_model = perturbed(trained)
    evals = [
        evaluate_exact(
            m,
            char_tokenizer,
            countdown_task,
            sampling=SamplingParams(T),
            rare_set=rare,
            splits=["test"],
            max_problems=1,
        )
        for m in (trained, run_model)
    ]
    base, run = evals
    assert exact_delta_nll_rare(base, base) == 0.0
    want = delta_nll_rare(run_model, rare)
    assert abs(want) > 1e-3  # the test has power
    assert exact_delta_nll_rare(base, run) == pytest.approx(want, abs=1e-4)  # per token
    per = rare_delta_nll(base, run, per_token=False)
    assert per == pytest.approx(np.array(base["rare"]["logp"]) - run["rare"]["logp"])
    assert exact_delta_nll_rare(base, run, per_token=False) == pytest.approx(6 * want, abs=1e-3)
    other = dict(run, rare=dict(run["rare"], answers=run["rare"]["answers"][::-1]))
    with pytest.raises(ValueError, match="different rare trajectories"):
        rare_delta_nll(base, other)


def test_cli_and_study_stage(trained, char_tokenizer, countdown_task, rare, tmp_path, capsys):
    model_dir = tmp_path / "b0" / "base"
    save_model_and_tokenizer(trained, char_tokenizer, model_dir)
    save_rare_set(rare, tmp_path / "b0" / "rare_set.json")
    out = tmp_path / "cli"
    argv = [
        "exact",
        str(model_dir),
        "--rare-set",
        str(tmp_path / "b0" / "rare_set.json"),
        "--out",
        str(out),
        "--max-problems",
        "1",
        "--max-new-tokens",
        str(T),
        "--k",
        "1,8",
        "--json",
        "--no-progress",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary["splits"]) == {"test", "ood"}
    assert summary["rare"]["trajectories"] == len(rare)
    data = load_exact_eval(out / EXACT_EVAL)
    assert data["environment"]["torch"] == torch.__version__
    # bad input: one line on stderr, exit status 2
    assert main(argv[:-4] + ["--k", "0,8"]) == 2
    err = capsys.readouterr().err
    assert "--k" in err and len(err.strip().splitlines()) == 1
    # the study's stage: a base and a 'run' (the same model: Delta NLL_rare = 0), then reused
    cfg = DemoConfig(max_new_tokens=T, eval_max_problems=1, batch_size=64)
    for d in (base_exact_path(tmp_path / "b0"), run_exact_path(tmp_path / "r0")):
        exact_eval_stage(
            model_dir,
            d.parent,
            cfg,
            task=countdown_task,
            rare_set=tmp_path / "b0" / "rare_set.json",
        )
        assert d.is_file()
    assert exact_delta_nll_rare_of(tmp_path / "b0", tmp_path / "r0") == 0.0
    stamp = run_exact_path(tmp_path / "r0").stat().st_mtime_ns
    exact_eval_stage(
        model_dir,
        run_exact_path(tmp_path / "r0").parent,
        cfg,
        task=countdown_task,
        rare_set=tmp_path / "b0" / "rare_set.json",
    )
    assert run_exact_path(tmp_path / "r0").stat().st_mtime_ns == stamp  # skipped when present
    for other in (
        DemoConfig(max_new_tokens=T + 1, eval_max_problems=1),
        DemoConfig(max_new_tokens=T, eval_max_problems=2),
    ):
        with pytest.raises(ValueError, match="other settings"):
            exact_eval_stage(
                model_dir,
                run_exact_path(tmp_path / "r0").parent,
                other,
                task=countdown_task,
                rare_set=tmp_path / "b0" / "rare_set.json",
            )
