"""The mechanism per rare trajectory (``fgrpo_llm.evaluation.mechanism``, ``fgrpo-llm mechanism``):
each class on hand-made group logs, the classes adding up to Delta NLL_rare on a tiny training run,
the verdict rules over bases, and the run's prompt order (``forecast_inputs.run_prompt_order``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.config import TrainConfig  # noqa: E402
from fgrpo_llm.evaluation.exact_eval import (  # noqa: E402
    evaluate_exact,
    exact_delta_nll_rare,
    load_exact_eval,
    write_exact_eval,
)
from fgrpo_llm.evaluation.mechanism import (  # noqa: E402
    DRIFT,
    NOT_RESOLVED,
    TAIL_MISSES,
    ClassTotals,
    MechanismReport,
    classify_trajectories,
    mechanism_report,
    mechanism_verdict,
)
from fgrpo_llm.evaluation.rare import build_rare_set, save_rare_set  # noqa: E402
from fgrpo_llm.experiments.countdown.exact_stage import base_exact_path, run_exact_path  # noqa: E402
from fgrpo_llm.experiments.countdown.forecast_inputs import run_prompt_order  # noqa: E402
from fgrpo_llm.model import load_model_and_tokenizer, save_model_and_tokenizer  # noqa: E402
from fgrpo_llm.rollout import SamplingParams  # noqa: E402
from fgrpo_llm.tasks.countdown import CountdownTask  # noqa: E402
from fgrpo_llm.trainer import train  # noqa: E402
from tests.llm.test_exact_mu_tau import train_toward_mixture  # noqa: E402

T = 8


def g(pid, X, N=4, forms=None, trained=True):
    """A group record; the correct rollouts' forms default to X copies of "1+2"."""
    return {
        "step": 1,
        "prompt_id": pid,
        "N": N,
        "num_correct": X,
        "forms": list(forms) if forms is not None else ["1+2"] * X,
        "trained": trained,
    }


# -- the classes on hand-made logs -----------------------------------------------------------------


def test_each_class_from_its_defining_groups():
    groups = [
        g("a", 2, forms=["1+2", "1+2"]),  # active, misses "2+1"
        g("b", 2, forms=["1+2", "2+1"]),  # samples "2+1"
        g("c", 4, forms=["1+2"] * 4),  # inactive (all correct)
        g("c", 0),  # inactive (all wrong)
        g("d", 2, forms=["2+1", "1+2"], trained=False),  # dropped by dynamic sampling
        g("e", 1, forms=["1+2"]),  # active miss, then ...
        g("e", 3, forms=["2+1", "1+2", "1+2"]),  # ... sampled later: S wins
    ]
    ids = ["a", "b", "c", "d", "e", "a"]
    forms = ["2+1", "2+1", "2+1", "2+1", "2+1", None]
    assert classify_trajectories(ids, forms, groups) == ["B", "S", "I", "U", "S", "B"]
    # a record without "trained" counts as trained (logs written before the field)
    old = [{k: v for k, v in g("z", 1, forms=["1+2"]).items() if k != "trained"}]
    assert classify_trajectories(["z"], ["2+1"], old) == ["B"]
    with pytest.raises(ValueError, match="differ in length"):
        classify_trajectories(["a"], [], groups)


def test_summary_adds_up_and_rejects_bad_delta():
    rep = mechanism_report(
        ["a", "b", "c", "d"],
        ["x"] * 4,
        [g("a", 2), g("b", 2, forms=["x", "y"]), g("c", 0)],
        [0.3, -0.1, 0.2, 0.7],
    )
    assert rep.classes == ("B", "S", "I", "U")
    s = rep.summary()
    assert sum(e["count"] for e in s["classes"].values()) == 4
    assert sum(e["contribution"] for e in s["classes"].values()) == pytest.approx(0.275, abs=1e-15)
    assert sum(e["share"] for e in s["classes"].values()) == pytest.approx(1.0)
    assert s["classes"]["U"]["mean"] == 0.7 and s["delta_nll_rare"] == pytest.approx(0.275)
    with pytest.raises(ValueError, match="not finite"):
        mechanism_report(["a"], ["x"], [], [np.inf])
    with pytest.raises(ValueError, match="one value per rare trajectory"):
        mechanism_report(["a", "b"], ["x", "x"], [], [0.1])


# -- the verdict over bases ------------------------------------------------------------------------


def unit(b_values, u_values, other=()):
    classes = ("B",) * len(b_values) + ("U",) * len(u_values) + ("S",) * len(other)
    return MechanismReport(classes, np.array([*b_values, *u_values, *other], dtype=float))


def test_verdict_rules():
    rng = np.random.default_rng(0)
    # B loses 0.5 nats more than U on every base, and B holds most of the sum
    tail = {(b, 0): unit(0.6 + 0.05 * rng.standard_normal(20), [0.1, 0.12]) for b in range(4)}
    v = mechanism_verdict(tail)
    assert v["verdict"] == TAIL_MISSES and v["d"]["lo"] > 0 and v["excess_share"] >= 0.25
    # B and U alike: drift
    drift = {(b, 0): unit([0.3 + 0.01 * b, 0.31], [0.3, 0.3 - 0.01 * b]) for b in range(4)}
    assert mechanism_verdict(drift)["verdict"] == DRIFT
    # B above U but the excess is a small share of the sum (S dominates): not resolved
    small = {(b, 0): unit([0.3 + 0.01 * b], [0.1], other=[5.0] * 50) for b in range(4)}
    assert mechanism_verdict(small)["verdict"] == NOT_RESOLVED
    # fewer than 3 bases with both B and U
    two = {**{(b, 0): tail[(b, 0)] for b in range(2)}, (2, 0): unit([0.5], [])}
    v = mechanism_verdict(two)
    assert v["verdict"] == "not judged, 2 bases" and v["units_without_B_or_U"] == 1
    assert v["classes"]["B"]["count"] == 41
    # the verdict reads only each class's count and sum: a study's units.csv columns give it
    for reports in (tail, drift, small, two):
        totals = {u: ClassTotals.from_columns(r.totals().columns()) for u, r in reports.items()}
        a, b = mechanism_verdict(totals), mechanism_verdict(reports)
        assert a["verdict"] == b["verdict"] and a["bases"] == b["bases"]
        assert (a["d"] is None) == (b["d"] is None)
        if a["d"] is not None:
            assert a["d"] == pytest.approx(b["d"], rel=1e-12)
            assert a["excess_share"] == pytest.approx(b["excess_share"], rel=1e-12)
        for c, e in a["classes"].items():
            assert e["count"] == b["classes"][c]["count"]
            if e["mean"] is not None:
                assert e["mean"] == pytest.approx(b["classes"][c]["mean"], rel=1e-12)
    assert ClassTotals.from_columns({"mech_U_n": 3}) is None


# -- a tiny run ------------------------------------------------------------------------------------


class OnePromptCountdown(CountdownTask):
    """Countdown whose training split is one given problem (a run that trains it every step)."""

    def __init__(self, train_problems, **kwargs):
        super().__init__(**kwargs)
        self._train = list(train_problems)

    def problems(self, split):
        return list(self._train) if split == "train" else super().problems(split)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, char_tokenizer, countdown_task):
    torch.set_num_threads(1)
    problems = [
        p for p in countdown_task.problems("test") if len(countdown_task.solutions(p)) >= 4
    ][:2]
    root = tmp_path_factory.mktemp("mech")
    base_dir, run_dir = root / "base0", root / "base0" / "seed0" / "grpo"
    model = train_toward_mixture(char_tokenizer, countdown_task, problems)
    save_model_and_tokenizer(model, char_tokenizer, base_dir / "base")
    rare = build_rare_set(
        model,
        char_tokenizer,
        countdown_task,
        problems,
        num_rollouts=100,
        top_fraction=0.2,
        sampling=SamplingParams(max_new_tokens=T),
        generator=torch.Generator().manual_seed(0),
    )
    save_rare_set(rare, base_dir / "rare_set.json")
    task = OnePromptCountdown([problems[0]], seed=0, num_test=20, num_ood=10)
    cfg = TrainConfig(
        base=str(base_dir / "base"),
        out=str(run_dir),
        steps=3,
        prompts_per_step=1,
        group_size=4,
        max_new_tokens=T,
        lr=3e-3,
        warmup_steps=0,
        progress=False,
        task_kwargs={"seed": 0, "num_test": 20, "num_ood": 10},
    )
    train(cfg, task=task)
    for model_dir, path in (
        (base_dir / "base", base_exact_path(base_dir)),
        (run_dir / "model", run_exact_path(run_dir)),
    ):
        m, tok = load_model_and_tokenizer(model_dir)
        res = evaluate_exact(
            m,
            tok,
            countdown_task,
            sampling=SamplingParams(T),
            rare_set=rare,
            splits=["test"],
            max_problems=1,
        )
        write_exact_eval(res, path.parent)
    return base_dir, run_dir, rare, problems


def test_classes_add_up_to_the_runs_delta_nll_rare(tiny_run, capsys):
    base_dir, run_dir, rare, problems = tiny_run
    assert (
        main(["mechanism", str(run_dir), "--rare-set", str(base_dir / "rare_set.json"), "--json"])
        == 0
    )
    s = json.loads(capsys.readouterr().out)
    want = exact_delta_nll_rare(
        load_exact_eval(base_exact_path(base_dir)), load_exact_eval(run_exact_path(run_dir))
    )
    assert abs(want) > 1e-3  # training moved the rare trajectories
    assert s["delta_nll_rare"] == pytest.approx(want, abs=1e-12)
    got = sum(e["contribution"] for e in s["classes"].values())
    assert got == pytest.approx(want, abs=1e-12)
    assert sum(e["count"] for e in s["classes"].values()) == len(rare)
    # the untrained problem's trajectories are U, the trained one's are not
    n_untrained = sum(pid == problems[1].id for pid in rare.prompt_ids)
    assert n_untrained > 0 and s["classes"]["U"]["count"] == n_untrained
    # the human-readable report, and bad input in one line
    assert main(["mechanism", str(run_dir), "--rare-set", str(base_dir / "rare_set.json")]) == 0
    shown = capsys.readouterr().out
    assert "Delta NLL_rare" in shown
    assert (
        main(
            [
                "mechanism",
                str(run_dir),
                "--rare-set",
                str(base_dir / "rare_set.json"),
                "--run-exact",
                str(run_dir / "nope.json"),
            ]
        )
        == 2
    )
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_run_prompt_order(tiny_run, tmp_path):
    _, run_dir, _, problems = tiny_run
    assert run_prompt_order(run_dir) == [(s, [problems[0].id]) for s in (1, 2, 3)]
    lines = [g("p", 1), {**g("q", 0), "step": 2, "trained": False}, {**g("r", 2), "step": 2}]
    (tmp_path / "groups.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert run_prompt_order(tmp_path) == [(1, ["p"]), (2, ["r"])]
    (tmp_path / "groups.jsonl").write_text(json.dumps({**g("p", 5)}) + "\n")
    with pytest.raises(ValueError, match="num_correct"):
        run_prompt_order(tmp_path)


def test_an_engines_records_are_read_the_same_way(tmp_path, countdown_task):
    """A TRL / verl run's records (``integrations.records.RunRecorder``, forms by the task's
    rule) class the rare trajectories as our trainer's log does."""
    from fgrpo_llm.evaluation.runs import load_run
    from fgrpo_llm.integrations.records import RunRecorder

    p, q = [x for x in countdown_task.problems("test") if len(countdown_task.solutions(x)) >= 3][:2]
    sp, sq = countdown_task.solutions(p), countdown_task.solutions(q)
    rec = RunRecorder(tmp_path, engine="trl", algo="grpo", group_size=4, gamma=0.0)
    rec.log_batch(
        step=1,
        prompt_ids=[p.id] * 4 + [q.id] * 4,
        completions=[sp[0], sp[0], "1+", "x", sq[0], sq[1], sq[0], sq[0]],
        correct=[True, True, False, False, True, True, True, True],
        task=countdown_task,
        problems={p.id: p, q.id: q},
    )
    rec.close()
    run = load_run(tmp_path)
    rep = mechanism_report(
        [p.id, p.id, q.id, q.id, "other"],
        [sp[1], sp[0], sq[1], sq[2], sp[0]],
        run.groups,
        [0.1, 0.2, 0.3, 0.4, 0.5],
    )
    assert rep.classes == ("B", "S", "S", "I", "U")


def test_forecast_inputs_feed_the_forecast(tiny_run):
    """The base's cached answers, the rare pairs and the run's order are what the theory's
    forecast takes: it builds its base and replays the run's 3 steps."""
    from fgrpo_llm.experiments.countdown.config import DemoConfig
    from fgrpo_llm.experiments.countdown.forecast_inputs import base_answers, rare_pairs, run_order
    from fgrpo_theory.forecast import ForecastBase, RunSchedule, forecast
    from fgrpo_theory.weighting import parse_weighting

    base_dir, run_dir, rare, problems = tiny_run
    task = OnePromptCountdown(problems, seed=0, num_test=20, num_ood=10)  # the rare prompts
    answers = base_answers(base_dir, DemoConfig(max_new_tokens=T, eval_max_problems=1), task=task)
    pairs = rare_pairs(base_dir)
    assert pairs == list(zip(rare.prompt_ids, rare.texts, strict=True))
    order = run_order(run_dir)
    assert order == [[problems[0].id]] * 3
    base = ForecastBase(answers["train"], answers["test"] + answers["ood"], pairs)
    run = RunSchedule(order=order, group_size=4, weighting=parse_weighting("none"), lr=3e-3)
    f = forecast(base, run, lr_theta_scale=1.0, lr_phi_scale=1.0, seed=0)
    assert 0.0 <= f.pass_at[1] <= 1.0
