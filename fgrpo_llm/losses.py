"""Policy losses of GRPO, DAPO and CISPO, with token-mean aggregation (paper Section 5.2-5.3;
DAPO: Yu et al. 2025; CISPO: MiniMax-M1, 2025).

Every loss is a pure function ``(logprobs, old_logprobs, advantages, mask) -> (loss, metrics)``:

- ``logprobs``     (M, L) log pi_theta(o_t | x, o_<t), differentiable
- ``old_logprobs`` (M, L) log pi_old of the same tokens, recorded by the sampler
- ``advantages``   (M,)   one advantage per sequence (already multiplied by the focal weight g
                          for the F-variants: A^F = g * A, Eq. 13), broadcast over its tokens
- ``mask``         (M, L) True on the completion tokens that count
                          (``RolloutBatch.completion_mask``)

with the per-token ratio r_t = pi_theta / pi_old = exp(logprobs - old_logprobs). The three
variants differ in one marked line each:

- GRPO:  l_t = -min(r_t A, clip(r_t, 1 - eps, 1 + eps) A), eps = 0.2
- DAPO:  the same with an asymmetric clip, eps_low = 0.2, eps_high = 0.28
- CISPO: l_t = -sg(clamp(r_t, 1 - is_eps_low, 1 + is_eps_high)) A log pi_theta(o_t), with the
         importance-weight cap is_eps_low = 1.0, is_eps_high = 5.0 (weight in [0, 6]); the weight
         is detached, so no token's gradient is ever switched off.

Token-mean aggregation: loss = sum_t mask_t l_t / sum_t mask_t over the whole batch (DAPO's
token-level loss). Regularisers with their own coefficients: an entropy bonus and the k3 KL
estimator to a frozen reference, KL_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1 >= 0.
Masked tokens never reach the loss (``torch.where``, not multiplication, so even a non-finite
value under the mask cannot leak into the loss or its gradient).
"""

from __future__ import annotations

import torch

__all__ = [
    "token_mean",
    "grpo_loss",
    "dapo_loss",
    "cispo_loss",
    "k3_kl",
    "entropy_bonus",
    "kl_penalty",
    "policy_loss",
    "LOSSES",
]


def token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum(x * mask) / max(sum(mask), 1) over all tokens of the batch; masked entries ignored.
    (M, L) -> ()."""
    mask = mask.bool()
    return torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum().clamp(min=1)


def _check(logprobs, old_logprobs, advantages, mask):
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            f"logprobs, old_logprobs and mask must share one (M, L) shape, got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(mask.shape)}"
        )
    if advantages.shape != logprobs.shape[:1]:
        raise ValueError(
            f"advantages must have shape (M,) = {tuple(logprobs.shape[:1])}, "
            f"got {tuple(advantages.shape)}"
        )


def _log_ratio(logprobs, old_logprobs, mask):
    """log r_t on the mask, 0 elsewhere (so exp gives a finite 1 off the mask). (M, L)."""
    return torch.where(mask.bool(), logprobs - old_logprobs.detach(), torch.zeros_like(logprobs))


def _clipped_surrogate(logprobs, old_logprobs, advantages, mask, *, clip_eps_low, clip_eps_high):
    """-min(r A, clip(r, 1 - clip_eps_low, 1 + clip_eps_high) A), token-mean (PPO clip
    objective)."""
    _check(logprobs, old_logprobs, advantages, mask)
    mask = mask.bool()
    r = torch.exp(_log_ratio(logprobs, old_logprobs, mask))  # (M, L)
    A = advantages.detach()[:, None]  # (M, 1)
    unclipped = r * A
    clipped = torch.clamp(r, 1.0 - clip_eps_low, 1.0 + clip_eps_high) * A
    loss = token_mean(-torch.minimum(unclipped, clipped), mask)
    with torch.no_grad():  # a token is "clipped" where the clip is active and its gradient is zero
        low = (r < 1.0 - clip_eps_low) & (A < 0)
        high = (r > 1.0 + clip_eps_high) & (A > 0)
        metrics = {
            "clip_ratio/low_mean": token_mean(low.float(), mask).item(),  # TRL's names
            "clip_ratio/high_mean": token_mean(high.float(), mask).item(),
            "policy/ratio_mean": token_mean(r, mask).item(),
            "policy/ratio_max": (r[mask].max().item() if mask.any() else 1.0),
        }
    return loss, metrics


def grpo_loss(
    logprobs,
    old_logprobs,
    advantages,
    mask,
    *,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
):
    """GRPO: token-mean of -min(r A, clip(r, 1 - eps, 1 + eps) A), the symmetric clip
    eps = ``clip_eps_low`` = ``clip_eps_high`` (a ValueError when they differ: that is DAPO)."""
    if clip_eps_low != clip_eps_high:
        raise ValueError(
            f"grpo uses a symmetric clip, got clip_eps_low={clip_eps_low} != "
            f"clip_eps_high={clip_eps_high} (dapo_loss is the asymmetric one)"
        )
    return _clipped_surrogate(
        logprobs,
        old_logprobs,
        advantages,
        mask,
        clip_eps_low=clip_eps_low,
        clip_eps_high=clip_eps_high,
    )  # <- symmetric clip


def dapo_loss(
    logprobs,
    old_logprobs,
    advantages,
    mask,
    *,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.28,
):
    """DAPO: token-mean of -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) ("clip-higher").

    DAPO's other ingredient, dynamic sampling (drop groups with X = 0 or X = N), lives in the
    trainer.
    """
    return _clipped_surrogate(
        logprobs,
        old_logprobs,
        advantages,
        mask,
        clip_eps_low=clip_eps_low,
        clip_eps_high=clip_eps_high,
    )  # <- asymmetric


def cispo_loss(
    logprobs, old_logprobs, advantages, mask, *, is_eps_low: float = 1.0, is_eps_high: float = 5.0
):
    """CISPO: token-mean of -sg(clamp(r, 1 - is_eps_low, 1 + is_eps_high)) * A * log pi_theta.

    ``is_eps_low`` / ``is_eps_high`` cap the importance weight (they are not a PPO clip: the
    gradient A * w * grad log pi flows through every token).
    """
    _check(logprobs, old_logprobs, advantages, mask)
    mask = mask.bool()
    r = torch.exp(_log_ratio(logprobs, old_logprobs, mask)).detach()  # (M, L)
    w = torch.clamp(r, 1.0 - is_eps_low, 1.0 + is_eps_high)  # <- capped, detached weight
    A = advantages.detach()[:, None]  # (M, 1)
    loss = token_mean(-w * A * logprobs, mask)
    with torch.no_grad():
        metrics = {
            "cap/low_frac": token_mean((r < 1.0 - is_eps_low).float(), mask).item(),
            "cap/high_frac": token_mean((r > 1.0 + is_eps_high).float(), mask).item(),
            "policy/ratio_mean": token_mean(r, mask).item(),
            "policy/ratio_max": (r[mask].max().item() if mask.any() else 1.0),
        }
    return loss, metrics


LOSSES = {"grpo": grpo_loss, "dapo": dapo_loss, "cispo": cispo_loss}


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 estimator of KL(pi_theta || pi_ref) per token: exp(d) - d - 1, d = ref - logp. (M, L)."""
    d = ref_logprobs.detach() - logprobs
    return torch.exp(d) - d - 1.0


def entropy_bonus(entropy: torch.Tensor, mask: torch.Tensor, *, coef: float):
    """The term -coef * token_mean(H) added to the loss (maximises entropy), and its metric."""
    H = token_mean(entropy, mask)
    return -coef * H, {"entropy": H.item()}


def kl_penalty(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, *, coef: float
):
    """The term coef * token_mean(k3 KL to the reference) added to the loss, and its metric."""
    # Off the mask the policy's log-prob is replaced by the reference's (d = 0, KL = 0) *before* the
    # exp: a large d there would give exp(d) = inf and, through 0 * inf, a NaN gradient.
    logprobs = torch.where(mask.bool(), logprobs, ref_logprobs.detach())
    kl = token_mean(k3_kl(logprobs, ref_logprobs), mask)
    return coef * kl, {"kl": kl.item()}


def policy_loss(
    algo: str,
    logprobs,
    old_logprobs,
    advantages,
    mask,
    *,
    entropy=None,
    entropy_coef: float = 0.0,
    ref_logprobs=None,
    kl_coef: float = 0.0,
    **algo_kwargs,
):
    """The full objective of one (mini-)batch: ``LOSSES[algo]`` + entropy bonus + k3 KL penalty.

    ``algo_kwargs`` go to the algorithm's loss (``clip_eps_low``, ``clip_eps_high`` for grpo and
    dapo; ``is_eps_low``, ``is_eps_high`` for cispo). ``entropy`` (M, L) is logged when given and
    enters the loss only when ``entropy_coef > 0``; ``ref_logprobs`` is needed only when
    ``kl_coef > 0``.
    """
    if algo not in LOSSES:
        raise ValueError(f"algo must be one of {sorted(LOSSES)}, got algo={algo!r}")
    loss, metrics = LOSSES[algo](logprobs, old_logprobs, advantages, mask, **algo_kwargs)
    metrics["loss/policy"] = loss.item()
    if entropy is not None:
        term, m = entropy_bonus(entropy, mask, coef=entropy_coef)
        metrics.update(m)
        if entropy_coef > 0:
            loss = loss + term
    if kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError(
                "kl_coef > 0 needs ref_logprobs (the frozen reference model's log-probs)"
            )
        term, m = kl_penalty(logprobs, ref_logprobs, mask, coef=kl_coef)
        metrics.update(m)
        loss = loss + term
    metrics["loss/total"] = loss.item()
    return loss, metrics
