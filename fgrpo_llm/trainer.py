"""The RL training loop: GRPO / DAPO / CISPO with the focal weight (SPEC.md §6, paper Section 5.3).

One visible ``for step in range(...)`` loop with the sections sample, score, advantages, loss and
step, evaluate, log, checkpoint. Each step draws B prompts, samples N completions per prompt,
scores them with the task's verifier, turns each group's rewards into advantages
A^F = (1 - X/N)^gamma * A^GRPO (Eq. 11-13), and takes ``num_mini_batches`` AdamW steps per
PPO epoch on the chosen loss, with the ratio r = pi_theta / pi_old of both policies taken at the
sampling temperature (r = 1 on the first mini-batch of the first epoch) and the loss a token mean
over all completion tokens of the mini-batch (DAPO-style), also when gradients are accumulated
over micro-batches. DAPO's dynamic sampling drops groups with X = 0 or X = N and
samples more prompts, for at most ``max_sampling_rounds`` extra rounds, to refill the batch.

Outputs in ``cfg.out``: config.json (resolved), metrics.jsonl (one line per step), groups.jsonl
(one line per sampled group: step, prompt_id, N, num_correct, the solution form of each correct
completion), checkpoints/step_*/ (resumable), model/ (the final policy, a HF checkpoint).

    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.trainer import train
    train(TrainConfig(base="runs/base", out="runs/x", algo="grpo", gamma=0.5, steps=20))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

from fgrpo_llm.advantages import focal_advantages, focal_weight, group_success_rate
from fgrpo_llm.checkpoint import capture_rng, latest_checkpoint, load_trainer_state, restore_rng, save_checkpoint
from fgrpo_llm.config import TrainConfig, save_config
from fgrpo_llm.losses import policy_loss
from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype, resolve_device, save_model_and_tokenizer
from fgrpo_llm.rollout import concat_rollouts, sample_completions, token_logprobs, token_logprobs_and_entropy
from fgrpo_llm.tasks import check_split, get_task
from fgrpo_llm.tracking import JsonlWriter, MetricsLogger, truncate_jsonl

__all__ = ["train", "PromptStream", "Evaluator", "RESUMABLE_FIELDS"]

#: An evaluation hook: called as hook(model, step) every ``eval_every`` steps; its metrics join that step's line.
Evaluator = Callable[[torch.nn.Module, int], dict]

#: Config fields a resumed run may change (everything else must match the stopped run).
RESUMABLE_FIELDS = ("steps", "progress", "tensorboard", "device", "eval_every", "checkpoint_every",
                    "keep_checkpoints")


class PromptStream:
    """Deterministic prompt order: epoch e visits the problems in permutation default_rng([seed, e]).

    The whole state is one integer (``cursor``, prompts handed out so far), so it is trivially saved.
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


def _sample_and_score(model, tok, task, problems, idx, cfg, generator, amp):
    """One sampling round: N completions for each problem in ``idx``; rewards (b, N), forms, X/N (b,)."""
    batch = sample_completions(model, tok, [problems[i].prompt for i in idx], num_samples=cfg.group_size,
                               max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                               top_k=cfg.top_k, generator=generator, batch_size=cfg.rollout_batch_size,
                               autocast_dtype=amp)
    row_problem = [problems[i] for i in idx for _ in range(cfg.group_size)]
    rewards = torch.tensor([float(task.reward(p, c)) for p, c in zip(row_problem, batch.completions)])
    form_fn = getattr(task, "solution_form", None)
    forms = [form_fn(p, c) if (form_fn is not None and r >= cfg.reward_correct) else None
             for p, c, r in zip(row_problem, batch.completions, rewards.tolist())]
    rewards = rewards.view(len(idx), cfg.group_size)  # (b, N)
    mu_hat = group_success_rate(rewards, reward_correct=cfg.reward_correct, reward_wrong=cfg.reward_wrong)
    return batch, rewards, forms, mu_hat


@dataclass
class _Round:
    """One sampling round: problem indices (b,), rollouts (b*N rows), rewards (b, N), forms (b*N,)."""

    idx: list[int]
    batch: object
    rewards: torch.Tensor
    forms: list
    mu_hat: torch.Tensor  # (b,) X/N

    @property
    def active(self) -> torch.Tensor:
        """(b,) groups with 0 < X < N: the only ones with a nonzero GRPO advantage."""
        return (self.mu_hat > 0) & (self.mu_hat < 1)


def _first_active(rounds: list[_Round], B: int) -> list[torch.Tensor]:
    """Dynamic sampling: keep the first B active groups (0 < X < N) across rounds, in sampling order."""
    keep, kept = [], 0
    for r in rounds:
        k = r.active & (torch.cumsum(r.active.long(), 0) + kept <= B)
        keep.append(k)
        kept += int(k.sum())
    return keep


def _check_resume(cfg: TrainConfig, out: Path) -> None:
    saved_path = out / "config.json"
    if not saved_path.is_file():
        return
    saved = json.loads(saved_path.read_text())
    diff = sorted(k for k, v in cfg.to_dict().items() if k not in RESUMABLE_FIELDS and saved.get(k) != v)
    if diff:
        raise ValueError(f"--resume: settings differ from the stopped run in {out}: "
                         + ", ".join(f"{k}={saved.get(k)!r} -> {getattr(cfg, k)!r}" for k in diff))


def _rows_of(groups: torch.Tensor, N: int) -> torch.Tensor:
    """Row indices of the given groups (rows of group b are b*N .. b*N+N-1)."""
    return (groups[:, None] * N + torch.arange(N)).flatten()


def train(cfg: TrainConfig, *, resume: bool = False, evaluators: Iterable[Evaluator] = (), task=None) -> dict:
    """Run (or, with ``resume``, continue) the RL run described by ``cfg``; return the last metrics line.

    ``task`` overrides ``get_task(cfg.task, **cfg.task_kwargs)`` (for user tasks). ``evaluators`` are
    called as hook(model, step) every ``cfg.eval_every`` steps and after the last step.
    """
    out = Path(cfg.out)
    device = resolve_device(cfg.device)
    amp = resolve_autocast_dtype(device, cfg.dtype)
    checkpoint = latest_checkpoint(out) if resume else None
    if resume:
        if checkpoint is None:
            raise FileNotFoundError(f"--resume: no checkpoint under {out / 'checkpoints'}")
        _check_resume(cfg, out)
    elif (out / "metrics.jsonl").exists():
        raise ValueError(f"{out} already holds a run (metrics.jsonl); pass --resume or choose another --out")

    # --- setup: model, reference, task, optimizer, random streams ---
    torch.manual_seed(cfg.seed)  # global RNG (dropout, if any); the trainer is an entry point
    model, tok = load_model_and_tokenizer(checkpoint or cfg.base, device=device)
    ref_model = None
    if cfg.kl_coef > 0:  # a frozen copy of the base only when the KL penalty is on
        ref_model = load_model_and_tokenizer(cfg.base, device=device)[0].requires_grad_(False)
    task = task if task is not None else get_task(cfg.task, **cfg.task_kwargs)
    problems = task.problems(check_split(task, cfg.split))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.effective_lr, betas=(cfg.adam_beta1, cfg.adam_beta2),
                                  eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
    warmup = max(cfg.warmup_steps, 1)  # linear warm-up over training steps, then constant (Table 5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    generator = torch.Generator(device=device).manual_seed(cfg.seed)  # sampling and mini-batch shuffling
    np_rng = np.random.default_rng(cfg.seed)  # reserved for numpy-side randomness; saved with the rest
    data = PromptStream(len(problems), seed=cfg.seed)
    start = 0
    if checkpoint is not None:
        state = load_trainer_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"], generator, np_rng)
        data.cursor = state["data"]["cursor"]
        start = state["step"]
    save_config(cfg, out / "config.json")
    logger = MetricsLogger(out, total_steps=cfg.steps, start_step=start, tensorboard=cfg.tensorboard,
                           progress=cfg.progress)
    truncate_jsonl(out / "groups.jsonl", max_step=start)
    group_log = JsonlWriter(out / "groups.jsonl")
    evaluators = list(evaluators)
    B, N = cfg.prompts_per_step, cfg.group_size
    metrics: dict = {}
    model.train()

    try:
        for step in range(start + 1, cfg.steps + 1):
            t_step = time.perf_counter()

            # --- sample and score (scored per round: dynamic sampling decides on rewards) ---
            def sample_round(idx):
                return _Round(idx, *_sample_and_score(model, tok, task, problems, idx, cfg, generator, amp))

            rounds = [sample_round(data.take(B))]
            if cfg.dynamic_sampling:  # DAPO: refill the batch with groups that carry signal (0 < X < N)
                for _ in range(cfg.max_sampling_rounds):
                    have = sum(int(r.active.sum()) for r in rounds)
                    if have >= B:
                        break
                    # ask for the missing groups divided by the active fraction seen so far (at least 1/4),
                    # so one extra round usually suffices without sampling a whole batch each time
                    rate = max(have / sum(len(r.idx) for r in rounds), 0.25)
                    rounds.append(sample_round(data.take(min(B, math.ceil((B - have) / rate)))))
            t_sampled = time.perf_counter()

            # --- score: the groups this step trains on (all, or under dynamic sampling the first B active) ---
            keep = _first_active(rounds, B) if cfg.dynamic_sampling else [torch.ones_like(r.active) for r in rounds]
            parts = [r.batch.select(_rows_of(k.nonzero().flatten(), N)) for r, k in zip(rounds, keep) if k.any()]
            rewards = torch.cat([r.rewards[k] for r, k in zip(rounds, keep)]).view(-1, N)  # (Bk, N)
            Bk = rewards.shape[0]

            # --- advantages: A^F = (1 - X/N)^gamma * A^GRPO per group (Eq. 11-13) ---
            A, g = torch.zeros(Bk, N), torch.ones(Bk)  # stay empty when dynamic sampling kept no group
            if Bk > 0:
                A = focal_advantages(rewards, gamma=cfg.gamma, reward_correct=cfg.reward_correct,
                                     reward_wrong=cfg.reward_wrong, std=cfg.adv_std, eps=cfg.adv_eps)  # (Bk, N)
                g = focal_weight(group_success_rate(rewards, reward_correct=cfg.reward_correct,
                                                    reward_wrong=cfg.reward_wrong), gamma=cfg.gamma)  # (Bk,)
            active = (A != 0).any(dim=1)  # (Bk,) groups that carry a learning signal

            # --- loss and step: PPO epochs x mini-batches, token-mean loss, AdamW, grad clip ---
            sums, maxes, tokens_trained, grad_norms = defaultdict(float), {}, 0, []
            lr_now = scheduler.get_last_lr()[0]
            if Bk > 0:
                train_batch = concat_rollouts(parts, pad_id=tok.pad_token_id)
                A_rows = A.flatten().to(device)  # (M,) one advantage per sequence
                for _epoch in range(cfg.ppo_epochs):
                    order = torch.randperm(Bk, generator=generator, device=generator.device).cpu()
                    for mb in order.tensor_split(min(cfg.num_mini_batches, Bk)):
                        rows = _rows_of(mb, N).to(device)
                        mb_tokens = int(train_batch.completion_mask[rows].sum())
                        optimizer.zero_grad(set_to_none=True)
                        for micro in rows.split(cfg.micro_batch_size or len(rows)):
                            seq, attn = train_batch.sequences[micro], train_batch.attention_mask[micro]
                            cmask = train_batch.completion_mask[micro]
                            # pi_theta at the sampling temperature, as old_logprobs (r = 1 on policy);
                            # the entropy keeps its graph only when the bonus is in the loss
                            logp, H = token_logprobs_and_entropy(model, seq, attn, autocast_dtype=amp,
                                                                 temperature=cfg.temperature,
                                                                 entropy_grad=cfg.entropy_coef > 0)
                            ref = None
                            if ref_model is not None:
                                with torch.no_grad():
                                    ref = token_logprobs(ref_model, seq, attn, autocast_dtype=amp,
                                                         temperature=cfg.temperature)
                            loss, m = policy_loss(cfg.algo, logp, train_batch.old_logprobs[micro], A_rows[micro],
                                                  cmask, entropy=H, entropy_coef=cfg.entropy_coef,
                                                  ref_logprobs=ref, kl_coef=cfg.kl_coef, **cfg.loss_kwargs())
                            n_tok = int(cmask.sum())
                            # token-mean over the whole mini-batch, accumulated over micro-batches
                            (loss * (n_tok / max(mb_tokens, 1))).backward()
                            for key, value in m.items():
                                if key.endswith("_max"):
                                    maxes[key] = max(maxes.get(key, -math.inf), value)
                                else:
                                    sums[key] += value * n_tok
                            tokens_trained += n_tok
                        norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else math.inf)
                        grad_norms.append(float(norm))
                        optimizer.step()
            with warnings.catch_warnings():  # a step whose groups were all dropped took no optimizer step
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)`")
                scheduler.step()
            t_trained = time.perf_counter()

            # --- evaluate ---
            eval_metrics = {}
            if evaluators and cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                model.eval()
                for hook in evaluators:
                    eval_metrics.update(hook(model, step))
                model.train()
            t_evaluated = time.perf_counter()

            # --- log: one flat metrics line, one record per sampled group ---
            first_batch, first_rewards = rounds[0].batch, rounds[0].rewards  # the unfiltered batch of B prompts
            X = (rounds[0].mu_hat * N).round()  # (B,) correct completions per group
            sampled_tokens = sum(int(r.batch.completion_mask.sum()) for r in rounds)
            lengths = first_batch.completion_lengths.float()
            metrics = {
                "reward/mean": first_rewards.mean().item(),
                "reward/pass_rate": (first_rewards >= cfg.reward_correct).float().mean().item(),
                "reward/pass_at_n": (X > 0).float().mean().item(),
                "groups/active_frac": ((X > 0) & (X < N)).float().mean().item(),
                "groups/all_correct_frac": (X == N).float().mean().item(),
                "groups/all_wrong_frac": (X == 0).float().mean().item(),
                "groups/trained": Bk,
                "sampling/rounds": len(rounds),
                "sampling/groups_sampled": sum(len(r.idx) for r in rounds),
                "focal/weight_mean": g[active].mean().item() if active.any() else float("nan"),
                "completion/length_mean": lengths.mean().item(),
                "completion/truncated_frac": (~first_batch.finished).float().mean().item(),
                **{k: v / max(tokens_trained, 1) for k, v in sums.items()},
                **maxes,
                "optim/grad_norm": float(np.mean(grad_norms)) if grad_norms else float("nan"),
                "optim/lr": lr_now,
                "optim/updates": len(grad_norms),
                **eval_metrics,
                "time/sample_s": t_sampled - t_step,
                "time/train_s": t_trained - t_sampled,
                "time/eval_s": t_evaluated - t_trained,
                "time/step_s": time.perf_counter() - t_step,
                "time/rollout_tokens_per_s": sampled_tokens / max(t_sampled - t_step, 1e-9),
                "time/train_tokens_per_s": tokens_trained / max(t_trained - t_sampled, 1e-9),
            }
            for n_round, (r, k) in enumerate(zip(rounds, keep)):
                for b, i in enumerate(r.idx):
                    correct = (r.rewards[b] >= cfg.reward_correct).tolist()
                    group_log.write({"step": step, "prompt_id": problems[i].id, "N": N, "num_correct": sum(correct),
                                     "forms": [r.forms[b * N + j] for j in range(N) if correct[j]],
                                     "round": n_round, "trained": bool(k[b])})
            logger.log(step, metrics)

            # --- checkpoint ---
            if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == cfg.steps:
                save_checkpoint(out, step, model=model, tokenizer=tok, optimizer=optimizer, scheduler=scheduler,
                                rng=capture_rng(generator, np_rng), data_state=data.state(),
                                keep=cfg.keep_checkpoints)
    finally:
        logger.close()
        group_log.close()

    model.eval()
    save_model_and_tokenizer(model, tok, out / "model")
    return {"step": cfg.steps, **metrics}
