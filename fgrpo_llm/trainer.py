"""The RL training loop: GRPO / DAPO / CISPO with the focal weight (paper Section 4, Eq. 11-13;
Table 5).

One visible ``for step in range(...)`` loop (``_train``) after the run is opened
(``_open_run``), in named phases: sample and score the groups (``_sample_groups``, a
:class:`Groups`), advantages, optimize (``_optimize``), evaluate, log, checkpoint. Each step
draws B prompts and samples N completions per prompt; the task's verifier marks each completion
correct or not (``Task.is_correct``) and gives its reward. Per group, X is the number of correct
completions, mu_hat = X / N, and

    A_i = g * A_i^GRPO,   g = (1 - mu_hat)^gamma,   A_i^GRPO = (R_i - mean R) / (std R + eps),

the one change F-GRPO makes (gamma = 0 is GRPO exactly). Then ``num_mini_batches`` AdamW steps per
PPO epoch on the chosen loss (``fgrpo_llm.losses``), with the ratio r = pi_theta / pi_old of both
policies taken at the sampling temperature (r = 1 on the first mini-batch of the first epoch: the
policy has no dropout, and under autocast pi_old comes from the loss's own forward pass) and
the loss a token mean over all completion tokens of the mini-batch (DAPO's token-level loss), also
when gradients are accumulated over micro-batches. DAPO's dynamic sampling drops groups with
X = 0 or X = N and samples more prompts, for at most ``max_sampling_rounds`` extra rounds, to
refill the batch.

Outputs in ``cfg.out``: config.json (resolved), run.json (``fgrpo_llm.tracking.write_run_info``),
metrics.jsonl (one line per step), groups.jsonl (one line per sampled group: step, prompt_id, N,
num_correct, the solution form of each correct completion, and for a trained group its focal
weight), checkpoints/step_*/ (resumable at any kill), model/ (the final policy, a HF checkpoint,
with step.json naming its step; a run resumed to more steps moves an evaluation of the old
policy, model/eval or eval, to eval_step_<its step> beside it when it replaces the policy).
Non-finite values in the loss, the gradients or the weights stop the run at that step with
:class:`TrainingDiverged`; nothing non-finite is ever saved.

    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.trainer import train
    train(TrainConfig(base="runs/base", out="runs/x", algo="grpo", gamma=0.5, steps=20))
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from fgrpo_llm.advantages import weighted_advantages
from fgrpo_llm.checkpoint import (
    SETTINGS_JSON,
    capture_rng,
    restore_rng,
    resume_point,
    save_checkpoint,
)
from fgrpo_llm.config import TrainConfig, refuse_a_model_directory, save_config
from fgrpo_llm.environment import environment
from fgrpo_llm.files import changed_settings, directory_lock, remove_stale_temporaries
from fgrpo_llm.groups import Groups, first_active, rows_of, sample_round
from fgrpo_llm.losses import policy_loss
from fgrpo_llm.model import (
    MAX_WEIGHT,
    autocast,
    disable_dropout,
    load_model_and_tokenizer,
    resolve_autocast_dtype,
    resolve_device,
    save_model_and_tokenizer,
    weight_problem,
)
from fgrpo_llm.rollout import (
    RolloutBatch,
    SamplingParams,
    sample_completions,
    token_logprobs,
    token_logprobs_and_entropy,
)
from fgrpo_llm.tasks import check_split, check_task, get_task
from fgrpo_llm.tasks.for_model import check_base_task, model_task_kwargs
from fgrpo_llm.tracking import (
    STEP_RECORD,
    JsonlWriter,
    MetricsLogger,
    model_step,
    truncate_jsonl,
    write_run_info,
)

__all__ = ["train", "PromptStream", "Evaluator", "RESUMABLE_FIELDS", "TrainingDiverged"]

#: An evaluation hook: called as hook(model, step) every ``eval_every`` steps; its metrics join that
#: step's line.
Evaluator = Callable[[torch.nn.Module, int], dict]

#: Config fields a resumed run may change (everything else must match the stopped run). ``out`` is
#: where the run is now, not a setting: a copied or moved run directory resumes.
RESUMABLE_FIELDS = (
    "out",
    "steps",
    "progress",
    "tensorboard",
    "device",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
)


class TrainingDiverged(RuntimeError):
    """The loss, a gradient or a weight became NaN or inf: the run stops at that step, unsaved."""


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
class _OptimStats:
    """What the loss-and-step section measured, summed over its mini-batches."""

    sums: dict = field(default_factory=lambda: defaultdict(float))  # token-weighted metric sums
    maxes: dict = field(default_factory=dict)
    tokens: int = 0
    grad_norms: list = field(default_factory=list)

    def means(self) -> dict:
        return {**{k: v / max(self.tokens, 1) for k, v in self.sums.items()}, **self.maxes}


def _diverged(step: int, what: str) -> TrainingDiverged:
    return TrainingDiverged(
        f"step {step}: {what} became NaN or inf; the run stops here and nothing of this step "
        f"is saved (the last checkpoint stays resumable). Lower the learning rate or keep "
        f"gradient clipping on (grad_clip > 0)."
    )


def _probe_ids(tok, prompt: str, device) -> torch.Tensor:
    """(1, P) token ids of one prompt: the input of ``_check_policy``."""
    ids = tok(prompt, add_special_tokens=False)["input_ids"] or [tok.eos_token_id or 0]
    return torch.tensor([ids], dtype=torch.long, device=device)


@torch.no_grad()
def _check_policy(model, probe: torch.Tensor, amp, where: str) -> None:
    """TrainingDiverged when the policy's next-token logits on ``probe`` are not finite: weights
    that are finite but huge (too large a learning rate) overflow in the forward pass, and the
    next sampling would fail. Checked after each optimizer phase, before anything of the step is
    logged or saved, and on the checkpoint a run resumes from."""
    was_training = model.training
    model.eval()
    try:
        with autocast(probe.device, amp):
            logits = model(input_ids=probe).logits[:, -1, :]  # (1, V)
    finally:
        model.train(was_training)
    if not torch.isfinite(logits).all():
        raise TrainingDiverged(
            f"{where}: the policy's logits are NaN or inf (its weights are finite but overflow "
            "in the forward pass); the run stops and nothing of this step is saved. Lower the "
            "learning rate or keep gradient clipping on (grad_clip > 0)."
        )


def _old_logprobs(model, batch: RolloutBatch, cfg, amp) -> torch.Tensor:
    """(M, L) log pi_old of the sampled tokens, as the loss's forward pass computes log pi_theta.

    In float32 these are the sampler's (its step-by-step decode gives the full forward pass's
    values to rounding, so r = 1 on the first mini-batch). Under autocast (bf16, a GPU's
    default) the two passes round differently, by several percent in r, so pi_old is computed
    again here by the loss's own full forward pass, without gradients (as verl does)."""
    if amp is None:
        return batch.old_logprobs
    out = torch.zeros_like(batch.old_logprobs)  # (M, L)
    with torch.no_grad():
        rows = torch.arange(len(out), device=out.device)
        for micro in rows.split(cfg.micro_batch_size or len(out)):
            logp = token_logprobs(  # (m, L)
                model,
                batch.sequences[micro],
                batch.attention_mask[micro],
                autocast_dtype=amp,
                temperature=cfg.temperature,
            )
            out[micro] = torch.where(batch.completion_mask[micro], logp.float(), 0.0)
    return out


def _optimize(step: int, run: _Run, batch: RolloutBatch, A_rows, B: int, cfg, amp) -> _OptimStats:
    """PPO epochs x mini-batches of AdamW steps on the token-mean loss of ``cfg.algo``.

    ``A_rows`` (M,) is one advantage per row of ``batch`` (B groups of N rows). Raises
    :class:`TrainingDiverged` before an optimizer step would write a non-finite weight.
    """
    model, ref_model, optimizer, params = run.model, run.ref_model, run.optimizer, run.params
    generator = run.generator
    N, stats = cfg.group_size, _OptimStats()
    old_logprobs = _old_logprobs(model, batch, cfg, amp)  # (M, L)
    for _epoch in range(cfg.ppo_epochs):
        order = torch.randperm(B, generator=generator, device=generator.device).cpu()
        for mb in order.tensor_split(min(cfg.num_mini_batches, B)):
            rows = rows_of(mb, N).to(A_rows.device)
            mb_tokens = int(batch.completion_mask[rows].sum())
            optimizer.zero_grad(set_to_none=True)
            for micro in rows.split(cfg.micro_batch_size or len(rows)):
                seq, attn = batch.sequences[micro], batch.attention_mask[micro]
                cmask = batch.completion_mask[micro]
                # pi_theta at the sampling temperature, as old_logprobs (r = 1 on policy); the
                # entropy keeps its graph only when the bonus is in the loss
                logp, H = token_logprobs_and_entropy(
                    model,
                    seq,
                    attn,
                    autocast_dtype=amp,
                    temperature=cfg.temperature,
                    entropy_grad=cfg.entropy_coef > 0,
                )
                ref = None
                if ref_model is not None:
                    with torch.no_grad():
                        ref = token_logprobs(
                            ref_model, seq, attn, autocast_dtype=amp, temperature=cfg.temperature
                        )
                loss, m = policy_loss(
                    cfg.algo,
                    logp,
                    old_logprobs[micro],
                    A_rows[micro],
                    cmask,
                    entropy=H,
                    entropy_coef=cfg.entropy_coef,
                    ref_logprobs=ref,
                    kl_coef=cfg.kl_coef,
                    **cfg.loss_kwargs(),
                )
                if not torch.isfinite(loss):
                    raise _diverged(step, "the loss")
                n_tok = int(cmask.sum())
                # token mean over the whole mini-batch, accumulated over micro-batches
                (loss * (n_tok / max(mb_tokens, 1))).backward()
                for key, value in m.items():
                    if key.endswith("_max"):
                        stats.maxes[key] = max(stats.maxes.get(key, -math.inf), value)
                    else:
                        stats.sums[key] += value * n_tok
                stats.tokens += n_tok
            norm = torch.nn.utils.clip_grad_norm_(
                params, cfg.grad_clip if cfg.grad_clip > 0 else math.inf
            )
            if not torch.isfinite(norm):
                raise _diverged(step, "the gradient")
            stats.grad_norms.append(float(norm))
            optimizer.step()
            for p in params:  # one reduction per weight: NaN / inf, or finite but overflowing
                largest = float(p.detach().abs().max()) if p.numel() else 0.0
                if not math.isfinite(largest):
                    raise _diverged(step, "a weight")
                if largest > MAX_WEIGHT:  # sampling from it would overflow
                    raise TrainingDiverged(
                        f"step {step}: {weight_problem(model)}; the run stops here and nothing "
                        "of this step is saved (the last checkpoint stays resumable). Lower the "
                        "learning rate or keep gradient clipping on (grad_clip > 0)."
                    )
    return stats


class _StepClock:
    """Wall time of a step's phases (timings only: no number of the run depends on them)."""

    def __init__(self):
        self.marks = {"start": time.perf_counter()}

    def mark(self, name: str) -> None:
        self.marks[name] = time.perf_counter()

    def seconds(self, a: str, b: str) -> float:
        return self.marks[b] - self.marks[a]


def _step_metrics(
    groups: Groups,
    *,
    N: int,
    g: torch.Tensor,
    active: torch.Tensor,
    opt: _OptimStats,
    lr: float,
    eval_metrics: dict,
    clock: _StepClock,
) -> dict:
    """One flat metrics line: the unfiltered first round's outcomes, the focal weight g that the
    update used (mean over groups with a learning signal), the optimiser's and the timings."""
    first = groups.rounds[0]
    X = first.X  # (B,) correct completions per group
    lengths = first.batch.completion_lengths.float()
    sampled_tokens = sum(int(r.batch.completion_mask.sum()) for r in groups.rounds)
    sample_s, train_s = clock.seconds("start", "sampled"), clock.seconds("sampled", "trained")
    return {
        "reward/mean": first.rewards.mean().item(),
        "reward/pass_rate": first.correct.float().mean().item(),
        "reward/pass_at_n": (X > 0).float().mean().item(),
        "groups/active_frac": ((X > 0) & (X < N)).float().mean().item(),
        "groups/all_correct_frac": (X == N).float().mean().item(),
        "groups/all_wrong_frac": (X == 0).float().mean().item(),
        "groups/trained": groups.Bk,
        "sampling/rounds": len(groups.rounds),
        "sampling/groups_sampled": sum(len(r.idx) for r in groups.rounds),
        "focal/weight_mean": g[active].mean().item() if active.any() else float("nan"),
        "completion/length_mean": lengths.mean().item(),
        "completion/truncated_frac": (~first.batch.finished).float().mean().item(),
        **opt.means(),
        "optim/grad_norm": float(np.mean(opt.grad_norms)) if opt.grad_norms else float("nan"),
        "optim/lr": lr,
        "optim/updates": len(opt.grad_norms),
        **eval_metrics,
        "time/sample_s": sample_s,
        "time/train_s": train_s,
        "time/eval_s": clock.seconds("trained", "evaluated"),
        "time/step_s": time.perf_counter() - clock.marks["start"],
        "time/rollout_tokens_per_s": sampled_tokens / max(sample_s, 1e-9),
        "time/train_tokens_per_s": opt.tokens / max(train_s, 1e-9),
    }


def _fixed_settings(cfg: TrainConfig) -> dict:
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


def train(
    cfg: TrainConfig, *, resume: bool = False, evaluators: Iterable[Evaluator] = (), task=None
) -> dict:
    """Run (or, with ``resume``, continue) the RL run described by ``cfg``; return the last metrics
    line.

    ``task`` overrides ``get_task(cfg.task, **cfg.task_kwargs)`` (for user tasks). ``evaluators``
    are called as hook(model, step) every ``cfg.eval_every`` steps and after the last step. A
    resumed run continues from its newest intact checkpoint (a damaged one is skipped, saying so),
    or from the start when it was stopped before its first checkpoint. A config without
    ``task_kwargs`` takes the settings the built-in base was pretrained with
    (``tasks.for_model.model_task_kwargs``), as ``fgrpo-llm train`` does, so that the test split
    stays out of training. A base that records the task it was made for
    (``tasks.for_model.recorded_task``) is refused for another ``cfg.task``.
    """
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"train takes a TrainConfig, got {type(cfg).__name__}")
    check_base_task(cfg.base, cfg.task)
    if task is None and not cfg.task_kwargs:
        found = model_task_kwargs(cfg.base, cfg.task)
        if found:
            cfg = replace(cfg, task_kwargs=found)
    out = Path(cfg.out)
    device = resolve_device(cfg.device)
    amp = resolve_autocast_dtype(device, cfg.dtype)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a directory, but {out} is a file")
    with directory_lock(out, what="fgrpo-llm run"):  # one process at a time in a run directory
        return _train(cfg, out, device, amp, resume, evaluators, task)


@dataclass
class _Run:
    """An opened run: the policy, its task, the optimizer and the random streams, the logs, and
    the step it starts after (0, or the checkpoint's on resume)."""

    model: torch.nn.Module
    tok: object
    task: object
    problems: list
    probe: torch.Tensor  # (1, P) the prompt _check_policy runs the policy on
    ref_model: torch.nn.Module | None  # the frozen base, only with the KL penalty
    params: list
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    sampling: SamplingParams  # the rollouts' settings (and the evaluations')
    generator: torch.Generator  # sampling and mini-batch shuffling
    np_rng: np.random.Generator  # reserved for numpy-side randomness; saved with the rest
    data: PromptStream
    logger: MetricsLogger
    group_log: JsonlWriter
    start: int


def _open_run(cfg, out: Path, device, amp, resume: bool, task) -> _Run:
    """Refuse to overwrite a run, find the checkpoint to resume from, load the policy, the task and
    the optimizer (restored on resume), write config.json and run.json, open the logs."""
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
    # the global streams (dropout, if any; Python's, which nothing draws from but a checkpoint
    # saves, so that two runs write the same bytes): the trainer is an entry point
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
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
    task = task if task is not None else get_task(cfg.task, model_tokenizer=tok, **cfg.task_kwargs)
    check_task(task)
    problems = task.problems(check_split(task, cfg.split))
    if cfg.prompt_pool is not None:  # a pool the run revisits: its first P problems
        problems = problems[: cfg.prompt_pool]
    probe = _probe_ids(tok, problems[0].prompt if problems else "", device)
    # before anything is written: a checkpoint whose finite weights overflow is no place to resume
    if point is not None:
        problem = weight_problem(model)
        if problem:
            raise TrainingDiverged(
                f"the checkpoint of step {start}: {problem}; it cannot be resumed. Remove it to "
                "resume from an earlier one, or start again with a lower learning rate."
            )
        _check_policy(model, probe, amp, f"the checkpoint of step {start}")
    ref_model = None
    if cfg.kl_coef > 0:  # a frozen copy of the base only when the KL penalty is on
        ref_model = load_model_and_tokenizer(cfg.base, device=device)[0].requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params,
        lr=cfg.effective_lr,
        betas=(cfg.adam_beta1, cfg.adam_beta2),
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
    )
    warmup = max(cfg.warmup_steps, 1)  # linear warm-up over training steps, then constant (Table 5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    np_rng = np.random.default_rng(cfg.seed)
    data = PromptStream(len(problems), seed=cfg.seed)
    if point is not None:
        state = point[3]
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"], generator, np_rng)
        data.cursor = state["data"]["cursor"]
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
        resumed_at=start if point is not None else None,  # one environment per segment
    )
    logger = MetricsLogger(
        out,
        total_steps=cfg.steps,
        start_step=start,
        tensorboard=cfg.tensorboard,
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
    return _Run(
        model, tok, task, problems, probe, ref_model, params, optimizer, scheduler,
        cfg.sampling(device), generator, np_rng, data, logger, group_log, start,
    )  # fmt: skip


def _sample_groups(run: _Run, cfg) -> Groups:
    """B prompts x N completions, scored per round; under DAPO's dynamic sampling more rounds
    refill the batch with groups that carry signal (0 < X < N), and the step keeps the first B."""
    B, N = cfg.prompts_per_step, cfg.group_size

    def sample(idx):
        return sample_round(
            run.model, run.tok, run.task, run.problems, idx, N, run.sampling, run.generator,
            sampler=sample_completions,
        )  # fmt: skip

    rounds = [sample(run.data.take(B))]
    if not cfg.dynamic_sampling:
        return Groups.of(rounds, [torch.ones_like(rounds[0].active)], N)
    for _ in range(cfg.max_sampling_rounds):
        have = sum(int(r.active.sum()) for r in rounds)
        if have >= B:
            break
        # ask for the missing groups divided by the active fraction seen so far (at least 1/4), so
        # one extra round usually suffices without sampling a whole batch each time
        rate = max(have / sum(len(r.idx) for r in rounds), 0.25)
        rounds.append(sample(run.data.take(min(B, math.ceil((B - have) / rate)))))
    return Groups.of(rounds, first_active(rounds, B), N)


def _step_scheduler(scheduler) -> None:
    """The warm-up's next learning rate. A step whose groups were all dropped took no optimizer
    step; torch warns about the order then, and the schedule is still the one intended."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)`")
        scheduler.step()


def _evaluate(model, evaluators: list, cfg, step: int) -> dict:
    """The evaluators' metrics every ``eval_every`` steps and after the last step, else {}."""
    if not (evaluators and cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps)):
        return {}
    metrics: dict = {}
    model.eval()
    for hook in evaluators:
        metrics.update(hook(model, step))
    model.train()
    return metrics


def _checkpoint(run: _Run, cfg, out: Path, step: int) -> None:
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
            rng=capture_rng(run.generator, run.np_rng),
            data_state=run.data.state(),
            keep=cfg.keep_checkpoints,
            settings=_fixed_settings(cfg),
        )


def _train(cfg, out, device, amp, resume, evaluators, task) -> dict:
    """``train`` inside the run directory's lock: open the run, then the step loop."""
    run = _open_run(cfg, out, device, amp, resume, task)
    evaluators, N, metrics = list(evaluators), cfg.group_size, {}
    run.model.train()
    try:
        for step in range(run.start + 1, cfg.steps + 1):
            clock = _StepClock()
            groups = _sample_groups(run, cfg)  # (B_k, N) rewards and verdicts, and rows
            clock.mark("sampled")

            # --- advantages: A = g * A_GRPO, one weight g = w(X / N) per group (Eq. 11-13) ---
            g, A, active = weighted_advantages(  # (B_k,), (B_k, N), (B_k,) carries a signal
                cfg.advantage_weighting, groups.rewards, groups.correct,
                std=cfg.adv_std, eps=cfg.adv_eps,
            )  # fmt: skip

            # --- optimize: PPO epochs x mini-batches, token-mean loss, AdamW, grad clip ---
            lr_now, opt = run.scheduler.get_last_lr()[0], _OptimStats()
            if groups.Bk > 0:  # a step whose groups were all dropped takes no optimizer step
                batch = groups.batch(N, run.tok.pad_token_id)
                opt = _optimize(step, run, batch, A.flatten().to(device), groups.Bk, cfg, amp)
                _check_policy(run.model, run.probe, amp, f"step {step}")
            _step_scheduler(run.scheduler)
            clock.mark("trained")

            eval_metrics = _evaluate(run.model, evaluators, cfg, step)
            clock.mark("evaluated")

            # --- log: one metrics line, one record per sampled group (with its weight g) ---
            metrics = _step_metrics(
                groups, N=N, g=g, active=active, opt=opt, lr=lr_now,
                eval_metrics=eval_metrics, clock=clock,
            )  # fmt: skip
            for record in groups.records(step, run.problems, N, g, weighting=cfg.weighting):
                run.group_log.write(record)
            run.logger.log(step, metrics)
            _checkpoint(run, cfg, out, step)
    finally:
        run.logger.close()
        run.group_log.close()

    run.model.eval()
    if run.start < cfg.steps:  # a new policy replaces model/: its evaluations are of the old one
        _set_aside_evaluation(out)
    save_model_and_tokenizer(
        run.model, run.tok, out / "model", records={STEP_RECORD: {"step": cfg.steps}}
    )
    return {"step": cfg.steps, **metrics}


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
