"""pass@k evaluation (fgrpo_llm.evaluation.passk, fgrpo-llm eval / compare): the table against
brute-force enumeration, the sampled counts against the sampler itself, the output files and the
CLIs."""

from __future__ import annotations

import csv
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.evaluation.passk import (  # noqa: E402
    compare_evals,
    default_ks,
    evaluate_model,
    load_eval,
    parse_ks,
    pass_at_k_table,
    sample_correct_counts,
    write_eval_outputs,
)
from fgrpo_llm.rollout import SamplingParams, sample_completions  # noqa: E402


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of k-subsets of n samples (c correct) that contain a correct one."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), data=st.data())
def test_pass_at_k_table_equals_the_mean_over_k_subsets(n, data):
    counts = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=4))
    ks = sorted(set(data.draw(st.lists(st.integers(1, n), min_size=1, max_size=3))))
    table = pass_at_k_table(counts, n, ks)
    for k in ks:
        expected = np.mean([brute_pass_at_k(n, c, k) for c in counts])
        assert table[f"pass@{k}"] == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_table_rejects_bad_input():
    with pytest.raises(ValueError, match="k must be <= n"):
        pass_at_k_table([1, 2], 4, [8])
    with pytest.raises(ValueError, match="counts"):
        pass_at_k_table([5], 4, [1])
    with pytest.raises(ValueError):
        parse_ks("1,x")
    assert default_ks(1024)[-1] == 256 and default_ks(5) == [1, 2, 4]


class PrefixTask:
    """Correct when the completion starts with a digit: a random model gets a mix of outcomes."""

    name = "prefix"
    splits = ("train", "test", "ood")

    def __init__(self, problems):
        self._problems = problems

    def problems(self, split):
        return list(self._problems[split])

    def is_correct(self, problem, completion):
        return completion[:1].isdigit()

    def reward(self, problem, completion):
        return 1.0 if self.is_correct(problem, completion) else 0.0


@pytest.fixture
def prefix_task(countdown_task):
    return PrefixTask(
        {
            "train": countdown_task.problems("train")[:3],
            "test": countdown_task.problems("test")[:3],
            "ood": countdown_task.problems("ood")[:2],
        }
    )


def test_counts_are_the_verified_samples_of_the_sampler(tiny_model, char_tokenizer, prefix_task):
    problems = prefix_task.problems("test")
    counts, outcomes = sample_correct_counts(
        tiny_model,
        char_tokenizer,
        prefix_task,
        problems,
        n=6,
        sampling=SamplingParams(max_new_tokens=4, batch_size=64),
        generator=torch.Generator().manual_seed(3),
        return_outcomes=True,
    )
    batch = sample_completions(
        tiny_model,
        char_tokenizer,
        [p.prompt for p in problems],
        num_samples=6,
        sampling=SamplingParams(max_new_tokens=4, batch_size=64),
        generator=torch.Generator().manual_seed(3),
    )
    expected = np.array(
        [
            [prefix_task.reward(p, batch.completions[b * 6 + j]) for j in range(6)]
            for b, p in enumerate(problems)
        ]
    )
    assert outcomes.shape == (3, 6)
    np.testing.assert_array_equal(outcomes, expected)
    np.testing.assert_array_equal(counts, expected.sum(axis=1))


def test_eval_outputs_round_trip(tiny_model, char_tokenizer, prefix_task, tmp_path):
    results, outcomes = evaluate_model(
        tiny_model,
        char_tokenizer,
        prefix_task,
        n=4,
        ks=[1, 2, 4],
        sampling=SamplingParams(max_new_tokens=3),
        generator=torch.Generator().manual_seed(0),
    )
    assert set(results["splits"]) == {"test", "ood"}
    assert (
        results["splits"]["ood"]["role"] == "ood"
        and results["splits"]["test"]["role"] == "in_domain"
    )
    for split, entry in results["splits"].items():
        assert entry["pass@1"] == pytest.approx(outcomes[split].mean())
        assert entry["pass@1"] <= entry["pass@2"] <= entry["pass@4"]
    paths = write_eval_outputs(results, outcomes, tmp_path / "ev")
    assert paths["plot"].stat().st_size > 0
    rows = list(csv.DictReader(open(paths["csv"])))
    assert len(rows) == 2 * 3 and {r["k"] for r in rows} == {"1", "2", "4"}
    back, back_out = load_eval(tmp_path / "ev")
    assert back == json.loads(json.dumps(results))
    np.testing.assert_array_equal(back_out["test"], outcomes["test"])
    matrix = tmp_path / "ev" / "outcomes_test.npy"
    matrix.write_bytes(matrix.read_bytes()[:90])  # torn: the file is named, not only numpy's words
    with pytest.raises(ValueError, match=r"outcomes_test.npy is not a readable outcome matrix"):
        load_eval(tmp_path / "ev")
    np.save(matrix, np.zeros((3, 4), dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"outcomes_test.npy is not a readable outcome matrix"):
        load_eval(tmp_path / "ev")


def _fake_eval(tmp_path, name, matrix, ids=("a", "b", "c")):
    n = matrix.shape[1]
    res = {
        "n": n,
        "ks": [1],
        "splits": {
            "test": {
                "role": "in_domain",
                "num_problems": len(ids),
                "problem_ids": list(ids),
                "counts": matrix.sum(1).tolist(),
                **pass_at_k_table(matrix.sum(1), n, [1]),
            }
        },
    }
    write_eval_outputs(res, {"test": matrix}, tmp_path / name)
    return tmp_path / name


def test_compare_detects_a_large_difference_and_not_an_identical_one(tmp_path):
    rng = np.random.default_rng(0)
    good = (rng.random((3, 40)) < 0.9).astype(np.int8)
    bad = (rng.random((3, 40)) < 0.1).astype(np.int8)
    a, b = _fake_eval(tmp_path, "a", good), _fake_eval(tmp_path, "b", bad)
    diff = compare_evals(a, b, m=20, iterations=500, ks=(1,), rng=np.random.default_rng(1))["test"][
        "pass@1"
    ]
    same = compare_evals(a, a, m=20, iterations=500, ks=(1,), rng=np.random.default_rng(1))["test"][
        "pass@1"
    ]
    assert diff["p_value"] < 0.05 < same["p_value"]
    assert diff["statistic"] == pytest.approx(good.mean() - bad.mean())
    c = _fake_eval(tmp_path, "c", good, ids=("x", "y", "z"))
    with pytest.raises(ValueError, match="different problems"):
        compare_evals(a, c, m=20, iterations=10, ks=(1,), rng=np.random.default_rng(1))


def test_compare_matches_problems_by_id_and_says_how_they_differ(tmp_path):
    """The same problems in another order are matched by id (the same test as in order);
    different or repeated ids are an error saying which."""
    rng = np.random.default_rng(0)
    good = (rng.random((3, 40)) < 0.9).astype(np.int8)
    bad = (rng.random((3, 40)) < 0.1).astype(np.int8)
    bad[0] = 1  # rows that differ, so that a wrong order would show
    a, b = _fake_eval(tmp_path, "a", good), _fake_eval(tmp_path, "b", bad)
    moved = _fake_eval(tmp_path, "moved", bad[[2, 0, 1]], ids=("c", "a", "b"))
    kw = dict(m=20, iterations=300, ks=(1,))
    in_order = compare_evals(a, b, rng=np.random.default_rng(1), **kw)
    reordered = compare_evals(a, moved, rng=np.random.default_rng(1), **kw)
    assert reordered == in_order
    wrong = compare_evals(
        a, _fake_eval(tmp_path, "w", bad[[2, 0, 1]]), rng=np.random.default_rng(1), **kw
    )
    assert wrong != in_order  # (the rows do matter)
    other = _fake_eval(tmp_path, "other", good, ids=("a", "b", "z"))
    with pytest.raises(
        ValueError, match=r"1 only in A, e\.g\. \['c'\]; 1 only in B, e\.g\. \['z'\]"
    ):
        compare_evals(a, other, rng=np.random.default_rng(1), **kw)
    twice = _fake_eval(tmp_path, "twice", good, ids=("a", "a", "b"))
    with pytest.raises(ValueError, match="repeats"):
        compare_evals(a, twice, rng=np.random.default_rng(1), **kw)
    short = json.loads((moved / "eval.json").read_text())
    short["splits"]["test"]["problem_ids"] = ["c", "a"]  # three rows, two ids
    (moved / "eval.json").write_text(json.dumps(short))
    with pytest.raises(ValueError, match=r"must list num_problems=3 problem_ids, got 2"):
        compare_evals(a, moved, rng=np.random.default_rng(1), **kw)


def test_compare_names_a_split_it_cannot_compare(tmp_path, capsys):
    """A split in one evaluation only: a SplitNotCompared warning from the library, one stderr
    line from the CLI (it used to be skipped without a word)."""
    from fgrpo_llm.evaluation.passk import SplitNotCompared

    rng = np.random.default_rng(0)
    matrix = (rng.random((3, 40)) < 0.5).astype(np.int8)
    a = _fake_eval(tmp_path, "a", matrix)
    b = _fake_eval(tmp_path, "b", matrix)
    res = json.loads((b / "eval.json").read_text())
    res["splits"]["ood"] = dict(res["splits"]["test"], role="ood")
    write_eval_outputs(res, {"test": matrix, "ood": matrix}, b)
    with pytest.warns(SplitNotCompared, match=r"split 'ood' is only in .*b: not compared"):
        report = compare_evals(a, b, m=10, iterations=10, ks=(1,), rng=np.random.default_rng(1))
    assert list(report) == ["test"]
    assert main(["compare", str(a), str(b), "--k", "1", "--iterations", "10"]) == 0
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("fgrpo-llm compare: warning: split 'ood' is only in ")
    # an error after the warning: both lines, the warning first
    assert main(["compare", str(a), str(b), "--k", "1", "--m", "40"]) == 2
    warn, err = capsys.readouterr().err.strip().splitlines()
    assert "only in" in warn and "m=40" in err


def test_compare_defaults_m_to_a_quarter_of_n_and_rejects_m_not_below_n(tmp_path):
    rng = np.random.default_rng(0)
    a = _fake_eval(tmp_path, "a", (rng.random((3, 40)) < 0.5).astype(np.int8))
    default = compare_evals(a, a, iterations=10, ks=(1,), rng=np.random.default_rng(1))["test"][
        "pass@1"
    ]
    assert default["m"] == 10 and default["n"] == 40
    # k = m is tested (the paper's pass@256 at m = 256), k > m left out
    at_m = compare_evals(a, a, iterations=10, ks=(1, 10, 11), rng=np.random.default_rng(1))
    assert list(at_m["test"]) == ["pass@1", "pass@10"]
    with pytest.raises(ValueError, match="m=40"):
        compare_evals(a, a, m=40, iterations=10, ks=(1,), rng=np.random.default_rng(1))


def test_compare_refuses_ks_that_all_exceed_m_and_leaves_out_only_those_that_do(tmp_path, capsys):
    """Every k > m: no pass@k can be tested on m-subsamples, a one-line error naming the ks and m
    (it used to print an empty report and exit 0); some k > m: those are left out of the report."""
    rng = np.random.default_rng(0)
    a = _fake_eval(tmp_path, "a", (rng.random((3, 40)) < 0.5).astype(np.int8))
    with pytest.raises(ValueError, match=r"m=10 .*k=64,256"):
        compare_evals(a, a, iterations=10, ks=(64, 256), rng=np.random.default_rng(1))
    assert main(["compare", str(a), str(a), "--k", "64,256", "--iterations", "10"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "k=64,256" in err[0] and "m=10" in err[0], err
    assert captured.out == ""
    assert main(["compare", str(a), str(a), "--k", "1,64", "--iterations", "10"]) == 0
    assert list(json.loads(capsys.readouterr().out)["test"]) == ["pass@1"]


def test_compare_scales_by_the_finite_population_factor_unless_told_not_to(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = _fake_eval(tmp_path, "a", (rng.random((3, 40)) < 0.5).astype(np.int8))
    b = _fake_eval(tmp_path, "b", (rng.random((3, 40)) < 0.6).astype(np.int8))
    reports = {}
    for flag in ("--finite-population", "--no-finite-population"):
        argv = ["compare", str(a), str(b), "--k", "1", "--iterations", "2000", flag]
        assert main(argv) == 0
        reports[flag] = json.loads(capsys.readouterr().out)["test"]["pass@1"]
    kept, dropped = reports["--finite-population"], reports["--no-finite-population"]
    assert kept["finite_population"] is True and dropped["finite_population"] is False
    assert kept["statistic"] == dropped["statistic"]  # the same D, the same subsamples
    assert kept["p_value"] > dropped["p_value"]  # a wider null law: a larger p-value


def test_compare_warns_where_k_close_to_m_leaves_the_p_value_uncalibrated(tmp_path, capsys):
    """pass@16 from subsamples of m = 16 at a pass rate of 0.5 saturates (App. Q's test breaks
    down, true nulls rejected): the JSON says calibrated false and one stderr line warns, naming
    the split and k; pass@1 beside it is calibrated and not warned about."""
    rng = np.random.default_rng(0)
    ids = [f"p{i}" for i in range(20)]
    a = _fake_eval(tmp_path, "a", (rng.random((20, 64)) < 0.5).astype(np.int8), ids=ids)
    b = _fake_eval(tmp_path, "b", (rng.random((20, 64)) < 0.5).astype(np.int8), ids=ids)
    assert main(["compare", str(a), str(b), "--k", "1,16", "--iterations", "2000"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)["test"]
    assert report["pass@16"]["calibrated"] is False and report["pass@1"]["calibrated"] is True
    (line,) = err.strip().splitlines()
    assert (
        line.startswith("fgrpo-llm compare: warning: test pass@16: ") and "not calibrated" in line
    )


def test_eval_and_compare_cli(tiny_checkpoint, tmp_path, capsys):
    from fgrpo_llm.environment import environment

    out = tmp_path / "ev"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_checkpoint),
                "--samples",
                "4",
                "--k",
                "1,2",
                "--max-problems",
                "2",
                "--max-new-tokens",
                "3",
                "--seed",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    results, outcomes = load_eval(out)
    assert set(results["splits"]) == {"test", "ood"} and outcomes["test"].shape == (2, 4)
    # eval.json records its seed and the environment, in the format of a run's and a base's
    assert results["seed"] == 3
    assert set(results["environment"]) == set(environment(results["environment"]["device"]))
    assert main(["compare", str(out), str(out), "--m", "2", "--iterations", "50", "--k", "1"]) == 0
    assert "p_value" in capsys.readouterr().out
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_checkpoint),
                "--samples",
                "2",
                "--k",
                "4",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert main(["eval", "--model", str(tmp_path / "missing"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "k must be <= n" in err or "k=4" in err
    assert "not found" in err


def test_coverage_against_the_base_on_a_hand_made_outcome_matrix():
    """Yue et al.'s count: problem 0 the base solves half the time at k = 2 and the trained
    model never (lost 0.5), problem 1 the reverse at 1 - C(2,2)/C(4,2) = 5/6 (gained), problem 2
    both always, problem 3 neither."""
    from fgrpo_llm.evaluation.passk import coverage_against

    base = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    trained = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    c = coverage_against(base, trained, 2)
    assert c["lost"] == pytest.approx(0.5) and c["gained"] == pytest.approx(5 / 6)
    assert c["both"] == pytest.approx(1.0) and c["neither"] == pytest.approx(0.5 * 1 + 1 / 6 + 1)
    assert c["lost"] + c["gained"] + c["both"] + c["neither"] == pytest.approx(4)
    at4 = coverage_against(base, trained, 4)  # k = n: solved iff any sample was right
    assert (at4["lost"], at4["gained"], at4["both"], at4["neither"]) == (1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="same problems"):
        coverage_against(base, trained[:3], 2)
    with pytest.raises(ValueError, match="k must be <="):
        coverage_against(base, trained, 5)


def test_the_coverage_table_gives_the_lost_count_of_sampling_alone(tmp_path):
    """Coverage against the base (Yue et al.): a second evaluation of the base itself loses
    problems too, each one it solves within k samples with probability (1 - mu)^k at its pass
    rate mu = c / n. The table gives that count beside the run's, so a lost count of sampling
    alone (the demo base's OOD split: about 8 of 100 at k = 64) is not read as lost coverage."""
    from types import SimpleNamespace

    from fgrpo_llm.evaluation.passk import coverage_against, write_eval_outputs
    from fgrpo_llm.experiments.countdown.report import coverage_section

    base = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    # k = 2: problem 0 is solved with pass@2 = 1/2 and missed by 2 fresh samples w.p. (3/4)^2
    assert coverage_against(base, base, 2)["lost_by_sampling"] == pytest.approx(0.5 * 0.75**2)
    assert coverage_against(base, base, 4)["lost_by_sampling"] == pytest.approx(0.75**4)

    def results(matrix):
        entry = {"role": "in_domain", "num_problems": 4, "problem_ids": list("abcd")}
        entry["counts"] = matrix.sum(axis=1).tolist()
        entry.update({"pass@1": 0.3, "pass@4": 0.5})
        return {"n": 4, "ks": [1, 4], "splits": {"test": entry}}

    write_eval_outputs(results(base), {"test": base}, tmp_path / "base_eval")
    run = tmp_path / "run"
    write_eval_outputs(results(base[::-1]), {"test": base[::-1]}, run / "eval")
    text = coverage_section(tmp_path / "base_eval", [SimpleNamespace(label="GRPO N=8", path=run)])
    assert "| run | split | k | problems | lost | lost by sampling alone | gained |" in text
    assert f"| GRPO N=8 | test | 4 | 4 | 2.000 | {0.75**4:.3f} | 2.000 |" in text
