"""The Hydra overrides that turn verl's PPO trainer into F-GRPO, F-DAPO or F-CISPO (paper Table 5).

Each list is what ``python -m verl.trainer.main_ppo`` takes on its command line; the tests
compose verl's real ``ppo_trainer`` config with them, and ``examples/verl_qwen25_7b_deepscaler.sh``
prints them. The method-defining part (:func:`method_overrides`) matches this package's losses
(``fgrpo_llm.losses``): token-mean aggregation, no KL; GRPO clip 0.2; DAPO clip-higher
(0.2 / 0.28) with verl's group filtering (drop groups whose rewards are all equal, resample; the
metric ``reward`` is the sequence's summed reward, i.e. the verifier's score; verl's replay
buffer bounds the resampling with its own ``max_inflight_gen_batches``, default 1);
CISPO with verl's ``cispo`` loss mode and bounds (1.0, 5.0), so the detached importance weight is
clamped to [0, 6]. gamma = 0 gives the base methods exactly. Every list installs the startup
check of the focal settings (:data:`CHECK_OVERRIDE`); DAPO's asks for verl's v1 trainer, the
one that applies the group filter.

One convention differs and is kept as verl's: the vanilla loss's dual clip (``clip_ratio_c``,
3.0) caps the loss of a token with A < 0 at -3 A once its ratio exceeds 3; ours has none. Set
``actor_rollout_ref.actor.clip_ratio_c=1e9`` to switch it off (see docs/engines.md).
"""

from __future__ import annotations

from fgrpo_llm.integrations.focal import FocalSettings

ALGOS = ("grpo", "dapo", "cispo")

#: The Hydra override that checks the run's focal settings before it starts
#: (:class:`fgrpo_llm.integrations.verl.startup.FocalCheck`).
CHECK_OVERRIDE = (
    "+hydra.callbacks.fgrpo_check._target_=fgrpo_llm.integrations.verl.startup.FocalCheck"
)

__all__ = ["ALGOS", "CHECK_OVERRIDE", "method_overrides", "table5_overrides"]


def method_overrides(
    algo: str, *, gamma: float, group_size: int, reward_wrong: float | None = None
) -> list[str]:
    """Overrides selecting F-``algo`` with focal exponent ``gamma`` and ``group_size`` rollouts per
    prompt."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got algo={algo!r}")
    # what the estimator will refuse inside verl's run (gamma not a finite number >= 0, a bad
    # reward_wrong), refused here before the launch
    FocalSettings(gamma=gamma, reward_wrong=0.0 if reward_wrong is None else reward_wrong)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"group_size must be an integer >= 2, got group_size={group_size!r}")
    out = [
        "algorithm.adv_estimator=focal_grpo",
        CHECK_OVERRIDE,
        f"+algorithm.focal_gamma={float(gamma)}",
        "algorithm.norm_adv_by_std_in_grpo=True",
        "algorithm.use_kl_in_reward=False",
        f"actor_rollout_ref.rollout.n={group_size}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
    ]
    if reward_wrong is not None:
        out.append(f"+algorithm.focal_reward_wrong={float(reward_wrong)}")
    if algo == "grpo":
        out += [
            "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
            "actor_rollout_ref.actor.clip_ratio_low=0.2",
            "actor_rollout_ref.actor.clip_ratio_high=0.2",
        ]
    elif algo == "dapo":
        out += [
            "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
            "actor_rollout_ref.actor.clip_ratio_low=0.2",
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "algorithm.filter_groups.enable=True",
            "algorithm.filter_groups.metric=reward",
            "trainer.use_v1=True",  # the legacy trainer ignores the group filter
        ]
    else:
        out += [
            "actor_rollout_ref.actor.policy_loss.loss_mode=cispo",
            "actor_rollout_ref.actor.clip_ratio_low=1.0",
            "actor_rollout_ref.actor.clip_ratio_high=5.0",
        ]
    return out


def table5_overrides() -> list[str]:
    """The paper's training hyperparameters (Table 5) in verl's keys: AdamW (0.9, 0.999), weight
    decay 0.01, grad-norm clip 1.0, lr 1e-6 constant after 15 warm-up steps, global batch 256
    prompts, mini-batch 64, one PPO epoch, sampling temperature 1.0, top-p 1.0, no top-k,
    prompts up to 1024 tokens."""
    return [
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.optim.lr_warmup_steps=15",
        "actor_rollout_ref.actor.optim.lr_scheduler_type=constant",
        "actor_rollout_ref.actor.optim.weight_decay=0.01",
        "actor_rollout_ref.actor.optim.betas=[0.9,0.999]",
        "actor_rollout_ref.actor.grad_clip=1.0",
        "data.train_batch_size=256",
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.top_p=1.0",
        "actor_rollout_ref.rollout.top_k=-1",
        "data.max_prompt_length=1024",
        "data.filter_overlong_prompts=True",
    ]
