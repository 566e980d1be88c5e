"""Exact success mass mu(x) and rare-event mass tau_E(x) for tasks that list their correct answers.

Lemma 3.1 of the paper (Section 3) predicts the tail-miss probability of a group of N rollouts,

    P(B_{E,N}) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N,

from the prompt's success probability mu(x) = pi(correct | x) and the mass tau_E(x) = pi(E(x) | x)
of its rare event E(x). The rare-correct set (App. M.2, ``fgrpo_llm.evaluation.rare``) estimates
both from M base rollouts and picks E(x) from the same rollouts, which biases tau: low where E(x)
is the least frequent sampled correct form ("designated": the smallest of several counts), high
where E(x) comes from the rare-correct set (a form enters only when it was sampled, so its
sampled tau is at least 1/M). A task
whose correct completions form a finite list that the verifier accepts in one spelling only
(Countdown: ``CountdownTask.solutions(problem)``) lets us compute them instead:

    log mu(x)    = logsumexp_{y in Y(x)}                 log pi(y | x)
    log tau_E(x) = logsumexp_{y in Y(x), form(y) in E(x)} log pi(y | x)

with Y(x) = ``task.solutions(problem)``, form = ``tasks.base.solution_form`` (the rule the rare set
and the training logs use) and log pi(y | x) the log-probability that the sampler
(``fgrpo_llm.rollout.sample_completions``) returns y. With c = c_0 .. c_{n-1} the tokens of y
(``tokenizer(y, add_special_tokens=False)``), the prompt tokens in front (as the sampler encodes
them, ``fgrpo_llm.tasks.base.encode_prompt``), T = ``max_new_tokens``, and
pi = softmax(filter(logits / temperature)) (the sampling policy; ``filter`` = top-k / top-p, off
by default):

    log pi(y | x) = sum_{t<n} log pi(c_t | x, c_<t) + log pi(EOS | x, c)   if n + 1 <= T
                  = sum_{t<n} log pi(c_t | x, c_<t)                         if n = T (the sampler
                                                        cuts the row at T tokens; its text is y,
                                                        and the verifier counts it correct)
                  = -inf                                                    if n > T

Exactness. The sum is exact when c is the only token sequence the sampler can return whose
decoded text is y. :func:`check_character_vocabulary` checks the tokenizer side of that: every
non-special token decodes to one character, distinct tokens to distinct characters, and decoding
concatenates (true for the built-in character tokenizer, ``fgrpo_llm.tokenizer``); otherwise
(a BPE vocabulary has many spellings of "3*5+7") a ValueError is raised, or, with
``allow_lower_bound=True``, the canonical-spelling sum is returned as a lower bound (``exact``
False). One gap remains even for the character tokenizer: the sampler decodes with
``skip_special_tokens=True``, so a completion with ``<pad>``, ``<bos>`` or ``<unk>`` inside it
("3*5<unk>+7") also reads as "3*5+7". Those spellings are bounded, not summed: every one of
them starts with a canonical prefix u of some correct y and then a skipped token s in S, and
these events are disjoint for distinct u, so

    mu_canonical <= mu <= mu_canonical + slack,   slack = sum_{u} pi(u | x) pi(S | x, u),

over the distinct prefixes u (the empty one and y itself included) of the correct answers with
n + 1 <= T; ``tau_slack`` is the same over the answers in E(x). Both come from the same forward
pass. A trained base puts almost no mass on special tokens, so the slack is tiny (reported).

Scoring runs one batched forward pass over right-padded rows (prompt, completion, EOS), positions
counted over attended tokens as in the sampler; it agrees with the sampler's ``old_logprobs``
up to float rounding (the sampler decodes with a KV cache). Tasks that cannot enumerate (boxed
math) keep the sampled estimates of ``build_rare_set``.

    from fgrpo_llm.evaluation.exact import exact_rare_set
    # records mu_exact, tau_exact
    comparison = exact_rare_set(model, tokenizer, task, problems, rare_set)
    # share of prompts whose sampled tau is below the exact one
    comparison.summary["tau_below_frac"]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from fgrpo_common.files import finite_or_none
from fgrpo_llm.evaluation.sampling_error import sampling_error_summary
from fgrpo_llm.tasks.base import encode_prompt, solution_form

if TYPE_CHECKING:
    from fgrpo_llm.rollout import SamplingParams

__all__ = [
    "ExactMass",
    "ExactComparison",
    "supports_exact",
    "check_character_vocabulary",
    "completion_logprobs",
    "exact_mu_tau",
    "exact_rare_set",
    "rare_set_sampling",
    "RECORDED_KEYS",
]

#: Keys :func:`exact_rare_set` writes into each ``rare_set.prompts[prompt_id]``.
RECORDED_KEYS = (
    "mu_exact",
    "tau_exact",
    "log_mu_exact",
    "log_tau_exact",
    "mu_exact_slack",
    "tau_exact_slack",
    "exact",
)


@dataclass(frozen=True)
class ExactMass:
    """mu(x) and tau_E(x) of one prompt, in log space, with the slack of skipped-token spellings.

    ``answer_logprobs[y]`` is log pi(y | x) of each correct answer (-inf when it cannot fit in
    ``max_new_tokens``). ``slack`` / ``tau_slack`` bound the mass of spellings with skipped
    special tokens (module docstring): mu lies in [mu, mu + slack]. ``exact`` is False when the
    tokenizer check failed and ``allow_lower_bound`` was set: mu is then a lower bound only and
    the slacks are nan.
    """

    log_mu: float
    log_tau: float
    slack: float
    tau_slack: float
    event: tuple[str, ...]
    answer_logprobs: dict[str, float] = field(repr=False)
    exact: bool = True

    @property
    def mu(self) -> float:
        """exp(log_mu), capped at 1 (float rounding of a model with all its mass on the answers)."""
        return min(1.0, math.exp(self.log_mu))

    @property
    def tau(self) -> float:
        """exp(log_tau), capped at 1."""
        return min(1.0, math.exp(self.log_tau))

    @property
    def mu_upper(self) -> float:
        """mu + slack, capped at 1 (nan when not exact)."""
        return min(1.0, self.mu + self.slack) if self.exact else math.nan


@dataclass
class ExactComparison:
    """Exact (mu, tau) per rare-set prompt and how far the sampled estimates were off."""

    per_prompt: dict[str, ExactMass]
    summary: dict


def supports_exact(task) -> bool:
    """True when ``task`` can list its correct completions (a callable ``solutions(problem)``)."""
    return callable(getattr(task, "solutions", None))


def check_character_vocabulary(tokenizer) -> frozenset[int]:
    """Check that each string has one spelling without skipped tokens; return those skipped ids S.

    Holds when every token other than the skipped ones decodes (``skip_special_tokens=True``, as
    the sampler decodes) to exactly one character, no two tokens to the same character, and
    decoding a sequence concatenates the tokens' characters (probed on the whole vocabulary
    interleaved with the skipped tokens). S = the tokens that decode to "" (``<pad>``, ``<bos>``,
    ``<unk>`` for the built-in tokenizer), EOS excluded: it ends the row. ValueError otherwise,
    naming the first offending token.
    """
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError(
            "the tokenizer has no EOS token: sampled rows never end, so mu is not a "
            "sum over answers"
        )
    size = len(tokenizer)
    skipped, chars, seen = [], [], {}
    for i in range(size):
        if i == eos:
            continue
        text = tokenizer.decode([i], skip_special_tokens=True)
        if text == "":
            skipped.append(i)
        elif len(text) != 1:
            raise ValueError(
                f"token {i} ({tokenizer.convert_ids_to_tokens(i)!r}) decodes to {text!r}, more "
                f"than one character: strings have several spellings, so the sum over "
                f"canonical spellings is only a lower bound (pass allow_lower_bound=True)"
            )
        elif text in seen:
            raise ValueError(
                f"tokens {seen[text]} and {i} both decode to {text!r}: strings have several "
                f"spellings (pass allow_lower_bound=True for a lower bound)"
            )
        else:
            seen[text] = i
            chars.append(i)
    probe = [
        t
        for pair in zip(chars, (skipped or [None]) * len(chars), strict=False)
        for t in pair
        if t is not None
    ]
    want = "".join(tokenizer.decode([i], skip_special_tokens=True) for i in chars)
    got = tokenizer.decode(probe, skip_special_tokens=True)
    if got != want:
        raise ValueError(
            f"decoding does not concatenate the tokens' characters ({got[:40]!r} vs "
            f"{want[:40]!r}): strings may have several spellings (pass allow_lower_bound=True)"
        )
    return frozenset(skipped)


#: Rows scored at once when ``sampling.batch_size`` is None.
SCORE_BATCH = 64


def _check_sampling(sampling) -> int:
    """The completion limit T of ``sampling`` (a SamplingParams, checked on construction), which
    must sample (temperature > 0)."""
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    if not isinstance(sampling, SamplingParams):
        raise TypeError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
    if sampling.temperature <= 0:
        raise ValueError(
            f"temperature must be > 0 (greedy decoding has no sampling distribution), "
            f"got temperature={sampling.temperature}"
        )
    return sampling.max_new_tokens


@torch.no_grad()
def _score_rows(
    model,
    rows: list[tuple[list[int], list[int]]],
    *,
    skip_ids: frozenset[int],
    pad_id: int,
    sampling: SamplingParams,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """For each (prompt ids, completion ids) row: (n,) log pi(c_t | x, c_<t) over the completion
    tokens and, when ``skip_ids`` is not empty, (n,) log pi(S | x, c_<t) at the same positions
    (the distribution each completion token was drawn from, ``sampling``'s). Float64 numpy;
    ``sampling.batch_size`` rows at a time (``SCORE_BATCH`` when None)."""
    from fgrpo_llm.model import autocast  # lazy: transformers
    from fgrpo_llm.rollout import filter_logits, position_ids_from_mask  # lazy: transformers

    temperature, top_p, top_k = sampling.temperature, sampling.top_p, sampling.top_k
    batch_size, autocast_dtype = sampling.batch_size or SCORE_BATCH, sampling.autocast_dtype
    device = next(model.parameters()).device
    skip = torch.tensor(sorted(skip_ids), dtype=torch.long, device=device)
    out: list[tuple[np.ndarray, np.ndarray | None]] = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            L = max(len(p) + len(c) for p, c in chunk)
            seq = torch.full((len(chunk), L), pad_id, dtype=torch.long)  # (B, L) right-padded
            att = torch.zeros((len(chunk), L), dtype=torch.bool)  # (B, L)
            for i, (p, c) in enumerate(chunk):
                seq[i, : len(p) + len(c)] = torch.tensor(p + c, dtype=torch.long)
                att[i, : len(p) + len(c)] = True
            seq, att = seq.to(device), att.to(device)
            with autocast(device, autocast_dtype):
                logits = model(
                    input_ids=seq,
                    attention_mask=att.long(),
                    position_ids=position_ids_from_mask(att),
                )["logits"]
            logits = filter_logits(
                logits[:, :-1, :].float() / temperature, top_k=top_k, top_p=top_p
            )  # (B, L-1, V)
            logq = torch.log_softmax(logits, dim=-1)  # (B, L-1, V): column j predicts token j + 1
            tok = logq.gather(-1, seq[:, 1:, None]).squeeze(-1).double().cpu()  # (B, L-1)
            skip_mass = (
                torch.logsumexp(logq[:, :, skip], dim=-1).double().cpu()  # (B, L-1)
                if len(skip)
                else None
            )
            for i, (p, c) in enumerate(chunk):
                # predictors of completion tokens 0..n-1
                cols = slice(len(p) - 1, len(p) - 1 + len(c))
                out.append(
                    (
                        tok[i, cols].numpy(),
                        None if skip_mass is None else skip_mass[i, cols].numpy(),
                    )
                )
    finally:
        model.train(was_training)
    return out


def completion_logprobs(
    model,
    tokenizer,
    prompt: str,
    completions: list[list[int]],
    *,
    sampling: SamplingParams,
) -> np.ndarray:
    """(K,) log-probability that the sampler (``sampling``) returns exactly each completion token
    list for ``prompt``.

    A completion the sampler can return either ends with its first EOS and has at most
    ``max_new_tokens`` tokens, or has exactly ``max_new_tokens`` tokens and no EOS (cut at the
    limit); anything else (longer, EOS not last, short without EOS) gets -inf. The outcomes of the
    sampler are disjoint and exhaustive: their probabilities sum to 1.
    """
    T = _check_sampling(sampling)
    eos = tokenizer.eos_token_id
    prompt_ids = encode_prompt(tokenizer, prompt)
    if not prompt_ids:
        raise ValueError(f"the prompt must encode to at least one token, got prompt={prompt!r}")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos or 0)
    result = np.full(len(completions), -np.inf)
    rows, where = [], []
    for j, c in enumerate(completions):
        c = [int(t) for t in c]
        ends = len(c) >= 1 and c[-1] == eos
        if len(c) > T or (eos in c[:-1]) or (not ends and len(c) != T) or not c:
            continue
        rows.append((prompt_ids, c))
        where.append(j)
    scored = _score_rows(model, rows, skip_ids=frozenset(), pad_id=pad_id, sampling=sampling)
    for j, (tok, _) in zip(where, scored, strict=True):
        result[j] = float(tok.sum())
    return result


def _logsumexp(values) -> float:
    """log sum_i exp(v_i) of the log-masses ``values`` (``scipy.special.logsumexp``); -inf for
    none, or when all are -inf."""
    from scipy.special import logsumexp  # deferred: scipy stays out of fgrpo_llm's imports

    return float(logsumexp(np.fromiter(values, dtype=float)))


def _answers(task, problem) -> list[str]:
    """``task.solutions(problem)`` checked: distinct non-empty strings its own verifier accepts."""
    answers = task.solutions(problem)
    if not isinstance(answers, (list, tuple)):
        raise TypeError(
            f"task.solutions must return a list of strings, got {type(answers).__name__} "
            f"for problem {problem.id!r}"
        )
    for y in answers:
        if not isinstance(y, str) or not y:
            raise ValueError(f"task.solutions({problem.id!r}) holds {y!r}, not a non-empty string")
        if not task.is_correct(problem, y):
            raise ValueError(
                f"task.solutions({problem.id!r}) holds {y!r}, which its verifier rejects"
            )
    if len(set(answers)) != len(answers):
        dup = next(y for y in answers if answers.count(y) > 1)
        raise ValueError(f"task.solutions({problem.id!r}) lists {dup!r} twice")
    return list(answers)


def exact_mu_tau(
    model,
    tokenizer,
    task,
    problems,
    *,
    events: dict | None = None,
    sampling: SamplingParams,
    allow_lower_bound: bool = False,
) -> dict[str, ExactMass]:
    """Exact mu(x) and tau_E(x) of each problem under the sampling policy ``sampling`` (module
    docstring).

    ``events[problem.id]`` lists the solution forms of E(x) (the rare set's ``rare_forms``); a
    problem without an entry has an empty E (tau = 0). Every form in E must be the form of one of
    the task's solutions (ValueError otherwise: the event names an answer the enumeration lacks).
    All (prompt, answer) rows of all problems are scored together in batches of
    ``sampling.batch_size`` (``SCORE_BATCH`` when None).
    """
    if not supports_exact(task):
        raise TypeError(
            f"task {getattr(task, 'name', type(task).__name__)!r} has no solutions(problem) "
            f"method: its correct completions cannot be enumerated, keep the sampled estimates"
        )
    T = _check_sampling(sampling)
    problems, events = _checked_problems(problems, events)
    eos, skip_ids, exact = _vocabulary(tokenizer, allow_lower_bound)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos

    plan = []  # per problem: (answers, forms, event, token ids per answer)
    rows, owners = [], []  # rows to score and (problem index, answer index) of each
    for pi_, problem in enumerate(problems):
        answers, forms, event = _answers_and_event(task, problem, events)
        prompt_ids = encode_prompt(tokenizer, problem.prompt)
        if not prompt_ids:
            raise ValueError(f"the prompt of problem {problem.id!r} encodes to no token")
        tokens = [_answer_ids(tokenizer, problem, y, skip_ids, eos) for y in answers]
        for ai, c in enumerate(tokens):
            if len(c) <= T:
                rows.append((prompt_ids, c + [eos] if len(c) + 1 <= T else c))
                owners.append((pi_, ai))
        plan.append((answers, forms, event, tokens))

    scored = _score_rows(model, rows, skip_ids=skip_ids, pad_id=pad_id, sampling=sampling)
    by_owner = dict(zip(owners, scored, strict=True))
    return {
        problem.id: _problem_mass(
            *planned, [by_owner.get((pi_, ai)) for ai in range(len(planned[0]))], T, exact
        )
        for pi_, (problem, planned) in enumerate(zip(problems, plan, strict=True))
    }


def _checked_problems(problems, events: dict | None) -> tuple[list, dict]:
    """``problems`` as a non-empty list with distinct ids, and ``events`` as a dict naming only
    those; a ValueError otherwise."""
    problems = list(problems)
    if not problems:
        raise ValueError("problems must not be empty")
    ids = [pr.id for pr in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"problems must have distinct ids, got {next(i for i in ids if ids.count(i) > 1)!r} "
            "twice"
        )
    events = dict(events or {})
    unknown = sorted(set(events) - set(ids))
    if unknown:
        raise ValueError(f"events names problems that are not in problems: {unknown[:5]}")
    return problems, events


def _vocabulary(tokenizer, allow_lower_bound: bool) -> tuple[int, frozenset, bool]:
    """``(eos, skip_ids, exact)``: the EOS id (a ValueError without one), the ids a character
    vocabulary skips (``check_character_vocabulary``), and whether the masses are exact (else,
    with ``allow_lower_bound``, lower bounds over the canonical tokenization only)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError(
            "the tokenizer has no EOS token: sampled rows never end, so mu is not a sum over "
            "answers"
        )
    try:
        return eos, check_character_vocabulary(tokenizer), True
    except ValueError:
        if not allow_lower_bound:
            raise
        return eos, frozenset(), False


def _answers_and_event(task, problem, events: dict) -> tuple[list[str], list[str], tuple]:
    """The problem's answers, their solution forms, and its event E(x) (sorted forms); a
    ValueError when E names a form of none of the answers."""
    answers = _answers(task, problem)
    forms = [str(solution_form(task, problem, y)) for y in answers]
    event = tuple(sorted({str(f) for f in events.get(problem.id, ())}))
    missing = sorted(set(event) - set(forms))
    if missing:
        raise ValueError(
            f"events[{problem.id!r}] holds {missing[0]!r}, the form of none of the task's "
            f"solutions for that problem"
        )
    return answers, forms, event


def _answer_ids(tokenizer, problem, y: str, skip_ids, eos: int) -> list[int]:
    """The token ids of answer ``y``; a ValueError when they do not decode back to ``y`` or hold
    a skipped id or EOS."""
    c = list(tokenizer(y, add_special_tokens=False)["input_ids"])
    if tokenizer.decode(c, skip_special_tokens=True) != y or any(
        t in skip_ids or t == eos for t in c
    ):
        raise ValueError(
            f"answer {y!r} of problem {problem.id!r} does not round-trip through the "
            f"tokenizer (its ids {c} decode to "
            f"{tokenizer.decode(c, skip_special_tokens=True)!r})"
        )
    return c


def _problem_mass(answers, forms, event, tokens, scored, T: int, exact: bool) -> ExactMass:
    """One problem's :class:`ExactMass` from its answers' scored rows (``scored[i]``: (token
    log-probs, skip log-probs) of answer i, None when it did not fit in T tokens)."""
    # answer -> log pi(y | x); prefix ids -> (log pi(u | x) + log pi(S | x, u), in E)
    logp, slack_terms = {}, {}
    for ai, (y, c) in enumerate(zip(answers, tokens, strict=True)):
        if scored[ai] is None:
            logp[y] = -math.inf
            continue
        tok, skip = scored[ai]
        logp[y] = float(tok.sum())
        if skip is not None and len(c) + 1 <= T:
            # (n+1,) log pi(c_<t | x), t = 0..n
            prefix = np.concatenate([[0.0], np.cumsum(tok[: len(c)])])
            for t in range(len(c) + 1):
                key = tuple(c[:t])
                value, in_event = slack_terms.get(key, (prefix[t] + skip[t], False))
                slack_terms[key] = (value, in_event or forms[ai] in event)
    in_e = [y for y, f in zip(answers, forms, strict=True) if f in event]
    return ExactMass(
        log_mu=_logsumexp(logp.values()),
        log_tau=_logsumexp(logp[y] for y in in_e),
        slack=math.exp(_logsumexp(v for v, _ in slack_terms.values())) if exact else math.nan,
        tau_slack=math.exp(_logsumexp(v for v, e in slack_terms.values() if e))
        if exact
        else math.nan,
        event=event,
        answer_logprobs=logp,
        exact=exact,
    )


def rare_set_sampling(rare_set, **overrides) -> SamplingParams:
    """The SamplingParams a rare set was built with (its ``meta``: max_new_tokens, temperature,
    top_p, top_k), rows scored ``SCORE_BATCH`` at a time; ``overrides`` replace fields
    (``autocast_dtype``, ``batch_size``). A ValueError when the meta lacks max_new_tokens."""
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    meta = rare_set.meta or {}
    if meta.get("max_new_tokens") is None and "max_new_tokens" not in overrides:
        raise ValueError("max_new_tokens is not in rare_set.meta: pass sampling")
    settings = {
        "max_new_tokens": meta.get("max_new_tokens"),
        "temperature": meta.get("temperature", 1.0),
        "top_p": meta.get("top_p", 1.0),
        "top_k": meta.get("top_k", 0),
        "batch_size": SCORE_BATCH,
    }
    return SamplingParams(**{**settings, **overrides})


def exact_rare_set(
    model,
    tokenizer,
    task,
    problems,
    rare_set,
    *,
    sampling: SamplingParams | None = None,
    record: bool = True,
    allow_lower_bound: bool = False,
) -> ExactComparison:
    """Exact (mu, tau) for every prompt of ``rare_set`` (E(x) = its ``rare_forms``), next to the
    sampled ones.

    ``problems`` must hold every prompt id of ``rare_set.prompts`` (the problems the set was built
    from; extra ones are ignored). ``sampling`` defaults to the settings the set was built with
    (:func:`rare_set_sampling`). With ``record`` (default), each ``rare_set.prompts[pid]`` gains
    ``RECORDED_KEYS`` (log values None where -inf, so the file stays plain JSON) and
    ``rare_set.meta["exact"]`` the summary (:func:`sampling_error_summary`, plus the settings and
    the largest slack). Pass the model the set was built from (the base).
    """
    sampling = rare_set_sampling(rare_set) if sampling is None else sampling
    by_id = {pr.id: pr for pr in problems}
    pids = list(rare_set.prompts)
    missing = [pid for pid in pids if pid not in by_id]
    if missing:
        raise ValueError(
            f"problems lacks {len(missing)} prompt(s) of the rare set, e.g. {missing[:3]}"
        )
    if not pids:
        raise ValueError("the rare set has no prompts")
    events = {pid: list(rare_set.prompts[pid].get("rare_forms") or []) for pid in pids}
    per_prompt = exact_mu_tau(
        model,
        tokenizer,
        task,
        [by_id[pid] for pid in pids],
        events=events,
        sampling=sampling,
        allow_lower_bound=allow_lower_bound,
    )
    info = [rare_set.prompts[pid] for pid in pids]
    summary = sampling_error_summary(
        [p["mu"] for p in info],
        [per_prompt[pid].mu for pid in pids],
        [p["tau"] for p in info],
        [per_prompt[pid].tau for pid in pids],
        [bool(p.get("rare_forms")) for p in info],
        num_rollouts=[int(p["num_rollouts"]) for p in info],
    )
    slacks = [per_prompt[pid].slack for pid in pids]
    summary.update(
        {
            "exact": all(m.exact for m in per_prompt.values()),
            "slack_max": finite_or_none(max(slacks)),
            "max_new_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
        }
    )
    if record:
        for pid, p in zip(pids, info, strict=True):
            m = per_prompt[pid]
            p.update(
                {
                    "mu_exact": m.mu,
                    "tau_exact": m.tau,
                    "log_mu_exact": finite_or_none(m.log_mu),
                    "log_tau_exact": finite_or_none(m.log_tau),
                    "mu_exact_slack": finite_or_none(m.slack),
                    "tau_exact_slack": finite_or_none(m.tau_slack),
                    "exact": m.exact,
                }
            )
        rare_set.meta["exact"] = summary
    return ExactComparison(per_prompt=per_prompt, summary=summary)
