"""verl: the focal_grpo estimator through verl's real advantage path, config composition, policy
losses and a Ray actor that finds the plug-in on its own; verl's rollout dump -> our run records."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

verl = pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402

from fgrpo_llm.advantages import focal_weight, grpo_advantages  # noqa: E402
from fgrpo_llm.integrations.verl import register  # noqa: E402
from fgrpo_llm.integrations.verl.overrides import method_overrides, table5_overrides  # noqa: E402


def _batch(scores, uids, T=5, seed=0):
    """A DataProto as verl's trainer holds it after scoring: outcome reward on the last response
    token."""
    rng = np.random.default_rng(seed)
    M = len(scores)
    lengths = rng.integers(1, T + 1, size=M)
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths])  # (M, T)
    rewards = torch.zeros(M, T)
    rewards[torch.arange(M), torch.tensor(lengths) - 1] = torch.tensor(scores, dtype=torch.float32)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": np.array(uids, dtype=object)},
    )


def _reference(scores, uids, gamma, eps=1e-6):
    """Per uid group: g * (R - mean) / (std_Bessel + eps), from this package's torch functions."""
    out = np.zeros(len(scores))
    for u in dict.fromkeys(uids):
        idx = [i for i, v in enumerate(uids) if v == u]
        R = torch.tensor([[scores[i] for i in idx]], dtype=torch.float32)  # (1, N)
        # verl: mean 0, std 1 for N=1
        A = grpo_advantages(R, std="bessel", eps=eps) if len(idx) > 1 else R.clone()
        if len(idx) == 1:
            A = R / (1 + eps)
        mu = (R >= 0.5).float().mean(dim=1)
        out[idx] = (focal_weight(mu, gamma=gamma)[:, None] * A)[0].numpy()
    return out


RAGGED = dict(
    scores=[1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1],
    uids=[
        "a7f3-x",
        "a7f3-x",
        "a7f3-x",
        "q-2",
        "q-2",
        "q-2",
        "q-2",
        "lone",
        "zz",
        "zz",
        "zz",
        "zz",
        "zz",
    ],
)


def _algo_config(**extra):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {"adv_estimator": "focal_grpo", "norm_adv_by_std_in_grpo": True, **extra}
    )


def test_plugin_registered_by_import_verl_alone():
    assert "focal_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY
    assert (
        core_algos.get_adv_estimator_fn("focal_grpo").__module__
        == "fgrpo_llm.integrations.verl.estimator"
    )


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
def test_real_advantage_path_ragged_string_uids(gamma):
    data = compute_advantage(
        _batch(**RAGGED), adv_estimator="focal_grpo", config=_algo_config(focal_gamma=gamma)
    )
    A = data.batch["advantages"]  # (M, T)
    mask = data.batch["response_mask"]
    assert torch.equal(A * (1 - mask), torch.zeros_like(A))  # nothing off the response
    per_row = (A * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(
        per_row.numpy(), _reference(RAGGED["scores"], RAGGED["uids"], gamma), rtol=1e-6, atol=1e-7
    )
    assert torch.equal(data.batch["returns"], A)
    # an all-correct group has g = 0 and an all-wrong one has A = 0: only mixed groups move
    assert torch.all(A[[7]] == 0) and torch.all(A[8:13][:, :1] != 0)


def test_gamma_zero_is_verls_grpo_exactly():
    base = compute_advantage(_batch(**RAGGED), adv_estimator="grpo")  # verl's own branch
    ours = compute_advantage(
        _batch(**RAGGED), adv_estimator="focal_grpo", config=_algo_config(focal_gamma=0.0)
    )
    assert torch.equal(base.batch["advantages"], ours.batch["advantages"])
    no_std = compute_advantage(
        _batch(**RAGGED), adv_estimator="grpo", norm_adv_by_std_in_grpo=False
    )
    ours = compute_advantage(
        _batch(**RAGGED),
        adv_estimator="focal_grpo",
        config=_algo_config(focal_gamma=0.0, norm_adv_by_std_in_grpo=False),
    )
    assert torch.equal(no_std.batch["advantages"], ours.batch["advantages"])


def test_focal_weighting_takes_every_spelling():
    """algorithm.focal_weighting reads as fgrpo_theory.weighting does: "none" is verl's grpo
    exactly, "focal:0.5" is focal_gamma=0.5, and "none" beside a gamma is refused."""
    base = compute_advantage(_batch(**RAGGED), adv_estimator="grpo")
    none = compute_advantage(
        _batch(**RAGGED), adv_estimator="focal_grpo", config=_algo_config(focal_weighting="none")
    )
    assert torch.equal(base.batch["advantages"], none.batch["advantages"])
    spelled, flag = (
        compute_advantage(_batch(**RAGGED), adv_estimator="focal_grpo", config=_algo_config(**kw))
        for kw in (dict(focal_weighting="focal:0.5"), dict(focal_gamma=0.5))
    )
    assert torch.equal(spelled.batch["advantages"], flag.batch["advantages"])
    assert not torch.equal(spelled.batch["advantages"], base.batch["advantages"])
    with pytest.raises(ValueError, match="no exponent"):
        compute_advantage(
            _batch(**RAGGED),
            adv_estimator="focal_grpo",
            config=_algo_config(focal_weighting="none", focal_gamma=1.0),
        )


@pytest.mark.parametrize("norm", [True, False])
def test_focal_is_grpo_times_weight_and_integer_uids(norm):
    """g times verl's grpo advantage, with or without its division by the group's std
    (``algorithm.norm_adv_by_std_in_grpo``, honoured at gamma > 0 as at gamma = 0)."""
    scores = [1, 1, 1, 0, 0, 1, 0, 0]
    uids = np.array([5, 5, 5, 5, 9, 9, 9, 9])
    base = compute_advantage(
        _batch(scores, uids), adv_estimator="grpo", norm_adv_by_std_in_grpo=norm
    ).batch["advantages"]
    ours = compute_advantage(
        _batch(scores, uids),
        adv_estimator="focal_grpo",
        config=_algo_config(focal_gamma=1.0, norm_adv_by_std_in_grpo=norm),
    ).batch["advantages"]
    g = torch.tensor([0.25] * 4 + [0.75] * 4)[:, None]
    torch.testing.assert_close(ours, base * g, rtol=0, atol=0)


def test_maxrl_needs_no_gamma():
    """focal_weighting=maxrl: verl's GRPO advantage times sqrt((1 - mu_hat) / mu_hat) with
    focal_gamma unset (it used to return plain GRPO unless gamma was > 0); a gamma beside it is
    refused, as the TRL trainer refuses it."""
    scores = [1, 0, 0, 0, 1, 1, 0, 0]
    uids = ["a"] * 4 + ["b"] * 4
    base = compute_advantage(_batch(scores, uids), adv_estimator="grpo").batch["advantages"]
    ours = compute_advantage(
        _batch(scores, uids),
        adv_estimator="focal_grpo",
        config=_algo_config(focal_weighting="maxrl"),
    ).batch["advantages"]
    g = torch.tensor([3.0**0.5] * 4 + [1.0] * 4)[:, None]
    torch.testing.assert_close(ours, base * g, rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match="maxrl.*no exponent"):
        compute_advantage(
            _batch(scores, uids),
            adv_estimator="focal_grpo",
            config=_algo_config(focal_weighting="maxrl", focal_gamma=1.0),
        )


@pytest.mark.parametrize(
    "extra, needle",
    [
        ({"focal_gama": 1.0}, "algorithm.focal_gama is not a focal_grpo setting"),
        ({"focal_gamma": "abc"}, "algorithm.focal_gamma must be a number, got 'abc'"),
        ({"focal_gamma": True}, "algorithm.focal_gamma must be a number, got True"),
        ({"focal_gamma": float("nan")}, "gamma must be a finite number"),
        ({"focal_gamma": 1.0, "focal_reward_wrong": 1.0}, "reward_correct must exceed"),
    ],
)
def test_focal_settings_name_a_misspelt_or_bad_key(extra, needle):
    """A typo in a focal_* key would leave the run plain GRPO without a word: refused, with the
    key; a value that is not a number names its key."""
    with pytest.raises(ValueError, match=re.escape(needle)):
        compute_advantage(
            _batch(**RAGGED), adv_estimator="focal_grpo", config=_algo_config(**extra)
        )


def test_dapo_style_rewards_and_threshold_settings():
    scores = [1.0, -1.0, -1.0, -1.0]  # verl's DAPO reward: +1 / -1
    out = compute_advantage(
        _batch(scores, ["p"] * 4),
        adv_estimator="focal_grpo",
        config=_algo_config(focal_gamma=1.0, focal_reward_wrong=-1.0),
    ).batch["advantages"]
    base = compute_advantage(_batch(scores, ["p"] * 4), adv_estimator="grpo").batch["advantages"]
    torch.testing.assert_close(out, 0.75 * base)
    with pytest.raises(ValueError, match="correct_threshold"):
        compute_advantage(
            _batch(scores, ["p"] * 4),
            adv_estimator="focal_grpo",
            config=_algo_config(focal_gamma=1.0, focal_correct_threshold=2.0),
        )
    with pytest.raises(ValueError, match="gamma"):
        compute_advantage(
            _batch(scores, ["p"] * 4),
            adv_estimator="focal_grpo",
            config=_algo_config(focal_gamma=-1),
        )


def test_registration_is_idempotent_and_survives_reload():
    import importlib

    import fgrpo_llm.integrations.verl.estimator as est

    assert register() == "focal_grpo" and register() == "focal_grpo"
    importlib.reload(est)
    assert est.register() == "focal_grpo"


def test_registration_failure_is_loud(monkeypatch, capsys):
    import fgrpo_llm.integrations.verl.plugin as plugin

    monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "focal_grpo", lambda **kw: None)
    with pytest.raises(RuntimeError, match="focal_grpo"):
        plugin._register()
    assert "FAILED" in capsys.readouterr().err and plugin.REGISTRATION_ERROR is not None


def _compose(overrides):
    from fgrpo_llm.integrations.verl.startup import compose_config

    return compose_config(overrides)


#: The per-GPU sizes of the example launch script (8 GPUs of one node).
LAUNCH = [
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=1",
]


def _loss_tensors(seed, extreme=False):
    g = torch.Generator().manual_seed(seed)
    M, T = 6, 7
    old = -torch.rand(M, T, generator=g) * 3
    spread = 3.0 if extreme else 0.5
    new = old + (torch.rand(M, T, generator=g) - 0.5) * 2 * spread  # ratios e^[-spread, spread]
    A = torch.randn(M, generator=g)
    mask = (torch.rand(M, T, generator=g) > 0.2).float()
    mask[:, 0] = 1
    return old, new, A, mask


LOSS_DIFFS: dict = {}


@pytest.mark.parametrize("algo", ["grpo", "dapo", "cispo"])
def test_composed_config_and_policy_loss_match_ours(algo):
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    from fgrpo_llm.losses import policy_loss

    cfg = _compose(method_overrides(algo, gamma=1.0, group_size=8) + table5_overrides() + LAUNCH)
    assert cfg.algorithm.adv_estimator == "focal_grpo" and cfg.algorithm.focal_gamma == 1.0
    assert cfg.actor_rollout_ref.rollout.n == 8 and cfg.actor_rollout_ref.actor.optim.lr == 1e-6
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(
        cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
    )
    assert not need_critic(cfg) and not need_reference_policy(cfg)
    # the advantage path with the composed algorithm section (a DictConfig, as in verl's trainer)
    data = compute_advantage(
        _batch(**RAGGED), adv_estimator=cfg.algorithm.adv_estimator, config=cfg.algorithm
    )
    per_row = (data.batch["advantages"] * data.batch["response_mask"]).sum(1) / data.batch[
        "response_mask"
    ].sum(1)
    np.testing.assert_allclose(
        per_row.numpy(), _reference(RAGGED["scores"], RAGGED["uids"], 1.0), rtol=1e-6, atol=1e-7
    )
    # the policy loss verl would run, on identical tensors, against ours
    OmegaConf.resolve(cfg)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    loss_fn = core_algos.get_policy_loss_fn(actor.policy_loss.loss_mode)
    kwargs = {
        "grpo": dict(clip_eps_low=0.2, clip_eps_high=0.2),
        "dapo": dict(clip_eps_low=0.2, clip_eps_high=0.28),
        "cispo": dict(is_eps_low=1.0, is_eps_high=5.0),
    }[algo]
    for extreme in (False, True):
        old, new, A, mask = _loss_tensors(1, extreme)
        lp_v = new.clone().requires_grad_()
        lv, _ = loss_fn(old, lp_v, A[:, None].expand_as(new), mask, actor.loss_agg_mode, actor)
        lv.backward()
        lp_o = new.clone().requires_grad_()
        lo, _ = policy_loss(algo, lp_o, old, A, mask.bool(), **kwargs)
        lo.backward()
        d_loss = abs(lv.item() - lo.item())
        d_grad = (lp_v.grad - lp_o.grad).abs().max().item()
        LOSS_DIFFS[(algo, "extreme" if extreme else "moderate")] = (d_loss, d_grad)
        print(
            f"verl {algo} ratios {'e^[-3,3]' if extreme else 'e^[-0.5,0.5]'}: |loss diff| "
            f"{d_loss:.3g}, max |grad diff| {d_grad:.3g}"
        )
        dual_clip_active = (
            extreme
            and algo != "cispo"
            and bool(((new - old).exp() > 3.0)[(A[:, None] < 0).expand_as(new) & mask.bool()].any())
        )
        if dual_clip_active:  # verl's dual clip (clip_ratio_c = 3) caps these tokens; ours does not
            assert d_loss > 1e-4
        else:
            assert d_loss < 1e-6 and d_grad < 1e-6


def test_dual_clip_off_makes_vanilla_equal_ours():
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    from fgrpo_llm.losses import grpo_loss

    cfg = _compose(
        method_overrides("grpo", gamma=1.0, group_size=8)
        + LAUNCH
        + ["actor_rollout_ref.actor.clip_ratio_c=1e9"]
    )
    OmegaConf.resolve(cfg)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    old, new, A, mask = _loss_tensors(1, extreme=True)
    lv, _ = core_algos.get_policy_loss_fn("vanilla")(
        old, new, A[:, None].expand_as(new), mask, "token-mean", actor
    )
    lo, _ = grpo_loss(new, old, A, mask.bool())
    assert abs(lv.item() - lo.item()) < 1e-6


def test_overrides_reject_bad_values():
    with pytest.raises(ValueError, match="algo"):
        method_overrides("ppo", gamma=1.0, group_size=8)
    with pytest.raises(ValueError, match="gamma"):
        method_overrides("grpo", gamma=-1, group_size=8)
    with pytest.raises(ValueError, match="group_size"):
        method_overrides("grpo", gamma=1, group_size=1)
    # what the estimator would refuse inside verl's run, refused before the launch
    with pytest.raises(ValueError, match="gamma must be a finite number"):
        method_overrides("grpo", gamma=float("inf"), group_size=8)
    for wrong in (float("nan"), 5.0):
        with pytest.raises(ValueError, match="reward_wrong"):
            method_overrides("grpo", gamma=1.0, group_size=8, reward_wrong=wrong)


OVERLONG = [
    "reward.reward_manager.name=dapo",
    "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
    "+reward.reward_kwargs.overlong_buffer_cfg.len=512",
    "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
]


@pytest.mark.parametrize(
    "algo, extra, needle",
    [
        ("grpo", ["+algorithm.focal_gama=1.0"], "algorithm.focal_gama is not a focal_grpo"),
        ("grpo", ["algorithm.focal_gamma=abc"], "algorithm.focal_gamma must be a number"),
        ("grpo", ["+actor_rollout_ref.actor.focal_gamma=1.0"], "actor.focal_gamma is not read"),
        ("grpo", ["algorithm.adv_estimator=grpo"], "algorithm.focal_gamma is set but"),
        ("dapo", ["trainer.use_v1=False"], "legacy trainer ignores the group filter"),
        ("dapo", OVERLONG, "down to 0, below the correctness threshold 0.5, and focal_grpo"),
        # 0/1 rewards: a penalty of 1 leaves no threshold to set, one of 0.8 leaves (0, 0.2]
        ("dapo", OVERLONG, "; lower penalty_factor below 1"),
        (
            "dapo",
            [o.replace("penalty_factor=1.0", "penalty_factor=0.8") for o in OVERLONG],
            "lower penalty_factor or set algorithm.focal_correct_threshold in (0, 0.2]",
        ),
    ],
)
def test_the_startup_check_refuses_what_the_run_would_get_wrong(algo, extra, needle):
    from fgrpo_llm.integrations.verl.startup import check_run_config

    with pytest.raises(ValueError, match=re.escape(needle)):
        check_run_config(_compose(method_overrides(algo, gamma=1.0, group_size=8) + extra))


def test_the_startup_check_passes_the_methods_and_a_separable_overlong_penalty(capsys):
    from fgrpo_llm.integrations.verl.startup import FocalCheck, check_run_config

    for algo in ("grpo", "dapo", "cispo"):
        cfg = _compose(method_overrides(algo, gamma=0.5, group_size=8) + table5_overrides())
        assert check_run_config(cfg).gamma == 0.5
    # +-1 rewards, penalty up to 0.5: correct scores in [0.5, 1], wrong ones in [-1.5, -1]
    separable = [o.replace("penalty_factor=1.0", "penalty_factor=0.5") for o in OVERLONG]
    cfg = _compose(method_overrides("dapo", gamma=1.0, group_size=8, reward_wrong=-1.0) + separable)
    assert check_run_config(cfg).threshold == 0.0
    # 0/1 rewards, penalty up to 0.5: a correct answer scores at least 0.5, the threshold itself
    at_threshold = [o.replace("penalty_factor=1.0", "penalty_factor=0.5") for o in OVERLONG]
    cfg_05 = _compose(method_overrides("dapo", gamma=1.0, group_size=8) + at_threshold)
    assert check_run_config(cfg_05).threshold == 0.5
    assert check_run_config(_compose(["algorithm.adv_estimator=grpo"])) is None  # not ours
    FocalCheck().on_job_start(config=cfg)
    assert "focal_grpo checked: weighting focal, gamma 1" in capsys.readouterr().err


def _compose_fully_async(overrides):
    """verl's fully-async entry point's config (``fully_async_ppo_trainer``) with ``overrides``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    config_dir = Path(verl.__file__).parent / "experimental" / "fully_async_policy" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="fully_async_ppo_trainer", overrides=list(overrides))


#: OVERLONG under the legacy names of verl's own fully-async DAPO scripts
LEGACY_OVERLONG = ["reward_model.reward_manager=dapo"] + [
    o.replace("+reward.", "+reward_model.") for o in OVERLONG[1:]
]


def test_the_startup_check_reads_the_legacy_reward_keys_fully_async_moves():
    """verl's fully-async entry point moves ``reward_model.reward_manager`` and
    ``reward_model.reward_kwargs`` into ``reward`` (its ``migrate_legacy_reward_impl``) after the
    check ran: the check refuses an overlong penalty set under those names as it refuses the
    migrated config. verl's main_ppo reads no legacy key: there they are refused as ignored."""
    import copy

    from verl.experimental.reward_loop import migrate_legacy_reward_impl

    from fgrpo_llm.integrations.verl.startup import check_run_config

    overrides = method_overrides("dapo", gamma=1.0, group_size=8) + LEGACY_OVERLONG
    legacy = _compose_fully_async(overrides)
    migrated = migrate_legacy_reward_impl(copy.deepcopy(legacy))
    assert migrated.reward.reward_manager.name == "dapo" and "reward_model" not in migrated
    for cfg, where in ((legacy, "reward_model."), (migrated, "reward.")):
        with pytest.raises(ValueError, match=re.escape(f"{where}reward_manager")) as err:
            check_run_config(cfg)
        assert "can take a correct answer's score down to 0" in str(err.value)
    with pytest.raises(
        ValueError, match=r"reward_model\.reward_manager is set, but verl's main_ppo"
    ):
        check_run_config(_compose(overrides))


@pytest.mark.parametrize(
    ("legacy", "target"),
    [
        ("custom_reward_function.path=/tmp/score.py", "reward.custom_reward_function.path"),
        ("reward_model.reward_manager=dapo", "reward.reward_manager.name"),
        (
            "+reward_model.reward_kwargs.overlong_buffer_cfg.len=512",
            "reward.reward_kwargs.overlong_buffer_cfg.len",
        ),
        ("reward_model.model.path=/tmp/rm", "reward.reward_model.model_path"),
        ("sandbox_fusion.url=http://localhost:1", "reward.sandbox_fusion.url"),
        ("reward_model.enable=True", "reward.reward_model.enable"),
        ("reward_model.nnodes=2", "reward.reward_model.nnodes"),
        ("reward_model.reward_loop_source=importlib", "reward.reward_manager.source"),
        ("reward_model.num_workers=4", "reward.num_workers"),
    ],
)
def test_the_startup_check_refuses_legacy_reward_keys_main_ppo_ignores(legacy, target, capsys):
    """verl's main_ppo reads the reward's settings only under ``reward``: a legacy key that is
    set (a custom reward function, DAPO's reward manager) would silently not be used. A focal_grpo
    run is refused with the key and where it belongs (where verl's fully-async entry point would
    move it, checked against its ``migrate_legacy_reward_impl`` for the mapped ones); a run of
    another estimator, and a config without legacy keys, are left alone."""
    import copy

    from omegaconf import OmegaConf
    from verl.experimental.reward_loop import migrate_legacy_reward_impl

    from fgrpo_llm.integrations.verl.startup import FocalCheck, check_run_config

    focal = method_overrides("grpo", gamma=1.0, group_size=8)
    assert check_run_config(_compose(focal)).gamma == 1.0
    key, value = legacy.lstrip("+").split("=", 1)
    message = f"{key} is set, but verl's main_ppo ignores it; set {target}"
    with pytest.raises(ValueError, match=re.escape(message)):
        check_run_config(_compose([*focal, legacy]))
    with pytest.raises(SystemExit) as stop:
        FocalCheck().on_job_start(config=_compose([*focal, legacy]))
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    assert check_run_config(_compose(["algorithm.adv_estimator=grpo", legacy])) is None
    migrated = migrate_legacy_reward_impl(  # verl's own move puts it there
        copy.deepcopy(_compose_fully_async(["algorithm.adv_estimator=grpo", legacy]))
    )
    assert str(OmegaConf.select(migrated, target)) == value


@pytest.mark.parametrize(
    "legacy",
    [
        "reward_model.enable=False",  # what reward.reward_model.enable holds: no difference
        "reward_model.reward_manager=naive",  # likewise reward.reward_manager.name
        "reward_model.model.external_lib=lib",  # moved nowhere: dropped by both entry points
        "reward_model.model.trust_remote_code=True",
    ],
)
def test_the_startup_check_leaves_legacy_keys_whose_loss_changes_nothing(legacy):
    from fgrpo_llm.integrations.verl.startup import check_run_config

    focal = method_overrides("grpo", gamma=1.0, group_size=8)
    assert check_run_config(_compose([*focal, legacy])).gamma == 1.0


def test_the_plugin_dry_run_composes_the_fully_async_config():
    """``--config-name fully_async_ppo_trainer``: the dry run composes the fully-async entry
    point's config, where the legacy keys are moved, not ignored: the overlong penalty set under
    them is refused as such (on main_ppo's config, as ignored)."""
    cmd = [sys.executable, "-m", "fgrpo_llm.integrations.verl.plugin"]
    overrides = method_overrides("dapo", gamma=1.0, group_size=8) + LEGACY_OVERLONG
    fully_async = subprocess.run(
        [*cmd, "--config-name", "fully_async_ppo_trainer", *overrides],
        capture_output=True,
        text=True,
    )
    assert fully_async.returncode == 2, fully_async.stderr
    assert "can take a correct answer's score down to 0" in fully_async.stderr
    main_ppo = subprocess.run([*cmd, *overrides], capture_output=True, text=True)
    assert main_ppo.returncode == 2
    assert "reward_model.reward_manager is set, but verl's main_ppo ignores it" in main_ppo.stderr


def test_the_startup_check_names_a_plugin_that_did_not_load(monkeypatch, capsys):
    """verl without focal_grpo in its registry (the plug-in failed to import): a focal_grpo run is
    refused before it starts, as is the plug-in's own check; a run of verl's grpo is not."""
    import fgrpo_llm.integrations.verl.plugin as plugin
    from fgrpo_llm.integrations.verl.startup import check_run_config

    focal = _compose(method_overrides("grpo", gamma=1.0, group_size=8))
    grpo = _compose(["algorithm.adv_estimator=grpo"])
    monkeypatch.delitem(core_algos.ADV_ESTIMATOR_REGISTRY, "focal_grpo")
    with pytest.raises(ValueError, match="the fgrpo plug-in did not load"):
        check_run_config(focal)
    assert check_run_config(grpo) is None
    assert plugin.check() == 1 and "focal_grpo NOT registered" in capsys.readouterr().err


def test_the_plugin_command_checks_a_runs_overrides():
    """``python -m fgrpo_llm.integrations.verl.plugin OVERRIDES``: the registration, then the
    focal settings of verl's config composed with the overrides (a dry run before a launch)."""

    def plugin(*args):
        cmd = [sys.executable, "-m", "fgrpo_llm.integrations.verl.plugin", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    good = plugin(*method_overrides("dapo", gamma=0.5, group_size=8))
    assert good.returncode == 0 and "focal_grpo checked: weighting focal, gamma 0.5" in good.stderr
    bad = plugin("algorithm.adv_estimator=focal_grpo", "+algorithm.focal_gama=1")
    assert bad.returncode == 2 and "algorithm.focal_gama is not a focal_grpo setting" in bad.stderr
    broken = plugin("algorithm.nosuch=1")
    assert broken.returncode == 2 and "do not compose" in broken.stderr
    assert "Traceback" not in good.stderr + bad.stderr + broken.stderr


def test_a_launch_with_a_misspelt_setting_stops_before_verl_starts(tmp_path):
    """verl's own entry point with the overrides: Hydra runs the check before verl's main, and
    the launch ends at once with one line naming the key and exit status 2. (Hydra writes its
    run directory, ``outputs/...``, under the working directory: here tmp_path.)"""
    overrides = method_overrides("grpo", gamma=1.0, group_size=8) + ["+algorithm.focal_gama=1"]
    done = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *overrides],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith("fgrpo:")]
    assert len(lines) == 1 and "algorithm.focal_gama" in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr


RAY_SCRIPT = textwrap.dedent("""
    import json, sys
    import ray
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)

    @ray.remote
    class AdvantageWorker:  # stands in for verl's TaskRunner: it imports verl, never fgrpo
        def run(self, scores, uids):
            import numpy as np, torch
            from verl import DataProto
            from verl.trainer.ppo.ray_trainer import compute_advantage
            from omegaconf import OmegaConf
            T = 3
            data = DataProto.from_dict(
                tensors={"token_level_rewards": torch.tensor([[0.0, 0.0, s] for s in scores]),
                         "response_mask": torch.ones(len(scores), T)},
                non_tensors={"uid": np.array(uids, dtype=object)})
            cfg = OmegaConf.create({"adv_estimator": "focal_grpo", "focal_gamma": 1.0})
            out = compute_advantage(data, adv_estimator="focal_grpo", config=cfg)
            modules = sorted(m for m in sys.modules if m.startswith("fgrpo"))
            return out.batch["advantages"][:, -1].tolist(), modules

    worker = AdvantageWorker.remote()
    adv, mods = ray.get(worker.run.remote([1.0, 0.0, 0.0, 0.0], ["u", "u", "u", "u"]))
    driver = sorted(m for m in sys.modules if m.startswith("fgrpo") or m == "verl")
    print(json.dumps({"adv": adv, "worker_modules": mods, "driver_modules": driver}))
    ray.shutdown()
""")


def test_ray_actor_finds_the_plugin_without_the_driver_importing_it(tmp_path):
    script = tmp_path / "ray_check.py"
    script.write_text(RAY_SCRIPT)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_DEDUP_LOGS="0")
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        # Ray's start and the actor's verl import take ~1 min idle; Ray runs its workers at nice 15,
        # so on a loaded machine the actor is starved (measured: > 15 min at load 7)
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["driver_modules"] == []  # the driver imported neither verl nor fgrpo
    assert "fgrpo_llm.integrations.verl.plugin" in out["worker_modules"]
    base = np.array([0.75, -0.25, -0.25, -0.25]) / (0.5 + 1e-6)  # (R - mean) / (Bessel std + eps)
    np.testing.assert_allclose(out["adv"], 0.75 * base, rtol=1e-6)


def test_verl_rollout_dump_becomes_run_records(tmp_path):
    """verl's own dump writer -> records_from_verl_dump -> the cross-check's load_run. The rows
    carry the v1 trainer's uid keys "{uid}_{session}_{output}" (its writer is the same static method
    as the legacy trainer's, whose module imports without TransferQueue)."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from fgrpo_llm.evaluation.runs import load_run
    from fgrpo_llm.integrations.records import records_from_verl_dump, verl_sampling
    from fgrpo_llm.tracking import read_run_info

    dump = tmp_path / "dump"
    for step in (1, 2):
        # ragged: 4 and 3
        keys = [f"uidA_0_{j}" for j in range(4)] + [f"uidB_0_{j}" for j in range(3)]
        inputs = ["system\nQ one\nassistant\n"] * 4 + ["system\nQ two\nassistant\n"] * 3
        outputs = [" \\boxed{2}", "\\boxed{3}", "\\boxed{2} ", "x", "\\boxed{5}", "y", "z"]
        scores = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
        RayPPOTrainer._write_generations(
            inputs, outputs, [None] * 7, scores, {"uid": keys}, str(dump), step
        )
    index = {"system\nQ one\nassistant\n": "train-0", "system\nQ two\nassistant\n": "train-1"}
    # the sampling of verl's real default config, with the paper's response length
    sampling = verl_sampling(_compose(["data.max_response_length=96"]))
    assert sampling.policy() == {
        "max_new_tokens": 96, "temperature": 1.0, "top_p": 1.0, "top_k": 0,
    }  # fmt: skip
    records_from_verl_dump(
        dump,
        tmp_path / "run",
        algo="grpo",
        group_size=4,
        gamma=1.0,
        prompt_id_of=lambda row: index.get(row["input"]),
        sampling=sampling,
    )
    run = load_run(tmp_path / "run")
    assert run.engine == "verl" and run.label == "F-GRPO N=4" and len(run.groups) == 4
    assert read_run_info(tmp_path / "run")["sampling"] == sampling.policy()
    g = run.groups[0]
    assert (g["step"], g["prompt_id"], g["N"], g["num_correct"], g["forms"]) == (
        1,
        "train-0",
        4,
        2,
        ["\\boxed{2}", "\\boxed{2}"],
    )
    assert [(r["prompt_id"], r["N"], r["num_correct"]) for r in run.groups[1:2]] == [
        ("train-1", 3, 1)
    ]
    # converted again once the run has gone on: the records are rebuilt, not appended
    RayPPOTrainer._write_generations(
        inputs, outputs, [None] * 7, scores, {"uid": keys}, str(dump), 3
    )
    records_from_verl_dump(dump, tmp_path / "run", algo="grpo", group_size=4, gamma=1.0)
    assert [g["step"] for g in load_run(tmp_path / "run").groups] == [1, 1, 2, 2, 3, 3]
    from fgrpo_llm.integrations.focal import FocalSettings

    with pytest.raises(ValueError, match="group_size"):  # refused before the groups are cleared
        records_from_verl_dump(dump, tmp_path / "run", algo="grpo", group_size=0, gamma=1.0)
    assert len(load_run(tmp_path / "run").groups) == 6
    with pytest.raises(ValueError, match="gamma=1.0 and settings.gamma=0.5 differ"):
        records_from_verl_dump(
            dump, tmp_path / "run", algo="grpo", group_size=4, gamma=1.0,
            settings=FocalSettings(gamma=0.5),
        )  # fmt: skip


def test_run_json_keeps_the_sampling_verls_rollout_was_set_to(tmp_path):
    """The temperature, top-p and top-k set on ``actor_rollout_ref.rollout`` (not verl's
    defaults, 1 / 1 / -1) reach run.json, from the composed config and from the run's saved
    ``.hydra/config.yaml`` alike."""
    from omegaconf import OmegaConf

    from fgrpo_llm.integrations.records import records_from_verl_dump, verl_sampling
    from fgrpo_llm.tracking import read_run_info

    rollout = "actor_rollout_ref.rollout"
    cfg = _compose(
        [f"{rollout}.temperature=0.6", f"{rollout}.top_p=0.95", f"{rollout}.top_k=20"]
        + ["data.max_response_length=96"]
    )
    want = {"max_new_tokens": 96, "temperature": 0.6, "top_p": 0.95, "top_k": 20}
    OmegaConf.save(cfg, tmp_path / "config.yaml")  # as Hydra saves it: unresolved
    assert verl_sampling(cfg).policy() == verl_sampling(tmp_path / "config.yaml").policy() == want
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_text(json.dumps({"input": "Q", "output": "a", "score": 1.0}) + "\n")
    records_from_verl_dump(
        dump, tmp_path / "run", algo="grpo", group_size=2, gamma=1.0, sampling=verl_sampling(cfg)
    )
    assert read_run_info(tmp_path / "run")["sampling"] == want


def test_verls_dapo_group_filter_with_our_overrides_and_scores(monkeypatch):
    """F-DAPO's overrides select verl's group filter on the metric ``reward`` (the summed
    response reward, which our ``compute_score`` puts on the last token) and no key that verl
    0.9.1 ignores; verl's own V1 replay buffer then drops exactly the groups whose verifier
    scores are all equal and keeps the others."""
    import verl.trainer.ppo.v1.replay_buffer as rb

    from fgrpo_llm.tasks.boxed_math import compute_score

    overrides = method_overrides("dapo", gamma=1.0, group_size=3)
    assert not any("max_num_gen_batches" in o for o in overrides)
    cfg = _compose(overrides + LAUNCH)
    assert (
        cfg.algorithm.filter_groups.enable and cfg.algorithm.filter_groups.max_num_gen_batches == 0
    )
    buffer = rb.ReplayBuffer(
        trainer_mode="sync",
        trainer_config=cfg,
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        refill_fn=lambda *args, **kwargs: None,
        filter_groups_metric=cfg.algorithm.filter_groups.metric,
        train_batch_size=2,
        gen_batch_size=1,
        max_inflight_gen_batches=cfg.algorithm.filter_groups.max_inflight_gen_batches,
    )
    answers = {  # u0 mixed (kept), u1 all wrong and u2 all right (dropped)
        "u0": ["\\boxed{4}", "\\boxed{5}", "\\boxed{4}"],
        "u1": ["\\boxed{7}", "\\boxed{7}", "\\boxed{7}"],
        "u2": ["\\boxed{4}", "\\boxed{2+2}", "\\boxed{4}"],
    }
    scores = {}
    for uid, outs in answers.items():
        buffer.finished_keys["train"].add(uid)
        for j, out in enumerate(outs):
            key = f"{uid}_{j}_0"
            buffer.partitions["train"][key] = {"status": "finished"}
            rm = torch.zeros(5)
            rm[-1] = compute_score(
                "math", out, "4"
            )  # verl's reward manager: score on the last token
            scores[key] = rm

    def kv_batch_get(keys, partition_id, select_fields):
        assert select_fields == ["rm_scores"]
        return {"rm_scores": [scores[k] for k in keys]}

    monkeypatch.setattr(rb.tq, "kv_batch_get", kv_batch_get)
    dropped, counts = buffer._dapo_filtered_keys("train")
    assert dropped == {"u1", "u2"}
    assert counts == {0.0: 1, 1.0: 1}


def _float64_batch(scores, uids, T=3):
    """As _batch, with the rewards in float64 (a reward manager that keeps them so)."""
    M = len(scores)
    rewards = torch.zeros(M, T, dtype=torch.float64)
    rewards[:, -1] = torch.tensor(scores, dtype=torch.float64)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(M, T)},
        non_tensors={"uid": np.array(uids, dtype=object)},
    )


def test_float64_scores_are_counted_exactly():
    """A verifier scoring wrong 0.4999999999 and correct 0.5000000001 in float64: X = 1 of 4,
    g = 3/4 (in float32 both are 0.5: X = 4, g = 0, and the batch would train nothing)."""
    w, c = 0.4999999999, 0.5000000001
    scores = [c, w, w, w]
    cfg = _algo_config(focal_gamma=1.0, focal_reward_wrong=w, focal_reward_correct=c)
    out = compute_advantage(
        _float64_batch(scores, ["p"] * 4), adv_estimator="focal_grpo", config=cfg
    )
    base = compute_advantage(_float64_batch(scores, ["p"] * 4), adv_estimator="grpo")
    assert base.batch["advantages"].abs().max() > 0  # verl's eps 1e-6 keeps them small
    torch.testing.assert_close(out.batch["advantages"], 0.75 * base.batch["advantages"])


def test_a_score_that_is_no_verdict_warns_once_or_stops_when_strict(monkeypatch):
    """Length-like scores in [0.5, 1]: every completion counts as correct, g = 0 everywhere
    while verl's advantages are not; one warning per run, an error under
    +algorithm.focal_strict_rewards=True."""
    import warnings

    from fgrpo_llm.integrations.verl import estimator

    monkeypatch.setattr(estimator, "_CHECKS", {})
    scores = [0.6, 0.7, 0.8, 0.9]
    cfg = _algo_config(focal_gamma=1.0)
    with pytest.warns(RuntimeWarning, match="verl focal_grpo: the reward does not read") as shown:
        out = compute_advantage(_batch(scores, ["p"] * 4), adv_estimator="focal_grpo", config=cfg)
    assert len(shown) == 1 and "+algorithm.focal_strict_rewards=True" in str(shown[0].message)
    assert out.batch["advantages"].abs().max() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # once per run
        compute_advantage(_batch(scores, ["p"] * 4), adv_estimator="focal_grpo", config=cfg)
    strict = _algo_config(focal_gamma=1.0, focal_strict_rewards=True)
    with pytest.raises(ValueError, match="neither reward_wrong=0 nor reward_correct=1"):
        compute_advantage(_batch(scores, ["p"] * 4), adv_estimator="focal_grpo", config=strict)
    with pytest.raises(ValueError, match="focal_strict_rewards must be True or False"):
        estimator.focal_settings(_algo_config(focal_strict_rewards="yes"))
    composed = _compose(
        method_overrides("grpo", gamma=1.0, group_size=8) + ["+algorithm.focal_strict_rewards=true"]
    )
    assert estimator.focal_settings(composed.algorithm).strict_rewards is True


def test_the_focal_metrics_of_a_batch_have_one_definition():
    """LAST_METRICS after verl's compute_advantage on ragged groups: the mean of g over every
    uid group (the lone, inactive one with g = 0 included) and over the active ones; a batch
    with no active group has no active mean (never NaN)."""
    from fgrpo_llm.integrations.verl import estimator

    compute_advantage(
        _batch(**RAGGED), adv_estimator="focal_grpo", config=_algo_config(focal_gamma=1.0)
    )
    g = [2 / 3, 1 / 4, 0.0, 3 / 5]  # a7f3-x 1/3, q-2 3/4, lone 1/1, zz 2/5
    assert estimator.LAST_METRICS == {
        "focal/weight_mean": pytest.approx(sum(g) / 4),
        "focal/weight_mean_active": pytest.approx((2 / 3 + 1 / 4 + 3 / 5) / 3),
    }
    compute_advantage(
        _batch([1, 1, 0, 0], ["a", "a", "b", "b"]),
        adv_estimator="focal_grpo",
        config=_algo_config(focal_gamma=1.0),
    )
    assert estimator.LAST_METRICS == {"focal/weight_mean": 0.5}


def test_converted_records_carry_the_focal_metrics_per_step(tmp_path):
    """records_from_verl_dump writes the focal metrics of each step's groups to metrics.jsonl
    (the keys and meaning the TRL trainer logs); an evaluation's line is kept, and a second
    conversion replaces the focal lines instead of adding to them."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from fgrpo_llm.integrations.records import records_from_verl_dump

    dump = tmp_path / "dump"
    keys = [f"uidA_0_{j}" for j in range(4)] + [f"uidB_0_{j}" for j in range(2)]
    inputs = ["Q one"] * 4 + ["Q two"] * 2
    steps = {1: [1.0, 0.0, 0.0, 0.0, 1.0, 1.0], 2: [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]}
    for step, scores in steps.items():
        RayPPOTrainer._write_generations(
            inputs, ["x"] * 6, [None] * 6, scores, {"uid": keys}, str(dump), step
        )
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 2, "eval_pass@1/test": 0.25}) + "\n")
    for _ in range(2):
        records_from_verl_dump(dump, run, algo="grpo", group_size=4, gamma=1.0)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert lines == [
        {"step": 2, "eval_pass@1/test": 0.25},
        {"step": 1, "focal/weight_mean": 0.375, "focal/weight_mean_active": 0.75},
        {"step": 2, "focal/weight_mean": 0.5},  # both groups inactive: g = 0 and 1
    ]


def test_the_one_gpu_example_composes_and_validates(tmp_path):
    """examples/verl_qwen25_05b_gsm8k_1gpu.sh with DRY_RUN=1: the script's overrides compose with
    verl's ppo_trainer config through the launch check (exit 0), and verl's validate_config
    accepts them for one GPU (batch sizes divisible, no critic, no reference policy)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["bash", str(root / "examples" / "verl_qwen25_05b_gsm8k_1gpu.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root), "DRY_RUN": "1", "PY": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "focal_grpo checked: weighting focal, gamma 1" in done.stderr
    overrides = [line for line in done.stdout.splitlines() if "=" in line]
    method = method_overrides("grpo", gamma=1.0, group_size=8)
    assert overrides[: len(method)] == method
    cfg = _compose(overrides)
    assert cfg.trainer.n_gpus_per_node == 1 and cfg.actor_rollout_ref.rollout.n == 8
    assert "0.5B-Instruct" in cfg.actor_rollout_ref.model.path
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    validate_config(
        cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
    )


def test_the_startup_check_warns_when_gamma_0_makes_plain_grpo(capsys):
    """focal_grpo with focal_gamma=0 (its default) is verl's grpo bit for bit: the launch check
    says so, and stays silent at gamma > 0 and for maxrl (which takes no gamma)."""
    from fgrpo_llm.integrations.verl.startup import FocalCheck

    FocalCheck().on_job_start(config=_compose(method_overrides("grpo", gamma=0.0, group_size=8)))
    assert "weighting focal:0 gives g = 1 for every group" in capsys.readouterr().err
    FocalCheck().on_job_start(config=_compose(method_overrides("grpo", gamma=1.0, group_size=8)))
    maxrl = method_overrides("grpo", gamma=0.0, group_size=8) + ["+algorithm.focal_weighting=maxrl"]
    FocalCheck().on_job_start(config=_compose(maxrl))
    assert "warning" not in capsys.readouterr().err
