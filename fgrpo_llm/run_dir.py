"""A training run's directory and its life: open it (refuse to overwrite a run, resume one from
its newest intact checkpoint with every setting checked, restore the policy, the optimizer, the
random streams and the prompt order, write config.json and run.json, open the logs), checkpoint
it, save its final policy (setting aside an evaluation of the policy it replaces), and hold it
for one process at a time (``fgrpo_common.files.directory_lock``). The loop that trains in it
is ``fgrpo_llm.trainer``'s.

Its files: config.json (resolved), run.json (``fgrpo_llm.tracking.write_run_info``),
metrics.jsonl, groups.jsonl, checkpoints/step_*/ (``fgrpo_llm.checkpoint``), model/ (the final
policy, with step.json naming its step) and the evaluations beside it (``eval``, ``model/eval``,
moved to ``eval_step_<its step>`` when a resumed run replaces the policy).

    with hold(out):
        run = open_run(cfg, out, device, amp, resume=False, task=None)
        ...  # the steps, each ending in checkpoint(run, cfg, out, step)
        save_policy(run, cfg, out)
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fgrpo_common.files import changed_settings, directory_lock, remove_stale_temporaries
from fgrpo_llm.checkpoint import (
    SETTINGS_JSON,
    capture_rng,
    restore_rng,
    resume_point,
    save_checkpoint,
)
from fgrpo_llm.config import TrainConfig, refuse_a_model_directory, save_config
from fgrpo_llm.divergence import TrainingDiverged, check_policy, probe_ids
from fgrpo_llm.environment import environment
from fgrpo_llm.model import (
    disable_dropout,
    load_model_and_tokenizer,
    save_model_and_tokenizer,
    weight_problem,
)
from fgrpo_llm.rollout import SamplingParams
from fgrpo_llm.tasks import check_split, check_task, get_task
from fgrpo_llm.tracking import (
    STEP_RECORD,
    JsonlWriter,
    MetricsLogger,
    model_step,
    truncate_jsonl,
    write_run_info,
)

__all__ = [
    "RESUMABLE_FIELDS",
    "PromptStream",
    "Run",
    "hold",
    "open_run",
    "checkpoint",
    "save_policy",
    "fixed_settings",
]

#: Config fields a resumed run may change (everything else must match the stopped run). ``out`` is
#: where the run is now, not a setting: a copied or moved run directory resumes.
RESUMABLE_FIELDS = (
    "out",
    "steps",
    "progress",
    "tensorboard",
    "report_to",
    "device",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
)


class PromptStream:
    """Deterministic prompt order: epoch e visits the problems in permutation
    default_rng([seed, e]).

    The whole state is one integer (``cursor``, prompts handed out so far), so it is trivially
    saved.
    """

    def __init__(self, num_problems: int, *, seed: int, cursor: int = 0):
        if num_problems < 1:
            raise ValueError(f"the task split has no problems (num_problems={num_problems})")
        self.num_problems, self.seed, self.cursor = num_problems, seed, cursor
        self._epoch, self._order = -1, None

    def take(self, k: int) -> list[int]:
        """The next ``k`` problem indices."""
        out = []
        for _ in range(k):
            epoch, pos = divmod(self.cursor, self.num_problems)
            if epoch != self._epoch:
                rng = np.random.default_rng([self.seed, epoch])
                self._epoch, self._order = epoch, rng.permutation(self.num_problems)
            out.append(int(self._order[pos]))
            self.cursor += 1
        return out

    def state(self) -> dict:
        return {"cursor": self.cursor}


@dataclass
class Run:
    """An opened run: the policy, its task, the optimizer and the random streams, the logs, and
    the step it starts after (0, or the checkpoint's on resume)."""

    model: torch.nn.Module
    tok: object
    task: object
    problems: list
    probe: torch.Tensor  # (1, P) the prompt check_policy runs the policy on
    ref_model: torch.nn.Module | None  # the frozen base, only with the KL penalty
    params: list
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    sampling: SamplingParams  # the rollouts' settings (and the evaluations')
    generator: torch.Generator  # sampling and mini-batch shuffling
    data: PromptStream
    logger: MetricsLogger
    group_log: JsonlWriter
    start: int


@contextlib.contextmanager
def hold(out: Path):
    """The run directory ``out`` for this process alone while the block runs
    (``directory_lock``: a second process is refused with ``DirectoryInUse``); a ValueError
    when ``out`` is a file."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a directory, but {out} is a file")
    with directory_lock(out, what="fgrpo-llm run"):
        yield out


def open_run(cfg, out: Path, device, amp, resume: bool, task) -> Run:
    """Refuse to overwrite a run, find the checkpoint to resume from, load the policy, the task and
    the optimizer (restored on resume), write config.json and run.json, open the logs."""
    point, start = _resume_point(cfg, out, device, resume)
    # the global streams (dropout, if any; Python's, which nothing draws from but a checkpoint
    # saves, so that two runs write the same bytes): the trainer is an entry point
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model, tok = _policy(cfg, point, device)
    task = task if task is not None else get_task(cfg.task, model_tokenizer=tok, **cfg.task_kwargs)
    check_task(task)
    problems = task.problems(check_split(task, cfg.split))
    if cfg.prompt_pool is not None:  # a pool the run revisits: its first P problems
        problems = problems[: cfg.prompt_pool]
    probe = probe_ids(tok, problems[0].prompt if problems else "", device)
    if point is not None:  # before anything is written
        _check_checkpoint(model, probe, amp, start)
    ref_model = None
    if cfg.kl_coef > 0:  # a frozen copy of the base only when the KL penalty is on
        ref_model = load_model_and_tokenizer(cfg.base, device=device)[0].requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer, scheduler = _optimizer(cfg, params)
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    data = PromptStream(len(problems), seed=cfg.seed)
    if point is not None:
        state = point[3]
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"], generator)
        data.cursor = state["data"]["cursor"]
    _write_settings(cfg, out, device, start if point is not None else None)
    logger = MetricsLogger(
        out,
        total_steps=cfg.steps,
        start_step=start,
        report_to=cfg.report_to,
        config=cfg.to_dict(),
        progress=cfg.progress,
    )
    truncate_jsonl(out / "groups.jsonl", max_step=start)
    group_log = JsonlWriter(out / "groups.jsonl")
    if resume and start < cfg.steps and (out / "model" / "config.json").is_file():
        held = _step_name(_old_step(out / "model"))
        print(
            f"fgrpo-llm: {out / 'model'} holds the policy of {held} "
            f"until this run finishes step {cfg.steps}",
            file=sys.stderr,
        )
    return Run(
        model, tok, task, problems, probe, ref_model, params, optimizer, scheduler,
        cfg.sampling(device), generator, data, logger, group_log, start,
    )  # fmt: skip


def _resume_point(cfg, out: Path, device, resume: bool):
    """``(point, start)``: the checkpoint to resume from (``checkpoint.resume_point``, None for a
    new run or one stopped before its first checkpoint) and the step it reached. Refuses a model
    directory, a run that exists when not resuming, and a resume with other settings; removes
    the leftovers of a kill during an atomic write."""
    refuse_a_model_directory(out)
    if not resume and ((out / "metrics.jsonl").exists() or (out / "config.json").exists()):
        raise ValueError(
            f"{out} already holds a run; pass --resume to continue it or choose another --out"
        )
    remove_stale_temporaries(out)  # leftovers of a kill during an atomic write
    remove_stale_temporaries(out / "checkpoints")
    point = resume_point(out, device=device) if resume else None
    start = int(point[3]["step"]) if point is not None else 0
    if resume:
        _check_resume(cfg, out, start, None if point is None else Path(point[0]))
        if point is None and (out / "metrics.jsonl").exists():
            print(
                f"fgrpo-llm: {out} has no checkpoint yet; starting it again from step 0",
                file=sys.stderr,
            )
    return point, start


def _policy(cfg, point, device):
    """The policy and its tokenizer: the checkpoint's, else the base's; without dropout."""
    model, tok = (
        (point[1], point[2])
        if point is not None
        else load_model_and_tokenizer(cfg.base, device=device)
    )
    # no dropout in the policy: the loss's log-probs must be those of the policy that sampled
    # (r = 1 on the first mini-batch); the built-in model has none, a downloaded base may
    dropped = disable_dropout(model)
    if dropped:
        print(f"fgrpo-llm: dropout switched off in the policy ({dropped})", file=sys.stderr)
    return model, tok


def _check_checkpoint(model, probe: torch.Tensor, amp, start: int) -> None:
    """TrainingDiverged for a checkpoint whose finite weights overflow: no place to resume."""
    problem = weight_problem(model)
    if problem:
        raise TrainingDiverged(
            f"the checkpoint of step {start}: {problem}; it cannot be resumed. Remove it to "
            "resume from an earlier one, or start again with a lower learning rate."
        )
    check_policy(model, probe, amp, f"the checkpoint of step {start}")


def _optimizer(cfg, params: list):
    """AdamW on ``params`` and its schedule: a linear warm-up over training steps, then constant
    (Table 5)."""
    optimizer = torch.optim.AdamW(
        params,
        lr=cfg.effective_lr,
        betas=(cfg.adam_beta1, cfg.adam_beta2),
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
    )
    warmup = max(cfg.warmup_steps, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    return optimizer, scheduler


def _write_settings(cfg, out: Path, device, resumed_at: int | None) -> None:
    """config.json (resolved) and run.json (``tracking.write_run_info``; ``resumed_at``: the
    step a resume continues from, None for a fresh run)."""
    save_config(cfg, out / "config.json")
    write_run_info(
        out,
        engine="fgrpo",
        algo=cfg.algo,
        group_size=cfg.group_size,
        gamma=cfg.gamma,
        lr_scale=cfg.effective_lr / cfg.lr,
        lr_match_gamma=cfg.lr_match_gamma,
        environment=environment(device),
        weighting=str(cfg.advantage_weighting),  # its spelling: "focal:0.5", "maxrl"
        sampling=cfg.sampling().policy(),  # as the engines' runs keep it (``eval --run``)
        entropy_coef=cfg.entropy_coef,
        kl_coef=cfg.kl_coef,
        resumed_at=resumed_at,  # one environment per segment
    )


def fixed_settings(cfg: TrainConfig) -> dict:
    """The settings a resume may not change (all but :data:`RESUMABLE_FIELDS`), as JSON."""
    return {k: v for k, v in cfg.to_dict().items() if k not in RESUMABLE_FIELDS}


def _check_resume(cfg: TrainConfig, out: Path, start: int, checkpoint: Path | None) -> None:
    """A resumed run keeps every setting of the stopped one except :data:`RESUMABLE_FIELDS` (as
    its config.json and the checkpoint it resumes from both say: a checkpoint copied from another
    run, or a config.json edited since, is refused), and cannot be told to stop before the step
    it already reached."""
    saved = [(out / "config.json", f"settings differ from the stopped run in {out}")]
    if checkpoint is not None:
        saved.append(
            (
                checkpoint / SETTINGS_JSON,
                f"the checkpoint {checkpoint} was made with other settings than the run's "
                "config.json",
            )
        )
    for path, what in saved:
        diff = changed_settings(
            path, cfg.to_dict(), free=RESUMABLE_FIELDS, hint=" (--resume reads it)"
        )
        if diff:
            raise ValueError(
                f"--resume: {what}: "
                + ", ".join(f"{k}={old!r} -> {new!r}" for k, (old, new) in diff.items())
            )
    if cfg.steps < start:
        raise ValueError(
            f"--resume: the run in {out} already reached step {start}; steps must be >= {start}, "
            f"got steps={cfg.steps}"
        )


def checkpoint(run: Run, cfg, out: Path, step: int) -> None:
    """Every ``checkpoint_every`` steps and after the last one (atomic: a kill leaves the previous
    checkpoint intact)."""
    if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == cfg.steps:
        save_checkpoint(
            out,
            step,
            model=run.model,
            tokenizer=run.tok,
            optimizer=run.optimizer,
            scheduler=run.scheduler,
            rng=capture_rng(run.generator),
            data_state=run.data.state(),
            keep=cfg.keep_checkpoints,
            settings=fixed_settings(cfg),
        )


def save_policy(run: Run, cfg, out: Path) -> None:
    """The final policy to ``out/model`` (with step.json naming ``cfg.steps``); a new policy
    replaces model/, so an evaluation of the old one is set aside first."""
    run.model.eval()
    if run.start < cfg.steps:  # a new policy replaces model/: its evaluations are of the old one
        _set_aside_evaluation(out)
    save_model_and_tokenizer(
        run.model, run.tok, out / "model", records={STEP_RECORD: {"step": cfg.steps}}
    )


def _old_step(model_dir: Path) -> int | None:
    """The step of the policy in ``model_dir`` (``model_step``), None when unknown or damaged."""
    try:
        return model_step(model_dir)
    except ValueError:
        return None


def _step_name(step: int | None) -> str:
    return f"step {step}" if step is not None else "an earlier step"


def _evaluated_step(ev: Path, model_dir: Path) -> tuple[bool, int | None]:
    """Whether ``ev/eval.json`` evaluated the policy in ``model_dir`` (it names that model, or
    lies inside it), and the step it says it evaluated (else model/'s recorded one)."""
    try:
        data = json.loads((ev / "eval.json").read_text())
    except (OSError, ValueError, RecursionError):
        return False, None
    if not isinstance(data, dict):
        return False, None
    named = data.get("model")
    ours = ev.parent == model_dir or (
        isinstance(named, str) and Path(named).resolve() == model_dir.resolve()
    )
    step = data.get("step")
    known = isinstance(step, int) and not isinstance(step, bool)
    return ours, step if known else _old_step(model_dir)


def _set_aside_evaluation(out: Path) -> None:
    """Move an evaluation of the policy in ``out/model`` (``fgrpo-llm eval``'s default --out,
    ``model/eval``, or ``out/eval``) to ``eval_step_<the step it evaluated>`` beside it, saying
    so: the new policy is saved next, and nothing is lost or misnamed."""
    model_dir = out / "model"
    for ev in (model_dir / "eval", out / "eval"):
        ours, step = _evaluated_step(ev, model_dir)
        if not ours:
            continue
        stem = f"eval_step_{step}" if step is not None else "eval_earlier"
        target, k = ev.parent / stem, 2
        while target.exists():
            target, k = ev.parent / f"{stem}_{k}", k + 1
        ev.rename(target)
        print(
            f"fgrpo-llm: {ev} evaluated the policy of {_step_name(step)}, not the one saved now; "
            f"moved to {target}",
            file=sys.stderr,
        )
