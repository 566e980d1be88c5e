"""The training run's guards against non-finite numbers: a loss, a gradient or a weight that
became NaN or inf, or finite weights so large that the policy's forward pass overflows, stop the
run at that step with :class:`TrainingDiverged`, before anything of the step is logged or saved
(so nothing non-finite is ever saved, and the last checkpoint stays resumable).

    from fgrpo_llm.divergence import check_policy, probe_ids
    check_policy(model, probe_ids(tok, "3 + 4 =", "cpu"), None, "step 7")
"""

from __future__ import annotations

import math

import torch

from fgrpo_llm.model import MAX_WEIGHT, autocast, weight_problem

__all__ = ["TrainingDiverged", "diverged", "probe_ids", "check_policy", "check_weights"]

_ADVICE = "Lower the learning rate or keep gradient clipping on (grad_clip > 0)."


class TrainingDiverged(RuntimeError):
    """The loss, a gradient or a weight became NaN or inf: the run stops at that step, unsaved."""


def diverged(step: int, what: str) -> TrainingDiverged:
    """The error for ``what`` (the loss, the gradient, a weight) become NaN or inf at ``step``."""
    return TrainingDiverged(
        f"step {step}: {what} became NaN or inf; the run stops here and nothing of this step "
        f"is saved (the last checkpoint stays resumable). {_ADVICE}"
    )


def check_weights(step: int, model, params) -> None:
    """TrainingDiverged when a weight of ``params`` (the policy ``model``'s) is NaN / inf, or
    finite but larger than ``MAX_WEIGHT`` in magnitude (sampling from it would overflow): one
    reduction per weight, after each optimizer step."""
    for p in params:
        largest = float(p.detach().abs().max()) if p.numel() else 0.0
        if not math.isfinite(largest):
            raise diverged(step, "a weight")
        if largest > MAX_WEIGHT:
            raise TrainingDiverged(
                f"step {step}: {weight_problem(model)}; the run stops here and nothing "
                f"of this step is saved (the last checkpoint stays resumable). {_ADVICE}"
            )


def probe_ids(tok, prompt: str, device) -> torch.Tensor:
    """(1, P) token ids of one prompt: the input of :func:`check_policy`."""
    ids = tok(prompt, add_special_tokens=False)["input_ids"] or [tok.eos_token_id or 0]
    return torch.tensor([ids], dtype=torch.long, device=device)


@torch.no_grad()
def check_policy(model, probe: torch.Tensor, amp, where: str) -> None:
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
            f"in the forward pass); the run stops and nothing of this step is saved. {_ADVICE}"
        )
