"""The forecast: the tied categorical policy trained on an LLM run's own schedule (paper Section
2, Eq. 11-13 for the update, Section 2.3 for the categorical view), and what it predicts.

Each step t, for each of the step's B prompts x (the LLM run's prompt order):

1. **sample**: a group of N outcomes i.i.d. from pi_t(. | x) (``draw_inverse_cdf``);
2. **score**: R = 1 for a correct answer, 0 for an incorrect or the malformed outcome;
3. **advantages**: A_i = w(mu_hat) * A_i^GRPO with mu_hat = X / N and the run's weighting w
   (``fgrpo_theory.weighting``: 1, the focal (1 - mu_hat)^gamma, or MaxRL's, whose advantage
   (R - mu_hat) / mu_hat is w times GRPO's with the population std and eps = 0);
   A^GRPO = (R - mean) / (std + eps) by ``fgrpo_theory.advantages`` with the run's convention;
4. **loss and step**: ascend J = (1 / D) sum over the B x N rows of A_i log pi(y_i | x), with
   D = B N ("batch": the LLM trainer's token mean, up to the mean completion length, a constant
   absorbed by the step size) or D = N ("group": the categorical simulator's (1/N) per group),
   by one optimizer step (``Optimizer``) on the per-prompt deviations delta (step size
   lr_theta = s_theta * lr) and on the shared table phi (lr_phi = s_phi * lr).

s_theta and s_phi are the model's only free parameters: how far one visit moves a prompt's own
logits, and how far the shared continuations move, in units of the LLM's learning rate.

The run then predicts, from the exact final distribution (no sampling):

    Delta NLL_rare = mean over rare trajectories (x, y) of log pi_0(y | x) - log pi_T(y | x)
    pass@k         = mean over eval prompts of 1 - (1 - mu(x))^k,  log(1 - mu) exact

    >>> import numpy as np
    >>> from fgrpo_theory.forecast import PromptAnswers, ForecastBase, RunSchedule, forecast
    >>> from fgrpo_theory.weighting import parse_weighting
    >>> pa = PromptAnswers("p", ("1+2", "2+1"), (("1", "+", "2"), ("2", "+", "1")),
    ...                    np.log([0.6, 0.1]), np.array([True, True]))
    >>> base = ForecastBase([pa], [pa], [("p", "2+1")])
    >>> run = RunSchedule(order=[["p"]] * 5, group_size=4, weighting=parse_weighting("none"),
    ...                   lr=0.1)
    >>> f = forecast(base, run, lr_theta_scale=1.0, lr_phi_scale=1.0, seed=0)
    >>> f.pass_at[1] > base.base_pass_at(1)
    True
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fgrpo_theory.advantages import (
    group_success_rate,
    grpo_advantages,
    mean_centred_advantages,
)
from fgrpo_theory.forecast.answers import PromptAnswers
from fgrpo_theory.forecast.optim import Optimizer
from fgrpo_theory.forecast.policy import (
    Gathered,
    edge_logp,
    gather,
    log1m_mu,
    outcome_logp,
    policy_gradient,
)
from fgrpo_theory.forecast.tree import Forest, build_forest
from fgrpo_theory.weighting import Weighting

__all__ = [
    "ForecastBase",
    "RunSchedule",
    "Trained",
    "Forecast",
    "train_once",
    "forecast",
    "draw_inverse_cdf",
    "evaluate",
    "gathered_steps",
    "ADV_STDS",
    "REDUCTIONS",
]

ADV_STDS = ("bessel", "population", "none")
REDUCTIONS = ("batch", "group")
#: The pass@k a forecast reports.
KS = (1, 64)


class ForecastBase:
    """One base policy's inputs: train and eval prompts' enumerated answers, the rare
    trajectories (prompt id, answer text), and their tied prefix forest (built once, shared by
    every cell on this base; ``share`` as ``build_forest``'s). ``per_token``: each rare
    trajectory's Delta NLL in nats per token, divided by |y| + 1 (its tokens and the end of
    sequence), the length normalisation of App. M.2 that the LLM's Delta NLL_rare uses."""

    def __init__(
        self,
        train: Sequence[PromptAnswers],
        eval: Sequence[PromptAnswers],
        rare: Sequence[tuple[str, str]],
        *,
        share: str = "prefix",
        per_token: bool = False,
    ):
        train, eval = list(train), list(eval)
        train_ids = {pa.prompt_id for pa in train}
        extra = [pa for pa in eval if pa.prompt_id not in train_ids]
        if not train or not eval:
            raise ValueError(
                f"train and eval must each hold a prompt, got {len(train)} and {len(eval)}"
            )
        self.forest: Forest = build_forest(train + extra, share=share)
        self.train_ids = frozenset(train_ids)
        f = self.forest
        self.eval = gather(f, [f.prompt_index(pa.prompt_id) for pa in eval])
        rare = [tuple(r) for r in rare]
        missing = [r for r in rare if r not in f.answer_index]
        if missing:
            raise ValueError(f"rare trajectory {missing[0]!r} is not an enumerated answer")
        self.rare_outcomes = np.array([f.answer_index[r] for r in rare], dtype=np.int64)
        length = {(pa.prompt_id, a): len(t) + 1 for pa in train + extra
                  for a, t in zip(pa.answers, pa.tokens, strict=True)}  # fmt: skip
        # (n_rare,) the divisor of each rare trajectory's Delta NLL: |y| + 1 tokens, or 1
        self.rare_length = np.array([length[r] if per_token else 1 for r in rare], dtype=np.float64)
        rare_prompts = np.unique(np.searchsorted(f.outcome_start, self.rare_outcomes, "right") - 1)
        self.rare = gather(f, rare_prompts)
        # position of each rare outcome among the gathered rare prompts' outcomes
        self.rare_pos = np.searchsorted(self.rare.outcomes, self.rare_outcomes)
        zero_d, zero_p = np.zeros(f.num_edges), np.zeros(f.num_shared + 1)
        self.base_rare_logp = self._logp(self.rare, zero_d, zero_p)[self.rare_pos]
        self._base_log1m = log1m_mu(
            self.eval, self._logp(self.eval, zero_d, zero_p), f.correct[self.eval.outcomes]
        )

    @staticmethod
    def _logp(g: Gathered, delta, phi) -> np.ndarray:
        return outcome_logp(g, edge_logp(g, delta, phi))

    def base_pass_at(self, k: int) -> float:
        """The base's exact pass@k on the eval prompts."""
        return float(np.mean(-np.expm1(k * self._base_log1m)))

    def steps(self, order) -> list[np.ndarray]:
        """The run's prompt order as global prompt indices per step (train prompts only)."""
        out = []
        for t, ids in enumerate(order):
            for p in ids:
                if p not in self.train_ids:
                    raise ValueError(f"step {t}: prompt {p!r} is not a train prompt of this base")
            out.append(np.array([self.forest.prompt_index(p) for p in ids], dtype=np.int64))
        return out


@dataclass(frozen=True)
class RunSchedule:
    """What an LLM run did, as the forecast replays it."""

    order: Sequence
    """Per step, the ids of the prompts trained (the run's own prompt order)."""
    group_size: int
    """N."""
    weighting: Weighting
    """w(mu_hat) (``fgrpo_theory.weighting.parse_weighting``)."""
    lr: float
    """The LLM run's learning rate (its lr x scale); step sizes are multiples of it."""
    optimizer: Optimizer = field(default_factory=Optimizer)
    """The run's optimizer (betas, eps, decay, warm-up)."""
    adv_std: str = "bessel"
    """GRPO's std: 'bessel', 'population' or 'none' (mean-centred)."""
    adv_eps: float = 1e-6
    """eps added to the std."""
    reduction: str = "batch"
    """'batch' (divide by B N, the LLM's token mean) or 'group' (divide by N)."""

    def __post_init__(self):
        N = self.group_size
        if isinstance(N, bool) or not isinstance(N, numbers.Integral) or N < 1:
            raise ValueError(f"group_size must be an int >= 1, got {N!r}")
        if not isinstance(self.weighting, Weighting):
            raise TypeError(f"weighting must be a Weighting, got {self.weighting!r}")
        if not isinstance(self.optimizer, Optimizer):
            raise TypeError(f"optimizer must be an Optimizer, got {self.optimizer!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, numbers.Real) or not self.lr > 0:
            raise ValueError(f"lr must be a number > 0, got {self.lr!r}")
        if self.adv_std not in ADV_STDS:
            raise ValueError(f"adv_std must be one of {ADV_STDS}, got {self.adv_std!r}")
        if self.adv_std == "bessel" and N < 2:
            raise ValueError(f"the Bessel std needs group_size >= 2, got {N}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {self.reduction!r}")
        if isinstance(self.order, str) or any(isinstance(s, str) for s in self.order):
            raise TypeError("order must be a list per step of prompt ids")
        object.__setattr__(self, "order", tuple(tuple(s) for s in self.order))

    def advantages(self, R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A (B, N), w (B,), active (B,)) for 0/1 rewards R (B, N): A = w(mu_hat) A^GRPO."""
        mu_hat = group_success_rate(R)  # (B,)
        w = np.asarray(self.weighting(mu_hat), dtype=np.float64).reshape(-1)  # (B,)
        own = self.weighting.rule.grpo_convention  # MaxRL: (R - mu_hat) / mu_hat
        if own is not None:
            A0 = grpo_advantages(R, std=own[0], eps=own[1])
        elif self.adv_std == "none":
            A0 = mean_centred_advantages(R)
        else:
            A0 = grpo_advantages(R, std=self.adv_std, eps=self.adv_eps)
        return w[:, None] * A0, w, (A0 != 0).any(axis=1)


def draw_inverse_cdf(p: np.ndarray, first: np.ndarray, count: np.ndarray, N: int, rng):
    """(B, N) local outcome indices, N i.i.d. draws per prompt from the probabilities p (o,)
    (prompt b's outcomes p[first[b]:first[b] + count[b]]), by inverse CDF on one cumulative sum
    of all the prompts' probabilities. An outcome of probability 0 is never drawn."""
    cum = np.cumsum(p)  # (o,)
    last = first + count - 1
    lo = np.where(first > 0, cum[first - 1], 0.0)  # (B,)
    total = cum[last] - lo
    u = rng.random((first.size, N))  # (B, N)
    idx = np.searchsorted(cum, lo[:, None] + u * total[:, None], side="right")
    pos = np.where(p > 0, np.arange(p.size), -1)
    last_pos = np.maximum.reduceat(pos, first)  # (B,) the last outcome of positive mass
    return np.minimum(np.maximum(idx, first[:, None]), last_pos[:, None])


@dataclass(frozen=True)
class Trained:
    """A trained forecast policy: the deviation tables and the realised weights."""

    delta: np.ndarray
    """(E,) per-prompt deviations theta - theta0."""
    phi: np.ndarray
    """(S + 1,) shared table (the last slot, for unshared edges, stays 0)."""
    mean_weight: float
    """The realised mean w(mu_hat) over the active groups (NaN with none)."""


def train_once(
    base: ForecastBase,
    run: RunSchedule,
    *,
    lr_theta_scale: float,
    lr_phi_scale: float,
    rng: np.random.Generator,
    steps: list | None = None,
    sampler: Callable = draw_inverse_cdf,
) -> Trained:
    """One replicate of the run (module docstring); ``steps`` are ``base.steps(run.order)``
    precomputed, ``sampler(p, first, count, N, rng)`` draws the groups."""
    for name, s in (("lr_theta_scale", lr_theta_scale), ("lr_phi_scale", lr_phi_scale)):
        if isinstance(s, bool) or not isinstance(s, numbers.Real) or not s >= 0:
            raise ValueError(f"{name} must be a number >= 0, got {s!r}")
    f, N, opt = base.forest, run.group_size, run.optimizer
    S = f.num_shared
    steps = base.steps(run.order) if steps is None else steps
    delta, phi = np.zeros(f.num_edges), np.zeros(S + 1)
    st_d, st_p = opt.state(f.num_edges), opt.state(S + 1)
    w_sum, w_n = 0.0, 0
    for t, prompts in enumerate(steps):
        g = prompts if isinstance(prompts, Gathered) else gather(f, prompts)
        B = g.prompts.size
        if B == 0:
            continue
        # --- sample: N outcomes per prompt from pi_t
        logp_e = edge_logp(g, delta, phi)  # (e,)
        p = np.exp(outcome_logp(g, logp_e))  # (o,)
        draws = sampler(p, g.outcome_first, g.outcome_count, N, rng)  # (B, N) local outcomes
        # --- score and advantages (Eq. 11-13)
        R = f.correct[g.outcomes[draws]].astype(np.float64)  # (B, N)
        A, w, active = run.advantages(R)  # (B, N), (B,), (B,)
        w_sum, w_n = w_sum + float(w[active].sum()), w_n + int(active.sum())
        if not active.any():
            continue
        # --- loss J = (1/D) sum_rows A log pi(y), its exact gradient, one step
        D = B * N if run.reduction == "batch" else N
        coef = np.bincount(draws.ravel(), weights=A.ravel() / D, minlength=g.outcomes.size)
        dz, V = policy_gradient(g, logp_e, coef)  # (e,), (m,)
        hit = (V[g.edge_node] != 0) | (dz != 0)  # (e,) edges that receive a gradient
        lr_t = run.lr * opt.schedule(t)
        if lr_theta_scale > 0:
            opt.step(delta, st_d, g.edges[hit], dz[hit], lr=lr_t * lr_theta_scale)
        if lr_phi_scale > 0:
            keys, inv = np.unique(g.keys[hit], return_inverse=True)
            G = np.bincount(inv, weights=dz[hit], minlength=keys.size)  # (s,)
            shared = keys < S  # the unshared slot stays 0
            opt.step(phi, st_p, keys[shared], G[shared], lr=lr_t * lr_phi_scale)
    return Trained(delta, phi, w_sum / w_n if w_n else float("nan"))


@dataclass(frozen=True)
class Forecast:
    """A forecast's predictions, averaged over its replicates."""

    delta_nll_rare: float
    """mean over rare trajectories of log pi_0(y|x) - log pi_T(y|x)."""
    delta_nll_per_rare: np.ndarray
    """(n_rare,) each rare trajectory's Delta NLL (in ``rare`` order)."""
    pass_at: dict
    """{k: exact pass@k on the eval prompts} for k in (1, 64)."""
    mean_weight: float
    """The realised mean weight over active groups."""
    replicates: int
    """R, the runs averaged."""

    def as_dict(self) -> dict:
        """{"delta_nll_rare", "pass@1", "pass@64"}."""
        out = {"delta_nll_rare": self.delta_nll_rare}
        out.update({f"pass@{k}": v for k, v in self.pass_at.items()})
        return out


def evaluate(base: ForecastBase, trained: Trained) -> tuple[np.ndarray, dict]:
    """(Delta NLL per rare trajectory, {k: pass@k}) of a trained policy, exactly."""
    rare = ForecastBase._logp(base.rare, trained.delta, trained.phi)[base.rare_pos]
    ev = base.eval
    log1m = log1m_mu(
        ev, ForecastBase._logp(ev, trained.delta, trained.phi), base.forest.correct[ev.outcomes]
    )
    return (base.base_rare_logp - rare) / base.rare_length, {
        k: float(np.mean(-np.expm1(k * log1m))) for k in KS
    }


def forecast(
    base: ForecastBase,
    run: RunSchedule,
    *,
    lr_theta_scale: float,
    lr_phi_scale: float,
    seed: int,
    replicates: int = 1,
    steps: list | None = None,
) -> Forecast:
    """The forecast of one cell: ``replicates`` runs (generators spawned from ``seed``),
    their predictions averaged. ``steps``: the gathered steps, to reuse across calls."""
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        raise ValueError(f"replicates must be an int >= 1, got {replicates!r}")
    if steps is None:
        steps = gathered_steps(base, run)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(replicates)]
    per_rare, passes, weights = [], [], []
    for rng in rngs:
        tr = train_once(
            base,
            run,
            lr_theta_scale=lr_theta_scale,
            lr_phi_scale=lr_phi_scale,
            rng=rng,
            steps=steps,
        )
        d, pk = evaluate(base, tr)
        per_rare.append(d)
        passes.append(pk)
        weights.append(tr.mean_weight)
    d = np.mean(per_rare, axis=0)
    return Forecast(
        delta_nll_rare=float(d.mean()) if d.size else float("nan"),
        delta_nll_per_rare=d,
        pass_at={k: float(np.mean([p[k] for p in passes])) for k in KS},
        mean_weight=float(np.nanmean(weights)) if not np.isnan(weights).all() else float("nan"),
        replicates=replicates,
    )


def gathered_steps(base: ForecastBase, run: RunSchedule) -> list:
    """The run's steps gathered once (reused by every replicate and every step-size trial)."""
    return [gather(base.forest, idx) for idx in base.steps(run.order)]
