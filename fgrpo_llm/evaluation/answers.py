"""A policy's whole answer distribution per prompt, and exact pass@k from it (Countdown).

Countdown's well-formed answers are finite: every parenthesis-free expression that uses each of
the prompt's numbers once (``fgrpo_llm.tasks.countdown.all_expressions``; at most 54 with 3
numbers, 648 with 4). For each such answer y the sampler's probability log pi(y | x) is scored
exactly (``fgrpo_llm.evaluation.exact``: the tokens of y, then EOS, under
softmax(filter(logits / temperature)); the prompt encoded once for all its answers,
``fgrpo_llm.evaluation.shared_prompt``), so a prompt's distribution is

    pi(y_k | x), k = 1..K,     pi(malformed | x) = 1 - sum_k pi(y_k | x),

with the verifier's verdict on each y_k. From it, with mu(x) = sum_{k correct} pi(y_k | x),
pass@k is exact (paper Section 5.3; no sampling error):

    pass@k(x) = 1 - (1 - mu)^k = -expm1(k * log(1 - mu)),
    log(1 - mu) = log(-expm1(log mu))   if log mu > -log 2
                = log1p(-exp(log mu))   otherwise,

which keeps 1 - mu accurate when mu is close to 1. The unbiased sampled estimator
(``fgrpo_llm.evaluation.passk``) has this value as its expectation.

Exactness needs one spelling per string (``exact.check_character_vocabulary``: the built-in
character tokenizer). Spellings with a skipped special token inside ("3*5<pad>+7") decode to a
well-formed answer but are not summed: they stay in the malformed remainder, bounded by
``slack`` (the same bound as ``exact.exact_mu_tau``'s), tiny for a trained base. The scores are
float32 log-softmax values: a sum a hair above 1 (at most 1e-5, ``within_one``) is divided out.

    from fgrpo_llm.evaluation.answers import answer_distributions, mean_exact_pass_at_k
    dists = answer_distributions(model, tok, task, task.problems("test"),
                                 sampling=SamplingParams(max_new_tokens=32))
    mean_exact_pass_at_k([d.answers.log_mu for d in dists], ks=[1, 8, 64])
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fgrpo_common.checks import check_integer
from fgrpo_llm.evaluation.exact import _logsumexp, check_character_vocabulary
from fgrpo_llm.evaluation.shared_prompt import score_shared_prompts
from fgrpo_llm.tasks.base import encode_prompt
from fgrpo_llm.tasks.countdown import CountdownTask, all_expressions
from fgrpo_theory.forecast import PromptAnswers

if TYPE_CHECKING:
    from fgrpo_llm.rollout import SamplingParams

__all__ = [
    "AnswerDistribution",
    "well_formed_answers",
    "answer_distributions",
    "log1mexp",
    "within_one",
    "exact_pass_at_k",
    "mean_exact_pass_at_k",
    "supports_answer_enumeration",
]

#: Rows scored at once when ``sampling.batch_size`` is None.
DEFAULT_ROWS = 512


@dataclass(frozen=True)
class AnswerDistribution:
    """One prompt's answers under one policy, with the bound on what the enumeration misses.

    ``slack`` bounds the mass of well-formed answers spelled with a skipped special token (module
    docstring): the true well-formed mass lies in [1 - malformed, 1 - malformed + slack].
    """

    answers: PromptAnswers
    slack: float

    @property
    def malformed(self) -> float:
        """pi(malformed | x) = 1 - enumerated mass (>= 0)."""
        return math.exp(self.answers.malformed_logp)


def supports_answer_enumeration(task) -> bool:
    """True for a task whose well-formed answers this module can list (Countdown)."""
    return isinstance(task, CountdownTask)


def well_formed_answers(task, problem) -> list[str]:
    """Every well-formed answer text of ``problem``, in the task's rank order: Countdown's
    parenthesis-free expressions over the prompt's numbers and the task's operators. TypeError
    for a task whose answers cannot be listed."""
    if not supports_answer_enumeration(task):
        raise TypeError(
            f"task {getattr(task, 'name', type(task).__name__)!r} cannot list its well-formed "
            "answers (only Countdown can): use the sampled evaluation (fgrpo-llm eval)"
        )
    numbers, _ = problem.answer
    return [text for text, _ in all_expressions(numbers, task.operators)]


def _check_sampling(sampling) -> tuple[int, SamplingParams]:
    """(T, ``sampling`` with ``batch_size`` set: DEFAULT_ROWS when None) for
    ``exact._score_rows`` and ``score_shared_prompts``; greedy is refused."""
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    if not isinstance(sampling, SamplingParams):
        raise TypeError(
            f"sampling must be a fgrpo_llm.rollout.SamplingParams, got {type(sampling).__name__}"
        )
    if sampling.temperature <= 0:
        raise ValueError(
            f"temperature must be > 0 (greedy decoding has no sampling distribution), got "
            f"temperature={sampling.temperature}"
        )
    return sampling.max_new_tokens, dataclasses.replace(
        sampling, batch_size=sampling.batch_size or DEFAULT_ROWS
    )


def _answer_rows(tokenizer, task, problem, T: int, skip_ids, eos: int):
    """(answers, token ids per answer, rows to score, answer index of each row) of one prompt;
    an answer longer than T tokens gets no row (log pi = -inf)."""
    answers = well_formed_answers(task, problem)
    prompt_ids = encode_prompt(tokenizer, problem.prompt)
    if not prompt_ids:
        raise ValueError(f"the prompt of problem {problem.id!r} encodes to no token")
    ids, rows, owners = [], [], []
    encoded = tokenizer(answers, add_special_tokens=False)["input_ids"]  # one batched call
    for k, (y, c) in enumerate(zip(answers, encoded, strict=True)):
        c = list(c)
        if tokenizer.decode(c, skip_special_tokens=True) != y or any(
            t in skip_ids or t == eos for t in c
        ):
            raise ValueError(
                f"answer {y!r} of problem {problem.id!r} does not round-trip through the tokenizer"
            )
        ids.append(c)
        if len(c) <= T:  # the sampler cuts a row at T tokens: no EOS after a T-token answer
            rows.append((prompt_ids, c + [eos] if len(c) < T else c))
            owners.append(k)
    return answers, ids, rows, owners


def _slack(scored, ids, owners, T: int) -> float:
    """sum over distinct prefixes u of the answers (n + 1 <= T) of pi(u | x) pi(S | x, u)."""
    terms = {}
    for (tok, skip), k in zip(scored, owners, strict=True):
        c = ids[k]
        if skip is None or len(c) + 1 > T:
            continue
        prefix = np.concatenate([[0.0], np.cumsum(tok[: len(c)])])  # (n+1,) log pi(c_<t | x)
        for t in range(len(c) + 1):
            terms.setdefault(tuple(c[:t]), prefix[t] + skip[t])
    return math.exp(_logsumexp(terms.values())) if terms else 0.0


def answer_distributions(
    model,
    tokenizer,
    task,
    problems,
    *,
    sampling: SamplingParams,
    progress: bool = False,
) -> list[AnswerDistribution]:
    """Each problem's well-formed answers and their exact log pi(y | x) under ``sampling``.

    ``answers.prompt_id`` is the problem's id; ``answers.tokens`` each answer's token strings as
    the tokenizer emits them (``convert_ids_to_tokens``, EOS not included); ``answers.correct``
    the verifier's verdict (``task.is_correct``). Rows of several problems are scored together,
    ``sampling.batch_size`` (default 512) at a time. The tokenizer must give each string one
    spelling (``check_character_vocabulary``: ValueError otherwise).
    """
    T, sampling = _check_sampling(sampling)
    problems = list(problems)
    if not problems:
        raise ValueError("problems must not be empty")
    eos = tokenizer.eos_token_id
    skip_ids = check_character_vocabulary(tokenizer)  # raises without an EOS or with BPE
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    per_chunk = max(1, sampling.batch_size // 54)  # about one batch of 3-number rows per chunk
    starts = range(0, len(problems), per_chunk)
    if progress:
        from tqdm import tqdm

        starts = tqdm(starts, desc="exact answers", unit="chunk", leave=False)
    out = []
    for start in starts:
        plans = [
            _answer_rows(tokenizer, task, pr, T, skip_ids, eos)
            for pr in problems[start : start + per_chunk]
        ]
        # each prompt encoded once for all its answers (shared_prompt; = exact._score_rows)
        scoring = [i for i, plan in enumerate(plans) if plan[2]]
        scored = dict(
            zip(
                scoring,
                score_shared_prompts(
                    model,
                    [(plans[i][2][0][0], [c for _, c in plans[i][2]]) for i in scoring],
                    skip_ids=skip_ids,
                    pad_id=pad_id,
                    sampling=sampling,
                ),
                strict=True,
            )
        )
        for i, (pr, (answers, ids, _rows, owners)) in enumerate(
            zip(problems[start : start + per_chunk], plans, strict=True)
        ):
            mine = scored.get(i, [])
            logp = np.full(len(answers), -np.inf)  # (K,)
            for (tok, _), k in zip(mine, owners, strict=True):
                logp[k] = float(tok.sum())
            out.append(
                AnswerDistribution(
                    answers=PromptAnswers(
                        prompt_id=pr.id,
                        answers=tuple(answers),
                        tokens=tuple(tuple(tokenizer.convert_ids_to_tokens(c)) for c in ids),
                        logp=within_one(logp, pr.id),
                        correct=np.array([bool(task.is_correct(pr, y)) for y in answers]),
                    ),
                    slack=_slack(mine, ids, owners, T),
                )
            )
    return out


#: How far above 1 the enumerated mass may come from float32 rounding of the scores.
ROUNDING = 1e-5


def within_one(logp, prompt_id: str = "") -> np.ndarray:
    """(K,) ``logp`` whose probabilities sum to at most 1: a sum in (1, 1 + ROUNDING] (float32
    scores of a model with nearly all its mass on well-formed answers) is divided out, so the
    malformed remainder is 0; a larger sum is a ValueError (the scores are not one policy's)."""
    logp = np.minimum(np.asarray(logp, dtype=np.float64), 0.0)
    total = _logsumexp(logp.tolist())
    if total <= 0.0:
        return logp
    if total > math.log1p(ROUNDING):
        raise ValueError(
            f"the answers of prompt {prompt_id!r} hold probability {math.exp(total):.9g} > 1: "
            "their scores are not one sampling policy's"
        )
    return logp - total


def log1mexp(a):
    """log(1 - exp(a)) for a <= 0, accurate at both ends (Maechler 2012): log(-expm1(a)) for
    a > -log 2, log1p(-exp(a)) below. a = 0 gives -inf, a = -inf gives 0."""
    a = np.asarray(a, dtype=np.float64)
    if np.isnan(a).any() or (a > 0).any():
        raise ValueError(f"log1mexp needs a <= 0 (a log-probability), got {a[~(a <= 0)][:3]}")
    with np.errstate(divide="ignore"):
        out = np.where(a > -math.log(2), np.log(-np.expm1(np.minimum(a, 0))), np.log1p(-np.exp(a)))
    return out[()] if out.ndim == 0 else out


def exact_pass_at_k(log_mu, k):
    """pass@k = 1 - (1 - mu)^k = -expm1(k * log(1 - mu)) from log mu (module docstring).
    Arrays broadcast; k an integer >= 1."""
    k = np.asarray(check_integer("k", k, minimum=1), dtype=np.float64)
    out = -np.expm1(k * log1mexp(np.minimum(np.asarray(log_mu, dtype=np.float64), 0.0)))
    return out[()] if np.ndim(out) == 0 else out


def mean_exact_pass_at_k(log_mu, ks) -> dict[int, float]:
    """{k: mean over problems of pass@k(x)} from the problems' log mu."""
    log_mu = np.asarray(log_mu, dtype=np.float64)
    if log_mu.ndim != 1 or log_mu.size == 0:
        raise ValueError(f"log_mu must be a non-empty 1-D array, got shape {log_mu.shape}")
    ks = [int(check_integer("k", k, minimum=1)) for k in ks]
    if not ks:
        raise ValueError("ks must not be empty")
    return {k: float(np.mean(exact_pass_at_k(log_mu, k))) for k in ks}
