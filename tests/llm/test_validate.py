"""The theory-vs-LLM cross-check (fgrpo_llm.validate): group flags by hand, Lemma 3.1 against
simulated groups drawn at known (mu, tau), the Wilson interval, the sweep table and its ordering
sentences (agreeing and disagreeing cases), the learning-rate-matched control (labelled apart, out
of the sweep, set between F-GRPO and GRPO), and the validate CLI with and without the paper file."""

from __future__ import annotations

import json
import math
import shutil

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.evaluation.rare import RareSet, save_rare_set  # noqa: E402
from fgrpo_llm.evaluation.runs import RunInfo, load_run  # noqa: E402
from fgrpo_llm.evaluation.sweep import (
    control_rows,
    difference_noise,
    lr_control_comparisons,
    ordering_sentences,  # noqa: E402
    plot_delta_nll,
    sweep_rows,
)
from fgrpo_llm.evaluation.tail_miss import summarise_tail_miss, tail_miss_records, wilson_interval  # noqa: E402
from fgrpo_llm.experiments.countdown.cross_check import cross_check  # noqa: E402
from fgrpo_llm.experiments.countdown.report import lr_control_section  # noqa: E402
from fgrpo_llm.tracking import write_run_info  # noqa: E402
from fgrpo_theory.tail_miss import p_tail_miss  # noqa: E402


def make_rare_set(prompts: dict[str, tuple[float, float]]) -> RareSet:
    """A rare set with no trajectories: prompt id -> (mu, tau) with rare form "r", common form
    "c"."""
    info = {
        pid: {
            "mu": mu,
            "tau": tau,
            "num_rollouts": 1000,
            "num_correct": int(mu * 1000),
            "form_counts": {"r": int(tau * 1000), "c": int((mu - tau) * 1000)},
            "rare_forms": ["r"],
            "rare_source": "designated",
        }
        for pid, (mu, tau) in prompts.items()
    }
    return RareSet(
        prompt_ids=[],
        token_ids=[],
        prompt_lengths=[],
        texts=[],
        forms=[],
        base_nll=np.zeros(0),
        prompts=info,
    )


def simulate_groups(
    rare: RareSet, N: int, groups_per_prompt: int, rng, *, step0: int = 0
) -> list[dict]:
    """Groups of N i.i.d. rollouts: each lands in E (tau), C minus E (mu - tau) or wrong
    (1 - mu)."""
    out = []
    for pid, p in rare.prompts.items():
        probs = [p["tau"], p["mu"] - p["tau"], 1 - p["mu"]]
        for g in range(groups_per_prompt):
            kinds = rng.choice(3, size=N, p=probs)
            forms = ["r" if k == 0 else "c" for k in kinds if k < 2]
            out.append(
                {
                    "step": step0 + g,
                    "prompt_id": pid,
                    "N": N,
                    "num_correct": len(forms),
                    "forms": forms,
                }
            )
    return out


def test_group_flags_by_hand():
    rare = make_rare_set({"p": (0.5, 0.1)})
    groups = [
        {
            "step": 1,
            "prompt_id": "p",
            "N": 4,
            "num_correct": 2,
            "forms": ["c", "c"],
        },  # active, miss
        {"step": 1, "prompt_id": "p", "N": 4, "num_correct": 2, "forms": ["r", "c"]},  # active, hit
        {"step": 2, "prompt_id": "p", "N": 4, "num_correct": 4, "forms": ["c"] * 4},  # all correct
        {"step": 2, "prompt_id": "p", "N": 4, "num_correct": 0, "forms": []},  # all wrong
        {"step": 3, "prompt_id": "other", "N": 4, "num_correct": 1, "forms": ["c"]},
    ]  # unknown prompt
    rec = tail_miss_records(groups, rare)
    assert rec["active"].tolist() == [True, True, False, False]
    assert rec["hit"].tolist() == [False, True, False, False]
    assert rec["tail_miss"].tolist() == [True, False, False, False]
    assert rec["p_tail_miss"][0] == pytest.approx(0.9**4 - 0.4**4 - 0.5**4)
    assert len(tail_miss_records(groups, rare, max_step=1)["step"]) == 2


@pytest.mark.parametrize("N", [2, 8, 32])
def test_observed_tail_miss_matches_lemma_on_simulated_groups(N):
    rng = np.random.default_rng(N)
    rare = make_rare_set({"a": (0.3, 0.03), "b": (0.6, 0.12), "c": (0.8, 0.04)})
    rec = tail_miss_records(simulate_groups(rare, N, 400, rng), rare)
    (row,) = summarise_tail_miss(rec)
    expected = np.mean(
        [p_tail_miss(0.3, 0.03, N), p_tail_miss(0.6, 0.12, N), p_tail_miss(0.8, 0.04, N)]
    )
    assert row["groups"] == 1200 and row["predicted"] == pytest.approx(expected)
    assert row["observed_lo"] <= row["predicted"] <= row["observed_hi"] and row["agrees"]


def test_summary_flags_a_wrong_prediction():
    rng = np.random.default_rng(0)
    truth = make_rare_set({"a": (0.5, 0.25)})
    wrong = make_rare_set({"a": (0.5, 0.01)})  # claims E is much rarer than it is
    (row,) = summarise_tail_miss(tail_miss_records(simulate_groups(truth, 8, 500, rng), wrong))
    assert not row["agrees"] and row["observed"] < row["predicted"]


def test_sampled_mu_tau_widen_the_range_by_their_estimation_error():
    """(mu, tau) sampled from M base rollouts: the range adds the sd of the mean prediction
    over a parametric bootstrap of the M rollouts (larger for smaller M), seeded, so the same
    records give the same row; exact (mu, tau) add nothing."""
    import dataclasses

    rng = np.random.default_rng(3)
    rare = make_rare_set({"a": (0.3, 0.03), "b": (0.6, 0.12), "c": (0.8, 0.04)})
    groups = simulate_groups(rare, 8, 300, rng)
    few = dataclasses.replace(
        rare, prompts={k: {**v, "num_rollouts": 50} for k, v in rare.prompts.items()}
    )
    (big,), (small,) = (summarise_tail_miss(tail_miss_records(groups, r)) for r in (rare, few))
    assert 0 < big["prediction_sd"] < small["prediction_sd"] and not small["exact"]
    assert small["predicted_hi"] - small["predicted_lo"] > big["predicted_hi"] - big["predicted_lo"]
    assert summarise_tail_miss(tail_miss_records(groups, few)) == [small]  # seeded
    exact = dataclasses.replace(
        rare,
        prompts={
            k: {**v, "mu_exact": v["mu"], "tau_exact": v["tau"]} for k, v in rare.prompts.items()
        },
    )
    (row,) = summarise_tail_miss(tail_miss_records(groups, exact))
    assert row["prediction_sd"] == 0.0 and row["exact"]
    assert summarise_tail_miss(tail_miss_records(groups, few), bootstrap=0)[0]["prediction_sd"] == 0


def _records(N, p, misses, *, active=None, mu=None, tau=None, M=None, exact=None):
    """Hand-made ``tail_miss_records`` of one prompt's G = len(p) groups at group size N: the
    first ``misses`` are tail misses, predictions ``p``; with ``M`` (and ``exact``), the base
    (mu, tau) was estimated from M rollouts."""
    G = len(p)
    rec = {
        "N": np.full(G, N),
        "tail_miss": np.arange(G) < misses,
        "active": np.arange(G) < (misses if active is None else active),
        "p_tail_miss": np.asarray(p, dtype=np.float64),
        "p_active": np.full(G, 0.9),
        "prompt_id": np.full(G, "a", dtype=object),
    }
    if M is not None:
        rec |= {
            "num_rollouts": np.full(G, M),
            "exact": np.full(G, bool(exact)),
            "mu": np.full(G, mu),
            "tau": np.full(G, tau),
        }
    return rec


def _concat(*records):
    return {k: np.concatenate([r[k] for r in records]) for k in records[0]}


def test_the_predicted_range_is_the_bernoulli_sum_at_95_percent_by_hand():
    """Exact (mu, tau) (records without the flag count as exact): the range of the observed
    frequency is mean(p) -/+ z_{0.975} sqrt(sum p (1 - p)) / G, clipped to [0, 1]. N = 8:
    p = 0.1..0.4, sd = sqrt(0.70) / 4 (the lower end clipped at 0); N = 16: p = 0.9..0.6 (the
    upper end clipped at 1)."""
    from fgrpo_llm.evaluation.tail_miss import Z95

    rec = _concat(
        _records(8, [0.1, 0.2, 0.3, 0.4], 1, active=3),
        _records(16, [0.9, 0.8, 0.7, 0.6], 3, active=4),
    )
    low, high = summarise_tail_miss(rec)
    half = Z95 * math.sqrt(0.70) / 4  # 0.410
    assert (low["N"], low["groups"], low["observed"], low["observed_active"]) == (8, 4, 0.25, 0.75)
    assert low["predicted"] == pytest.approx(0.25) and low["predicted_lo"] == 0.0
    assert low["predicted_hi"] == pytest.approx(0.25 + half, rel=1e-12)
    assert high["predicted"] == pytest.approx(0.75) and high["predicted_hi"] == 1.0
    assert high["predicted_lo"] == pytest.approx(0.75 - half, rel=1e-12)
    assert low["exact"] and high["exact"] and low["prediction_sd"] == high["prediction_sd"] == 0
    assert (low["observed_lo"], low["observed_hi"]) == wilson_interval(1, 4)


def test_agreement_needs_one_of_the_two_intervals_only():
    """``agrees`` when the prediction lies in the observation's Wilson interval OR the observation
    in the prediction's 95% range. With exact (mu, tau) and predictions 0 or 1, the range is the
    point 0.5, which 1 miss in 4 groups misses, but Wilson(1, 4) holds 0.5: agrees. With (mu,
    tau) sampled from M = 40 rollouts, the range (widened by their estimation error, its half
    width z_{0.975} hypot(the Bernoulli sd, the bootstrap sd)) holds the observed 36 / 400 =
    0.09, near its lower end (a 90% range would not), while Wilson(36, 400) does not hold the
    prediction 0.426: agrees too."""
    from fgrpo_llm.evaluation.tail_miss import Z95

    (point,) = summarise_tail_miss(_records(4, [1.0, 1.0, 0.0, 0.0], 1))
    assert point["predicted_lo"] == point["predicted_hi"] == 0.5
    assert point["observed_lo"] < 0.5 < point["observed_hi"] and point["agrees"]
    p = float(p_tail_miss(0.5, 0.1, 8))
    (row,) = summarise_tail_miss(_records(8, [p] * 400, 36, mu=0.5, tau=0.1, M=40, exact=False))
    assert not row["exact"] and row["prediction_sd"] > 0
    sd = math.hypot(math.sqrt(p * (1 - p) / 400), row["prediction_sd"])
    assert row["predicted_hi"] - row["predicted"] == pytest.approx(Z95 * sd, rel=1e-12)
    assert row["predicted"] - row["predicted_lo"] == pytest.approx(Z95 * sd, rel=1e-12)
    assert not row["observed_lo"] <= row["predicted"] <= row["observed_hi"]
    z90 = 1.6448536269514722  # z_{0.95}
    assert row["predicted_lo"] <= row["observed"] < row["predicted"] - z90 * sd
    assert row["agrees"]


def test_no_estimation_sd_from_one_draw_or_without_rollout_counts():
    """The bootstrap sd needs two draws (one gives 0, not nan) and each prompt's rollout count M
    (M = 0, not recorded: 0)."""
    p = [float(p_tail_miss(0.5, 0.1, 8))] * 10
    sampled = dict(mu=0.5, tau=0.1, exact=False)
    (one,) = summarise_tail_miss(_records(8, p, 3, M=40, **sampled), bootstrap=1)
    (none,) = summarise_tail_miss(_records(8, p, 3, M=0, **sampled))
    assert one["prediction_sd"] == 0.0 and none["prediction_sd"] == 0.0
    (two,) = summarise_tail_miss(_records(8, p, 3, M=40, **sampled), bootstrap=2)
    assert two["prediction_sd"] > 0


def test_the_estimation_sd_of_two_draws_is_their_gap_over_root_two():
    """The bootstrap sd is the sample sd (ddof 1) of the draws' mean predictions: with two draws,
    |m_1 - m_2| / sqrt(2). One prompt with (mu, tau) = (0.6, 0.2) from M = 5 rollouts: each
    draw's mean prediction is Lemma 3.1 at one of the 21 re-estimated (mu, tau) = ((e + c) / 5,
    e / 5), so sqrt(2) x prediction_sd is a gap between two of those 21 values (2 x sd, ddof 0,
    is none)."""
    M, mu, tau, N = 5, 0.6, 0.2, 8
    e, c = (a.ravel() for a in np.meshgrid(np.arange(M + 1), np.arange(M + 1)))
    e, c = e[e + c <= M], c[e + c <= M]
    values = p_tail_miss((e + c) / M, e / M, N)
    gaps = np.abs(values[:, None] - values[None, :])
    p = [float(p_tail_miss(mu, tau, N))] * 10
    rec = _records(N, p, 3, mu=mu, tau=tau, M=M, exact=False)
    (row,) = summarise_tail_miss(rec, bootstrap=2, seed=0)
    sd = row["prediction_sd"]
    assert sd > 0 and np.isclose(gaps, math.sqrt(2) * sd, rtol=1e-12, atol=0).any()
    assert not np.isclose(gaps, 2 * sd, rtol=1e-12, atol=0).any()


def test_the_predicted_band_is_the_central_95_percent_of_the_bootstrap_law():
    """``predicted_curve`` with (mu, tau) = (0.5, 0.1) sampled from M = 50 rollouts: the band at
    N = 8 holds the central 95% of the parametric bootstrap's law, computed exactly (the
    counts in E, C minus E and not-C are Multinomial(50; 0.1, 0.4, 0.5), each giving Lemma 3.1
    at its re-estimated (mu, tau)): about 2.5% of that law lies below the band, 2.5% above
    (2000 draws: within +-1.5%, some 4 sd; a 90% band would leave 5% each side)."""
    import dataclasses

    from scipy import stats

    from fgrpo_llm.evaluation.tail_miss import predicted_curve

    M, mu, tau, N = 50, 0.5, 0.1, 8
    rare = make_rare_set({"a": (mu, tau)})
    rare = dataclasses.replace(
        rare, prompts={k: {**v, "num_rollouts": M} for k, v in rare.prompts.items()}
    )
    curve = predicted_curve(rare, [N], bootstrap=2000, rng=np.random.default_rng(0))
    lo, hi = float(curve["lo"][0]), float(curve["hi"][0])
    e, c = (a.ravel() for a in np.meshgrid(np.arange(M + 1), np.arange(M + 1)))
    e, c = e[e + c <= M], c[e + c <= M]
    law = stats.multinomial.pmf(np.stack([e, c, M - e - c], 1), M, [tau, mu - tau, 1 - mu])
    value = p_tail_miss((e + c) / M, e / M, N)
    assert 0.01 < law[value <= lo].sum() and law[value < lo].sum() < 0.04
    assert 0.01 < law[value >= hi].sum() and law[value > hi].sum() < 0.04
    assert curve["mean"][0] == pytest.approx(p_tail_miss(mu, tau, N)) and lo < curve["mean"][0] < hi


def test_the_tail_miss_figure_lists_a_band_only_when_it_draws_one():
    """With the exact (mu, tau) ``predicted_curve`` gives a zero-width band; the figure then
    draws none and its legend names none (it once listed "95% band (estimate)" with nothing
    drawn, under a notebook text that described the band). Sampled (mu, tau): the band is
    drawn and listed."""
    import dataclasses

    from matplotlib.collections import PolyCollection

    from fgrpo_llm.evaluation.tail_miss import plot_tail_miss_vs_N, predicted_curve

    sampled = make_rare_set({"a": (0.5, 0.1), "b": (0.7, 0.05)})
    exact = dataclasses.replace(
        sampled,
        prompts={
            k: {**v, "mu_exact": v["mu"], "tau_exact": v["tau"]} for k, v in sampled.prompts.items()
        },
    )
    for rare, has_band in ((exact, False), (sampled, True)):
        curve = predicted_curve(rare, [1, 2, 4, 8, 16], bootstrap=50, rng=np.random.default_rng(0))
        fig, ax = plt.subplots()
        plot_tail_miss_vs_N(ax, curve, {})
        labels = ax.get_legend_handles_labels()[1]
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert bool(bands) is has_band
        assert ("95% band (estimate)" in labels) is has_band, labels
        assert any(lab.startswith("Lemma 3.1") for lab in labels)
        plt.close(fig)


def test_wilson_interval():
    lo, hi = wilson_interval(5, 10)
    assert lo < 0.5 < hi and 0 <= lo and hi <= 1
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(50, 100)[1] - wilson_interval(50, 100)[0] < hi - lo


def _run(label, N, gamma, pass1, delta):
    ev = {
        "n": 4,
        "ks": [1, 4],
        "splits": {
            "test": {"role": "in_domain", "pass@1": pass1, "pass@4": pass1 + 0.1},
            "ood": {"role": "ood", "pass@1": pass1 / 2, "pass@4": pass1},
        },
    }
    return RunInfo(
        path=None, label=label, algo="grpo", N=N, gamma=gamma, delta_nll_rare=delta, eval=ev
    )


PAPER = {
    "table2_group_size_sweep_qwen2.5_7b": {
        "rows": {
            name: {
                "avg_math": {"pass@1": p1, "pass@256": p1 + 30},
                "avg_ood": {"pass@1": p1 / 2, "pass@256": 60},
                "delta_nll_rare": d,
            }
            for name, p1, d in [
                ("GRPO N=2", 36, 0.19),
                ("GRPO N=4", 37, 0.44),
                ("GRPO N=8", 38, 0.68),
                ("F-GRPO N=8", 39, 0.46),
            ]
        }
    }
}


def test_sweep_rows_and_ordering_sentences():
    runs = [
        _run("GRPO N=2", 2, 0, 0.3, 0.1),
        _run("GRPO N=4", 4, 0, 0.4, 0.2),
        _run("GRPO N=8", 8, 0, 0.5, 0.3),
        _run("F-GRPO N=8", 8, 1, 0.45, 0.4),
    ]
    rows = sweep_rows(runs, PAPER)
    assert rows[0]["paper"]["id_pass1"] == pytest.approx(0.36) and rows[0][
        "id_passk"
    ] == pytest.approx(0.4)
    assert rows[3]["kmax"] == 4 and rows[3]["ood_pass1"] == pytest.approx(0.225)
    text = "\n".join(ordering_sentences(rows))
    # F-GRPO has higher Delta NLL here but lower in the paper; lower pass@1 here, higher in the
    # paper
    assert "Delta NLL_rare: F-GRPO N=8 is higher than GRPO N=8 here" in text
    assert (
        "lower than it in the paper (0.460 vs 0.680; the paper's F-GRPO at gamma = 0.5, ours at "
        "gamma = 1): the ordering disagrees" in text
    )
    # GRPO across N: same increasing order in both -> agrees
    assert (
        "in-domain pass@1 across GRPO N = 2, 4, 8: Kendall tau between our values and the paper's "
        "= +1.00" in text
    )
    assert sweep_rows(runs, None)[0].get("paper") is None


def _tau_b_by_pairs(a, b) -> float:
    """Kendall's tau-b from its definition: (concordant - discordant) pairs over
    sqrt((pairs - ties in a) (pairs - ties in b))."""
    pairs = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a))]
    s = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i, j in pairs)
    untied_a = sum(a[i] != a[j] for i, j in pairs)
    untied_b = sum(b[i] != b[j] for i, j in pairs)
    return s / math.sqrt(untied_a * untied_b)


@pytest.mark.parametrize(
    "a,b",
    [
        ([0.1, 0.2, 0.3, 0.4], [1, 2, 3, 4]),  # the same order: +1
        ([0.1, 0.2, 0.3, 0.4], [4, 3, 2, 1]),  # reversed: -1
        ([0.3, 0.1, 0.4, 0.2, 0.5], [2, 1, 5, 3, 4]),  # no ties: tau-a = tau-b
        ([0.2, 0.2, 0.5, 0.1], [3, 1, 4, 2]),  # a tie in ours: tau-b, not tau-a (0.5)
    ],
)
def test_kendall_tau_is_tau_b_by_its_definition(a, b):
    from fgrpo_llm.evaluation.sweep import _kendall_tau

    assert _kendall_tau(a, b) == pytest.approx(_tau_b_by_pairs(a, b), abs=1e-12)


def test_kendall_tau_is_nan_without_an_order():
    from fgrpo_llm.evaluation.sweep import _kendall_tau

    assert math.isnan(_kendall_tau([0.5], [1]))
    assert math.isnan(_kendall_tau([0.5, 0.5, 0.5], [1, 2, 3]))


def test_cross_check_and_cli(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rare = make_rare_set({"a": (0.4, 0.05), "b": (0.7, 0.07)})
    rare_path = save_rare_set(rare, tmp_path / "rare.json")
    for name, N, gamma in [("g2", 2, 0.0), ("g8", 8, 0.0), ("f8", 8, 1.0)]:
        d = tmp_path / name
        d.mkdir()
        write_run_info(d, engine="fgrpo", algo="grpo", group_size=N, gamma=gamma)
        (d / "groups.jsonl").write_text(
            "\n".join(json.dumps(g) for g in simulate_groups(rare, N, 30, rng))
        )
        (d / "metrics.jsonl").write_text(json.dumps({"step": 1, "rare/delta_nll": 0.1 * N}) + "\n")
    runs = [load_run(tmp_path / n) for n in ("g2", "g8", "f8")]
    assert [r.label for r in runs] == ["GRPO N=2", "GRPO N=8", "F-GRPO N=8"]
    res = cross_check(
        runs, rare, tmp_path / "out", early_steps=10, paper=None, rng=np.random.default_rng(0)
    )
    assert (
        not res["paper_available"] and (tmp_path / "out" / "tail_miss_check.png").stat().st_size > 0
    )
    assert set(res["tail_miss"]["all steps"]) == {"GRPO N=2", "GRPO N=8", "F-GRPO N=8"}
    curve = res["curve"]
    assert (
        curve["lo"][curve["N"].index(8)]
        <= curve["mean"][curve["N"].index(8)]
        <= curve["hi"][curve["N"].index(8)]
    )
    paper = tmp_path / "paper.json"
    paper.write_text(json.dumps(PAPER))
    out = tmp_path / "v"
    assert (
        main(
            [
                "validate",
                "--rare-set",
                str(rare_path),
                "--run",
                str(tmp_path / "g2"),
                "--run",
                str(tmp_path / "g8"),
                "--run",
                str(tmp_path / "f8"),
                "--out",
                str(out),
                "--paper-results",
                str(paper),
            ]
        )
        == 0
    )
    report = (out / "report.md").read_text()
    assert (
        "Tail-miss check" in report and "The paper (Qwen2.5-7B" in report and "ordering" in report
    )
    assert (
        main(
            [
                "validate",
                "--rare-set",
                str(tmp_path / "nope.json"),
                "--run",
                str(tmp_path / "g2"),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "not found" in capsys.readouterr().err


def _fake_run_dir(path, rare, rng, *, N, gamma, delta, lr_multiplier=1.0, lr_match_gamma=None):
    from fgrpo_theory.focal import lr_multiplier as m_gamma

    path.mkdir()
    scale = lr_multiplier * (1.0 if lr_match_gamma is None else float(m_gamma(lr_match_gamma)))
    write_run_info(
        path,
        engine="fgrpo",
        algo="grpo",
        group_size=N,
        gamma=gamma,
        lr_scale=scale,
        lr_match_gamma=lr_match_gamma,
    )
    (path / "groups.jsonl").write_text(
        "\n".join(json.dumps(g) for g in simulate_groups(rare, N, 20, rng))
    )
    (path / "metrics.jsonl").write_text(json.dumps({"step": 1, "rare/delta_nll": delta}) + "\n")
    return path


def test_lr_matched_run_is_labelled_apart_and_left_out_of_the_sweep(tmp_path):
    rng = np.random.default_rng(1)
    rare = make_rare_set({"a": (0.4, 0.05)})
    dirs = [
        _fake_run_dir(tmp_path / "g2", rare, rng, N=2, gamma=0.0, delta=0.1),
        _fake_run_dir(tmp_path / "g4", rare, rng, N=4, gamma=0.0, delta=0.2),
        _fake_run_dir(tmp_path / "g8", rare, rng, N=8, gamma=0.0, delta=0.3),
        _fake_run_dir(tmp_path / "f8", rare, rng, N=8, gamma=1.0, delta=0.9),
        _fake_run_dir(
            tmp_path / "g8lr",
            rare,
            rng,
            N=8,
            gamma=0.0,
            delta=0.8,
            lr_match_gamma=1.0,
            lr_multiplier=1.0,
        ),
        _fake_run_dir(
            tmp_path / "g8half",
            rare,
            rng,
            N=8,
            gamma=0.0,
            delta=0.0,
            lr_match_gamma=0.5,
            lr_multiplier=0.5,
        ),
    ]
    runs = [load_run(d) for d in dirs]
    assert runs[4].label == "GRPO N=8 (lr x0.50)" and runs[4].lr_scale == pytest.approx(0.5)
    assert (
        runs[5].lr_scale == pytest.approx(0.5 * 0.679, abs=1e-3)
        and runs[5].label == "GRPO N=8 (lr x0.34)"
    )
    assert (
        runs[2].label == "GRPO N=8" and runs[2].lr_scale == 1.0 and runs[2].lr_match_gamma is None
    )
    # the sweep rows (and so the orderings and Kendall tau) hold only the runs at the configured lr
    rows = sweep_rows(runs, PAPER)
    assert [r["label"] for r in rows] == ["GRPO N=2", "GRPO N=4", "GRPO N=8", "F-GRPO N=8"]
    assert [r["label"] for r in control_rows(runs)] == [
        "GRPO N=8 (lr x0.50)",
        "GRPO N=8 (lr x0.34)",
    ]
    assert all("lr x" not in s for s in ordering_sentences(rows + control_rows(runs)))
    fig, ax = plt.subplots()
    plot_delta_nll(ax, rows, control_rows(runs))
    (grpo_line,) = [line for line in ax.lines if line.get_label() == "GRPO (ours)"]
    assert list(grpo_line.get_xdata()) == [2, 4, 8] and list(grpo_line.get_ydata()) == [
        0.1,
        0.2,
        0.3,
    ]
    assert any(line.get_label() == "GRPO N=8 (lr x0.50) (ours)" for line in ax.lines)
    plt.close(fig)
    # ...but every run takes part in the tail-miss check, and the control is set between F-GRPO and
    # GRPO
    res = cross_check(
        runs, rare, tmp_path / "out", early_steps=10, paper=None, rng=np.random.default_rng(0)
    )
    for window in res["tail_miss"].values():
        assert set(window) == {r.label for r in runs}
    assert [r["label"] for r in res["sweep"]] == ["GRPO N=2", "GRPO N=4", "GRPO N=8", "F-GRPO N=8"]
    (comp,) = res["lr_control"]  # only the control matched to the F-GRPO run's gamma = 1
    assert (
        comp["control"]["label"] == "GRPO N=8 (lr x0.50)" and comp["focal"]["label"] == "F-GRPO N=8"
    )
    (delta_sentence,) = [s for s in comp["sentences"] if s.startswith("Delta NLL_rare")]
    assert (
        "reproduces 83% of F-GRPO's +0.600" in delta_sentence and "nearer F-GRPO" in delta_sentence
    )
    text = lr_control_section(res)
    assert "GRPO N=8 (lr x0.50)" in text and "0.500" in text


def test_the_papers_f_grpo_row_is_named_at_its_own_gamma():
    """Table 2's F-GRPO row is at gamma = 0.5: beside ours at gamma = 1 the orderings say so and
    the paper's table labels it; beside ours at gamma = 0.5 nothing is added."""
    from fgrpo_llm.experiments.countdown.report import sweep_section

    for gamma, said in ((1.0, True), (0.5, False)):
        rows = sweep_rows(
            [_run("GRPO N=8", 8, 0, 0.5, 0.3), _run("F-GRPO N=8", 8, gamma, 0.45, 0.4)], PAPER
        )
        text = "\n".join(ordering_sentences(rows))
        assert ("the paper's F-GRPO at gamma = 0.5, ours at gamma = 1" in text) is said
        report = sweep_section({"sweep": rows, "orderings": [], "paper_available": True})
        assert "| F-GRPO N=8 (gamma = 0.5) |" in report and "| GRPO N=8 (gamma" not in report


def test_a_difference_within_one_runs_noise_is_not_read_as_an_ordering():
    """One run on one base: with the study's run-to-run noise of a difference given
    (difference_noise: 1.96 sqrt(2) s_w, s_w the sd between RL seeds of one base), an
    F-GRPO - GRPO difference inside it is "not resolved by one run" in the orderings and left
    unsplit by the lr control; a difference beyond it is read as before, and so is every
    difference without a noise."""
    spread = {"sd": {"id_pass1": 1.0}, "within_base_sd": {"id_pass1": 0.01, "delta_nll_rare": 0.01}}
    noise = difference_noise(spread)
    assert noise["id_pass1"] == pytest.approx(1.96 * 2**0.5 * 0.01)  # within, not the total sd
    assert difference_noise({"sd": {"id_pass1": 0.01}}) == {"id_pass1": pytest.approx(0.0277186)}
    assert difference_noise(None) is None and difference_noise({"sd": "x"}) is None
    # pass@1: F-GRPO 0.39 vs GRPO 0.38 (inside +-0.028); Delta NLL_rare: 0.1 vs 0.3 (beyond)
    rows = sweep_rows(
        [_run("GRPO N=8", 8, 0, 0.38, 0.3), _run("F-GRPO N=8", 8, 1, 0.39, 0.1)], PAPER
    )
    text = "\n".join(ordering_sentences(rows, noise))
    assert (
        "in-domain pass@1: F-GRPO N=8 is higher than GRPO N=8 here (0.390 vs 0.380, a difference "
        "within one run's noise, +-0.028) and higher than it in the paper (0.390 vs 0.380; the "
        "paper's F-GRPO at gamma = 0.5, ours at gamma = 1): the ordering is not resolved by one "
        "run." in text
    )
    assert "Delta NLL_rare: F-GRPO N=8 is lower than GRPO N=8 here (0.100 vs 0.300) and" in text
    assert "in-domain pass@1: F-GRPO N=8 is higher than GRPO N=8 here (0.390 vs 0.380) and " in (
        "\n".join(ordering_sentences(rows))
    )
    control = _run("GRPO N=8 (lr x0.50)", 8, 0, 0.38, 0.15)
    control.lr_scale, control.lr_match_gamma = 0.5, 1.0
    (comp,) = lr_control_comparisons(rows, control_rows([control]), noise)
    pass1, _, delta = comp["sentences"]
    assert "difference from GRPO (+0.010) lies within one run's noise (+-0.028)" in pass1
    assert "nearer F-GRPO" in delta and "reproduces 75%" in delta
    (plain,) = lr_control_comparisons(rows, control_rows([control]))
    assert "nearer GRPO" in plain["sentences"][0]


def test_lr_control_sentences_follow_the_numbers():
    rows = sweep_rows([_run("GRPO N=8", 8, 0, 0.5, 0.3), _run("F-GRPO N=8", 8, 1, 0.4, 0.1)], None)
    control = _run("GRPO N=8 (lr x0.50)", 8, 0, 0.49, 0.1)
    control.lr_scale, control.lr_match_gamma = 0.5, 1.0
    (comp,) = lr_control_comparisons(rows, control_rows([control]))
    pass1, passk, delta = comp["sentences"]
    assert "nearer GRPO" in pass1 and "reproduces 10% of F-GRPO's -0.100" in pass1
    assert "nearer GRPO" in passk
    assert "nearer F-GRPO" in delta and "reproduces 100%" in delta
    same = sweep_rows([_run("GRPO N=8", 8, 0, 0.5, 0.3), _run("F-GRPO N=8", 8, 1, 0.5, 0.3)], None)
    assert (
        "does not differ"
        in lr_control_comparisons(same, control_rows([control]))[0]["sentences"][0]
    )
    control.lr_match_gamma = 0.5  # no F-GRPO run at gamma = 0.5: nothing to compare with
    assert lr_control_comparisons(rows, control_rows([control])) == []


def test_short_runs_get_one_window_named_by_their_steps_and_the_table_says_what_was_evaluated(
    tmp_path,
):
    """Runs shorter than the early window are checked over all their steps, and the window says
    so (not "first 50 steps"); the sweep table names the problems behind each pass@k and the
    evaluated policy's step, flagged when it is not the run's last."""
    from fgrpo_llm.experiments.countdown.report import sweep_section

    rng = np.random.default_rng(1)
    rare = make_rare_set({"a": (0.4, 0.05)})
    d = tmp_path / "g8"
    d.mkdir()
    write_run_info(d, engine="fgrpo", algo="grpo", group_size=8, gamma=0.0)
    (d / "groups.jsonl").write_text(
        "\n".join(json.dumps(g) for g in simulate_groups(rare, 8, 4, rng, step0=1))
    )
    (d / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "rare/delta_nll": 0.1}) + "\n" for s in (1, 2, 3, 4))
    )
    (d / "eval").mkdir()
    entry = {"role": "in_domain", "num_problems": 20, "pass@1": 0.5, "pass@8": 0.9}
    entry.update(problem_ids=[f"p{i}" for i in range(20)], counts=[4] * 20)
    ood = dict(entry, role="ood", num_problems=10, problem_ids=entry["problem_ids"][:10])
    ood["counts"] = [4] * 10
    results = {"n": 8, "ks": [1, 8], "splits": {"test": entry, "ood": ood}, "step": 2}
    (d / "eval" / "eval.json").write_text(json.dumps(results))
    res = cross_check([load_run(d)], rare, tmp_path / "out", early_steps=50, paper=None, rng=rng)
    assert list(res["tail_miss"]) == ["all 4 steps (the early window is 50)"]
    text = sweep_section(res)
    assert "20 + 10 problems, step 2 (**not the run's last, 4**)" in text
    assert "in-domain pass@8" in text

    # runs without evaluations: the pass@k columns say k_max, not pass@None
    shutil.rmtree(d / "eval")
    res = cross_check([load_run(d)], rare, tmp_path / "out2", early_steps=50, paper=None, rng=rng)
    text = sweep_section(res)
    assert "pass@None" not in text and "in-domain pass@k_max" in text


def test_maxrl_and_regularised_runs_are_not_grpo_and_one_label_is_one_run(tmp_path):
    """A MaxRL run (gamma 0) and GRPO with an entropy bonus or KL penalty are labelled as such,
    kept out of the GRPO sweep and never taken as the GRPO baseline of the lr-matched control;
    two runs of one label are refused (every table is keyed by label)."""
    rng = np.random.default_rng(0)
    rare = make_rare_set({"a": (0.4, 0.05)})

    def run(name, gamma=0.0, p1=0.5, **info):
        d = tmp_path / name
        d.mkdir()
        write_run_info(d, engine="fgrpo", algo="grpo", group_size=8, gamma=gamma, **info)
        (d / "groups.jsonl").write_text(
            "\n".join(json.dumps(g) for g in simulate_groups(rare, 8, 4, rng, step0=1))
        )
        (d / "metrics.jsonl").write_text(json.dumps({"step": 4, "rare/delta_nll": p1}) + "\n")
        return load_run(d)

    runs = [
        run("maxrl", weighting="maxrl", p1=0.9),
        run("entropy", entropy_coef=1e-3, p1=0.8),
        run("kl", kl_coef=1e-3, p1=0.7),
        run("grpo", p1=0.3),
        run("fgrpo", gamma=1.0, p1=0.1),
        run("control", p1=0.2, lr_scale=0.5, lr_match_gamma=1.0),
    ]
    assert [r.label for r in runs] == [
        "MaxRL N=8", "GRPO N=8 + entropy", "GRPO N=8 + KL", "GRPO N=8", "F-GRPO N=8",
        "GRPO N=8 (lr x0.50)",
    ]  # fmt: skip
    rows = sweep_rows(runs, None)
    assert [r["label"] for r in rows] == ["GRPO N=8", "F-GRPO N=8"]
    (comparison,) = lr_control_comparisons(rows, control_rows(runs))
    assert comparison["grpo"]["label"] == "GRPO N=8"
    assert {r["label"] for r in control_rows(runs)} == {r.label for r in runs} - {
        "GRPO N=8", "F-GRPO N=8"
    }  # fmt: skip

    twin = run("grpo_seed1", p1=0.4)
    with pytest.raises(ValueError, match=r"two runs have the label 'GRPO N=8'.*--label"):
        cross_check([*runs, twin], rare, tmp_path / "out", paper=None, rng=rng)


def test_a_runs_delta_nll_rare_is_its_last_finite_value(tmp_path):
    """Delta NLL_rare of a run is the last finite ``rare/delta_nll`` of metrics.jsonl (a NaN of a
    failed evaluation at the end does not replace it), with the step it was measured at."""
    d = tmp_path / "r"
    d.mkdir()
    write_run_info(d, engine="fgrpo", algo="grpo", group_size=4, gamma=0.0)
    lines = [{"step": 1, "rare/delta_nll": 0.1}, {"step": 2, "rare/delta_nll": 0.2}]
    lines += [{"step": 3, "rare/delta_nll": None}, {"step": 4, "reward": 0.5}]
    (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = load_run(d)
    assert run.delta_nll_rare == 0.2


def test_validate_reads_one_runs_differences_against_the_measured_noise(tmp_path, capsys):
    """``fgrpo-llm validate --spread-file`` reads a difference of one run from another as the
    demo's report does (Section 5.3, one run per configuration): inside the run-to-run noise
    that the study measured it is "not resolved by one run", and the report quotes that spread;
    without a spread file (the runs may be of any model and task) it reads every sign and says
    that the spread was not measured."""
    from fgrpo_llm.experiments.countdown.pipeline import SEED_SPREAD

    rng = np.random.default_rng(0)
    rare = make_rare_set({"a": (0.4, 0.05)})
    rare_path = save_rare_set(rare, tmp_path / "rare.json")
    # Delta NLL_rare 0.30 vs 0.25: a gap of 0.05, inside the shipped noise (+-0.097)
    g8 = _fake_run_dir(tmp_path / "g8", rare, rng, N=8, gamma=0.0, delta=0.30)
    f8 = _fake_run_dir(tmp_path / "f8", rare, rng, N=8, gamma=1.0, delta=0.25)
    paper = tmp_path / "paper.json"
    paper.write_text(json.dumps(PAPER))

    def validate(out, *extra):
        args = ["validate", "--rare-set", str(rare_path), "--run", str(g8), "--run", str(f8)]
        assert main([*args, "--out", str(out), "--paper-results", str(paper), *extra]) == 0
        return (out / "report.md").read_text()

    report = validate(tmp_path / "v", "--spread-file", str(SEED_SPREAD))
    assert (
        "Delta NLL_rare: F-GRPO N=8 is lower than GRPO N=8 here (0.250 vs 0.300, a difference "
        "within one run's noise, +-0.097)" in report
    )
    assert "the ordering agrees" not in report and "measured the standard deviation" in report
    plain = validate(tmp_path / "w")
    assert "(0.250 vs 0.300) and lower than it in the paper" in plain
    assert "The spread has not been measured" in plain
    spread = tmp_path / "spread.json"
    spread.write_text(json.dumps({"sd": {"delta_nll_rare": 0.001}, "num_seeds": 2}))
    assert "(0.250 vs 0.300) and" in validate(tmp_path / "x", "--spread-file", str(spread))
    for bad, words in ((tmp_path / "nowhere.json", "not found"), (paper, "not a seed_spread")):
        args = ["validate", "--rare-set", str(rare_path), "--run", str(g8), "--out", str(tmp_path)]
        capsys.readouterr()
        assert main([*args, "--spread-file", str(bad)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and words in err[0]


def test_an_ordering_across_n_reads_only_the_pairs_beyond_one_runs_noise():
    """GRPO across N (Table 2's sweep): with the run-to-run noise of a difference given, only the
    pairs of N whose values differ beyond it count as ordered. Values that all lie within it are
    not resolved by one run, whatever Kendall tau says; the N within the noise of our largest
    value are named beside it; without a noise the sentence reads every sign, as before."""
    rows = sweep_rows(
        [
            _run("GRPO N=2", 2, 0, 0.300, 0.10),
            _run("GRPO N=4", 4, 0, 0.305, 0.50),
            _run("GRPO N=8", 8, 0, 0.310, 0.52),
        ],
        PAPER,
    )
    noise = {"id_pass1": 0.047, "delta_nll_rare": 0.097}
    text = "\n".join(ordering_sentences(rows, noise))
    assert (
        "in-domain pass@1 across GRPO N = 2, 4, 8: our values (0.300, 0.305, 0.310) differ by "
        "less than one run's noise (+-0.047) for every pair of N, so the ordering is not "
        "resolved by one run." in text
    )
    (delta,) = [s for s in text.splitlines() if s.startswith("Delta NLL_rare across")]
    assert "Kendall tau between our values and the paper's = +1.00" in delta
    assert "largest at N=8 here, within one run's noise of N=4; N=8 in the paper" in delta
    assert "beyond one run's noise (+-0.097): 2 of 3, ordered as in the paper: 2 of 2" in delta
    assert delta.endswith("where one run resolves it, the ordering agrees.")
    plain = "\n".join(ordering_sentences(rows))
    assert "(largest at N=8 here, N=8 in the paper): the ordering agrees." in plain


def test_the_lr_control_says_in_words_a_share_outside_0_to_100_percent():
    """The lr-matched control (Table 3): share = (control - GRPO) / (F-GRPO - GRPO). A control
    that moved the other way is not said to "reproduce -117%" of F-GRPO's difference, one that
    went past F-GRPO not to reproduce "most" of it, and one within one run's noise of both F-GRPO
    and GRPO is not placed nearer either."""
    rows = sweep_rows([_run("GRPO N=8", 8, 0, 0.5, 0.3), _run("F-GRPO N=8", 8, 1, 0.6, 0.1)], None)

    def sentences(pass1, delta, noise=None):
        control = _run("GRPO N=8 (lr x0.50)", 8, 0, pass1, delta)
        control.lr_scale, control.lr_match_gamma = 0.5, 1.0
        (comp,) = lr_control_comparisons(rows, control_rows([control]), noise)
        return comp["sentences"]

    # pass@1: F-GRPO +0.100 over GRPO, the control -0.117; Delta NLL_rare: F-GRPO -0.200, the
    # control -0.300
    pass1, _, delta = sentences(0.383, 0.0)
    assert "%" not in pass1
    assert "moves GRPO the other way, -0.117 against F-GRPO's +0.100" in pass1
    assert "nearer GRPO" in pass1
    assert "moves GRPO by -0.300, past F-GRPO's -0.200" in delta and "%" not in delta
    assert "goes beyond F-GRPO" in delta and "most of" not in delta
    assert "reproduces 50% of F-GRPO's -0.200" in sentences(0.55, 0.2)[2]
    # the control halfway, within the noise of both (+-0.15 > 0.1 each way)
    _, _, delta = sentences(0.55, 0.2, {"delta_nll_rare": 0.15})
    assert "within one run's noise (+-0.150) of both F-GRPO and GRPO" in delta
    assert "lands nearer F-GRPO" not in delta and "lands nearer GRPO" not in delta
