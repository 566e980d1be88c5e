"""Exact mu(x) and tau_E(x) (``fgrpo_llm.evaluation.exact``) against sampling, hand formulas and
limits.

The tiny random model of ``conftest`` puts about 1e-8 on any Countdown answer, which sampling
cannot tell from 0, so the Monte Carlo tests use it after a few hundred full-batch steps toward
a fixed mixture of right and wrong completions per prompt (common and rare correct answers, a
correct answer followed by an extra digit so that pi(EOS | answer) is far from 1, a truncated
one). A position-table model (logits depend on the position only) gives hand-computable
references and the degenerate cases.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
scipy_stats = pytest.importorskip("scipy.stats")

from fgrpo_llm.evaluation.exact import (  # noqa: E402
    RECORDED_KEYS,
    check_character_vocabulary,
    completion_logprobs,
    exact_mu_tau,
    exact_rare_set,
    supports_exact,
)
from fgrpo_llm.evaluation.rare import build_rare_set, load_rare_set, save_rare_set  # noqa: E402
from fgrpo_llm.evaluation.sampling_error import sampling_error_summary  # noqa: E402
from fgrpo_llm.model import build_tiny_model  # noqa: E402
from fgrpo_llm.rollout import SamplingParams, sample_completions  # noqa: E402
from fgrpo_llm.tasks.countdown import all_expressions  # noqa: E402
from fgrpo_llm.tokenizer import build_word_tokenizer  # noqa: E402
from tests.llm._rl_helpers import ToyTask  # noqa: E402
from tests.llm.conftest import TINY  # noqa: E402

#: p-value below which a sampled count contradicts an exact probability (several counts per test).
ALPHA = 1e-4


def mixture(task, problem) -> list[tuple[str, float]]:
    """The training targets of one prompt: (completion text, weight)."""
    s = task.solutions(problem)
    return [(s[0], 0.40), (s[1], 0.18), (s[-1], 0.06), (s[0] + "1", 0.16), (s[1][:3], 0.20)]


def train_toward_mixture(tokenizer, task, problems, *, steps: int = 80, seed: int = 0):
    """The conftest tiny model after ``steps`` full-batch Adam steps on the weighted NLL of the
    mixtures."""
    torch.manual_seed(seed)
    model = build_tiny_model(tokenizer, seed=seed, **TINY)
    rows, weights = [], []
    for pr in problems:
        for text, w in mixture(task, pr):
            rows.append(
                (
                    tokenizer(pr.prompt)["input_ids"],
                    tokenizer(text, add_special_tokens=False)["input_ids"]
                    + [tokenizer.eos_token_id],
                )
            )
            weights.append(w)
    L = max(len(p) + len(c) for p, c in rows)
    seq = torch.zeros((len(rows), L), dtype=torch.long)  # (R, L) right-padded with <pad>
    att = torch.zeros((len(rows), L), dtype=torch.bool)
    comp = torch.zeros((len(rows), L), dtype=torch.bool)
    for i, (p, c) in enumerate(rows):
        seq[i, : len(p) + len(c)] = torch.tensor(p + c)
        att[i, : len(p) + len(c)] = True
        comp[i, len(p) : len(p) + len(c)] = True
    w = torch.tensor(weights)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    model.train()
    for _ in range(steps):
        logits = model(input_ids=seq, attention_mask=att.long())["logits"][
            :, :-1
        ].float()  # (R, L-1, V)
        logp = torch.log_softmax(logits, -1).gather(-1, seq[:, 1:, None]).squeeze(-1)  # (R, L-1)
        loss = -(w * (logp * comp[:, 1:]).sum(1)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: tiny matrices on a loaded 2-core machine run many times faster so."""
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


def rare_event(task, problem) -> list[str]:
    """E(x): the two least weighted correct answers of the mixture."""
    s = task.solutions(problem)
    return [s[1], s[-1]]


class PositionTable(torch.nn.Module):
    """A causal 'LM' whose logits depend on the position only: logits = table[position_ids]."""

    def __init__(self, table: torch.Tensor):  # (max positions, V)
        super().__init__()
        self.table = torch.nn.Parameter(table.float(), requires_grad=False)

    def forward(
        self,
        input_ids,
        attention_mask=None,
        position_ids=None,
        use_cache=False,
        past_key_values=None,
    ):
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1]).expand_as(input_ids)
        return {"logits": self.table[position_ids], "past_key_values": None}  # (M, L, V)


def binom_p(k: int, n: int, p: float) -> float:
    return scipy_stats.binomtest(k, n, min(max(p, 0.0), 1.0)).pvalue


# -- against sampling ------------------------------------------------------------------------------


@pytest.mark.parametrize("max_new_tokens, temperature", [(8, 1.0), (5, 1.6)])
def test_exact_agrees_with_sampling(
    trained, char_tokenizer, countdown_task, problems, max_new_tokens, temperature
):
    """mu and tau against 2000 samples per prompt: two-sided exact binomial tests. At max_new_tokens
    = 5 the answers (5 characters) have no room for EOS: the sampler cuts the row and its text is
    still correct, so mu there also holds the continuations; the policy there is
    softmax(logits / 1.6)."""
    n = 2000
    events = {p.id: rare_event(countdown_task, p) for p in problems}
    exact = exact_mu_tau(
        trained,
        char_tokenizer,
        countdown_task,
        problems,
        events=events,
        sampling=SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature),
    )
    batch = sample_completions(
        trained,
        char_tokenizer,
        [p.prompt for p in problems],
        num_samples=n,
        sampling=SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature),
        generator=torch.Generator().manual_seed(1),
    )
    for b, p in enumerate(problems):
        texts = batch.completions[b * n : (b + 1) * n]
        correct = [t for t in texts if countdown_task.is_correct(p, t)]
        assert set(correct) <= set(countdown_task.solutions(p))
        hits = sum(t in events[p.id] for t in correct)
        m = exact[p.id]
        assert 0.05 < m.mu < 0.95 and 0.005 < m.tau < m.mu  # the test has power
        assert binom_p(len(correct), n, m.mu) > ALPHA, (p.id, len(correct) / n, m.mu)
        assert binom_p(hits, n, m.tau) > ALPHA, (p.id, hits / n, m.tau)
        # the trained model rarely emits <pad>/<bos>/<unk> (more often when hotter)
        assert m.slack < 0.02
        if max_new_tokens == 8 and temperature == 1.0 and b == 0:
            # the same counts reject a mu that forgets the EOS factor: the test can fail
            no_eos = math.log(
                sum(
                    math.exp(v)
                    for v in completion_logprobs(
                        trained,
                        char_tokenizer,
                        p.prompt,
                        [
                            char_tokenizer(y, add_special_tokens=False)["input_ids"]
                            for y in countdown_task.solutions(p)
                        ],
                        sampling=SamplingParams(max_new_tokens=len(countdown_task.solutions(p)[0])),
                    )
                )
            )
            assert binom_p(len(correct), n, math.exp(no_eos)) < 1e-6


def test_scores_match_the_samplers_logprobs(trained, char_tokenizer, problems):
    """completion_logprobs of sampled rows = the sum of the sampler's own old_logprobs."""
    T = 6
    batch = sample_completions(
        trained,
        char_tokenizer,
        [problems[0].prompt],
        num_samples=64,
        sampling=SamplingParams(max_new_tokens=T, temperature=1.3),
        generator=torch.Generator().manual_seed(3),
    )
    rows = [batch.sequences[i][batch.completion_mask[i]].tolist() for i in range(64)]
    mine = completion_logprobs(
        trained,
        char_tokenizer,
        problems[0].prompt,
        rows,
        sampling=SamplingParams(max_new_tokens=T, temperature=1.3),
    )
    theirs = (batch.old_logprobs * batch.completion_mask).sum(1).double().numpy()
    assert np.all(np.isfinite(mine))
    np.testing.assert_allclose(mine, theirs, atol=1e-4)
    # cut rows covered too
    assert any(len(r) == T and r[-1] != char_tokenizer.eos_token_id for r in rows)


@pytest.mark.parametrize("which", ["random", "trained"])
def test_all_outcomes_sum_to_one(which, tiny_model, trained, char_tokenizer, problems):
    """Every completion the sampler can return (EOS-ended up to T tokens, or T tokens cut) for
    T = 2: 1 + 22 + 22^2 outcomes whose probabilities sum to 1; impossible lists get -inf."""
    model = tiny_model if which == "random" else trained
    T, V, eos = 2, len(char_tokenizer), char_tokenizer.eos_token_id
    other = [i for i in range(V) if i != eos]
    outcomes = [list(w) + [eos] for n in range(T) for w in itertools.product(other, repeat=n)]
    outcomes += [list(w) for w in itertools.product(other, repeat=T)]
    lp = completion_logprobs(
        model,
        char_tokenizer,
        problems[0].prompt,
        outcomes,
        sampling=SamplingParams(max_new_tokens=T, batch_size=512),
    )
    assert len(outcomes) == 1 + 22 + 22**2 and np.all(np.isfinite(lp))
    assert math.isclose(float(np.exp(lp).sum()), 1.0, abs_tol=1e-4)
    impossible = [[5], [eos, 5], [5, 6, eos], [], [5, 6, 7]]
    assert np.all(
        completion_logprobs(
            model,
            char_tokenizer,
            problems[0].prompt,
            impossible,
            sampling=SamplingParams(max_new_tokens=T),
        )
        == -np.inf
    )


def test_every_expression_together_is_at_most_one(
    trained, char_tokenizer, countdown_task, problems
):
    """All Countdown expressions of the prompt's numbers (correct or not) carry mass <= 1, and mu is
    the part of it on the correct ones."""
    p = problems[0]
    texts = [t for t, _ in all_expressions(p.answer.numbers, "+-*/")]
    ids = [
        char_tokenizer(t, add_special_tokens=False)["input_ids"] + [char_tokenizer.eos_token_id]
        for t in texts
    ]
    mass = np.exp(
        completion_logprobs(
            trained,
            char_tokenizer,
            p.prompt,
            ids,
            sampling=SamplingParams(max_new_tokens=8),
        )
    )
    mu = exact_mu_tau(
        trained,
        char_tokenizer,
        countdown_task,
        [p],
        sampling=SamplingParams(max_new_tokens=8),
    )[p.id].mu
    correct = sum(m for t, m in zip(texts, mass, strict=True) if countdown_task.is_correct(p, t))
    assert mass.sum() <= 1 + 1e-6 and 0.3 < mass.sum()
    assert math.isclose(correct, mu, rel_tol=1e-5)


# -- references and limits -------------------------------------------------------------------------


def _table(char_tokenizer, rng, rows=40):
    return torch.tensor(rng.normal(0, 2, size=(rows, len(char_tokenizer))))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_against_hand_formula_on_a_position_model(
    char_tokenizer, countdown_task, problems, temperature
):
    """With logits W[pos]: log pi(y) = sum_t log softmax(W[P-1+t] / temp)[c_t] + log
    softmax(W[P-1+n] / temp)[EOS]."""
    W = _table(char_tokenizer, np.random.default_rng(0))
    model = PositionTable(W)
    p = problems[0]
    P = len(char_tokenizer(p.prompt)["input_ids"])
    logq = torch.log_softmax(W.double() / temperature, -1).numpy()
    eos = char_tokenizer.eos_token_id
    want = {}
    for y in countdown_task.solutions(p):
        c = char_tokenizer(y, add_special_tokens=False)["input_ids"]
        want[y] = sum(logq[P - 1 + t, c[t]] for t in range(len(c))) + logq[P - 1 + len(c), eos]
    got = exact_mu_tau(
        model,
        char_tokenizer,
        countdown_task,
        [p],
        sampling=SamplingParams(max_new_tokens=8, temperature=temperature),
    )[p.id]
    for y, v in want.items():
        assert math.isclose(got.answer_logprobs[y], v, rel_tol=1e-5)
    assert math.isclose(got.log_mu, float(np.logaddexp.reduce(list(want.values()))), rel_tol=1e-5)


def test_limiting_cases(trained, char_tokenizer, countdown_task, problems):
    p = problems[0]
    sols = countdown_task.solutions(p)
    forms = lambda E: {p.id: E}  # noqa: E731
    empty = exact_mu_tau(
        trained,
        char_tokenizer,
        countdown_task,
        [p],
        sampling=SamplingParams(max_new_tokens=8),
    )[p.id]
    assert (
        empty.tau == 0.0
        and empty.log_tau == -math.inf
        and empty.tau_slack == 0.0
        and empty.event == ()
    )
    everything = exact_mu_tau(
        trained,
        char_tokenizer,
        countdown_task,
        [p],
        events=forms(sols),
        sampling=SamplingParams(max_new_tokens=8),
    )[p.id]
    assert everything.tau == everything.mu and everything.tau_slack == everything.slack
    for r in (1, 2, len(sols) - 1):
        for E in itertools.combinations(sols, r):
            m = exact_mu_tau(
                trained,
                char_tokenizer,
                countdown_task,
                [p],
                events=forms(list(E)),
                sampling=SamplingParams(max_new_tokens=8),
            )[p.id]
            assert 0 < m.tau < m.mu == empty.mu and m.tau_slack <= m.slack
            assert math.isclose(m.tau, sum(math.exp(m.answer_logprobs[y]) for y in E), rel_tol=1e-9)
    # answers of 5 characters cannot appear within 4 tokens
    short = exact_mu_tau(
        trained,
        char_tokenizer,
        countdown_task,
        [p],
        sampling=SamplingParams(max_new_tokens=4),
    )[p.id]
    assert (
        short.mu == 0.0
        and short.slack == 0.0
        and all(v == -math.inf for v in short.answer_logprobs.values())
    )


def test_a_model_with_all_mass_on_one_answer(char_tokenizer, countdown_task, problems):
    p = problems[0]
    y, others = countdown_task.solutions(p)[1], countdown_task.solutions(p)[2:]
    P = len(char_tokenizer(p.prompt)["input_ids"])
    path = char_tokenizer(y, add_special_tokens=False)["input_ids"] + [char_tokenizer.eos_token_id]
    W = torch.zeros(40, len(char_tokenizer))
    for t, tok in enumerate(path):
        W[P - 1 + t] = -math.inf
        W[P - 1 + t, tok] = 0.0
    m = exact_mu_tau(
        PositionTable(W),
        char_tokenizer,
        countdown_task,
        [p],
        events={p.id: [y]},
        sampling=SamplingParams(max_new_tokens=8),
    )[p.id]
    assert m.log_mu == 0.0 and m.mu == 1.0 and m.tau == 1.0 and m.slack == 0.0
    assert all(m.answer_logprobs[o] == -math.inf for o in others)
    other = exact_mu_tau(
        PositionTable(W),
        char_tokenizer,
        countdown_task,
        [p],
        events={p.id: others},
        sampling=SamplingParams(max_new_tokens=8),
    )[p.id]
    assert other.mu == 1.0 and other.tau == 0.0
    batch = sample_completions(
        PositionTable(W),
        char_tokenizer,
        [p.prompt],
        num_samples=20,
        sampling=SamplingParams(max_new_tokens=8),
        generator=torch.Generator().manual_seed(0),
    )
    assert set(batch.completions) == {y}


def test_skipped_special_tokens_stay_inside_the_slack(char_tokenizer, countdown_task, problems):
    """The sampler decodes with skip_special_tokens, so "y<unk><eos>" reads as y: the canonical sum
    is then a strict lower bound, and the sampled mu lies between it and mu + slack."""
    p = problems[0]
    y = countdown_task.solutions(p)[0]
    P = len(char_tokenizer(p.prompt)["input_ids"])
    c = char_tokenizer(y, add_special_tokens=False)["input_ids"]
    unk, eos = char_tokenizer.unk_token_id, char_tokenizer.eos_token_id
    W = torch.zeros(40, len(char_tokenizer))
    for t, tok in enumerate(c):
        W[P - 1 + t, tok] = 5.0
    W[P - 1 + len(c) :, eos] = 4.0
    W[P - 1 + len(c) :, unk] = 3.4
    model = PositionTable(W)
    m = exact_mu_tau(
        model,
        char_tokenizer,
        countdown_task,
        [p],
        sampling=SamplingParams(max_new_tokens=8),
    )[p.id]
    n = 4000
    batch = sample_completions(
        model,
        char_tokenizer,
        [p.prompt],
        num_samples=n,
        sampling=SamplingParams(max_new_tokens=8),
        generator=torch.Generator().manual_seed(2),
    )
    k = sum(countdown_task.is_correct(p, t) for t in batch.completions)
    assert binom_p(k, n, m.mu) < 1e-6 and k / n > m.mu  # the canonical spelling misses mass
    # within the bound
    assert scipy_stats.binomtest(k, n, m.mu_upper, alternative="greater").pvalue > ALPHA
    assert m.slack > 0.05 and m.mu_upper > m.mu


def test_check_character_vocabulary(char_tokenizer):
    S = check_character_vocabulary(char_tokenizer)
    assert S == {
        char_tokenizer.pad_token_id,
        char_tokenizer.bos_token_id,
        char_tokenizer.unk_token_id,
    }
    multi = build_word_tokenizer(list("0123456789+-*") + ["3*"])
    with pytest.raises(ValueError, match=r"'3\*'.*more than one character.*allow_lower_bound"):
        check_character_vocabulary(multi)


# -- argument errors and the lower-bound mode ------------------------------------------------------


def test_refuses_what_it_cannot_compute_exactly(trained, char_tokenizer, countdown_task, problems):
    p = problems[0]
    assert supports_exact(countdown_task) and not supports_exact(ToyTask())
    with pytest.raises(TypeError, match="toy.*no solutions"):
        exact_mu_tau(
            trained,
            char_tokenizer,
            ToyTask(),
            ToyTask().problems("train"),
            sampling=SamplingParams(max_new_tokens=8),
        )
    for settings, events, pattern in [
        ({"temperature": 0.0}, None, "temperature must be > 0"),
        ({"max_new_tokens": 0}, None, "max_new_tokens must be >= 1"),
        ({"top_p": 0.0}, None, r"top_p must lie in \(0, 1\]"),
        ({"batch_size": 0}, None, "batch_size must be >= 1"),
        ({}, {p.id: ["1+2+3"]}, "'1\\+2\\+3', the form of none"),
        ({}, {"nope": []}, "not in problems: \\['nope'\\]"),
    ]:
        with pytest.raises(ValueError, match=pattern):  # (SamplingParams checks its fields)
            sampling = SamplingParams(**{"max_new_tokens": 8, **settings})
            exact_mu_tau(
                trained, char_tokenizer, countdown_task, [p], events=events, sampling=sampling
            )
    with pytest.raises(TypeError, match="SamplingParams"):
        exact_mu_tau(trained, char_tokenizer, countdown_task, [p], sampling={"max_new_tokens": 8})
    with pytest.raises(ValueError, match="distinct ids"):
        exact_mu_tau(
            trained,
            char_tokenizer,
            countdown_task,
            [p, p],
            sampling=SamplingParams(max_new_tokens=8),
        )


def test_lower_bound_mode_for_a_tokenizer_with_several_spellings(countdown_task, problems):
    """A vocabulary with a two-character token: refused, or with allow_lower_bound the canonical
    spelling's mass, flagged not exact (its tokenization encodes '3*' as one token)."""
    tok = build_word_tokenizer(list("0123456789+-*=:") + ["3*"])
    model = build_tiny_model(tok, seed=0, **TINY).eval()

    class SpacedCountdown:  # answers in the word tokenizer's spelling ("4 + 7 + 2")
        name, splits = "spaced", ("test",)

        def solutions(self, problem):
            return [" ".join(y) for y in countdown_task.solutions(problem)]

        def is_correct(self, problem, completion):
            return completion.replace(" ", "") in countdown_task.solutions(problem)

    p = problems[0]
    with pytest.raises(ValueError, match="more than one character"):
        exact_mu_tau(
            model,
            tok,
            SpacedCountdown(),
            [p],
            sampling=SamplingParams(max_new_tokens=12),
        )
    m = exact_mu_tau(
        model,
        tok,
        SpacedCountdown(),
        [p],
        sampling=SamplingParams(max_new_tokens=12),
        allow_lower_bound=True,
    )[p.id]
    assert not m.exact and math.isnan(m.slack) and math.isnan(m.mu_upper) and 0 < m.mu < 1


# -- the rare set ----------------------------------------------------------------------------------


def test_the_pipeline_skips_exact_for_a_tokenizer_with_several_spellings(
    countdown_task, problems, capsys
):
    """``fgrpo-llm rare-set`` and the demo call ``record_exact_mu_tau`` after all the sampling: a
    subword vocabulary ("3*" is one token) gives no exact sums, so it says why and keeps the
    sampled estimates instead of failing (the CLI saved nothing, before)."""
    from fgrpo_llm.experiments.countdown.stages import record_exact_mu_tau

    tok = build_word_tokenizer(list("0123456789+-*=:") + ["3*"])
    assert record_exact_mu_tau(None, tok, countdown_task, problems, None) is None
    err = capsys.readouterr().err
    assert "exact (mu, tau) not computed, the sampled estimates stand" in err and "3*" in err


def test_exact_rare_set_records_and_summarises(
    tmp_path, trained, char_tokenizer, countdown_task, problems
):
    rs = build_rare_set(
        trained,
        char_tokenizer,
        countdown_task,
        problems,
        num_rollouts=300,
        top_fraction=0.05,
        sampling=SamplingParams(max_new_tokens=8),
        generator=torch.Generator().manual_seed(4),
    )
    cmp_ = exact_rare_set(
        trained,
        char_tokenizer,
        countdown_task,
        problems + [countdown_task.problems("test")[-1]],
        rs,
    )
    s = cmp_.summary
    for pid, info in rs.prompts.items():
        assert set(RECORDED_KEYS) <= set(info)
        m = cmp_.per_prompt[pid]
        assert m.event == tuple(sorted(info["rare_forms"])) and info["mu_exact"] == m.mu
        # the set's own mu agrees within MC error
        assert binom_p(info["num_correct"], 300, m.mu) > ALPHA
    mu_s = np.array([rs.prompts[i]["mu"] for i in rs.prompts])
    mu_e = np.array([rs.prompts[i]["mu_exact"] for i in rs.prompts])
    assert s["num_prompts"] == 2 and math.isclose(
        s["mu_abs_error_max"], float(np.max(np.abs(mu_s - mu_e)))
    )
    assert s["exact"] and s["max_new_tokens"] == 8 and s["slack_max"] < 1e-3
    assert rs.meta["exact"] is s
    json.dumps(rs.prompts, allow_nan=False)  # plain JSON: no inf or nan recorded
    json.dumps(rs.meta, allow_nan=False)
    again = load_rare_set(save_rare_set(rs, tmp_path / "rs.json"))
    assert again.prompts == rs.prompts
    with pytest.raises(ValueError, match="problems lacks 2 prompt"):
        exact_rare_set(trained, char_tokenizer, countdown_task, countdown_task.problems("ood"), rs)


def test_sampling_error_summary_by_hand():
    s = sampling_error_summary(
        mu_sampled=[0.5, 0.2, 0.9],
        mu_exact=[0.4, 0.25, 0.9],
        tau_sampled=[0.01, 0.05, 0.0],
        tau_exact=[0.02, 0.04, 0.3],
        has_event=[True, True, False],
        num_rollouts=100,
    )
    assert s["num_prompts"] == 3 and s["num_with_event"] == 2
    assert math.isclose(s["mu_abs_error_mean"], (0.1 + 0.05 + 0) / 3)
    assert math.isclose(s["mu_abs_error_max"], 0.1) and math.isclose(
        s["mu_error_mean"], (0.1 - 0.05) / 3
    )
    assert math.isclose(s["tau_error_mean"], (-0.01 + 0.01) / 2, abs_tol=1e-15)
    assert math.isclose(s["tau_ratio_mean"], (0.5 + 1.25) / 2) and math.isclose(
        s["tau_ratio_median"], 0.875
    )
    assert (
        s["tau_below_frac"] == 0.5 and s["tau_above_frac"] == 0.5 and s["num_tau_exact_zero"] == 0
    )
    # Wilson 95% intervals: 50/100 -> [0.404, 0.596] (misses 0.4), 20/100 -> [0.133, 0.289],
    # 90/100 -> [0.826, 0.945]
    assert math.isclose(s["mu_in_ci95_frac"], 2 / 3)
    empty = sampling_error_summary([0.5], [0.5], [0.0], [0.0], [False])
    assert empty["tau_ratio_mean"] is None and empty["tau_below_frac"] is None
    with pytest.raises(ValueError, match="one length"):
        sampling_error_summary([0.5], [0.5, 0.2], [0.0], [0.0], [False])
    with pytest.raises(ValueError, match="mu_exact must lie in"):
        sampling_error_summary([0.5], [1.5], [0.0], [0.0], [False])


def test_sampling_error_summary_tau_is_over_the_prompts_with_an_event():
    """The tau entries average over the prompts with E(x) only (a fifth prompt without one, far
    off, changes none of them); the ratio leaves out tau_exact = 0; a tie is neither below nor
    above. Three ratios 0.5, 1.25, 1 tell the median (1) from the mean (11/12); one exact value
    0 with sampled 2/100 lies outside its Wilson interval, the other three inside."""
    s = sampling_error_summary(
        mu_sampled=[0.3, 0.3, 0.3, 0.3, 0.9],
        mu_exact=[0.36, 0.3, 0.3, 0.3, 0.88],
        tau_sampled=[0.01, 0.05, 0.03, 0.02, 0.5],
        tau_exact=[0.02, 0.04, 0.03, 0.0, 0.3],
        has_event=[True, True, True, True, False],
        num_rollouts=100,
    )
    assert s["num_with_event"] == 4 and s["num_tau_exact_zero"] == 1
    assert math.isclose(s["mu_sampled_mean"], 2.1 / 5) and math.isclose(
        s["mu_exact_mean"], 2.14 / 5
    )
    assert math.isclose(s["mu_abs_error_max"], 0.06)  # the largest error is negative: -0.06
    assert math.isclose(s["tau_sampled_mean"], 0.11 / 4)
    assert math.isclose(s["tau_exact_mean"], 0.09 / 4)
    assert math.isclose(s["tau_error_mean"], 0.02 / 4)
    assert math.isclose(s["tau_abs_error_mean"], 0.04 / 4)  # |-0.01| + 0.01 + 0 + 0.02
    assert math.isclose(s["tau_ratio_median"], 1.0) and math.isclose(s["tau_ratio_mean"], 11 / 12)
    assert s["tau_below_frac"] == 0.25 and s["tau_above_frac"] == 0.5
    assert s["tau_in_ci95_frac"] == 0.75  # 0 is not in the interval of 2/100 ([0.0055, 0.070])
    assert s["mu_in_ci95_frac"] == 1.0  # 0.36 in [0.219, 0.396] (30/100), 0.88 in [0.826, 0.945]


def test_sampling_error_summary_counts_coverage_in_the_closed_95_percent_wilson_interval():
    """Four sampled proportions of M = 100 whose exact value each lies in the 95% Wilson interval
    (closed), at a place a near variant would miss: 0.41 for 50/100 (inside [0.404, 0.596],
    outside the 90% interval [0.419, 0.581]); 0 for 0/100 and 1 for 100/100 (on the bound);
    0.66 for 0.57 (57/100: 0.57 * 100 is 56.999... in binary, rounded to 57, whose interval
    reaches 0.663, not truncated to 56, whose interval stops at 0.653). Both mu and tau."""
    from fgrpo_llm.evaluation.stats import wilson_interval

    z90 = float(scipy_stats.norm.ppf(0.95))
    assert wilson_interval(50, 100)[0] < 0.41 < wilson_interval(50, 100, z=z90)[0]
    assert wilson_interval(56, 100)[1] < 0.66 < wilson_interval(57, 100)[1]
    assert wilson_interval(0, 100)[0] == 0.0 and wilson_interval(100, 100)[1] == 1.0
    sampled, exact = [0.5, 0.0, 1.0, 0.57], [0.41, 0.0, 1.0, 0.66]
    s = sampling_error_summary(sampled, exact, sampled, exact, [True] * 4, num_rollouts=100)
    assert s["mu_in_ci95_frac"] == 1.0 and s["tau_in_ci95_frac"] == 1.0
    with pytest.raises(ValueError, match="num_rollouts must be an integer >= 1"):
        sampling_error_summary(sampled, exact, sampled, exact, [True] * 4, num_rollouts=0)
