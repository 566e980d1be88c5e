"""The run directory an engine's run leaves for ``fgrpo-llm validate`` (engine-free).

The tail-miss cross-check (paper Lemma 3.1) reads ``run.json``, ``groups.jsonl`` and optionally
``metrics.jsonl`` (contract: :mod:`fgrpo_llm.evaluation.runs`). Our trainer writes them itself;
the TRL trainer writes them through :class:`RunRecorder` during training, and a verl run is
converted afterwards from verl's own rollout dump (``trainer.rollout_data_dir``) by
:func:`records_from_verl_dump`, with the policy verl sampled (:func:`verl_sampling` of the run's
config) kept in run.json for ``fgrpo-llm eval --run``. Nothing here needs verl installed.

Per group: ``prompt_id`` (stable across runs: from the data, never an engine's random uid), N
(the group's own size: groups may be ragged), X = ``num_correct``, and the solution form of each
correct completion, by :func:`fgrpo_llm.tasks.base.solution_form` when the task is known, else
the stripped completion text.

    rec = RunRecorder("runs/trl_f", engine="trl", algo="grpo", group_size=8, gamma=1.0)
    rec.log_batch(step=1, prompt_ids=ids, completions=texts, correct=flags)
    rec.close()
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from fgrpo_common.checks import is_finite_number
from fgrpo_common.files import atomic_write_text, read_jsonl
from fgrpo_llm.config import read_config_file
from fgrpo_llm.tasks.base import solution_form
from fgrpo_llm.tracking import JsonlWriter, group_record, truncate_jsonl, write_run_info

__all__ = [
    "RunRecorder",
    "forms_of",
    "row_forms",
    "text_prompt_id",
    "records_from_verl_dump",
    "read_verl_dump",
    "verl_sampling",
]


def text_prompt_id(text: str) -> str:
    """A stable id for a prompt known only by its text: ``"sha1:" + the first 16 hex digits``."""
    return "sha1:" + hashlib.sha1(str(text).encode("utf-8", "replace")).hexdigest()[:16]


def forms_of(completions: list, correct: list[bool], *, task=None, problem=None) -> list:
    """The form of each correct completion (in order): the task's rule when ``task`` and
    ``problem`` are given, else the stripped text."""
    if task is not None and problem is not None:
        forms = []
        for c, ok in zip(completions, correct, strict=True):
            if ok:
                form = solution_form(task, problem, c)
                forms.append(form if form is not None else str(c).strip())
        return forms
    return [str(c).strip() for c, ok in zip(completions, correct, strict=True) if ok]


def row_forms(prompt_ids, completions, correct, *, task=None, problems=None) -> list:
    """Each row's form: that of its completion when correct (``forms_of``), None when wrong."""
    out = []
    for pid, c, ok in zip(prompt_ids, completions, correct, strict=True):
        problem = problems.get(str(pid)) if problems else None
        out.append(forms_of([c], [True], task=task, problem=problem)[0] if ok else None)
    return out


class RunRecorder:
    """Writes ``run.json`` once, then ``groups.jsonl`` / ``metrics.jsonl`` line by line (flushed).

    ``resume_step``: drop lines of later steps first (a resumed run rewrites them).
    ``environment``: what the run runs on (``fgrpo_llm.environment.environment``), for run.json.
    ``sampling``: how the engine samples its policy (``SamplingParams.policy()``), for run.json.
    """

    def __init__(
        self,
        run_dir,
        *,
        engine: str,
        algo: str,
        group_size: int,
        gamma: float,
        lr_scale: float = 1.0,
        lr_match_gamma: float | None = None,
        resume_step: int | None = None,
        environment: dict | None = None,
        weighting: str = "focal",
        sampling: dict | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_run_info(
            self.run_dir,
            engine=engine,
            algo=algo,
            group_size=int(group_size),
            gamma=float(gamma),
            lr_scale=float(lr_scale),
            lr_match_gamma=lr_match_gamma,
            environment=environment,
            weighting=weighting,
            sampling=sampling,
        )
        if resume_step is not None:
            self._truncate_files(resume_step)
        self._open()

    def _open(self) -> None:
        self._groups = JsonlWriter(self.run_dir / "groups.jsonl")
        self._metrics = JsonlWriter(self.run_dir / "metrics.jsonl")

    def _truncate_files(self, max_step: int) -> None:
        for name in ("groups.jsonl", "metrics.jsonl"):
            truncate_jsonl(self.run_dir / name, max_step=int(max_step))

    def log_group(
        self,
        *,
        step: int,
        prompt_id: str,
        num_correct: int,
        N: int,
        forms: list,
        trained: bool = True,
    ) -> dict:
        record = group_record(
            step=step,
            prompt_id=prompt_id,
            N=N,
            num_correct=num_correct,
            forms=forms,
            trained=trained,
        )
        self._groups.write(record)
        return record

    def log_batch(
        self,
        *,
        step: int,
        prompt_ids: list,
        completions: list,
        correct: list,
        group_ids=None,
        trained=True,
        task=None,
        problems: dict | None = None,
    ) -> list[dict]:
        """Group the M rows of one batch by ``group_ids`` (default: the prompt ids; order of first
        appearance) and write one record per group. ``trained`` is one bool or one per row;
        ``problems`` maps prompt id -> Problem for the task's form rule."""
        M = len(prompt_ids)
        if not len(completions) == len(correct) == M:
            raise ValueError(
                f"prompt_ids, completions and correct must have one entry per row, got {M}, "
                f"{len(completions)}, {len(correct)}"
            )
        forms = row_forms(prompt_ids, completions, correct, task=task, problems=problems)
        return self.log_forms(
            step=step, prompt_ids=prompt_ids, forms=forms, group_ids=group_ids, trained=trained
        )

    def log_forms(
        self, *, step: int, prompt_ids: list, forms: list, group_ids=None, trained=True
    ) -> list[dict]:
        """As :meth:`log_batch`, from each row's form: the form of a correct completion, None for
        a wrong one (what a process sends when the completions' texts stay where they are)."""
        M = len(prompt_ids)
        if len(forms) != M:
            raise ValueError(
                f"prompt_ids and forms must have one entry per row, got {M}, {len(forms)}"
            )
        group_ids = list(prompt_ids) if group_ids is None else list(group_ids)
        trained = [trained] * M if isinstance(trained, bool) else list(trained)
        rows: dict = {}
        for i, g in enumerate(group_ids):
            rows.setdefault(g.item() if hasattr(g, "item") else g, []).append(i)
        return [
            self.log_group(
                step=step,
                prompt_id=str(prompt_ids[idx[0]]),
                num_correct=sum(forms[i] is not None for i in idx),
                N=len(idx),
                forms=[forms[i] for i in idx if forms[i] is not None],
                trained=any(trained[i] for i in idx),
            )
            for idx in rows.values()
        ]

    def truncate(self, max_step: int) -> None:
        """Drop the lines of steps after ``max_step`` (a run resumed from that step's
        checkpoint writes them again)."""
        self.close()
        self._truncate_files(max_step)
        self._open()

    def clear_groups(self) -> None:
        """Empty ``groups.jsonl`` (a conversion that rebuilds every group)."""
        self.close()
        (self.run_dir / "groups.jsonl").unlink(missing_ok=True)
        self._open()

    def log_metrics(self, step: int, metrics: dict) -> None:
        """One line ``{"step": step, **metrics}`` of ``metrics.jsonl`` (e.g. ``rare/delta_nll``)."""
        self._metrics.write({"step": int(step), **metrics})

    def close(self) -> None:
        self._groups.close()
        self._metrics.close()


# ----------------------------------------------------------------------------- verl
def read_verl_dump(dump_dir, *, max_step: int | None = None) -> list[dict]:
    """Every line of verl's rollout dump (``trainer.rollout_data_dir``: one ``{step}.jsonl`` per
    step with ``input, output, gts, score, step`` and, on verl's v1 trainer, ``uid``), by step.

    ``max_step``: only the files of steps <= it. A run resumed from a checkpoint rewrites the
    step files after it as it goes, so until it has passed the step where it stopped, the later
    files are still the abandoned attempt's: read up to the step the resumed run has reached.
    The last file's last line, when a writer left it incomplete, is left out with a warning."""
    dump_dir = Path(dump_dir)
    if not dump_dir.is_dir():
        raise FileNotFoundError(f"verl rollout dump directory not found: {dump_dir}")
    if max_step is not None and (
        isinstance(max_step, bool) or not isinstance(max_step, int) or max_step < 0
    ):
        raise ValueError(f"max_step must be an integer >= 0 or None, got max_step={max_step!r}")
    files = sorted(
        (p for p in dump_dir.glob("*.jsonl") if p.stem.isdigit()), key=lambda p: int(p.stem)
    )
    if max_step is not None:
        files = [p for p in files if int(p.stem) <= max_step]
    if not files:
        raise ValueError(
            f"no <step>.jsonl file in {dump_dir}"
            + (f" up to step {max_step}" if max_step is not None else "")
            + ": was the run started with trainer.rollout_data_dir?"
        )
    rows = []
    for path in files:
        lines = read_jsonl(path, what="verl rollout dump", partial_tail=path == files[-1])
        for i, row in enumerate(lines, 1):
            missing = [k for k in ("input", "output", "score") if k not in row]
            if missing:
                raise ValueError(f"{path}:{i} lacks {missing}; not a verl rollout dump line")
            score = row["score"]
            if (
                isinstance(score, bool)
                or not isinstance(score, (int, float))
                or not math.isfinite(score)
            ):
                raise ValueError(
                    f"{path}:{i}: score must be a finite number, got score={score!r} (an "
                    "unscored response cannot be counted as right or wrong)"
                )
            if not isinstance(row["input"], str) or not isinstance(row["output"], str):
                raise ValueError(f"{path}:{i}: input and output must be strings")
            step = row.setdefault("step", int(path.stem))
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ValueError(f"{path}:{i}: step must be an integer >= 0, got step={step!r}")
            rows.append(row)
    return rows


def _verl_group_key(row: dict):
    uid = row.get("uid")
    if isinstance(uid, str) and uid.count("_") >= 2:  # v1 trainer: "{uid}_{session}_{output}"
        return uid.rsplit("_", 2)[0]
    return uid if uid is not None else row["input"]


def records_from_verl_dump(
    dump_dir,
    run_dir,
    *,
    algo: str,
    group_size: int,
    gamma: float,
    lr_scale: float = 1.0,
    lr_match_gamma: float | None = None,
    settings=None,
    prompt_id_of=None,
    task=None,
    problems: dict | None = None,
    sampling=None,
    max_step: int | None = None,
) -> Path:
    """Convert verl's rollout dump into ``run_dir`` (``run.json`` with engine "verl" and
    ``groups.jsonl``). ``sampling``: verl's rollout settings
    (:func:`verl_sampling` of the run's config), kept in run.json so
    that ``fgrpo-llm eval --run`` samples the run's checkpoint as verl sampled it. ``max_step``:
    the steps read (:func:`read_verl_dump`; after a resume, the step the resumed run has reached).

    Rows of one step with the same prompt uid (or, without one, the same prompt text) form a group.
    A row is correct when its ``score`` >= ``settings.threshold``
    (:class:`fgrpo_llm.integrations.focal.FocalSettings`, default 0/1 rewards). The prompt id is the
    row's ``prompt_id`` field when present, else ``prompt_id_of(row)`` (e.g. a map of the decoded
    prompt text to the task's problem id: ``verl.data.prompt_index``; a row it does not know is a
    ValueError, since its records would match no problem of the rare set), else
    :func:`text_prompt_id`.
    verl dumps only the groups it trained on, so every record has ``trained: true``.

    ``metrics.jsonl`` gets one line per step with the focal metrics of the dumped groups
    (:func:`fgrpo_llm.integrations.focal.focal_metrics`: ``focal/weight_mean`` over every group,
    ``focal/weight_mean_active`` over the active ones, absent when none is), the definitions the
    TRL trainer logs; lines that others wrote there (an evaluation's) are kept, and a second
    conversion replaces the first's focal lines.
    """
    from fgrpo_llm.integrations.focal import (  # lazy: torch
        FocalSettings,
        correct_mask,
        focal_metrics,
        group_weights,
    )

    if settings is not None and float(settings.gamma) != float(gamma):
        raise ValueError(
            f"gamma={gamma} and settings.gamma={settings.gamma} differ; give the run's gamma once"
        )
    settings = settings or FocalSettings(gamma=gamma)
    rows = read_verl_dump(dump_dir, max_step=max_step)  # every row checked before writing
    batches = []
    by_step: dict[int, list[dict]] = {}
    for row in rows:
        by_step.setdefault(int(row["step"]), []).append(row)
    unknown = []  # rows whose prompt prompt_id_of does not know
    for step, step_rows in sorted(by_step.items()):
        ids = []
        for row in step_rows:
            pid = row.get("prompt_id")
            if pid is None and prompt_id_of is not None:
                pid = prompt_id_of(row)
                if pid is None:
                    unknown.append(row)
            ids.append(str(pid) if pid is not None else text_prompt_id(row["input"]))
        batches.append(
            dict(
                step=step,
                prompt_ids=ids,
                completions=[r["output"] for r in step_rows],
                correct=correct_mask([float(r["score"]) for r in step_rows], settings).tolist(),
                group_ids=[
                    (_verl_group_key(r), pid) for r, pid in zip(step_rows, ids, strict=True)
                ],
            )
        )
    if unknown:  # their records would name no problem of the rare set: refuse, not guess
        raise ValueError(
            f"prompt_id_of knows the prompt of {len(rows) - len(unknown)} of {len(rows)} rows of "
            f"{dump_dir}; the first unknown one: {unknown[0]['input'][:200]!r}. Was the index "
            "built from the run's split, with the chat template verl applied "
            "(verl.data.prompt_index's template_kwargs: data.apply_chat_template_kwargs, tools)?"
        )
    rec = RunRecorder(
        run_dir,
        engine="verl",
        algo=algo,
        group_size=group_size,
        gamma=gamma,
        lr_scale=lr_scale,
        lr_match_gamma=lr_match_gamma,
        weighting=str(settings.w),
        sampling=sampling.policy() if hasattr(sampling, "policy") else sampling,
    )
    metrics = []
    for batch in batches:
        scores = [float(r["score"]) for r in by_step[batch["step"]]]
        g, X, N, _ = group_weights(scores, batch["group_ids"], settings)
        metrics.append({"step": batch["step"], **focal_metrics(g, X, N)})
    try:
        # the groups are rebuilt from the whole dump: a second conversion replaces the first's
        # (metrics.jsonl, which an evaluation of the run may have written, is kept)
        rec.clear_groups()
        for batch in batches:
            rec.log_batch(**batch, task=task, problems=problems)
    finally:
        rec.close()
    _replace_focal_metrics(Path(run_dir) / "metrics.jsonl", metrics)
    return Path(run_dir)


def _replace_focal_metrics(path: Path, lines: list[dict]) -> None:
    """``metrics.jsonl`` with its focal lines (a line with a ``focal/`` key) replaced by
    ``lines``; every other line kept, in order."""
    import json

    kept = []
    if path.is_file():
        kept = [
            m
            for m in read_jsonl(path, what="metrics file")
            if not any(str(k).startswith("focal/") for k in m)
        ]
    text = "".join(json.dumps(m) + "\n" for m in kept + lines)
    atomic_write_text(path, text)


def _plain_config(config) -> dict:
    """verl's config as plain dicts: a dict, an OmegaConf DictConfig (resolved), or the path of
    a YAML file (Hydra's ``.hydra/config.yaml`` of the run, :func:`read_config_file`)."""
    if isinstance(config, (str, Path)):
        config = read_config_file(config)
    elif not isinstance(config, dict) and hasattr(config, "items"):
        from omegaconf import OmegaConf  # verl's config type, installed with verl

        config = OmegaConf.to_container(config, resolve=True)
    if not isinstance(config, dict):
        raise TypeError(f"config must be verl's config (a mapping or a YAML path), got {config!r}")
    return config


def verl_sampling(config):
    """The policy verl's rollout samples (:class:`fgrpo_llm.rollout.SamplingParams`), from its
    config's ``actor_rollout_ref.rollout``: ``temperature``, ``top_p``, ``top_k`` (verl's -1 and
    our 0 both mean off) and ``response_length`` (verl's default: ``data.max_response_length``,
    else 512). ``config``: a dict, an OmegaConf DictConfig, or a YAML file's path.

        sampling = verl_sampling("outputs/2026-12-01/10-00-00/.hydra/config.yaml")
        records_from_verl_dump(dump, run, ..., sampling=sampling)
    """
    from fgrpo_llm.rollout import SamplingParams  # lazy: torch

    config = _plain_config(config)
    try:
        rollout = config["actor_rollout_ref"]["rollout"]
    except (KeyError, TypeError):
        raise ValueError("verl's config has no actor_rollout_ref.rollout section") from None
    length = rollout.get("response_length")
    if not isinstance(length, int) or isinstance(length, bool):  # unresolved: ${oc.select:...}
        length = (config.get("data") or {}).get("max_response_length", 512)
    values = {
        "max_new_tokens": length,
        "temperature": rollout.get("temperature", 1.0),
        "top_p": rollout.get("top_p", 1.0),
        "top_k": rollout.get("top_k", -1),
    }
    for key, v in values.items():
        if not is_finite_number(v):
            raise ValueError(f"verl's rollout {key} must be a finite number, got {key}={v!r}")
    top_k = values["top_k"]
    if top_k != int(top_k) or top_k < -1:
        raise ValueError(f"verl's rollout top_k must be -1 or an integer >= 0, got top_k={top_k!r}")
    top_k = int(top_k)
    return SamplingParams(
        max_new_tokens=values["max_new_tokens"],
        temperature=float(values["temperature"]),
        top_p=float(values["top_p"]),
        top_k=max(top_k, 0),
    )
