"""What the forecast model (``fgrpo_theory.forecast``) reads from a Countdown study: the base's
answer distributions and a run's prompt order.

- :func:`base_answers`: the base policy's exact answer distribution
  (``fgrpo_theory.forecast.PromptAnswers``, from ``fgrpo_llm.evaluation.answers``) on every
  training prompt a run can draw and on the evaluation problems (those of
  ``stages.evaluate_stage``). Computed once per base and cached as gzipped JSON in
  ``<base_dir>/base_answers.json.gz`` (never pickle); a cache made under other sampling settings
  or for other problems is refused, not reused.
- :func:`rare_pairs`: the base's rare-correct trajectories as (prompt id, answer text);
- :func:`run_prompt_order` (and :func:`run_order`, the ids alone): per training step, the ids
  of the prompts whose groups the step trained on, in the order the group log (``groups.jsonl``,
  ``fgrpo_llm.tracking.group_record``) lists them; a group with ``trained: false`` (dropped by
  dynamic sampling) is left out.

    answers = base_answers(out / "base0", cfg)          # {"train": [...], "test": [...], ...}
    order = run_prompt_order(out / "base0/seed0/grpo_n8")  # [(1, ["3-5-7_22", ...]), ...]
    base = ForecastBase(answers["train"], answers["test"] + answers["ood"],
                        rare_pairs(out / "base0"))
    schedule = RunSchedule(order=run_order(out / "base0/seed0/grpo_n8"), ...)
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np

from fgrpo_common.files import atomic_write, read_jsonl
from fgrpo_llm.experiments.countdown.stages import task_for
from fgrpo_llm.tracking import check_group_record
from fgrpo_theory.forecast import PromptAnswers

__all__ = [
    "BASE_ANSWERS",
    "answers_to_json",
    "answers_from_json",
    "write_answers",
    "read_answers",
    "base_answers",
    "run_prompt_order",
    "run_order",
    "rare_pairs",
]

#: The cache file in a base directory, and its format version.
BASE_ANSWERS = "base_answers.json.gz"
FORMAT = 1


def answers_to_json(pa: PromptAnswers) -> dict:
    """One prompt's answers as a JSON object (log-probabilities of -inf as null)."""
    return {
        "prompt_id": pa.prompt_id,
        "answers": list(pa.answers),
        "tokens": [list(t) for t in pa.tokens],
        "logp": [float(v) if math.isfinite(v) else None for v in pa.logp],
        "correct": [bool(c) for c in pa.correct],
    }


def answers_from_json(d: dict) -> PromptAnswers:
    """The inverse of :func:`answers_to_json` (PromptAnswers checks the fields)."""
    try:
        return PromptAnswers(
            prompt_id=d["prompt_id"],
            answers=tuple(d["answers"]),
            tokens=tuple(tuple(t) for t in d["tokens"]),
            logp=np.array([-np.inf if v is None else v for v in d["logp"]], dtype=np.float64),
            correct=np.array(d["correct"], dtype=bool),
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"not a prompt's answers record ({type(err).__name__}: {err})") from None


def write_answers(path, groups: dict[str, list[PromptAnswers]], meta: dict) -> Path:
    """Write ``{name: [PromptAnswers]}`` and ``meta`` as gzipped JSON, atomically."""
    data = {
        "format": FORMAT,
        "meta": meta,
        "groups": {k: [answers_to_json(pa) for pa in v] for k, v in groups.items()},
    }
    # -inf is already null (answers_to_json): plain json.dumps, which refuses any NaN left
    raw = gzip.compress(json.dumps(data, allow_nan=False).encode("utf-8"), compresslevel=6, mtime=0)
    return atomic_write(path, lambda fh: fh.write(raw))


def read_answers(path) -> tuple[dict[str, list[PromptAnswers]], dict]:
    """Read what :func:`write_answers` wrote: ``({name: [PromptAnswers]}, meta)``."""
    path = Path(path)
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError, RecursionError) as err:
        raise ValueError(f"{path} is not a gzipped answers file ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not an answers file of format {FORMAT}")
    groups = {k: [answers_from_json(d) for d in v] for k, v in data["groups"].items()}
    return groups, data.get("meta", {})


def _problems_of(task, cfg) -> dict[str, list]:
    """The training prompts (all of the "train" split) and the evaluation problems of the plan."""
    from fgrpo_llm.evaluation.passk import default_eval_splits  # lazy: torch

    out = {"train": task.problems("train")}
    for split in default_eval_splits(task):
        out[split] = task.problems(split)[: cfg.eval_max_problems]
    return out


def base_answers(base_dir, cfg, *, task=None, progress: bool = False):
    """``{"train": [PromptAnswers], <eval split>: [...]}`` of the base ``<base_dir>/base`` under
    the plan's sampling (temperature 1, ``cfg.max_new_tokens``), read from the cache
    ``<base_dir>/base_answers.json.gz`` or computed and cached. ``cfg`` is a ``DemoConfig``."""
    base_dir = Path(base_dir)
    task = task if task is not None else task_for(base_dir / "base")
    problems = _problems_of(task, cfg)
    meta = {
        "sampling": {
            "max_new_tokens": int(cfg.max_new_tokens),
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": 0,
        },
        "problems": {k: [p.id for p in v] for k, v in problems.items()},
    }
    path = base_dir / BASE_ANSWERS
    if path.is_file():
        groups, saved = read_answers(path)
        if saved.get("sampling") != meta["sampling"] or saved.get("problems") != meta["problems"]:
            raise ValueError(
                f"{path} was made for other sampling settings or problems; remove it to recompute"
            )
        return groups
    groups = _compute(base_dir / "base", task, problems, cfg, progress=progress)
    write_answers(path, groups, meta)
    return groups


def _compute(model_dir: Path, task, problems: dict, cfg, *, progress: bool):
    import time

    from fgrpo_llm.evaluation.answers import answer_distributions  # lazy: torch

    # lazy: torch, transformers
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    model, tok = load_model_and_tokenizer(model_dir, device=cfg.device)
    device = next(model.parameters()).device
    sampling = SamplingParams(
        max_new_tokens=cfg.max_new_tokens,
        batch_size=cfg.batch_size,
        autocast_dtype=resolve_autocast_dtype(device),
    )
    groups = {}
    for name, probs in problems.items():
        start = time.perf_counter()
        groups[name] = [
            d.answers
            for d in answer_distributions(
                model, tok, task, probs, sampling=sampling, progress=progress
            )
        ]
        if progress:
            import sys

            print(
                f"base answers {name}: {len(probs)} prompts in {time.perf_counter() - start:.1f} s",
                file=sys.stderr,
            )
    return groups


def run_prompt_order(run_dir) -> list[tuple[int, list[str]]]:
    """``[(step, [prompt ids trained at that step]), ...]`` in step order, from the run's
    ``groups.jsonl`` (every line checked by ``tracking.check_group_record``); a group record
    without ``trained`` counts as trained (records written before the field existed)."""
    path = Path(run_dir) / "groups.jsonl"
    rows = read_jsonl(path, what="group log")
    by_step: dict[int, list[str]] = {}
    for i, g in enumerate(rows, 1):
        check_group_record(g, f"{path}:{i}")
        if g.get("trained", True):
            by_step.setdefault(g["step"], []).append(str(g["prompt_id"]))
    return sorted(by_step.items())


def run_order(run_dir) -> list[list[str]]:
    """The run's prompt order as ``fgrpo_theory.forecast.RunSchedule(order=...)`` takes it: per
    step (in step order), the ids of the prompts trained (a step without a trained group, which
    our trainer never logs, is left out)."""
    return [ids for _, ids in run_prompt_order(run_dir)]


def rare_pairs(base_dir) -> list[tuple[str, str]]:
    """The base's rare-correct trajectories as (prompt id, answer text), in the set's order
    (the ``rare`` argument of ``fgrpo_theory.forecast.ForecastBase``), from
    ``<base_dir>/rare_set.json``."""
    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch

    rare = load_rare_set(Path(base_dir) / "rare_set.json")
    return list(zip(rare.prompt_ids, rare.texts, strict=True))
