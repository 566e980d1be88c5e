"""Run tracking: metrics.jsonl (always), a tracker (``report_to``: :mod:`fgrpo_llm.trackers`), a
tqdm progress bar; run.json and
the per-group records of groups.jsonl, the files every engine's run writes for the cross-check.

One flat dict of slash-keyed metrics per step, written as one JSON line and flushed at once, so
a crashed run keeps every finished step. On resume the lines of steps after the checkpoint are
dropped first (they will be recomputed), so the file reads as if the run never stopped.
"""

from __future__ import annotations

import json
import math
import operator
import re
import sys
from pathlib import Path

from tqdm.auto import tqdm

from fgrpo_common.checks import is_finite_number
from fgrpo_common.cli import bar_disabled
from fgrpo_common.files import atomic_write_text, read_json, strict_json
from fgrpo_llm.trackers import open_tracker
from fgrpo_theory.weighting import resolve_weighting

__all__ = [
    "JsonlWriter",
    "MetricsLogger",
    "truncate_jsonl",
    "run_segments",
    "RUN_INFO",
    "write_run_info",
    "read_run_info",
    "STEP_RECORD",
    "model_step",
    "group_record",
]

#: The engine-neutral description of a run, read by the cross-check (``fgrpo_llm.evaluation.runs``).
RUN_INFO = "run.json"
ENGINES = ("fgrpo", "verl", "trl")


def _step_of(line: str) -> float:
    """The "step" of one JSON line; a line torn by a crash mid-write counts as after every step."""
    try:
        step = json.loads(line).get("step", 0)
    except (json.JSONDecodeError, AttributeError, RecursionError):
        return math.inf
    return step if isinstance(step, (int, float)) and not isinstance(step, bool) else math.inf


def truncate_jsonl(path, *, max_step: int) -> None:
    """Keep only the lines of ``path`` whose "step" is <= ``max_step`` (no-op if the file is
    missing).

    An unreadable last line (torn by a crash mid-write) is dropped; an unreadable line before
    it is damage, not a crash: a ValueError naming the file and line, and nothing is dropped.
    """
    path = Path(path)
    if not path.exists():
        return
    lines = [
        (i, _text_or_damage(raw))
        for i, raw in enumerate(path.read_bytes().splitlines(), 1)
        if raw.strip()
    ]
    for i, line in lines[:-1]:
        if _step_of(line) == math.inf:
            raise ValueError(
                f"{path}:{i} is damaged (not a JSON record with a step) before the last line; "
                "repair or remove that line, then resume"
            )
    kept = [line for _, line in lines if _step_of(line) <= max_step]
    atomic_write_text(path, "".join(line + "\n" for line in kept))


def _text_or_damage(raw: bytes) -> str:
    """A line's text; a line that is not UTF-8 (binary bytes written over the file's tail) as
    text that is no JSON record, so that it is dropped as a torn last line or named as damage."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd not UTF-8"


class JsonlWriter:
    """Append one JSON object per line to ``path``, flushed after every write."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a")

    def write(self, record: dict) -> None:
        self._f.write(strict_json(record) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class MetricsLogger:
    """metrics.jsonl + the ``report_to`` tracker (``config`` its run's settings) + progress bar
    for steps ``start_step+1 .. total_steps``."""

    def __init__(
        self,
        out_dir,
        *,
        total_steps: int,
        start_step: int = 0,
        report_to: str = "none",
        config: dict | None = None,
        progress: bool = True,
    ):
        out_dir = Path(out_dir)
        truncate_jsonl(out_dir / "metrics.jsonl", max_step=start_step)
        self.jsonl = JsonlWriter(out_dir / "metrics.jsonl")
        self.tracker = open_tracker(report_to, out_dir, start_step=start_step, config=config)
        self.bar = tqdm(
            total=total_steps,
            initial=start_step,
            file=sys.stderr,
            disable=bar_disabled(progress),
            desc="train",
            dynamic_ncols=True,
        )

    def log(self, step: int, metrics: dict) -> None:
        """Write one line {"step": step, **metrics} and advance the bar."""
        self.jsonl.write({"step": step, **metrics})
        if self.tracker is not None:
            self.tracker.log(step, metrics)
        self.bar.set_postfix(
            {
                k: f"{metrics[k]:.3g}"
                for k in ("reward", "loss/total")
                if k in metrics and isinstance(metrics[k], (int, float))
            },
            refresh=False,
        )
        self.bar.update(1)

    def close(self) -> None:
        self.jsonl.close()
        if self.tracker is not None:
            self.tracker.close()
        self.bar.close()


def write_run_info(
    run_dir,
    *,
    engine: str,
    algo: str,
    group_size: int,
    gamma: float,
    lr_scale: float = 1.0,
    lr_match_gamma: float | None = None,
    environment: dict | None = None,
    weighting: str = "focal",
    sampling: dict | None = None,
    entropy_coef: float = 0.0,
    kl_coef: float = 0.0,
    resumed_at: int | None = None,
) -> Path:
    """Write ``run_dir/run.json`` (atomically) after checking every field. ``environment``
    (``fgrpo_llm.environment.environment``): what the run ran on, when known. ``sampling``: how
    the engine sampled its policy (``SamplingParams.policy()``: max_new_tokens, temperature,
    top_p, top_k), which ``fgrpo-llm eval --run`` samples the run's checkpoint with.
    ``weighting``: the advantages' weighting as ``str(Weighting)`` spells it ("focal:0.5",
    "maxrl"), or a bare rule name whose exponent is ``gamma`` (``resolve_weighting``).

    ``segments`` keeps one environment per segment of the run: a fresh run (``resumed_at``
    None) starts ``[{"from_step": 0, "environment": ...}]``; a run resumed at step s keeps the
    earlier segments that began before s and appends ``{"from_step": s, ...}`` (a run resumed
    on another machine computes on other kernels from there on). ``environment`` stays the
    latest segment's."""
    info = {
        "engine": engine,
        "algo": algo,
        "group_size": group_size,
        "gamma": gamma,
        "lr_scale": lr_scale,
        "lr_match_gamma": lr_match_gamma,
    }
    if weighting != "focal":  # its spelling ("focal:0.5"); a bare "focal" takes gamma
        info["weighting"] = str(weighting)
    for key, coef in (("entropy_coef", entropy_coef), ("kl_coef", kl_coef)):
        if coef:  # (absent: none)
            info[key] = float(coef)
    if environment is not None:
        info["environment"] = environment
        info["segments"] = _earlier_segments(run_dir, resumed_at) + [
            {"from_step": int(resumed_at or 0), "environment": environment}
        ]
    if sampling is not None:
        info["sampling"] = dict(sampling)
    _check_run_info(info, Path(run_dir) / RUN_INFO)
    return atomic_write_text(
        Path(run_dir) / RUN_INFO, json.dumps(info, indent=1, sort_keys=True) + "\n"
    )


def _earlier_segments(run_dir, resumed_at: int | None) -> list[dict]:
    """The segments of the run.json already in ``run_dir`` that began before ``resumed_at``
    ([] for a fresh run, or when there is none)."""
    if resumed_at is None or not (Path(run_dir) / RUN_INFO).is_file():
        return []
    try:
        old = read_run_info(run_dir)
    except ValueError:  # an unreadable record: the new one starts over
        return []
    return [s for s in run_segments(old) if s["from_step"] < resumed_at]


def run_segments(info: dict) -> list[dict]:
    """``[{"from_step", "environment"}, ...]`` of a checked run.json: its ``segments``, or for a
    run.json written before they were kept, its one ``environment`` as one segment."""
    if info.get("segments") is not None:
        return list(info["segments"])
    env = info.get("environment")
    return [{"from_step": 0, "environment": env}] if isinstance(env, dict) else []


def _check_segments(segments, path: Path) -> None:
    if segments is None:
        return
    if not isinstance(segments, list):
        raise ValueError(f"{path}: segments must be a list")
    for i, seg in enumerate(segments):
        step = seg.get("from_step") if isinstance(seg, dict) else None
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"{path}: segments[{i}].from_step must be an integer >= 0")
        if not isinstance(seg.get("environment"), dict):
            raise ValueError(f"{path}: segments[{i}].environment must be an object")


def _check_run_info(info, path: Path) -> dict:
    if not isinstance(info, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(info).__name__}")
    missing = [k for k in ("engine", "algo", "group_size", "gamma") if k not in info]
    if missing:
        raise ValueError(f"{path} lacks {missing}")
    if info["engine"] not in ENGINES:
        raise ValueError(
            f"{path}: engine must be one of {list(ENGINES)}, got engine={info['engine']!r}"
        )
    if not isinstance(info["algo"], str) or not info["algo"]:
        raise ValueError(f"{path}: algo must be a non-empty string, got algo={info['algo']!r}")
    N = info["group_size"]
    if isinstance(N, bool) or not isinstance(N, int) or N < 1:
        raise ValueError(f"{path}: group_size must be an integer >= 1, got group_size={N!r}")
    for key in ("gamma", "lr_scale", "entropy_coef", "kl_coef"):
        v = info.get(key, 1.0)
        if not is_finite_number(v) or v < 0:
            raise ValueError(f"{path}: {key} must be a finite number >= 0, got {key}={v!r}")
    g = info.get("lr_match_gamma")
    if g is not None and (not is_finite_number(g) or g < 0):
        raise ValueError(f"{path}: lr_match_gamma must be null or a finite number >= 0, got {g!r}")
    try:  # "focal:0.5" (absent or "focal" in earlier runs: the focal weight with gamma)
        resolve_weighting(info.get("weighting", "focal"), info["gamma"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: {err}") from None
    if info.get("environment") is not None and not isinstance(info["environment"], dict):
        raise ValueError(f"{path}: environment must be an object")
    _check_segments(info.get("segments"), path)
    _check_sampling(info.get("sampling"), path)
    return info


#: The keys of a run's sampling settings in run.json (``SamplingParams.policy()``).
SAMPLING_KEYS = ("max_new_tokens", "temperature", "top_p", "top_k")


def _check_sampling(sampling, path: Path) -> None:
    """run.json's optional ``sampling``: an object of SAMPLING_KEYS, each a finite number."""
    if sampling is None:
        return
    if not isinstance(sampling, dict):
        raise ValueError(f"{path}: sampling must be an object, got {sampling!r}")
    stray = sorted(set(sampling) - set(SAMPLING_KEYS))
    if stray:
        raise ValueError(f"{path}: sampling holds unknown keys {stray} (known: {SAMPLING_KEYS})")
    for key, v in sampling.items():
        if not is_finite_number(v):
            raise ValueError(f"{path}: sampling.{key} must be a finite number, got {v!r}")


def read_run_info(run_dir) -> dict:
    """The checked contents of ``run_dir/run.json``; FileNotFoundError naming it when absent."""
    path = Path(run_dir) / RUN_INFO
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: a run directory needs {RUN_INFO} (written by every trainer "
            f"of this package; see fgrpo_llm.evaluation.runs)"
        )
    return _check_run_info(read_json(path), path)


#: In a run's ``model/``: the training step whose policy it holds, written with the weights.
STEP_RECORD = "step.json"


def model_step(model_dir) -> int | None:
    """The training step whose policy ``model_dir`` holds: its ``step.json`` (a run's ``model/``)
    or the N of ``checkpoints/step_N``; None for any other checkpoint (a base, a download, a
    run's ``model/`` saved before the record was kept). A ValueError naming the file when
    step.json is damaged."""
    path = Path(model_dir)
    record = path / STEP_RECORD
    if record.is_file():
        data = read_json(record)
        step = data.get("step") if isinstance(data, dict) else None
        if not _is_int(step) or step < 0:
            raise ValueError(f'{record} must hold {{"step": an integer >= 0}}, got step={step!r}')
        return step
    name = re.fullmatch(r"step_(\d+)", path.name)
    if name and path.parent.name == "checkpoints":
        return int(name.group(1))
    return None


def group_record(
    *,
    step: int,
    prompt_id: str,
    N: int,
    num_correct: int,
    forms: list,
    trained: bool = True,
    **extra,
) -> dict:
    """One line of ``groups.jsonl``: a sampled group of N completions of prompt ``prompt_id`` at
    ``step``, X = ``num_correct`` of them correct, the solution form of each correct one
    (``fgrpo_llm.tasks.base.solution_form``), and whether the update used it."""
    record = {
        "step": _integer(step),
        "prompt_id": str(prompt_id),
        "N": _integer(N),
        "num_correct": _integer(num_correct),
        "forms": [None if f is None else str(f) for f in forms],
        "trained": bool(trained),
        **extra,
    }
    check_group_record(record)
    return record


#: The largest group size and step a group record may hold.
MAX_GROUP_SIZE = 1 << 30
MAX_STEP = 1 << 53


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _integer(v):
    """A numpy or Python integer as an int; anything else as it is (for the check to name)."""
    if isinstance(v, bool):
        return v
    try:
        return operator.index(v)
    except TypeError:
        return v


def check_group_record(g, where: str = "") -> None:
    """The rules of a ``groups.jsonl`` line, the same on write and on read: a ValueError naming
    ``where`` (file:line) and the bad field. step an integer in [0, 2^53], prompt_id a string
    (or integer), N an integer in [1, 2^30], num_correct an integer in [0, N], forms (when
    present) a list of num_correct strings or nulls, trained (when present) a boolean."""
    at = f"{where}: " if where else ""
    if not isinstance(g, dict):
        raise ValueError(f"{at}a group record must be a JSON object, got {type(g).__name__}")
    missing = [k for k in ("step", "prompt_id", "N", "num_correct") if k not in g]
    if missing:
        raise ValueError(f"{at}lacks {missing}")
    step, N, X = g["step"], g["N"], g["num_correct"]
    if not _is_int(step) or not 0 <= step <= MAX_STEP:
        raise ValueError(f"{at}step must be an integer in [0, 2^53], got step={step!r}")
    if not isinstance(g["prompt_id"], str) and not _is_int(g["prompt_id"]):
        raise ValueError(f"{at}prompt_id must be a string, got prompt_id={g['prompt_id']!r}")
    if not _is_int(N) or not 1 <= N <= MAX_GROUP_SIZE:
        raise ValueError(f"{at}N must be an integer in [1, 2^30], got N={N!r}")
    if not _is_int(X) or not 0 <= X <= N:
        raise ValueError(f"{at}num_correct must be an integer in [0, N={N}], got num_correct={X!r}")
    forms = g.get("forms")
    if forms is not None and (
        not isinstance(forms, list)
        or len(forms) != X
        or not all(f is None or isinstance(f, str) for f in forms)
    ):
        raise ValueError(
            f"{at}forms must be a list of num_correct={X} strings (or nulls), got forms="
            f"{str(forms)[:80]}"
        )
    if "trained" in g and not isinstance(g["trained"], bool):
        raise ValueError(f"{at}trained must be true or false, got trained={g['trained']!r}")
