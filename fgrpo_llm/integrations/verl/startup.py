"""The F-GRPO settings of a verl run, checked when it starts: a Hydra callback.

The estimator reads ``algorithm.focal_*`` only when verl first computes advantages, after the
model is loaded and the first batch is sampled; some mistakes it never sees (a ``focal_*`` key
under another section, or with another estimator, leaves the run plain GRPO). This callback
checks the composed config before verl's ``main`` runs:

    +hydra.callbacks.fgrpo_check._target_=fgrpo_llm.integrations.verl.startup.FocalCheck

(``overrides.CHECK_OVERRIDE``, which ``overrides.method_overrides`` adds). A problem stops the
launch with one line on stderr and exit status 2; Hydra turns an exception raised in a callback
into a warning, so the callback exits itself. What it refuses, each with the key to change:

- ``focal_grpo`` not in verl's estimator registry (the plug-in did not load);
- a ``focal_*`` key outside ``algorithm``, or in it while ``algorithm.adv_estimator`` is not
  ``focal_grpo`` (the setting would be ignored);
- the focal settings the estimator would refuse (:func:`estimator.focal_settings`);
- verl's group filter (F-DAPO's dynamic sampling) on the legacy trainer, which ignores it
  (only ``trainer.use_v1=True`` filters);
- DAPO's overlong penalty (``reward.reward_manager.name=dapo`` with
  ``reward.reward_kwargs.overlong_buffer_cfg.enable``) when it can carry a correct answer's score
  below the correctness threshold: the estimator sees the shaped score, so X would be wrong. Under
  verl's fully-async entry point the legacy ``reward_model.reward_manager`` and
  ``reward_model.reward_kwargs`` count too: it moves them there after this check
  (:func:`_reward_manager`);
- under verl's ``main_ppo``, a legacy reward key (``reward_model.*``,
  ``custom_reward_function.*``, ``sandbox_fusion.*``) set to something other than its place
  under ``reward`` holds: only the fully-async entry point moves them under ``reward``,
  ``main_ppo`` ignores them, so a custom reward function or DAPO's reward manager set there
  would silently not be used (:func:`_ignored_legacy_key`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from fgrpo_llm.integrations.focal import FocalSettings
from fgrpo_llm.integrations.verl.estimator import ESTIMATOR_NAME, SETTING_KEYS, focal_settings

__all__ = ["FocalCheck", "check_run_config", "compose_config"]


#: Where verl keeps its entry points' configs: ``main_ppo``'s, then the fully-async one's.
CONFIG_DIRS = ("trainer/config", "experimental/fully_async_policy/config")


def compose_config(overrides=(), config_name: str = "ppo_trainer") -> DictConfig:
    """verl's own ``config_name`` (``verl/trainer/config``, or the fully-async entry point's
    ``verl/experimental/fully_async_policy/config``) composed with Hydra ``overrides``, as its
    entry point would compose it (no job is run)."""
    import verl  # (loaded already: verl imports this plug-in inside its own import)

    root = Path(verl.__file__).parent
    dirs = [root / d for d in CONFIG_DIRS]
    config_dir = next((d for d in dirs if (d / f"{config_name}.yaml").is_file()), dirs[0])
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides))


def _focal_keys(node, path: str = ""):
    """Every ``focal_*`` key under ``node`` (a DictConfig), as dotted paths."""
    if isinstance(node, DictConfig):
        for key in node.keys():
            where = f"{path}.{key}" if path else str(key)
            if str(key).startswith("focal_"):
                yield where
            value = node._get_node(key)
            if isinstance(value, DictConfig):
                yield from _focal_keys(value, where)


def _select(config, key: str, default=None):
    return OmegaConf.select(config, key, default=default, throw_on_missing=False)


def _fully_async(config) -> bool:
    """Whether ``config`` is verl's fully-async entry point's (it has ``async_training``): that
    entry point moves the legacy reward keys under ``reward`` after this check."""
    return _select(config, "async_training") is not None


def _reward_manager(config):
    """``(name, name_key, overlong_buffer_cfg, kwargs_key)``: the reward manager and its overlong
    settings as the run's reward manager reads them, each with the key it was set under. verl's
    fully-async entry point (``verl.experimental.fully_async_policy.fully_async_main``, whose
    config has ``async_training``) calls
    ``verl.experimental.reward_loop.migrate_legacy_reward_impl`` after this check: a legacy
    ``reward_model.reward_manager`` that is set replaces ``reward.reward_manager.name``, a legacy
    ``reward_model.reward_kwargs`` replaces ``reward.reward_kwargs`` whole. verl's ``main_ppo``
    reads no legacy key."""
    name_key, kwargs_key = "reward.reward_manager.name", "reward.reward_kwargs"
    if _fully_async(config):
        if _select(config, "reward_model.reward_manager") is not None:
            name_key = "reward_model.reward_manager"
        if _select(config, "reward_model.reward_kwargs") is not None:
            kwargs_key = "reward_model.reward_kwargs"
    overlong = _select(config, f"{kwargs_key}.overlong_buffer_cfg")
    return _select(config, name_key), name_key, overlong, kwargs_key


#: The legacy sections verl's fully-async entry point moves under ``reward``
#: (``migrate_legacy_reward_impl``) and ``main_ppo`` does not read.
LEGACY_REWARD_SECTIONS = ("reward_model", "custom_reward_function", "sandbox_fusion")

#: Where ``migrate_legacy_reward_impl`` moves a legacy key; a prefix maps every key below it.
#: A key it moves nowhere (``reward_model.model.external_lib``, ...) is dropped by both entry
#: points alike, so it is not refused.
_LEGACY_TARGETS = {
    "reward_model.reward_manager": "reward.reward_manager.name",
    "reward_model.reward_kwargs": "reward.reward_kwargs",
    "reward_model.num_workers": "reward.num_workers",
    "reward_model.reward_loop_source": "reward.reward_manager.source",
    "reward_model.reward_loop_module_path": "reward.reward_manager.module.path",
    "reward_model.reward_loop_class_name": "reward.reward_manager.module.name",
    "reward_model.enable": "reward.reward_model.enable",
    "reward_model.enable_resource_pool": "reward.reward_model.enable_resource_pool",
    "reward_model.n_gpus_per_node": "reward.reward_model.n_gpus_per_node",
    "reward_model.nnodes": "reward.reward_model.nnodes",
    "reward_model.model.path": "reward.reward_model.model_path",
    "reward_model.rollout": "reward.reward_model.rollout",
    "custom_reward_function": "reward.custom_reward_function",
    "sandbox_fusion": "reward.sandbox_fusion",
}


def _set_leaves(node, path: str):
    """The dotted paths of the leaves under ``node`` that are set (not None)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _set_leaves(value, f"{path}.{key}")
    elif node is not None:
        yield path


def _legacy_target(key: str) -> str | None:
    """Where ``migrate_legacy_reward_impl`` moves the legacy ``key`` (None: nowhere)."""
    for prefix, target in _LEGACY_TARGETS.items():
        if key == prefix or key.startswith(prefix + "."):
            return target + key[len(prefix) :]
    return None


def _ignored_legacy_key(config) -> str | None:
    """Under verl's ``main_ppo`` (a config without ``async_training``), the first legacy reward
    key that is set to something other than what its place under ``reward`` holds, with that
    place: ``main_ppo`` reads the reward's settings only under ``reward`` and ignores these
    without a word. None where there is none, or on the fully-async entry point's config (it
    moves them itself)."""
    if _fully_async(config):
        return None
    for section in LEGACY_REWARD_SECTIONS:
        node = _select(config, section)
        if not isinstance(node, DictConfig):
            continue
        for key in _set_leaves(OmegaConf.to_container(node, resolve=False), section):
            target = _legacy_target(key)
            if target is None or _select(config, key) == _select(config, target):
                continue  # (dropped by both entry points, or ignoring it changes nothing)
            return f"{key} is set, but verl's main_ppo ignores it; set {target}"
    return None


def check_run_config(config) -> FocalSettings | None:
    """A ValueError naming the key for each problem above; the focal settings of a
    ``focal_grpo`` run, None for a run of another estimator."""
    if not isinstance(config, DictConfig):
        config = OmegaConf.create(config)
    from verl.trainer.ppo import core_algos

    estimator = _select(config, "algorithm.adv_estimator")
    if ESTIMATOR_NAME not in core_algos.ADV_ESTIMATOR_REGISTRY and estimator == ESTIMATOR_NAME:
        raise ValueError(
            f"algorithm.adv_estimator={ESTIMATOR_NAME} but verl has no such estimator: the "
            "fgrpo plug-in did not load in this environment (python -m "
            "fgrpo_llm.integrations.verl.plugin says why)"
        )
    stray = [k for k in _focal_keys(config) if not k.startswith(("algorithm.", "hydra."))]
    if stray:
        raise ValueError(
            f"{stray[0]} is not read by focal_grpo: its settings live under algorithm "
            f"({', '.join('algorithm.' + k for k in SETTING_KEYS)})"
        )
    algorithm = _select(config, "algorithm")
    if estimator != ESTIMATOR_NAME:
        given = list(_focal_keys(algorithm, "algorithm")) if algorithm is not None else []
        if given:
            raise ValueError(
                f"{given[0]} is set but algorithm.adv_estimator={estimator}: it would be ignored "
                f"and the run plain {estimator}; set algorithm.adv_estimator={ESTIMATOR_NAME}"
            )
        return None
    settings = focal_settings(algorithm)
    ignored = _ignored_legacy_key(config)
    if ignored is not None:
        raise ValueError(
            f"{ignored} (only verl's fully-async entry point moves the legacy "
            f"{', '.join(s + '.*' for s in LEGACY_REWARD_SECTIONS)} keys under reward)"
        )
    if _select(config, "algorithm.filter_groups.enable", False) and not _select(
        config, "trainer.use_v1", True
    ):
        raise ValueError(
            "algorithm.filter_groups.enable=True with trainer.use_v1=False: verl's legacy "
            "trainer ignores the group filter, so F-DAPO would run without dynamic sampling; "
            "set trainer.use_v1=True"
        )
    manager, manager_key, overlong, kwargs_key = _reward_manager(config)
    if manager == "dapo" and overlong is not None and _select(overlong, "enable", False):
        penalty = float(_select(overlong, "penalty_factor", 1.0))
        lowest_correct = settings.reward_correct - penalty
        if not settings.reward_wrong < settings.threshold <= lowest_correct:
            if lowest_correct > settings.reward_wrong:
                fix = (
                    "lower penalty_factor or set algorithm.focal_correct_threshold in "
                    f"({settings.reward_wrong:g}, {lowest_correct:g}]"
                )
            else:  # no threshold separates an overlong correct answer from a wrong one
                fix = (
                    "lower penalty_factor below "
                    f"{settings.reward_correct - settings.reward_wrong:g}"
                )
            raise ValueError(
                f"{manager_key}=dapo with {kwargs_key}.overlong_buffer_cfg.enable=True: DAPO's "
                f"overlong penalty (up to {penalty:g}) can take a correct answer's score down to "
                f"{lowest_correct:g}, below the correctness threshold {settings.threshold:g}, "
                f"and focal_grpo counts X from that shaped score; {fix}"
            )
    return settings


class FocalCheck(Callback):
    """Hydra callback: :func:`check_run_config` on the composed config before the job runs;
    a problem is one stderr line and exit status 2."""

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        try:
            settings = check_run_config(config)
        except ValueError as err:
            print(f"fgrpo: {err}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        if settings is not None:
            print(
                f"fgrpo: {ESTIMATOR_NAME} checked: weighting {settings.weighting}, gamma "
                f"{settings.gamma:g}, correct when score >= {settings.threshold:g}",
                file=sys.stderr,
                flush=True,
            )
            if settings.weight_is_one:
                print(
                    f"fgrpo: warning: {ESTIMATOR_NAME} with the weighting {settings.w} gives g = 1 "
                    "for every group: this run is plain GRPO (set +algorithm.focal_gamma > 0, "
                    "e.g. 1.0)",
                    file=sys.stderr,
                    flush=True,
                )
