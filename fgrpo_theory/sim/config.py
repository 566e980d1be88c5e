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

from fgrpo_common.fields import Choice, Integer, Optional, Real, Sequence, Text, check_fields
from fgrpo_theory.weighting import WEIGHTINGS, Weighting, series, weighting_names

OPTIMIZERS = ("sgd", "adam")
#: How a group's advantages are weighted by its success rate: the weightings' names
#: (``fgrpo_theory.weighting``, which holds the one tuple): 'focal' w = (1 - X/N)^gamma for each
#: gamma of the sweep (gamma 0: GRPO); 'maxrl' w = sqrt((1 - X/N) / (X/N)) (one gamma, ignored).
SIM_WEIGHTINGS = WEIGHTINGS
SURROGATES = ("ratio", "prob")
ADVANTAGES = ("centered", "grpo", "raw")

#: The largest action count and group size a config accepts: the samplers index actions and
#: draws with int64 and hold (K,) float64 arrays, so 2**27 actions already take 1 GiB per array.
MAX_ACTIONS = 1 << 27
MAX_GROUP = 1 << 30
#: Largest |reward|: rewards are squared (GRPO's standard deviation, Adam's second moment)
#: times up to N^2, which must stay far from float64's overflow.
MAX_REWARD = 1e100
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
    weighting: str = "focal"
    """the weighting's name (``fgrpo_theory.weighting``): 'focal' (w = (1 - X/N)^gamma per
    gamma), 'none', 'maxrl' (w = sqrt((1 - X/N) / (X/N))) or a registered rule; one without an
    exponent takes one gamma, which it ignores"""

    def __post_init__(self):
        check_fields(self, SIM_RULES)  # every field's type and range (fgrpo_common.fields)
        K, C = self.actions, self.correct
        if C >= K:
            raise ValueError(f"correct must be < actions={K}, got correct={C}")
        if self.rare >= C:
            raise ValueError(
                f"rare must be < correct={C} (action 0 is the anchor), got rare={self.rare}"
            )
        if not self.reward_correct > self.reward_wrong:
            raise ValueError(
                f"reward_correct must exceed reward_wrong, got "
                f"{self.reward_correct} <= {self.reward_wrong}"
            )
        if self.weighting not in weighting_names():
            raise ValueError(
                f"weighting must be one of {weighting_names()}, got weighting={self.weighting!r}"
            )
        if not self.weightings()[0].rule.takes_gamma and len(self.gammas) != 1:
            raise ValueError(
                f"weighting={self.weighting!r} ignores gamma: give one gamma (e.g. "
                f"gammas=(0.0,)), got gammas={self.gammas}"
            )
        if self.initial_logits is not None and len(self.initial_logits) != K:
            raise ValueError(
                f"initial_logits must be {K} finite values (one per action), got "
                f"{len(self.initial_logits)} values"
            )
        labels = [f"{g:g}" for g in self.gammas]
        if len(set(labels)) != len(labels):
            raise ValueError(
                f"gammas must differ in their first 6 significant digits (the records and CSV "
                f"columns are labelled by them), got gammas={self.gammas}"
            )
        self._check_initial_masses()

    def weightings(self) -> tuple[Weighting, ...]:
        """The weighting of each series of the gamma axis (``fgrpo_theory.weighting.series``)."""
        return tuple(series(self.weighting, g) for g in self.gammas)

    def _check_initial_masses(self) -> None:
        """ValueError unless pi_0 gives the correct actions positive float64 mass (M_ret, Eq. 26,
        divides by it) and the logits' spread is a float64 (the engines subtract the largest
        logit: a spread that overflows makes the entropy NaN)."""
        z = self.logits0()
        where = "initial_logits" if self.initial_logits is not None else "the initial logits"
        with np.errstate(over="ignore"):
            spread = z.max() - z.min()
        if not np.isfinite(spread):
            given = (
                "initial_logits"
                if self.initial_logits is not None
                else f"the initial logits (anchor_logit={self.anchor_logit:g}, correct_logit="
                f"{self.correct_logit:g}, incorrect_logit={self.incorrect_logit:g})"
            )
            raise ValueError(
                f"{given} lie further apart than float64 reaches (largest {z.max():g}, smallest "
                f"{z.min():g}); bring them closer"
            )
        if not np.exp(z[: self.correct] - z.max()).sum() > 0.0:
            raise ValueError(
                f"{where} give the correct actions probability 0 in float64 (their logits lie "
                f"over 745 below the largest, {z.max():g}); bring them closer"
            )

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


_FINITE = Real()
_POSITIVE = Real(0, open_low=True)

#: Type and range of every SimConfig field (the rules between fields live in ``__post_init__``).
SIM_RULES = {
    "actions": Integer(2, MAX_ACTIONS),
    "correct": Integer(1),
    "anchor_logit": _FINITE,
    "correct_logit": _FINITE,
    "incorrect_logit": _FINITE,
    "initial_logits": Optional(Sequence(_FINITE)),
    "rare": Integer(1),
    "reward_correct": Real(-MAX_REWARD, MAX_REWARD),
    "reward_wrong": Real(-MAX_REWARD, MAX_REWARD),
    "group_sizes": Sequence(Integer(1, MAX_GROUP), distinct=True),
    "gammas": Sequence(Real(0), distinct=True),
    "seeds": Sequence(Integer(0), distinct=True),
    "steps": Integer(1, MAX_STEPS),
    "lr": _POSITIVE,
    "optimizer": Choice(OPTIMIZERS),
    "surrogate": Choice(SURROGATES),
    "advantage": Choice(ADVANTAGES),
    "adam_betas": Sequence(Real(0, 1, open_high=True), length=2),
    "adam_eps": _POSITIVE,
    "weighting": Text(),  # a registered weighting's name (checked in __post_init__)
}


def sparse_applies(cfg: SimConfig) -> bool:
    """True when the ascent direction vanishes off the sampled actions: the ratio surrogate with
    advantages that sum to zero over the group (centred or GRPO), so sum_j r_j p = 0."""
    return cfg.surrogate == "ratio" and cfg.advantage in ("centered", "grpo")


_FIG2_SIZES = tuple(2**k for k in range(1, 18))


def _paper_fig2(optimizer: str) -> SimConfig:
    """Fig. 2's sweep with ``optimizer`` on the ratio surrogate with centred advantages (Section
    5.1: K = 128,000, |P| = 10,000, logits 5 / 3 / 0, N = 2 ... 2^17, 1000 steps)."""
    return SimConfig(
        actions=128_000,
        correct=10_000,
        group_sizes=_FIG2_SIZES,
        gammas=(0.0, 1.0),
        seeds=(0, 1, 2, 3),
        steps=1000,
        lr=1e-2,
        optimizer=optimizer,
        surrogate="ratio",
        advantage="centered",
    )


PRESETS: dict[str, SimConfig] = {
    # App. J / Fig. 2: Adam on the ratio surrogate reproduces the paper's description.
    "paper-fig2": _paper_fig2("adam"),
    # The same with plain SGD: the logits barely move (updates scale with p_i ~ 6e-5).
    "paper-fig2-sgd": _paper_fig2("sgd"),
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
