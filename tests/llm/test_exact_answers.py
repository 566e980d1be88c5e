"""Exact answer distributions and exact pass@k (``fgrpo_llm.evaluation.answers``) against the
sampled evaluator, against exact mu (``exact.exact_mu_tau``), and in their limits.

The model is the conftest tiny model trained toward a mixture of right and wrong completions
(``test_exact_mu_tau.train_toward_mixture``): its mass on correct answers, on wrong well-formed
ones and on malformed text (an extra digit, a truncated expression) are all far from 0 and 1, so
sampling can tell a wrong exact value from a right one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
scipy_stats = pytest.importorskip("scipy.stats")

from fgrpo_llm.evaluation.answers import (  # noqa: E402
    answer_distributions,
    exact_pass_at_k,
    log1mexp,
    mean_exact_pass_at_k,
    well_formed_answers,
    within_one,
)
from fgrpo_llm.evaluation.exact import exact_mu_tau  # noqa: E402
from fgrpo_llm.evaluation.passk import sample_outcomes  # noqa: E402
from fgrpo_llm.rollout import SamplingParams, sample_completions  # noqa: E402
from fgrpo_theory.passk import pass_at_k_exact, pass_at_k_unbiased  # noqa: E402
from tests.llm._rl_helpers import ToyTask  # noqa: E402
from tests.llm.test_exact_mu_tau import train_toward_mixture  # noqa: E402

ALPHA = 1e-4
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
def dists(trained, char_tokenizer, countdown_task, problems):
    return answer_distributions(
        trained, char_tokenizer, countdown_task, problems, sampling=SamplingParams(T)
    )


def test_every_well_formed_answer_listed_with_the_verifier_verdict(dists, countdown_task, problems):
    for d, p in zip(dists, problems, strict=True):
        a = d.answers
        assert a.prompt_id == p.id
        assert len(a.answers) == 3 * 2 * 9  # 3! orders x 3^2 operator pairs, distinct numbers
        assert set(a.answers[i] for i in np.flatnonzero(a.correct)) == set(
            countdown_task.solutions(p)
        )
        assert all("".join(t) == y for t, y in zip(a.tokens, a.answers, strict=True))


def test_log_mu_equals_exact_mu(dists, trained, char_tokenizer, countdown_task, problems):
    """The correct answers' summed mass is the (separately tested) exact mu (up to float32
    rounding: the prompt is encoded once here, with every row there)."""
    ref = exact_mu_tau(
        trained,
        char_tokenizer,
        countdown_task,
        problems,
        sampling=SamplingParams(max_new_tokens=T),
    )
    for d in dists:
        assert d.answers.log_mu == pytest.approx(ref[d.answers.prompt_id].log_mu, abs=1e-6)


def test_sampled_pass_at_k_agrees_with_exact(
    dists, trained, char_tokenizer, countdown_task, problems
):
    """n = 2000 samples per problem from the sampled evaluator: the correct counts pass a
    binomial test at the exact mu, and the unbiased pass@8 lies within 5 standard errors of the
    exact one (delta method); the same counts reject a mu off by 20%."""
    n = 2000
    outcomes = sample_outcomes(
        trained,
        char_tokenizer,
        countdown_task,
        problems,
        n=n,
        sampling=SamplingParams(max_new_tokens=T),
        generator=torch.Generator().manual_seed(3),
    )
    c = outcomes.sum(axis=1)
    log_mu = np.array([d.answers.log_mu for d in dists])
    mu = np.exp(log_mu)
    assert ((mu > 0.05) & (mu < 0.95)).all()  # the test has power
    for ci, m in zip(c, mu, strict=True):
        assert scipy_stats.binomtest(int(ci), n, m).pvalue > ALPHA
        assert scipy_stats.binomtest(int(ci), n, 0.8 * m).pvalue < ALPHA
    for k in (1, 8):
        sampled = np.array([pass_at_k_unbiased(n, int(ci), k) for ci in c])
        exact = exact_pass_at_k(log_mu, k)
        se = k * (1 - mu) ** (k - 1) * np.sqrt(mu * (1 - mu) / n)
        assert (np.abs(sampled - exact) <= 5 * se + 1e-12).all(), (k, sampled, exact)
    assert mean_exact_pass_at_k(log_mu, [8])[8] == pytest.approx(np.mean(1 - (1 - mu) ** 8))


def test_malformed_remainder_matches_sampled_rate(
    dists, trained, char_tokenizer, countdown_task, problems
):
    n = 2000
    batch = sample_completions(
        trained,
        char_tokenizer,
        [p.prompt for p in problems],
        num_samples=n,
        sampling=SamplingParams(max_new_tokens=T),
        generator=torch.Generator().manual_seed(4),
    )
    for b, (d, p) in enumerate(zip(dists, problems, strict=True)):
        texts = batch.completions[b * n : (b + 1) * n]
        listed = set(well_formed_answers(countdown_task, p))
        bad = sum(t not in listed for t in texts)
        assert d.malformed >= 0.0 and d.slack < 0.02
        assert 0.1 < d.malformed < 0.9  # the mixture's extra digit and truncation
        assert scipy_stats.binomtest(bad, n, d.malformed).pvalue > ALPHA, (bad / n, d.malformed)
        # leaving the EOS factor out (mass only on the listed strings' prefixes) is rejected
        assert scipy_stats.binomtest(bad, n, 0.5 * d.malformed).pvalue < ALPHA


def test_log1mexp_and_pass_at_k_limits():
    a = np.array([-1e-12, -0.1, -math.log(2), -5.0, -50.0])
    assert log1mexp(a) == pytest.approx(np.log(1 - np.exp(a.astype(np.longdouble))), rel=1e-9)
    assert log1mexp(0.0) == -math.inf and log1mexp(-math.inf) == 0.0
    with pytest.raises(ValueError, match="a <= 0"):
        log1mexp(0.1)
    mu = np.array([0.0, 1e-9, 0.3, 0.999, 1.0])
    with np.errstate(divide="ignore"):
        log_mu = np.log(mu)
    for k in (1, 8, 64):
        assert exact_pass_at_k(log_mu, k) == pytest.approx(pass_at_k_exact(mu, k), abs=1e-12)
    assert exact_pass_at_k(0.0, 5) == 1.0 and exact_pass_at_k(-math.inf, 5) == 0.0
    # close to mu = 1, 1 - mu survives in log space: 1 - (1 - mu)^1 with 1 - mu = 1e-13
    assert 1 - exact_pass_at_k(math.log1p(-1e-13), 1) == pytest.approx(1e-13, rel=1e-3)


def test_bad_settings_and_tasks(trained, char_tokenizer, countdown_task, problems):
    with pytest.raises(ValueError, match="greedy"):
        answer_distributions(
            trained,
            char_tokenizer,
            countdown_task,
            problems,
            sampling=SamplingParams(T, temperature=0.0),
        )
    with pytest.raises(TypeError, match="SamplingParams"):
        answer_distributions(trained, char_tokenizer, countdown_task, problems, sampling={"T": 8})
    with pytest.raises(TypeError, match="cannot list"):
        answer_distributions(
            trained,
            char_tokenizer,
            ToyTask(2),
            ToyTask(2).problems("train"),
            sampling=SamplingParams(T),
        )
    with pytest.raises(ValueError, match="empty"):
        answer_distributions(
            trained, char_tokenizer, countdown_task, [], sampling=SamplingParams(T)
        )


def test_enumerated_mass_never_above_one():
    """float32 scores of a policy with all its mass on the answers can sum a hair above 1: that
    is divided out (malformed = 0), more is refused."""
    logp = np.log([0.5, 0.5 + 3e-6])
    fixed = within_one(logp, "p")
    assert np.exp(fixed).sum() == pytest.approx(1.0, abs=1e-15)
    assert np.array_equal(within_one(np.log([0.5, 0.25]), "p"), np.log([0.5, 0.25]))
    with pytest.raises(ValueError, match="probability 1.01"):
        within_one(np.log([0.5, 0.51]), "p")


@pytest.mark.parametrize("temperature, top_p, top_k", [(1.0, 1.0, 0), (1.3, 0.9, 0), (0.8, 1.0, 5)])
def test_shared_prompt_scoring_equals_row_scoring(
    trained, char_tokenizer, countdown_task, temperature, top_p, top_k
):
    """Prompts of different lengths (3 and 4 numbers), completions of different lengths (one
    token, cut without EOS, EOS-terminated), groups larger than a batch: the prompt-once scorer
    gives the full-row scorer's numbers."""
    from fgrpo_llm.evaluation.exact import _score_rows
    from fgrpo_llm.evaluation.shared_prompt import score_shared_prompts
    from fgrpo_llm.tasks.base import encode_prompt

    tok = char_tokenizer
    eos = tok.eos_token_id
    probs = countdown_task.problems("test")[:3] + countdown_task.problems("ood")[:2]
    groups = []
    for p in probs:
        ys = well_formed_answers(countdown_task, p)[:7]
        cs = [tok(y, add_special_tokens=False)["input_ids"] + [eos] for y in ys]
        cs += [[eos], tok(ys[0][:2], add_special_tokens=False)["input_ids"]]
        groups.append((encode_prompt(tok, p.prompt), cs))
    sampling = SamplingParams(
        max_new_tokens=16, temperature=temperature, top_p=top_p, top_k=top_k, batch_size=8
    )
    kw = dict(skip_ids=frozenset({0, 1, 3}), pad_id=tok.pad_token_id, sampling=sampling)
    rows = _score_rows(trained, [(x, c) for x, cs in groups for c in cs], **kw)
    shared = [r for g in score_shared_prompts(trained, groups, **kw) for r in g]
    assert len(rows) == len(shared) == 5 * 9
    for (a, sa), (b, sb) in zip(rows, shared, strict=True):
        assert a.shape == b.shape
        assert np.allclose(a, b, atol=1e-5, equal_nan=True)
        assert np.allclose(sa, sb, atol=1e-5, equal_nan=True)
    # the test can fail: a prompt cache given to the wrong rows changes the numbers
    swapped = score_shared_prompts(trained, [(groups[0][0], groups[1][1])], **kw)[0]
    assert not all(
        np.allclose(a, b[0], atol=1e-3) for (a, _), b in zip(rows[9:18], swapped, strict=True)
    )
