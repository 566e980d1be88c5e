"""``fgrpo_theory.weighting`` and ``fgrpo-theory plan``: the weighting identities (GRPO's w = 1,
F-GRPO's focal weight, MaxRL's advantage (r - mu) / mu on 0/1 rewards), the calculator against a
brute-force Monte Carlo of groups on a small pass-rate histogram, the finite-n uncertainty, and
the CLI on outcome files, counts and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fgrpo_theory.cli import main
from fgrpo_theory.focal import focal_advantage_magnitudes, focal_weight
from fgrpo_theory.plan import plan, update_mass
from fgrpo_theory.weighting import Weighting, focal, maxrl, none, parse_weighting

MU = np.linspace(0.0, 1.0, 101)


def test_grpo_is_one_and_focal_is_the_focal_weight():
    assert np.array_equal(none()(MU), np.ones_like(MU))
    for gamma in (0.0, 0.5, 1.0, 2.0):
        np.testing.assert_array_equal(focal(gamma)(MU), focal_weight(MU, gamma))
        pos, neg = focal(gamma).magnitudes(MU[1:-1])
        ref = focal_advantage_magnitudes(MU[1:-1], gamma)
        np.testing.assert_allclose(pos, ref[0], rtol=1e-13)
        np.testing.assert_allclose(neg, ref[1], rtol=1e-13)


@pytest.mark.parametrize("N", [2, 3, 8, 64])
def test_maxrl_times_grpo_is_maxrls_advantage(N):
    """On 0/1 rewards, w(mu_hat) times GRPO's advantage (population std, eps -> 0) is MaxRL's
    (r - mu_hat) / mu_hat; X = 0 groups get 0."""
    for X in range(1, N):
        m = X / N
        r = np.array([1.0] * X + [0.0] * (N - X))
        grpo = (r - m) / np.sqrt(m * (1 - m))
        np.testing.assert_allclose(maxrl()(m) * grpo, (r - m) / m, rtol=1e-12)
    assert maxrl()(0.0) == 0.0 and maxrl()(1.0) == 0.0
    w = maxrl()(MU[1:])
    np.testing.assert_allclose(w, focal(0.5)(MU[1:]) / np.sqrt(MU[1:]), rtol=1e-13)


def test_parse_weighting_and_its_errors():
    assert parse_weighting("focal:0.5") == focal(0.5) and parse_weighting("GRPO") == none()
    assert parse_weighting("focal").gamma == 1.0 and parse_weighting(" maxrl ") == maxrl()
    for bad in ("focal:-1", "focal:x", "ppo", ""):
        with pytest.raises(ValueError, match="weighting|focal"):
            parse_weighting(bad)
    # None is not "none" (GRPO); an exponent on a weighting that takes none is refused
    with pytest.raises(TypeError, match="a weighting is a string .* got None"):
        parse_weighting(None)
    with pytest.raises(TypeError, match="got None"):
        plan([0.3], rho=0.1, group_sizes=[4], weightings=[None])
    with pytest.raises(ValueError, match="'maxrl' takes none, got gamma=5.0"):
        Weighting("maxrl", 5.0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got seed=-1"):
        plan([0.3], rho=0.1, group_sizes=[4], seed=-1)


def test_the_calculator_matches_a_monte_carlo_of_groups():
    """A small histogram of pass rates, 20,000 groups per prompt and N: the active fraction,
    the tail-miss rate and each weighting's share of the update to hard prompts are the
    calculator's within 4 standard errors."""
    mu = np.array([0.1, 0.3, 0.6, 0.85])
    rho = 0.2
    res = plan(mu, rho=rho, group_sizes=[4, 16], weightings=["none", "focal:1", "maxrl"])
    rng = np.random.default_rng(3)
    G = 20_000
    for row in res["rows"]:
        N = row["N"]
        active, miss = np.empty((mu.size, G)), np.empty((mu.size, G))
        mass = {w: np.empty(mu.size) for w in ("none", "focal:1", "maxrl")}
        for p, m in enumerate(mu):
            draws = rng.multinomial(N, [rho * m, (1 - rho) * m, 1 - m], size=G)  # (G, 3)
            X = draws[:, 0] + draws[:, 1]
            act = (X > 0) & (X < N)
            active[p], miss[p] = act, act & (draws[:, 0] == 0)
            mh = X / N
            l1 = 2 * N * np.sqrt(mh * (1 - mh))
            for w in mass:
                mass[w][p] = np.mean(parse_weighting(w)(mh) * l1)
        for got, sample in ((row["active"], active), (row["tail_miss"], miss)):
            se = np.sqrt(np.sum(sample.var(axis=1) / G)) / mu.size
            assert abs(sample.mean() - got) <= 4 * se + 1e-12, (N, got, sample.mean())
        hard = mu < 0.5
        for w, label in (("none", "GRPO"), ("focal:1", "F-GRPO (gamma=1)"), ("maxrl", "MaxRL")):
            mc = mass[w][hard].sum() / mass[w].sum()
            assert row["hard_share"][label] == pytest.approx(mc, abs=0.01), (N, w)
            np.testing.assert_allclose(
                update_mass(mu, N, parse_weighting(w)), mass[w], rtol=0.03, atol=1e-3
            )
    assert res["peak_N"] in (4, 16)


def test_the_finite_n_range_narrows_with_more_samples():
    mu = np.array([0.1, 0.4, 0.7])
    widths = []
    for n in (16, 1024):
        c = np.round(mu * n).astype(int)
        row = plan(None, n=[n] * 3, c=c, rho=0.1, group_sizes=[8], draws=400)["rows"][0]
        assert row["tail_miss_lo"] < row["tail_miss_hi"]
        widths.append(row["tail_miss_hi"] - row["tail_miss_lo"])
    assert widths[1] < widths[0] / 4
    with pytest.raises(ValueError, match="0 <= c <= n"):
        plan(None, n=[4], c=[5], rho=0.1, group_sizes=[8])


def test_cli_reads_outcomes_and_counts_and_writes_json_and_a_plot(tmp_path, capsys):
    rng = np.random.default_rng(0)
    out = (rng.random((20, 32)) < rng.random((20, 1))).astype(np.int8)
    d = tmp_path / "eval"
    d.mkdir()
    np.save(d / "outcomes_test.npy", out)
    argv = ["plan", "--outcomes", str(d), "--split", "test", "--group-size", "2,8", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["prompts"] == 20 and [r["N"] for r in res["rows"]] == [2, 8]
    assert res["rows"][1]["tail_miss_lo"] is not None
    csv = tmp_path / "c.csv"
    csv.write_text("prompt_id,n,c\n" + "".join(f"p{i},32,{v}\n" for i, v in enumerate(out.sum(1))))
    png = tmp_path / "plan.png"
    assert main(["plan", "--counts", str(csv), "--group-size", "2,8", "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "tail misses peak at N =" in text and png.stat().st_size > 0
    assert main(["plan", "--mu", "0.2,0.5", "--weightings", "focal:0.5,maxrl"]) == 0


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["plan"], "exactly one of"),
        (["plan", "--mu", "0.2", "--counts", "x.csv"], "exactly one of"),
        (["plan", "--mu", "1.5"], "mu"),
        (["plan", "--mu", "0.2", "--weightings", "ppo"], "weighting"),
        (["plan", "--mu", "0.2", "--group-size", "0"], "--group-size"),
        (["plan", "--mu", "0.2", "--rho", "2"], "rho"),
        (["plan", "--counts", "nowhere.csv"], "not found"),
        (["plan", "--outcomes", "nowhere.npy"], "not found"),
    ],
)
def test_cli_bad_input_is_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0]


def test_a_damaged_counts_file_names_its_line(tmp_path, capsys):
    csv = tmp_path / "c.csv"
    csv.write_text("prompt_id,n,c\np0,10,3\np1,10,11\n")
    assert main(["plan", "--counts", str(csv)]) == 2
    assert "c.csv:3" in capsys.readouterr().err


def test_weightings_take_extreme_rates_and_name_a_bad_gamma():
    """maxrl at a subnormal rate is sqrt((1 - mu) / mu), finite (4.5e161 at 5e-324), not inf;
    a gamma that is not one real number is a TypeError naming gamma."""
    assert float(maxrl()(5e-324)) == pytest.approx(1.0 / np.sqrt(5e-324), rel=1e-12)
    with np.errstate(over="ignore"):  # (|A+| = 1e155 sqrt(1e310) is beyond float64: inf)
        assert float(maxrl().magnitudes(1e-310)[1]) == pytest.approx(1.0, rel=1e-12)
    assert float(maxrl()(0.25)) == np.sqrt(3.0)
    for bad in ("abc", np.array([1.0, 2.0]), True):
        with pytest.raises(TypeError, match="gamma"):
            focal(bad)
    assert focal(np.float32(2.0)).label == "F-GRPO (gamma=2)"


def test_cli_rejects_odd_files_and_sizes_in_one_line(tmp_path, capsys):
    """An .npz or a structured array as --outcomes, a counts CSV that is not UTF-8, a posterior
    too large for memory, and one weighting named twice: one line each, exit 2."""
    npz = tmp_path / "o.npz"
    np.savez(npz, a=np.ones((2, 2)))
    structured = tmp_path / "s.npy"
    np.save(structured, np.zeros((2, 2), dtype=[("a", "i4")]))
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"prompt_id,n,c\n\xff,4,1\n")
    good = tmp_path / "c.csv"
    good.write_text("prompt_id,n,c\np0,4,1\n")
    for argv, needle in [
        (["--outcomes", str(npz)], ".npz archive"),
        (["--outcomes", str(structured)], "dtype"),
        (["--counts", str(latin)], "latin.csv is not UTF-8"),
        (["--counts", str(good), "--draws", str(10**12)], "draws x prompts"),
        (["--mu", "0.2", "--weightings", "none,grpo"], "GRPO twice"),
        (["--mu", "0.2", "--weightings", "focal:1,focal:1.0000001"], "twice"),
    ]:
        assert main(["plan", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], (argv, err)


def test_with_counts_the_point_estimate_lies_in_its_range():
    # Prompts never solved in 8 samples: the plug-in mu = c / n = 0 gives them no tail misses,
    # an estimate below its own posterior range at N = 32; the posterior median lies within it.
    n, c = [8] * 5, [0, 0, 0, 1, 8]
    res = plan(None, n=n, c=c, rho=0.1, group_sizes=[2, 8, 32, 128])
    for row in res["rows"]:
        assert row["tail_miss_lo"] <= row["tail_miss"] <= row["tail_miss_hi"], row
    plug_in = plan(np.divide(c, n), rho=0.1, group_sizes=[32])["rows"][0]["tail_miss"]
    assert plug_in < res["rows"][2]["tail_miss_lo"]
    assert res["peak_N"] == max(res["rows"], key=lambda r: r["tail_miss"])["N"]


def test_with_counts_the_active_fraction_bounds_the_tail_miss_rate():
    """A tail miss needs an active group: from counts both columns are posterior medians, so
    the tail-miss rate never exceeds the active fraction, also where every pass rate observed
    is 0 (the plug-in active fraction would be 0 there, below a positive tail-miss rate)."""
    n, c = [256] * 6, [0] * 6
    res = plan(None, n=n, c=c, rho=0.5, group_sizes=[2, 8, 64, 1024])
    for row in res["rows"]:
        assert 0 < row["tail_miss"] <= row["active"] < 1, row
    assert plan(np.zeros(6), rho=0.5, group_sizes=[8])["rows"][0]["active"] == 0.0


def test_an_outcomes_directory_names_its_splits(tmp_path, capsys):
    np.save(tmp_path / "outcomes_test.npy", np.eye(3, dtype=np.int8))
    np.save(tmp_path / "outcomes_ood.npy", np.eye(3, dtype=np.int8))
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv, needle in [
        (["--outcomes", str(tmp_path)], "choose --split among ood, test"),
        (["--outcomes", str(tmp_path), "--split", "train"], "holds the splits ood, test"),
        (["--outcomes", str(empty), "--split", "test"], "holds no outcomes_<split>.npy"),
    ]:
        assert main(["plan", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (argv, err)
    assert main(["plan", "--outcomes", str(tmp_path), "--split", "ood"]) == 0


def test_no_peak_is_named_where_no_group_misses_the_tail(capsys):
    """With every pass rate 0 or 1 (no active group) or rho = 1 (the rare mode is all of the
    correct mass), P(B) = 0 at every N (Lemma 3.1): there is no peak to report."""
    for mu, rho in (([0.0, 1.0], 0.05), ([0.3, 0.5], 1.0)):
        res = plan(mu, rho=rho, group_sizes=[2, 8, 32])
        assert [r["tail_miss"] for r in res["rows"]] == [0.0, 0.0, 0.0]
        assert res["peak_N"] is None
    assert plan([0.3, 0.5], rho=0.05, group_sizes=[2, 8, 32])["peak_N"] == 8
    assert main(["plan", "--mu", "0,1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("no tail misses at any")
    assert main(["plan", "--mu", "0,1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["peak_N"] is None


def test_counts_come_whole_and_alone():
    """plan takes pass rates mu or counts c of n: half the counts, or both sources, is a
    ValueError naming them (it was silently ignored)."""
    with pytest.raises(ValueError, match="n is given without c"):
        plan(None, n=[10, 10], rho=0.05, group_sizes=[8])
    with pytest.raises(ValueError, match="c is given without n"):
        plan(None, c=[3, 4], rho=0.05, group_sizes=[8])
    with pytest.raises(ValueError, match="not both"):
        plan([0.3, 0.4], n=[10, 10], c=[3, 4], rho=0.05, group_sizes=[8])


def test_a_plan_too_large_to_finish_is_refused_at_once():
    """The update shares sum over X = 0..N for every prompt: 20,000 prompts at N = 2^16 would
    run for hours, so the calculator refuses them with the sizes named."""
    mu = np.full(20_000, 0.3)
    with pytest.raises(ValueError, match=r"20000 prompts and group_sizes=\[65536\]"):
        plan(mu, rho=0.05, group_sizes=[65536])


def test_a_peak_the_pass_rates_uncertainty_leaves_open_is_not_named_alone(tmp_path, capsys):
    """Where tail misses peak (Lemma 3.1 over the prompts, Section 4): pass rates measured from
    few samples per prompt may leave neighbouring N undecided, and then the plan names every N
    where the posterior draws put the peak, not the medians' argmax alone; with many samples
    (or exact pass rates) the peak is one N."""
    rates = [0.25] * 10 + [0.2] * 10
    Ns = [2, 4, 8, 16, 32, 64]

    def counts(n):
        return [n] * 20, [round(r * n) for r in rates]

    few = plan(None, n=counts(16)[0], c=counts(16)[1], rho=0.05, group_sizes=Ns)
    assert few["peak_N"] == 16 and few["peak_N_range"] == [8, 16]
    many = plan(None, n=counts(100_000)[0], c=counts(100_000)[1], rho=0.05, group_sizes=Ns)
    assert many["peak_N_range"] == [16]
    assert plan(rates, rho=0.05, group_sizes=Ns)["peak_N_range"] == [16]
    assert plan([0.0, 1.0], rho=0.05, group_sizes=Ns)["peak_N_range"] == []
    csv = tmp_path / "c.csv"
    rows = zip(*counts(16), strict=True)
    csv.write_text("prompt_id,n,c\n" + "".join(f"p{i},{a},{b}\n" for i, (a, b) in enumerate(rows)))
    assert main(["plan", "--counts", str(csv), "--group-size", "2,4,8,16,32,64"]) == 0
    text = capsys.readouterr().out
    assert "does not resolve the peak between N = 8, 16" in text
