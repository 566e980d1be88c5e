"""Supervised fine-tuning, shared by the Countdown base and the Maze SFT stage.

- :func:`pad_sft_rows`: (token ids, prompt length) rows -> right-padded ``(input_ids,
  attention_mask, labels)`` with labels -100 off the completion;
- :func:`completion_loss`: the token-mean cross-entropy of the completion tokens,
  -(1/|O|) sum_{t in O} log pi(o_t | <t);
- :func:`sft_loop`: the one SFT loop (AdamW steps on :func:`completion_loss`, the gradient norm
  clipped at 1, a step budget).

Dimension letters: ``B`` rows, ``T`` columns, ``V`` vocabulary.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import torch

from fgrpo_common.cli import bar_disabled
from fgrpo_common.timer import Timer

__all__ = ["pad_sft_rows", "completion_loss", "sft_loop"]


def pad_sft_rows(
    rows: list[tuple[list[int], int]], pad_id: int
) -> tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]:
    """Right-pad ``(token ids, prompt length)`` rows into ``(input_ids, attention_mask, labels)``,
    each (B, T); labels are -100 off the completion, so only completion tokens are trained."""
    T = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), T), pad_id, dtype=torch.long)  # (B, T), right-padded
    labels = torch.full((len(rows), T), -100, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(rows), T), dtype=torch.long)  # (B, T)
    for b, (ids, P) in enumerate(rows):
        input_ids[b, : len(ids)] = torch.tensor(ids)
        labels[b, P : len(ids)] = input_ids[b, P : len(ids)]
        mask[b, : len(ids)] = 1
    return input_ids, mask, labels


def completion_loss(model, input_ids, attention_mask, labels) -> torch.Tensor:
    """Token-mean cross-entropy of the completion tokens: -(1/|O|) sum_{t in O} log pi(o_t | <t)."""
    # (B, T-1, V)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    target = labels[:, 1:]  # (B, T-1) next-token targets
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100
    )


def sft_loop(
    model,
    optimizer: torch.optim.Optimizer,
    next_batch: Callable[[], tuple],
    *,
    steps: int,
    device,
    lr_at: Callable[[int], float] | None = None,
    autocast_dtype: torch.dtype | None = None,
    log: Callable[[dict], None] | None = None,
    log_at: Callable[[int], bool] = lambda step: step == 1,
    seconds: float = 0.0,
    desc: str = "sft",
    progress: bool = True,
) -> dict:
    """Train ``model`` for ``steps`` steps: per step the learning rate ``lr_at(step)`` (0-based;
    None: the optimizer's), a batch ``next_batch()`` -> ``(input_ids, attention_mask, labels)``
    (B, T) each, :func:`completion_loss` (under ``autocast_dtype``), the gradient norm clipped at 1
    and one optimizer step. At each step where ``log_at(step)`` (1-based), ``log`` receives
    ``{"step", "loss", "grad_norm", "lr", "tokens", "elapsed_s"}``. A non-finite loss or gradient
    norm raises FloatingPointError before the step is taken. ``seconds`` > 0 also stops at that
    wall time (the model then depends on the machine's speed; off by default).

    Returns ``{"steps": steps taken, "loss": the last loss, "stopped_by": "step budget" or the
    time cap, "seconds": wall time}``.
    """
    from tqdm import tqdm

    from fgrpo_llm.model import autocast  # lazy: transformers

    model.train()
    timer, step, tokens, loss_value = Timer(), 0, 0, math.nan
    cap = seconds if seconds > 0 else math.inf
    stopped_by = "step budget"
    bar = tqdm(total=steps, unit="step", desc=desc, file=sys.stderr, disable=bar_disabled(progress))
    while step < steps:
        if timer.seconds() >= cap:
            stopped_by = f"time cap ({seconds:g} s) after {step} of {steps} steps"
            break
        lr = None
        if lr_at is not None:
            lr = lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
        input_ids, mask, labels = (x.to(device) for x in next_batch())  # (B, T) each
        with autocast(device, autocast_dtype):
            loss = completion_loss(model, input_ids, mask, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not (torch.isfinite(loss) and torch.isfinite(grad_norm)):
            raise FloatingPointError(
                f"{desc} diverged at step {step + 1} (loss {loss.item()}, gradient norm "
                f"{float(grad_norm)}); lower the learning rate"
            )
        optimizer.step()
        step += 1
        tokens += int(mask.sum())
        loss_value = loss.item()
        if log is not None and log_at(step):
            log(
                {
                    "step": step,
                    "loss": loss_value,
                    "grad_norm": float(grad_norm),
                    "lr": lr if lr is not None else optimizer.param_groups[0]["lr"],
                    "tokens": tokens,
                    "elapsed_s": timer.seconds(),
                }
            )
            bar.set_postfix(loss=f"{loss_value:.3f}", step=step)
        bar.update(1)
    bar.close()
    model.eval()
    return {
        "steps": step,
        "loss": loss_value,
        "stopped_by": stopped_by,
        "seconds": timer.seconds(),
    }
