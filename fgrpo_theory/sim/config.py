"""The categorical simulator's configuration: ``SimConfig``, its checks and the ``PRESETS``
(paper Section 5.1 and Appendix J, Fig. 2).

K actions, the first C of them correct (reward R_c), the rest incorrect (R_w). Action 0 is the
"anchor" (a high initial logit), actions 1..E are the designated rare-correct subset. A sweep
runs every (N, gamma, seed) of the config for T steps.

    >>> from fgrpo_theory.sim.config import PRESETS, config_from_preset
    >>> config_from_preset("tiny", steps=10).steps
    10
    >>> PRESETS["paper-fig2"].group_sizes[-1]
    131072
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from fgrpo_theory.checks import as_float_array, check_integer, check_nonnegative

OPTIMIZERS = ("sgd", "adam")
SURROGATES = ("ratio", "prob")
ADVANTAGES = ("centered", "grpo", "raw")

#: The largest action count and group size a config accepts: the samplers index actions and
#: draws with int64 and hold (K,) float64 arrays, so 2**27 actions already take 1 GiB per array.
MAX_ACTIONS = 1 << 27
MAX_GROUP = 1 << 30
#: The largest number of steps (records are (runs, steps + 1) float64 arrays).
MAX_STEPS = 10_000_000


@dataclass(frozen=True)
class SimConfig:
    """One sweep of the categorical simulator (defaults: the paper's App. J setting, one N)."""

    actions: int = 128_000
    """K, the number of actions"""
    correct: int = 10_000
    """C, the number of correct actions (actions 0..C-1; action 0 is the anchor)"""
    anchor_logit: float = 5.0
    """initial logit of the anchor (action 0)"""
    correct_logit: float = 3.0
    """initial logit of the other correct actions"""
    incorrect_logit: float = 0.0
    """initial logit of the incorrect actions"""
    initial_logits: tuple[float, ...] | None = None
    """explicit initial logits (K values); overrides the three values above"""
    rare: int = 1
    """E, the size of the rare-correct subset: actions 1..E"""
    reward_correct: float = 1.0
    """R_c"""
    reward_wrong: float = -1.0
    """R_w (< R_c)"""
    group_sizes: tuple[int, ...] = (64,)
    """the group sizes N to sweep"""
    gammas: tuple[float, ...] = (0.0, 1.0)
    """the focal exponents gamma to sweep (0 = plain GRPO)"""
    seeds: tuple[int, ...] = (0,)
    """one run per seed; a run's generator is seeded by (seed, N)"""
    steps: int = 1000
    """T, optimisation steps"""
    lr: float = 1e-2
    """learning rate"""
    optimizer: str = "adam"
    """'adam' (betas 0.9/0.999, eps 1e-8, bias-corrected) or 'sgd'"""
    surrogate: str = "ratio"
    """'ratio' (log-prob gradient) or 'prob' (the literal Eq. 5 gradient)"""
    advantage: str = "centered"
    """'centered' r = R - mean (App. J), 'grpo' (R - mean)/(std + 1e-6) with Bessel std,
    'raw' r = R"""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """Adam (beta1, beta2)"""
    adam_eps: float = 1e-8
    """Adam epsilon"""

    def __post_init__(self):
        K = int(check_integer("actions", self.actions, minimum=2))
        if K > MAX_ACTIONS:
            raise ValueError(f"actions must be <= {MAX_ACTIONS}, got actions={K}")
        C = int(check_integer("correct", self.correct, minimum=1))
        if C >= K:
            raise ValueError(f"correct must be < actions={K}, got correct={C}")
        E = int(check_integer("rare", self.rare, minimum=1))
        if E >= C:
            raise ValueError(f"rare must be < correct={C} (action 0 is the anchor), got rare={E}")
        for name in ("actions", "correct", "rare"):
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in (
            "anchor_logit",
            "correct_logit",
            "incorrect_logit",
            "reward_correct",
            "reward_wrong",
        ):
            x = as_float_array(name, getattr(self, name))
            if x.ndim != 0 or not np.isfinite(x):
                raise ValueError(
                    f"{name} must be one finite number, got {name}={getattr(self, name)!r}"
                )
            object.__setattr__(self, name, float(x))
        if not self.reward_correct > self.reward_wrong:
            raise ValueError(
                f"reward_correct must exceed reward_wrong, got "
                f"{self.reward_correct} <= {self.reward_wrong}"
            )
        if self.initial_logits is not None:
            z0 = as_float_array("initial_logits", self.initial_logits)
            if z0.shape != (K,) or not np.isfinite(z0).all():
                raise ValueError(f"initial_logits must be {K} finite values, got shape {z0.shape}")
            object.__setattr__(self, "initial_logits", tuple(float(v) for v in z0))
        sizes = check_integer("group_sizes", self.group_sizes, minimum=1).ravel()
        if sizes.max() > MAX_GROUP:
            raise ValueError(f"group_sizes must be <= {MAX_GROUP}, got {int(sizes.max())}")
        object.__setattr__(self, "group_sizes", tuple(int(n) for n in sizes))
        gammas = check_nonnegative("gammas", self.gammas).ravel()
        if not np.isfinite(gammas).all():
            raise ValueError(f"gammas must be finite, got gammas={self.gammas}")
        object.__setattr__(self, "gammas", tuple(float(g) for g in gammas))
        seeds = check_integer("seeds", self.seeds, minimum=0).ravel()
        object.__setattr__(self, "seeds", tuple(int(s) for s in seeds))
        for name in ("group_sizes", "gammas", "seeds"):
            if len(set(getattr(self, name))) != len(getattr(self, name)):
                raise ValueError(f"{name} must not repeat values, got {name}={getattr(self, name)}")
        T = int(check_integer("steps", self.steps, minimum=1))
        if T > MAX_STEPS:
            raise ValueError(f"steps must be <= {MAX_STEPS}, got steps={T}")
        object.__setattr__(self, "steps", T)
        lr = as_float_array("lr", self.lr)
        if lr.ndim != 0 or not (np.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be one finite number > 0, got lr={self.lr!r}")
        object.__setattr__(self, "lr", float(lr))
        for name, allowed in (
            ("optimizer", OPTIMIZERS),
            ("surrogate", SURROGATES),
            ("advantage", ADVANTAGES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}, got {name}={getattr(self, name)!r}"
                )
        betas = as_float_array("adam_betas", self.adam_betas)
        if betas.shape != (2,) or not (np.all(betas >= 0) and np.all(betas < 1)):
            raise ValueError(f"adam_betas must be two values in [0, 1), got {self.adam_betas}")
        object.__setattr__(self, "adam_betas", (float(betas[0]), float(betas[1])))
        eps = as_float_array("adam_eps", self.adam_eps)
        if eps.ndim != 0 or not (np.isfinite(eps) and eps > 0):
            raise ValueError(f"adam_eps must be one finite number > 0, got {self.adam_eps!r}")
        object.__setattr__(self, "adam_eps", float(eps))

    def logits0(self) -> np.ndarray:
        """Initial logits z_0 (K,)."""
        if self.initial_logits is not None:
            return np.asarray(self.initial_logits, dtype=np.float64)
        z0 = np.full(self.actions, float(self.incorrect_logit))
        z0[: self.correct] = self.correct_logit
        z0[0] = self.anchor_logit
        return z0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def sparse_applies(cfg: SimConfig) -> bool:
    """True when the ascent direction vanishes off the sampled actions: the ratio surrogate with
    advantages that sum to zero over the group (centred or GRPO), so sum_j r_j p = 0."""
    return cfg.surrogate == "ratio" and cfg.advantage in ("centered", "grpo")


_FIG2_SIZES = tuple(2**k for k in range(1, 18))

PRESETS: dict[str, SimConfig] = {
    # App. J / Fig. 2: Adam on the ratio surrogate reproduces the paper's description
    # (Section 5.1: K = 128,000, |P| = 10,000, logits 5 / 3 / 0, N = 2 ... 2^17, 1000 steps).
    "paper-fig2": SimConfig(
        actions=128_000,
        correct=10_000,
        group_sizes=_FIG2_SIZES,
        gammas=(0.0, 1.0),
        seeds=(0, 1, 2, 3),
        steps=1000,
        lr=1e-2,
        optimizer="adam",
        surrogate="ratio",
        advantage="centered",
    ),
    # The same with plain SGD: the logits barely move (updates scale with p_i ~ 6e-5).
    "paper-fig2-sgd": SimConfig(
        actions=128_000,
        correct=10_000,
        group_sizes=_FIG2_SIZES,
        gammas=(0.0, 1.0),
        seeds=(0, 1, 2, 3),
        steps=1000,
        lr=1e-2,
        optimizer="sgd",
        surrogate="ratio",
        advantage="centered",
    ),
    # A reduced sweep (K / 10, fewer steps, a larger lr) that shows the three regimes in seconds.
    "small": SimConfig(
        actions=12_800,
        correct=1_000,
        group_sizes=tuple(2**k for k in range(1, 15)),
        gammas=(0.0, 1.0),
        seeds=(0, 1),
        steps=300,
        lr=3e-2,
    ),
    "tiny": SimConfig(
        actions=1_280,
        correct=100,
        group_sizes=(2, 16, 128, 4096),
        gammas=(0.0, 1.0),
        seeds=(0,),
        steps=100,
        lr=3e-2,
    ),
}


def config_from_preset(name: str, **overrides) -> SimConfig:
    """A preset with some fields replaced (None values are ignored)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})


def config_fields() -> list[str]:
    """The names of SimConfig's fields."""
    return [f.name for f in fields(SimConfig)]
