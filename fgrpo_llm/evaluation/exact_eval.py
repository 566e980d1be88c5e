"""An exact evaluation of a policy (Countdown): pass@k per split and every rare trajectory's
log-probability, with no sampling, written as ``exact_eval.json``.

Per split (in-domain "test" and "ood", the problems the sampled evaluation uses), each
problem's whole answer distribution (``fgrpo_llm.evaluation.answers``) gives exact pass@k,

    pass@k = mean over problems of 1 - (1 - mu(x))^k,

and the malformed mass, mean over problems of 1 - sum_y pi(y | x) over the well-formed answers.
For a rare-correct set (paper App. M.2, ``fgrpo_llm.evaluation.rare``) every trajectory
(x, y) gets log pi(y | x) under the same sampling policy (y's tokens as sampled, EOS included).
Between a base and a run trained from it,

    Delta NLL(x, y) = log pi_base(y | x) - log pi_run(y | x)       (NLL = -log pi),
    Delta NLL_rare (exact) = mean over the set of Delta NLL(x, y),

in nats per token: each term divided by |y| (tokens with EOS), the length normalisation of
App. M.2 and of the sampled ``rare/delta_nll``; ``per_token=False`` keeps nats per trajectory.

The file (format 1; other readers rely on these keys)::

    {"format": 1, "model": ..., "step": ..., "sampling": {...}, "ks": [...],
     "splits": {split: {"role", "problems", "problem_ids", "pass@k": {"1": ..., ...},
                        "malformed_mass", "log_mu": [...], "malformed": [...], "slack_max"}},
     "rare": {"trajectories", "prompt_ids", "answers", "forms", "lengths", "logp": [...]},
     "environment": {...}}

    fgrpo-llm exact runs/demo/grpo_n8/model --rare-set runs/demo/rare_set.json --out DIR
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fgrpo_common.files import atomic_write_text, read_json, strict_json
from fgrpo_llm.evaluation.answers import _check_sampling, answer_distributions, mean_exact_pass_at_k
from fgrpo_llm.evaluation.exact import _score_rows
from fgrpo_llm.evaluation.passk import default_eval_splits, split_role
from fgrpo_llm.tasks.base import check_split

if TYPE_CHECKING:
    from fgrpo_llm.rollout import SamplingParams

__all__ = [
    "EXACT_EVAL",
    "FORMAT",
    "DEFAULT_KS",
    "rare_logprobs",
    "evaluate_exact",
    "write_exact_eval",
    "load_exact_eval",
    "rare_delta_nll",
    "exact_delta_nll_rare",
]

#: The file name, and the version of its format.
EXACT_EVAL = "exact_eval.json"
FORMAT = 1
#: k of the exact pass@k table: the paper's grid 1, 2, 4, ..., 256 (App. P).
DEFAULT_KS = tuple(2**i for i in range(9))


def rare_logprobs(model, tokenizer, rare_set, *, sampling: SamplingParams) -> np.ndarray:
    """(S,) log pi(y | x) of each rare trajectory under ``sampling``: its completion tokens as
    sampled (EOS last, or cut at ``max_new_tokens``); -inf for one the sampler cannot return
    under these settings (longer than ``max_new_tokens``, or short without EOS)."""
    T, sampling = _check_sampling(sampling)
    eos = tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    out = np.full(len(rare_set), -np.inf)  # (S,)
    rows, where = [], []
    for i, (ids, pl) in enumerate(zip(rare_set.token_ids, rare_set.prompt_lengths, strict=True)):
        x, c = list(ids[:pl]), list(ids[pl:])
        ends = bool(c) and c[-1] == eos
        if not x or not c or len(c) > T or eos in c[:-1] or (not ends and len(c) != T):
            continue
        rows.append((x, c))
        where.append(i)
    if rows:
        scored = _score_rows(model, rows, skip_ids=frozenset(), pad_id=pad_id, sampling=sampling)
        for i, (tok, _) in zip(where, scored, strict=True):
            out[i] = float(tok.sum())
    return out


def _split_entry(task, split: str, dists, ks) -> dict:
    log_mu = np.array([d.answers.log_mu for d in dists])  # (P,)
    malformed = np.array([d.malformed for d in dists])  # (P,)
    return {
        "role": split_role(split),
        "problems": len(dists),
        "problem_ids": [d.answers.prompt_id for d in dists],
        "pass@k": {str(k): v for k, v in mean_exact_pass_at_k(log_mu, ks).items()},
        "malformed_mass": float(np.mean(malformed)),
        "log_mu": log_mu.tolist(),
        "malformed": malformed.tolist(),
        "slack_max": float(max(d.slack for d in dists)),
    }


def evaluate_exact(
    model,
    tokenizer,
    task,
    *,
    sampling: SamplingParams,
    rare_set,
    splits=None,
    ks=DEFAULT_KS,
    max_problems: int | None = None,
    progress: bool = False,
) -> dict:
    """The exact evaluation (module docstring) of ``model`` under ``sampling``: every split of
    ``splits`` (default: all but "train"), its first ``max_problems`` problems (None: all), and
    the trajectories of ``rare_set``. Returns the file's content without ``environment``."""
    splits = list(splits) if splits else default_eval_splits(task)
    for split in splits:
        check_split(task, split)
    if max_problems is not None and (isinstance(max_problems, bool) or int(max_problems) < 1):
        raise ValueError(f"max_problems must be an integer >= 1, got {max_problems!r}")
    ks = sorted({int(k) for k in ks})
    results = {"format": FORMAT, "sampling": sampling.policy(), "ks": ks, "splits": {}}
    for split in splits:
        problems = task.problems(split)[:max_problems]
        dists = answer_distributions(
            model, tokenizer, task, problems, sampling=sampling, progress=progress
        )
        results["splits"][split] = _split_entry(task, split, dists, ks)
    logp = rare_logprobs(model, tokenizer, rare_set, sampling=sampling)
    results["rare"] = {
        "trajectories": len(rare_set),
        "prompt_ids": list(rare_set.prompt_ids),
        "answers": list(rare_set.texts),
        "forms": list(rare_set.forms),
        "lengths": [
            len(t) - p for t, p in zip(rare_set.token_ids, rare_set.prompt_lengths, strict=True)
        ],
        "logp": logp.tolist(),
    }
    return results


def write_exact_eval(results: dict, out_dir) -> Path:
    """Write ``results`` to ``out_dir/exact_eval.json`` atomically (strict JSON: -inf as null)."""
    return atomic_write_text(Path(out_dir) / EXACT_EVAL, strict_json(results, indent=1) + "\n")


def _floats(values, where: str) -> np.ndarray:
    """A list of numbers (null read as -inf: a log-probability of 0) as a float array."""
    if not isinstance(values, list) or not all(
        v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
    ):
        raise ValueError(f"{where} must be a list of numbers (or null)")
    return np.array([-math.inf if v is None else float(v) for v in values], dtype=np.float64)


def load_exact_eval(path) -> dict:
    """Read an ``exact_eval.json`` (a file, or the directory that holds one), checked: format 1,
    every split with problems, pass@k and malformed_mass, and the rare part's lists of one
    length; ``rare["logp"]`` is returned as a float array (null as -inf)."""
    path = Path(path)
    if path.is_dir():
        path = path / EXACT_EVAL
    if not path.is_file():
        raise FileNotFoundError(f"no exact evaluation at {path} (run `fgrpo-llm exact` first)")
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not an exact evaluation of format {FORMAT}")
    splits, rare = data.get("splits"), data.get("rare")
    if not isinstance(splits, dict) or not isinstance(rare, dict):
        raise ValueError(f"{path} must hold the objects 'splits' and 'rare'")
    for split, entry in splits.items():
        missing = [k for k in ("problems", "pass@k", "malformed_mass") if k not in entry]
        if missing:
            raise ValueError(f"{path}: split {split!r} lacks {missing}")
    S = rare.get("trajectories")
    for key in ("prompt_ids", "answers", "logp"):
        if not isinstance(rare.get(key), list) or len(rare[key]) != S:
            raise ValueError(f"{path}: rare[{key!r}] must list trajectories={S} entries")
    rare["logp"] = _floats(rare["logp"], f"{path}: rare['logp']")
    return data


def rare_delta_nll(base: dict, run: dict, *, per_token: bool = True) -> np.ndarray:
    """(S,) Delta NLL(x, y) = log pi_base(y | x) - log pi_run(y | x) of each rare trajectory,
    from two loaded evaluations of the same rare set (ValueError when their trajectories
    differ); ``per_token`` (the default) divides by |y| (App. M.2's length normalisation)."""
    b, r = base["rare"], run["rare"]
    if b["prompt_ids"] != r["prompt_ids"] or b["answers"] != r["answers"]:
        raise ValueError(
            "the base's and the run's exact evaluations hold different rare trajectories (were "
            "they evaluated with the same rare set?)"
        )
    delta = np.asarray(b["logp"], dtype=float) - np.asarray(r["logp"], dtype=float)  # (S,)
    if per_token:
        lengths = np.asarray(b.get("lengths") or [], dtype=float)
        if lengths.shape != delta.shape or (lengths < 1).any():
            raise ValueError("per_token needs each trajectory's length ('lengths', >= 1)")
        delta = delta / lengths
    return delta


def exact_delta_nll_rare(base: dict, run: dict, *, per_token: bool = True) -> float:
    """Delta NLL_rare (exact): the mean of :func:`rare_delta_nll` over the set."""
    delta = rare_delta_nll(base, run, per_token=per_token)
    if delta.size == 0:
        raise ValueError("the rare set is empty: Delta NLL_rare is not defined")
    return float(np.mean(delta))
