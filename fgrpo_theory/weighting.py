"""Success-rate weightings of group advantages, w(mu_hat): the one vocabulary of the trainer,
the integrations and every simulator engine (paper Section 4, Eq. 11-13; MaxRL, arXiv
2602.02710).

A group of N rollouts with X correct, mu_hat = X / N, gets GRPO's advantages times one scalar
w(mu_hat):

- ``none`` (GRPO): w = 1;
- ``focal:GAMMA`` (F-GRPO, Eq. 11): w = (1 - mu_hat)^gamma;
- ``maxrl``: w = sqrt((1 - mu_hat) / mu_hat) (0 at mu_hat = 0). For 0/1 rewards MaxRL's
  advantage is (r - mu_hat) / mu_hat, GRPO's (population std, eps -> 0) is
  (r - mu_hat) / sqrt(mu_hat (1 - mu_hat)); their ratio is this w: a focal weight with
  gamma = 1/2 times a mu_hat^(-1/2) boost for hard prompts.

Groups with X = 0 or X = N have zero advantage whatever w is.

A weighting is one :class:`Rule` (its numpy w(mu), the reference) registered by name; a
:class:`Weighting` is a rule with its exponent. Since mu_hat = X / N, every engine needs only
the table w(X / N) for X = 0..N (:meth:`Weighting.table`); the torch trainer evaluates the
rule's torch form on its (B,) success rates (``fgrpo_llm.advantages.weighted_advantages``). A
new weighting is one subclass of :class:`Rule` passed to :func:`register`.

    >>> w = parse_weighting("focal:1")
    >>> float(w(0.25)), float(parse_weighting("maxrl")(0.25)), float(parse_weighting("none")(0.25))
    (0.75, 1.7320508075688772, 1.0)
    >>> str(w), str(resolve_weighting("focal", gamma=0.5)), parse_weighting("maxrl").table(4)
    ('focal:1', 'focal:0.5', array([0.        , 1.73205081, 1.        , 0.57735027, 0.        ]))
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from fgrpo_common.checks import broadcast, check_nonnegative, check_probability
from fgrpo_theory.focal import focal_weight

__all__ = [
    "Rule",
    "Weighting",
    "WEIGHTINGS",
    "focal",
    "maxrl",
    "none",
    "parse_weighting",
    "register",
    "resolve_weighting",
    "series",
    "unregister",
    "weighting_names",
]


class Rule:
    """One weighting's definition. Subclass it, give it a ``name`` and ``weight``, and
    :func:`register` an instance; ``TrainConfig``, ``SimConfig`` and every engine then take it
    by name.

    The torch forms (``weight_torch``, ``advantages_torch``) are what the trainer evaluates; they
    use tensor methods only, so this module never imports torch. Their defaults go through the
    numpy ``weight`` (float64, then the tensor's dtype) and multiply GRPO's advantages."""

    name: str = ""
    """How configs and run files spell it."""
    title: str = ""
    """The method's name in row labels ("MaxRL"); the name when empty."""
    takes_gamma: bool = False
    """Whether it has an exponent gamma (spelled "NAME:GAMMA")."""
    default_gamma: float = 0.0
    """gamma of the bare name in :func:`parse_weighting`."""
    grpo_family: bool = False
    """True for GRPO and its focal reweighting: the runs the paper's group-size sweep compares."""
    grpo_convention: tuple | None = None
    """(std, eps) of the GRPO advantage this weighting multiplies whatever the run's convention
    (MaxRL: ("population", 0.0), so that w * A^GRPO = (r - mu_hat) / mu_hat); None: the run's."""

    def weight(self, mu, gamma: float):
        """w(mu) for mu (float64 array) in [0, 1], the numpy reference."""
        raise NotImplementedError

    def weight_torch(self, mu, gamma: float):
        """w(mu_hat) on a (B,) tensor of success rates, (B,) in its dtype."""
        w = np.asarray(self.weight(mu.detach().double().cpu().numpy(), gamma), dtype=np.float64)
        return mu.new_tensor(w)

    def advantages_torch(self, A_grpo, g, correct):
        """The group's advantages (B, N) from GRPO's A_grpo (B, N), the weights g (B,) and the
        verifier's verdicts ``correct`` (B, N) bool: A = g * A_grpo."""
        return g[:, None] * A_grpo

    def row_name(self, algo: str, gamma: float) -> str:
        """The method's name in a run's label, for the policy loss ``algo``: "MaxRL",
        "MaxRL-DAPO"."""
        title = self.title or self.name
        return title if algo == "grpo" else f"{title}-{algo.upper()}"

    def label(self, gamma: float) -> str:
        """The weighting's name in plots and tables."""
        return self.title or self.name


class _None(Rule):
    name, title, grpo_family = "none", "GRPO", True

    def weight(self, mu, gamma):
        return np.ones_like(mu, dtype=np.float64)

    def weight_torch(self, mu, gamma):
        return mu.new_ones(mu.shape)

    def row_name(self, algo, gamma):
        return algo.upper()


class _Focal(Rule):
    name, title, grpo_family = "focal", "F-GRPO", True
    takes_gamma, default_gamma = True, 1.0

    def weight(self, mu, gamma):

        return focal_weight(mu, gamma)  # exp(gamma log1p(-mu)) with 0^0 = 1

    def weight_torch(self, mu, gamma):
        if gamma == 0:  # GRPO exactly, also at mu_hat = 1
            return mu.new_ones(mu.shape)
        return (1.0 - mu).pow(gamma)  # (B,) g = (1 - mu_hat)^gamma

    def row_name(self, algo, gamma):
        return f"F-{algo.upper()}" if gamma > 0 else algo.upper()

    def label(self, gamma):
        return f"F-GRPO (gamma={gamma:g})"


class _MaxRL(Rule):
    name, title = "maxrl", "MaxRL"
    grpo_convention = ("population", 0.0)

    def weight(self, mu, gamma):
        return np.where(mu > 0, _sqrt_odds(1.0 - mu, mu), 0.0)

    def weight_torch(self, mu, gamma):
        return ((1 - mu) / mu.clamp_min(1e-30)).sqrt().where(mu > 0, 0.0)  # (B,), 0 at X = 0

    def advantages_torch(self, A_grpo, g, correct):
        """MaxRL's own advantage on the verdicts r: A_i = (r_i - mu_hat) / mu_hat, 0 at X = 0,
        whatever the rewards and GRPO's std convention (equal to g * A_GRPO with the population
        std and eps -> 0)."""
        r = correct.float()  # (B, N)
        mu = r.mean(dim=1, keepdim=True)  # (B, 1)
        return ((r - mu) / mu.clamp_min(float(np.finfo(np.float32).tiny))).where(mu > 0, 0.0)


_RULES: dict[str, Rule] = {}
_ALIASES = {"grpo": "none"}


def register(rule: Rule) -> Rule:
    """Add ``rule`` under ``rule.name`` (a ValueError when the name is taken or not a plain
    lowercase word); returns it."""
    if not isinstance(rule, Rule):
        raise TypeError(f"a weighting rule is a Rule instance, got {type(rule).__name__}")
    name = rule.name
    if not (isinstance(name, str) and name.isidentifier() and name == name.lower()):
        raise ValueError(f"a weighting's name is a lowercase word, got {name!r}")
    if name in _RULES or name in _ALIASES:
        raise ValueError(f"the weighting {name!r} is already registered")
    _RULES[name] = rule
    return rule


def unregister(name: str) -> None:
    """Remove a rule added by :func:`register` (the built-in ones stay)."""
    if name in WEIGHTINGS:
        raise ValueError(f"the built-in weighting {name!r} cannot be removed")
    _RULES.pop(name, None)


for _rule in (_None(), _Focal(), _MaxRL()):
    register(_rule)

#: The built-in weightings by name (``parse_weighting`` reads "none", "focal:GAMMA", "maxrl").
WEIGHTINGS = tuple(_RULES)


def weighting_names() -> tuple[str, ...]:
    """Every registered weighting's name, the built-in ones first."""
    return tuple(_RULES)


@dataclass(frozen=True)
class Weighting:
    """w(mu_hat): a registered rule ``kind`` with its exponent ``gamma`` (0 for a rule that
    takes none). ``str`` gives its canonical spelling ("none", "focal:0.5", "maxrl")."""

    kind: str
    gamma: float = 0.0

    def __post_init__(self):
        if self.kind not in _RULES:
            raise ValueError(f"weighting must be one of {weighting_names()}, got {self.kind!r}")
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, numbers.Real):
            raise TypeError(f"gamma must be a real number, got gamma={self.gamma!r}")
        check_nonnegative("gamma", self.gamma)
        if not self.rule.takes_gamma and self.gamma != 0:
            raise ValueError(
                f"gamma is focal's exponent; {self.kind!r} takes none, got gamma={self.gamma!r}"
            )
        object.__setattr__(self, "gamma", float(self.gamma))

    @property
    def rule(self) -> Rule:
        return _RULES[self.kind]

    def __str__(self) -> str:
        if not self.rule.takes_gamma:
            return self.kind
        text = repr(self.gamma)
        return f"{self.kind}:{text[:-2] if text.endswith('.0') else text}"

    def __call__(self, mu_hat):
        """w at mu_hat in [0, 1] (scalar or array)."""
        mu = check_probability("mu_hat", mu_hat)
        out = np.asarray(self.rule.weight(mu, self.gamma), dtype=np.float64)
        return out[()] if out.ndim == 0 else out

    def table(self, N: int) -> np.ndarray:
        """g_X = w(X / N) for X = 0..N, (N + 1,) float64: all an engine needs, since
        mu_hat = X / N."""
        return np.asarray(self.rule.weight(np.arange(N + 1) / N, self.gamma), dtype=np.float64)

    @property
    def label(self) -> str:
        """ "GRPO", "F-GRPO (gamma=1)" or "MaxRL"."""
        return self.rule.label(self.gamma)

    def row_name(self, algo: str = "grpo") -> str:
        """The method's name in a run's label: "GRPO", "F-DAPO", "MaxRL-CISPO"."""
        return self.rule.row_name(algo, self.gamma)

    def magnitudes(self, mu):
        """w-scaled advantage magnitudes (pos, neg) of correct and incorrect rollouts of a group
        whose success rate equals mu in (0, 1) (paper Fig. 4 for any weighting): GRPO's
        |A+| = sqrt((1 - mu) / mu) and |A-| = sqrt(mu / (1 - mu)) times w(mu)."""
        mu = check_probability("mu", mu, open_low=True, open_high=True)
        w = self(mu)
        mu, w = broadcast(mu=mu, w=w)
        pos, neg = w * _sqrt_odds(1.0 - mu, mu), w * _sqrt_odds(mu, 1.0 - mu)
        return (pos[()] if pos.ndim == 0 else pos), (neg[()] if neg.ndim == 0 else neg)


def _sqrt_odds(a, b):
    """sqrt(a / b) for a, b in [0, 1] (b > 0 where it matters): as sqrt(a) / sqrt(b) where a / b
    would overflow (b subnormal), so 1 / 5e-324 does not turn sqrt's 4.5e161 into inf."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(b >= np.finfo(np.float64).tiny, np.sqrt(a / b), np.sqrt(a) / np.sqrt(b))


def focal(gamma: float) -> Weighting:
    return Weighting("focal", gamma)


def maxrl() -> Weighting:
    return Weighting("maxrl")


def none() -> Weighting:
    return Weighting("none")


def parse_weighting(text: str) -> Weighting:
    """ "none" | "grpo", "maxrl", or "focal:GAMMA" (also "focal" for gamma = 1), or any
    registered rule's "NAME" / "NAME:GAMMA"; a ValueError naming the text otherwise (a TypeError
    for anything but a string)."""
    if not isinstance(text, str):
        raise TypeError(f"a weighting is a string such as 'focal:1', got {text!r}")
    name, colon, value = text.strip().lower().partition(":")
    name = _ALIASES.get(name, name)
    rule = _RULES.get(name)
    if rule is None or (colon and not rule.takes_gamma):
        raise ValueError(
            f"a weighting is 'none', 'maxrl' or 'focal:GAMMA' (registered: "
            f"{', '.join(weighting_names())}), got {text!r}"
        )
    if not colon:
        return Weighting(name, rule.default_gamma)
    try:
        gamma = float(value)
    except ValueError:
        gamma = float("nan")
    if not np.isfinite(gamma) or gamma < 0:
        raise ValueError(f"{name}:GAMMA needs a number gamma >= 0, got {text!r}")
    return Weighting(name, gamma)


def resolve_weighting(weighting, gamma: float = 0.0) -> Weighting:
    """The Weighting of a config's pair (``weighting``, ``gamma``): ``weighting`` a Weighting,
    a bare rule name ("focal" takes ``gamma``, as the ``--gamma`` flag and old config files
    say) or a full spelling ("focal:0.5", which ``gamma`` may repeat but not contradict).
    A ValueError naming both when they disagree (gamma given to a rule without one)."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma must be a real number, got gamma={gamma!r}")
    if isinstance(weighting, str) and ":" not in weighting:
        name = _ALIASES.get(weighting.strip().lower(), weighting.strip().lower())
        rule = _RULES.get(name)
        if rule is not None and not rule.takes_gamma and gamma != 0:
            raise ValueError(
                f"gamma must be 0 with weighting={weighting!r} (it has no exponent), "
                f"got gamma={gamma!r}"
            )
        if rule is not None:
            return Weighting(name, gamma if rule.takes_gamma else 0.0)
    w = weighting if isinstance(weighting, Weighting) else parse_weighting(weighting)
    if gamma != 0 and gamma != w.gamma:
        raise ValueError(f"gamma={gamma!r} contradicts weighting={str(w)!r}: give one of them")
    return w


def series(name: str, gamma: float) -> Weighting:
    """The weighting of one series of a simulator sweep: the rule ``name`` at the sweep's
    ``gamma``, which a rule without an exponent ignores."""
    if name not in _RULES:
        raise ValueError(f"weighting must be one of {weighting_names()}, got {name!r}")
    return Weighting(name, float(gamma) if _RULES[name].takes_gamma else 0.0)
