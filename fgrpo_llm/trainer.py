"""The RL training loop: GRPO / DAPO / CISPO with the focal weight (paper Section 4, Eq. 11-13;
Table 5).

One visible ``for step in range(...)`` loop (``_train``) after the run is opened
(``fgrpo_llm.run_dir.open_run``), in named phases: sample and score the groups
(``_sample_groups``, a :class:`Groups`), advantages, optimize (``_optimize``), evaluate, log,
checkpoint. Each step draws B prompts and samples N completions per prompt; the task's verifier
marks each completion correct or not (``Task.is_correct``) and gives its reward. Per group, X is
the number of correct completions, mu_hat = X / N, and

    A_i = g * A_i^GRPO,   g = (1 - mu_hat)^gamma,   A_i^GRPO = (R_i - mean R) / (std R + eps),

the one change F-GRPO makes (gamma = 0 is GRPO exactly). Then ``num_mini_batches`` AdamW steps per
PPO epoch on the chosen loss (``fgrpo_llm.losses``), with the ratio r = pi_theta / pi_old of both
policies taken at the sampling temperature (r = 1 on the first mini-batch of the first epoch: the
policy has no dropout, and under autocast pi_old comes from the loss's own forward pass) and
the loss a token mean over all completion tokens of the mini-batch (DAPO's token-level loss), also
when gradients are accumulated over micro-batches. DAPO's dynamic sampling drops groups with
X = 0 or X = N and samples more prompts, for at most ``max_sampling_rounds`` extra rounds, to
refill the batch.

The run directory (``fgrpo_llm.run_dir``: its files, resume, the lock) gets config.json, run.json,
metrics.jsonl (one line per step), groups.jsonl (one line per sampled group: step, prompt_id, N,
num_correct, the solution form of each correct completion, and for a trained group its focal
weight), checkpoints/step_*/ (resumable at any kill) and model/ (the final policy).
Non-finite values in the loss, the gradients or the weights stop the run at that step with
:class:`TrainingDiverged` (``fgrpo_llm.divergence``); nothing non-finite is ever saved.

    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.trainer import train
    train(TrainConfig(base="runs/base", out="runs/x", algo="grpo", gamma=0.5, steps=20))
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from fgrpo_common.timer import Timer
from fgrpo_llm.advantages import focal_metrics, weighted_advantages
from fgrpo_llm.config import TrainConfig
from fgrpo_llm.divergence import TrainingDiverged, check_policy, check_weights, diverged
from fgrpo_llm.groups import Groups, first_active, rows_of, sample_round
from fgrpo_llm.losses import policy_loss
from fgrpo_llm.model import resolve_autocast_dtype, resolve_device
from fgrpo_llm.rollout import (
    RolloutBatch,
    sample_completions,
    token_logprobs,
    token_logprobs_and_entropy,
)
from fgrpo_llm.run_dir import (
    RESUMABLE_FIELDS,
    PromptStream,
    Run,
    checkpoint,
    hold,
    open_run,
    save_policy,
)
from fgrpo_llm.tasks.for_model import check_base_task, model_task_kwargs

__all__ = ["train", "PromptStream", "Evaluator", "RESUMABLE_FIELDS", "TrainingDiverged"]

#: An evaluation hook: called as hook(model, step) every ``eval_every`` steps; its metrics join that
#: step's line.
Evaluator = Callable[[torch.nn.Module, int], dict]


@dataclass
class _OptimStats:
    """What the loss-and-step section measured, summed over its mini-batches."""

    sums: dict = field(default_factory=lambda: defaultdict(float))  # token-weighted metric sums
    maxes: dict = field(default_factory=dict)
    tokens: int = 0
    grad_norms: list = field(default_factory=list)

    def means(self) -> dict:
        return {**{k: v / max(self.tokens, 1) for k, v in self.sums.items()}, **self.maxes}


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


def _optimize(step: int, run: Run, batch: RolloutBatch, A_rows, B: int, cfg, amp) -> _OptimStats:
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
                    raise diverged(step, "the loss")
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
                raise diverged(step, "the gradient")
            stats.grad_norms.append(float(norm))
            optimizer.step()
            check_weights(step, model, params)  # NaN / inf, or finite but overflowing
    return stats


def _step_metrics(
    groups: Groups,
    *,
    N: int,
    g: torch.Tensor,
    opt: _OptimStats,
    lr: float,
    eval_metrics: dict,
    clock: Timer,
) -> dict:
    """One flat metrics line: the unfiltered first round's outcomes, the weights g of the trained
    groups (``focal_metrics``: the engines' definitions), the optimiser's and the timings. Names
    follow TRL's GRPOTrainer where the quantity is the same (``reward``, ``grad_norm``,
    ``completions/mean_length``, ...)."""
    first = groups.rounds[0]
    X = first.X  # (B,) correct completions per group
    X_k = groups.correct.sum(dim=1)  # (B_k,) the same, of the trained groups (weights g)
    lengths = first.batch.completion_lengths.float()
    sampled_tokens = sum(int(r.batch.completion_mask.sum()) for r in groups.rounds)
    sample_s, train_s = clock.seconds("start", "sampled"), clock.seconds("sampled", "trained")
    return {
        "reward": first.rewards.mean().item(),
        "reward/pass_rate": first.correct.float().mean().item(),
        "reward/pass_at_n": (X > 0).float().mean().item(),
        "groups/active_frac": ((X > 0) & (X < N)).float().mean().item(),
        "groups/all_correct_frac": (X == N).float().mean().item(),
        "groups/all_wrong_frac": (X == 0).float().mean().item(),
        "groups/trained": groups.Bk,
        "sampling/rounds": len(groups.rounds),
        "sampling/groups_sampled": sum(len(r.idx) for r in groups.rounds),
        **focal_metrics(g, X_k, torch.full_like(X_k, N)),
        "completions/mean_length": lengths.mean().item(),
        "completions/clipped_ratio": (~first.batch.finished).float().mean().item(),
        **opt.means(),
        "grad_norm": float(np.mean(opt.grad_norms)) if opt.grad_norms else float("nan"),
        "learning_rate": lr,
        "optim/updates": len(opt.grad_norms),
        **eval_metrics,
        "time/sample_s": sample_s,
        "time/train_s": train_s,
        "time/eval_s": clock.seconds("trained", "evaluated"),
        "time/step_s": clock.seconds(),
        "time/rollout_tokens_per_s": sampled_tokens / max(sample_s, 1e-9),
        "time/train_tokens_per_s": opt.tokens / max(train_s, 1e-9),
    }


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
    with hold(out):  # one process at a time in a run directory
        return _train(cfg, out, device, amp, resume, evaluators, task)


def _sample_groups(run: Run, cfg) -> Groups:
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


def _train(cfg, out, device, amp, resume, evaluators, task) -> dict:
    """``train`` inside the run directory's lock: open the run, then the step loop."""
    run = open_run(cfg, out, device, amp, resume, task)
    evaluators, N, metrics = list(evaluators), cfg.group_size, {}
    run.model.train()
    try:
        for step in range(run.start + 1, cfg.steps + 1):
            clock = Timer()
            groups = _sample_groups(run, cfg)  # (B_k, N) rewards and verdicts, and rows
            clock.mark("sampled")

            # --- advantages: A = g * A_GRPO, one weight g = w(X / N) per group (Eq. 11-13) ---
            g, A, _ = weighted_advantages(  # (B_k,), (B_k, N), (B_k,) carries a signal
                cfg.advantage_weighting, groups.rewards, groups.correct,
                std=cfg.adv_std, eps=cfg.adv_eps,
            )  # fmt: skip

            # --- optimize: PPO epochs x mini-batches, token-mean loss, AdamW, grad clip ---
            lr_now, opt = run.scheduler.get_last_lr()[0], _OptimStats()
            if groups.Bk > 0:  # a step whose groups were all dropped takes no optimizer step
                batch = groups.batch(N, run.tok.pad_token_id)
                opt = _optimize(step, run, batch, A.flatten().to(device), groups.Bk, cfg, amp)
                check_policy(run.model, run.probe, amp, f"step {step}")
            _step_scheduler(run.scheduler)
            clock.mark("trained")

            eval_metrics = _evaluate(run.model, evaluators, cfg, step)
            clock.mark("evaluated")

            # --- log: one metrics line, one record per sampled group (with its weight g) ---
            metrics = _step_metrics(
                groups, N=N, g=g, opt=opt, lr=lr_now,
                eval_metrics=eval_metrics, clock=clock,
            )  # fmt: skip
            for record in groups.records(step, run.problems, N, g, weighting=cfg.weighting):
                run.group_log.write(record)
            run.logger.log(step, metrics)
            checkpoint(run, cfg, out, step)
    finally:
        run.logger.close()
        run.group_log.close()

    save_policy(run, cfg, out)
    return {"step": cfg.steps, **metrics}
