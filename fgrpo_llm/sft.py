"""Supervised fine-tuning pieces shared by the Countdown base and the Maze SFT stage.

- :func:`pad_sft_rows`: (token ids, prompt length) rows -> right-padded ``(input_ids,
  attention_mask, labels)`` with labels -100 off the completion;
- :func:`completion_loss`: the token-mean cross-entropy of the completion tokens,
  -(1/|O|) sum_{t in O} log pi(o_t | <t).

Dimension letters: ``B`` rows, ``T`` columns, ``V`` vocabulary.
"""

from __future__ import annotations

import torch

__all__ = ["pad_sft_rows", "completion_loss"]


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
