"""The rare-correct set and Delta NLL_rare (paper App. M.2).

Construction: take P training prompts, draw M rollouts of each from the base model (temperature
1, top-p 1), keep the correct ones, score each by its length-normalised NLL under the base,

    nll(y | x) = -(1/|y|) * sum_t log pi_base(y_t | x, y_<t),

and keep the top q fraction by NLL over the whole pool (defaults P = 256, M = 800, q = 1%).
During training,

    Delta NLL_rare = mean_{(x, y) in set} nll_theta(y | x) - mean nll_base(y | x);

above zero means the policy moved mass away from the rare correct solutions.

The same rollouts give, per prompt, the success rate mu = #correct / M and the rare-correct
mass tau of a rare event E(x) defined by solution forms (``Task.solution_form``): E(x) is the set
of forms of the prompt's rare-set trajectories, or, for a prompt without one, its designated rare
mode (its least frequent correct form, when it has at least two distinct ones). tau = base
frequency of E(x). Forms make E(x) checkable in training logs (``groups.jsonl`` records the form of
every correct completion), which is what the tail-miss cross-check (``validate.py``) needs.

    fgrpo-llm rare-set --base runs/base --out runs/rare_set.json --prompts 64 --rollouts 200
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from fgrpo_common.checks import check_integer, check_probability, is_finite_number
from fgrpo_common.files import atomic_write_text
from fgrpo_llm.evaluation.passk import sampled_chunks
from fgrpo_llm.tasks.base import solution_form

if TYPE_CHECKING:
    from fgrpo_llm.rollout import SamplingParams

#: Format version of the saved artifact.
RARE_SET_VERSION = 1


@dataclass
class RareSet:
    """A fixed set of rare correct trajectories with their base NLL, plus per-prompt (mu, tau).

    ``token_ids[i]`` is the full unpadded sequence (prompt tokens, then completion tokens including
    EOS); the completion starts at ``prompt_lengths[i]``. ``prompts[prompt_id]`` holds
    ``mu``, ``tau``, ``num_rollouts``, ``num_correct``, ``form_counts`` (correct forms -> count),
    ``rare_forms`` (the forms of E(x)) and ``rare_source`` ("rare_set", "designated" or "none").
    """

    prompt_ids: list[str]
    token_ids: list[list[int]]
    prompt_lengths: list[int]
    texts: list[str]
    forms: list[str | None]
    base_nll: np.ndarray  # (S,) length-normalised NLL under the base model
    prompts: dict[str, dict]
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def mean_base_nll(self) -> float:
        return float(np.mean(self.base_nll)) if len(self) else float("nan")

    @property
    def has_exact(self) -> bool:
        """Whether every prompt carries exact base (mu, tau) (``fgrpo_llm.evaluation.exact``)."""
        return bool(self.prompts) and all(
            "mu_exact" in p and "tau_exact" in p for p in self.prompts.values()
        )

    def mu_tau(self, *, exact: bool | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(prompt_ids, mu, tau)`` over the prompts that have a rare event E(x): the exact values
        when ``exact`` (None: when the set has them), else the sampled estimates."""
        exact = self.has_exact if exact is None else exact
        mu_key, tau_key = ("mu_exact", "tau_exact") if exact else ("mu", "tau")
        ids = [pid for pid, p in self.prompts.items() if p["rare_forms"]]
        mu = np.array([self.prompts[pid][mu_key] for pid in ids], dtype=np.float64)
        tau = np.array([self.prompts[pid][tau_key] for pid in ids], dtype=np.float64)
        return ids, mu, tau


@torch.no_grad()
def length_normalised_nll(
    model,
    token_ids: list[list[int]],
    prompt_lengths: list[int],
    *,
    pad_token_id: int = 0,
    batch_size: int = 64,
    autocast_dtype: torch.dtype | None = None,
) -> np.ndarray:
    """nll(y | x) = -(1/|y|) sum_t log pi(y_t | x, y_<t) for each sequence, shape (S,).

    Sequences are right-padded (positions of real tokens stay 0..len-1, so no position-id care is
    needed) and scored with ``rollout.token_logprobs``.
    """
    from fgrpo_llm.rollout import token_logprobs  # lazy: transformers

    if len(token_ids) != len(prompt_lengths):
        raise ValueError(
            f"token_ids and prompt_lengths differ in length: {len(token_ids)} vs "
            f"{len(prompt_lengths)}"
        )
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = np.zeros(len(token_ids), dtype=np.float64)
    try:
        for start in range(0, len(token_ids), batch_size):
            seqs = token_ids[start : start + batch_size]
            L = max(len(s) for s in seqs)
            sequences = torch.full((len(seqs), L), pad_token_id, dtype=torch.long)  # (S, L)
            attention = torch.zeros((len(seqs), L), dtype=torch.bool)  # (S, L)
            completion = torch.zeros((len(seqs), L), dtype=torch.bool)  # (S, L)
            for i, s in enumerate(seqs):
                sequences[i, : len(s)] = torch.tensor(s, dtype=torch.long)
                attention[i, : len(s)] = True
                completion[i, prompt_lengths[start + i] : len(s)] = True
            logp = (
                token_logprobs(
                    model, sequences.to(device), attention.to(device), autocast_dtype=autocast_dtype
                )
                .float()
                .cpu()
            )  # (S, L)
            length = completion.sum(dim=1).clamp(min=1)  # (S,)
            nll = -(logp * completion).sum(dim=1) / length  # (S,)
            out[start : start + len(seqs)] = nll.double().numpy()
    finally:
        model.train(was_training)
    return out


def build_rare_set(
    model,
    tokenizer,
    task,
    problems,
    *,
    num_rollouts: int = 800,
    top_fraction: float = 0.01,
    sampling: SamplingParams,
    generator: torch.Generator,
    progress: bool = False,
) -> RareSet:
    """Sample M = ``num_rollouts`` base rollouts per problem under ``sampling``, keep the correct
    ones, keep the top ``top_fraction`` (q) of them by length-normalised base NLL (at least one
    when any is correct).

    Also estimates, per prompt, mu = #correct / M and tau = base frequency of E(x) (module doc).
    """
    M = int(check_integer("num_rollouts", num_rollouts, minimum=1))
    q = float(check_probability("top_fraction", top_fraction, open_low=True))
    problems = list(problems)
    if not problems:
        raise ValueError("problems must not be empty")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    pool = []  # every correct rollout: (prompt_id, token ids, prompt length, text, form)
    prompts: dict[str, dict] = {}
    for _, chunk, batch in sampled_chunks(
        model,
        tokenizer,
        problems,
        n=M,
        sampling=sampling,
        generator=generator,
        progress="rare-set rollouts" if progress else None,
    ):
        seq = batch.sequences.cpu()  # (B*M, L)
        att = batch.attention_mask.cpu()  # (B*M, L)
        comp = batch.completion_mask.cpu()  # (B*M, L)
        for b, problem in enumerate(chunk):
            forms = Counter()
            num_correct = 0
            for j in range(M):
                row = b * M + j
                text = batch.completions[row]
                if not task.is_correct(problem, text):
                    continue
                num_correct += 1
                form = solution_form(task, problem, text)
                forms[form] += 1
                keep = att[row] | comp[row]
                ids = seq[row][keep].tolist()
                prompt_len = int(att[row, : batch.prompt_length].sum())
                pool.append((problem.id, ids, prompt_len, text, form))
            prompts[problem.id] = {
                "mu": num_correct / M,
                "num_rollouts": M,
                "num_correct": num_correct,
                "form_counts": {str(k): v for k, v in forms.items()},
            }

    # scored in the model's own precision (no autocast), as Delta NLL_rare later scores the
    # trained policy: a base NLL from bf16 autocast would start Delta NLL_rare off zero
    nll = (
        length_normalised_nll(
            model,
            [p[1] for p in pool],
            [p[2] for p in pool],
            pad_token_id=pad_id,
            batch_size=64,
        )
        if pool
        else np.zeros(0)
    )
    keep = _top_fraction_indices(nll, q)
    chosen = [pool[i] for i in keep]
    threshold = float(nll[keep].min()) if len(keep) else None
    _assign_rare_events(prompts, chosen)
    meta = {
        "version": RARE_SET_VERSION,
        "num_prompts": len(problems),
        "num_rollouts": M,
        "top_fraction": q,
        "num_correct_pool": len(pool),
        "nll_threshold": threshold,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_new_tokens": sampling.max_new_tokens,
        # one generator draws the chunks in turn: the samples depend on the batch size
        "batch_size": sampling.batch_size,
        "task": getattr(task, "name", None),
        "pool_mean_nll": float(nll.mean()) if len(pool) else None,
    }
    return RareSet(
        prompt_ids=[c[0] for c in chosen],
        token_ids=[c[1] for c in chosen],
        prompt_lengths=[c[2] for c in chosen],
        texts=[c[3] for c in chosen],
        forms=[c[4] for c in chosen],
        base_nll=nll[keep].astype(np.float64),
        prompts=prompts,
        meta=meta,
    )


def _top_fraction_indices(nll: np.ndarray, q: float) -> np.ndarray:
    """Indices of the ceil(q * S) largest values of ``nll`` (highest NLL first); none if S = 0."""
    S = len(nll)
    if S == 0:
        return np.zeros(0, dtype=np.int64)
    count = max(1, int(np.ceil(q * S)))
    return np.argsort(-nll, kind="stable")[:count]


def _assign_rare_events(prompts: dict[str, dict], chosen) -> None:
    """Fill ``rare_forms``, ``rare_source`` and tau = sum of base counts of E(x) / M per prompt."""
    by_prompt: dict[str, set] = {}
    for pid, _ids, _plen, _text, form in chosen:
        by_prompt.setdefault(pid, set()).add(str(form))
    for pid, p in prompts.items():
        counts = p["form_counts"]
        if pid in by_prompt:
            rare, source = sorted(by_prompt[pid]), "rare_set"
        elif len(counts) >= 2:
            # designated rare mode: the least frequent correct form (ties broken by name)
            rare, source = [min(counts, key=lambda f: (counts[f], f))], "designated"
        else:
            rare, source = [], "none"
        p["rare_forms"] = rare
        p["rare_source"] = source
        p["tau"] = sum(counts.get(f, 0) for f in rare) / p["num_rollouts"]


def save_rare_set(rare_set: RareSet, path) -> Path:
    """Write the artifact as one JSON file (atomic)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "meta": rare_set.meta,
        "prompts": rare_set.prompts,
        "trajectories": [
            {
                "prompt_id": pid,
                "token_ids": ids,
                "prompt_length": pl,
                "text": text,
                "form": form,
                "base_nll": float(nll),
            }
            for pid, ids, pl, text, form, nll in zip(
                rare_set.prompt_ids,
                rare_set.token_ids,
                rare_set.prompt_lengths,
                rare_set.texts,
                rare_set.forms,
                rare_set.base_nll,
                strict=True,
            )
        ],
    }

    return atomic_write_text(path, json.dumps(data))


def load_rare_set(path, *, vocab_size: int | None = None) -> RareSet:
    """Read an artifact written by :func:`save_rare_set`, checked with the rules it was written
    by (:func:`check_rare_set_data`); with ``vocab_size``, every token id must lie below it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"rare-correct set not found: {path}")
    try:
        data = json.loads(path.read_text(), object_pairs_hook=_no_repeated_keys)
    except _RepeatedKey as err:  # a prompt id given twice: which of its entries holds?
        raise ValueError(f"{path}: {err.args[0]!r} is given twice in one object") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{path} is not a rare-correct set file ({err})") from err
    check_rare_set_data(data, str(path), vocab_size=vocab_size)
    trajs = data["trajectories"]
    return RareSet(
        prompt_ids=[str(t["prompt_id"]) for t in trajs],
        token_ids=[t["token_ids"] for t in trajs],
        prompt_lengths=[t["prompt_length"] for t in trajs],
        texts=[t["text"] for t in trajs],
        forms=[t.get("form") for t in trajs],
        base_nll=np.array([t["base_nll"] for t in trajs], dtype=np.float64),
        prompts=data["prompts"],
        meta=data.get("meta", {}),
    )


class _RepeatedKey(Exception):
    """A JSON object names one key twice (json.loads would keep the last silently)."""


def _no_repeated_keys(pairs: list) -> dict:
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen[key] = value
    return seen


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_rare_set_data(data, where: str, *, vocab_size: int | None = None) -> None:
    """A ValueError naming ``where`` and the first bad entry unless ``data`` is a rare-correct
    set as :func:`save_rare_set` writes it: ``prompts`` an object of objects (``mu`` and ``tau``
    in [0, 1], ``mu_exact`` and ``tau_exact`` too where present, ``rare_forms`` a list),
    ``trajectories`` a list of objects with ``token_ids`` non-negative integers (below
    ``vocab_size`` when given), ``prompt_length`` in [0, len(token_ids)), a finite
    ``base_nll``, a string ``text``."""
    bad = f"{where} is not a rare-correct set file"
    if not isinstance(data, dict):
        raise ValueError(f"{bad}: not a JSON object")
    prompts, trajs = data.get("prompts"), data.get("trajectories")
    if not isinstance(prompts, dict):
        raise ValueError(f"{bad}: 'prompts' must be an object, got {str(prompts)[:40]!r}")
    for pid, p in prompts.items():
        _check_prompt_entry(p, f"{bad}: prompts[{pid!r}]")
    if not isinstance(trajs, list):
        raise ValueError(f"{bad}: 'trajectories' must be a list")
    if "meta" in data and not isinstance(data["meta"], dict):
        raise ValueError(f"{bad}: 'meta' must be an object")
    for i, t in enumerate(trajs):
        _check_trajectory(t, f"{bad}: trajectory {i}", vocab_size)


def _check_prompt_entry(p, at: str) -> None:
    """A ValueError starting with ``at`` unless ``p`` is a rare set's prompt entry."""
    if not isinstance(p, dict):
        raise ValueError(f"{at} must be an object")
    for key in ("mu", "tau", "mu_exact", "tau_exact"):
        if key in ("mu", "tau") and key not in p:
            raise ValueError(f"{at} has no {key}")
        if key in p and not (is_finite_number(p[key]) and 0.0 <= p[key] <= 1.0):
            raise ValueError(f"{at}.{key} must lie in [0, 1]")
    if not isinstance(p.get("rare_forms"), list):
        raise ValueError(f"{at}.rare_forms must be a list")


def _check_trajectory(t, at: str, vocab_size: int | None) -> None:
    """A ValueError starting with ``at`` unless ``t`` is a rare set's trajectory."""
    if not isinstance(t, dict):
        raise ValueError(f"{at} must be an object")
    ids, pl = t.get("token_ids"), t.get("prompt_length")
    if not isinstance(ids, list) or not ids or not all(_is_int(x) and x >= 0 for x in ids):
        raise ValueError(f"{at}: token_ids must be a non-empty list of integers >= 0")
    if vocab_size is not None and max(ids) >= vocab_size:
        raise ValueError(
            f"{at}: token id {max(ids)} is outside the model's vocabulary of {vocab_size} "
            "(a rare set built with another tokenizer?)"
        )
    if not _is_int(pl) or not 0 <= pl < len(ids):
        raise ValueError(f"{at}: prompt_length must be an integer in [0, {len(ids)})")
    if not is_finite_number(t.get("base_nll")):
        raise ValueError(f"{at}: base_nll must be a finite number")
    if not isinstance(t.get("text"), str) or not isinstance(t.get("prompt_id"), (str, int)):
        raise ValueError(f"{at}: text and prompt_id must be strings")
    if t.get("form") is not None and not isinstance(t["form"], str):
        raise ValueError(f"{at}: form must be a string or null")


def _policy_nll(model, rare_set: RareSet, *, batch_size: int, pad_token_id: int) -> np.ndarray:
    """nll_theta(y | x) of every trajectory of the set under ``model``, shape (S,)."""
    return length_normalised_nll(
        model,
        rare_set.token_ids,
        rare_set.prompt_lengths,
        pad_token_id=pad_token_id,
        batch_size=batch_size,
    )


def delta_nll_rare(
    model, rare_set: RareSet, *, batch_size: int = 64, pad_token_id: int = 0
) -> float:
    """Delta NLL_rare = mean nll_theta over the set - mean nll_base (App. M.2); nan for an empty
    set."""
    if len(rare_set) == 0:
        return float("nan")
    nll = _policy_nll(model, rare_set, batch_size=batch_size, pad_token_id=pad_token_id)
    return float(nll.mean() - rare_set.base_nll.mean())


def make_rare_evaluator(rare_set: RareSet, *, batch_size: int = 64, pad_token_id: int = 0):
    """An evaluator for the trainer's ``evaluators`` list:
    ``(model, step) -> {"rare/delta_nll": ...}``."""

    def evaluate_rare(model, step: int) -> dict:
        if len(rare_set) == 0:
            return {"rare/delta_nll": float("nan"), "rare/size": 0}
        nll = _policy_nll(model, rare_set, batch_size=batch_size, pad_token_id=pad_token_id)
        return {
            "rare/delta_nll": float(nll.mean() - rare_set.base_nll.mean()),
            "rare/nll": float(nll.mean()),
            "rare/size": len(rare_set),
        }

    return evaluate_rare
