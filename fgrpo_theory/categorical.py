"""One-step theory of the categorical softmax policy (paper Section 2.3, App. C-H).

A softmax policy p = softmax(z) over K actions, split into correct (P) and incorrect (N) ones.
A group of N i.i.d. draws gives the *distinct* sampled correct set A, the distinct sampled
incorrect set B and the unsampled set U. With

    P_pos = sum_A p_i,  P_neg = sum_B p_i,  A_2 = sum_A p_i^2,  B_2 = sum_B p_i^2,
    U_pos,2 = sum_{U∩P} p_i^2,  U_neg,2 = sum_{U∩N} p_i^2,  U_2 = U_pos,2 + U_neg,2,
    Q_u,pos = sum_{U∩P} p_i = Q_pos - P_pos,  S_R = R_c P_pos + R_w P_neg,

the Eq. 5 update is Delta z_i = (eta/N) p_i (R_i - S_R) (R_i = 0 when i is unsampled), and to
first order in eta the correct mass moves as Eq. 17 and the unsampled-correct mass as
Proposition 3.2. Lemma H.1 gives E[P_pos | X = k] and E[P_neg | X = k] exactly.

    >>> import numpy as np
    >>> from fgrpo_theory.categorical import group_stats, softmax
    >>> p = softmax(np.array([2.0, 1.0, 0.0, 0.0]))
    >>> s = group_stats(p, np.array([True, True, False, False]), np.array([0, 0, 2]))
    >>> round(s.S_R, 4)    # R_c = 1, R_w = -1: p_0 - p_2
    0.5277

Shapes: ``K`` actions, ``N`` draws in the group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fgrpo_common.checks import (
    as_float_array,
    check_bool_mask,
    check_integer,
    check_nonnegative,
    check_real_scalar,
    single,
)
from fgrpo_theory.focal import focal_weight


def softmax(z) -> np.ndarray:
    """p_i = exp(z_i - max z) / sum_j exp(z_j - max z), for a 1-D logit vector z (K,).

    A logit of -inf is an action of probability 0 (a mask); +inf has no softmax (the limit
    depends on how it was approached), so it is an error, as are NaN and an all -inf vector.
    """
    z = as_float_array("z", z)
    if z.ndim != 1:
        raise ValueError(f"z must be a 1-D logit vector (K,), got shape {z.shape}")
    if np.isposinf(z).any():
        raise ValueError(f"z must not contain +inf, got z[{int(np.argmax(np.isposinf(z)))}]=inf")
    if np.isneginf(z).all():
        raise ValueError("z must have at least one finite logit, got every z = -inf")
    with np.errstate(over="ignore"):  # -inf - max or a span beyond float64: exp gives 0
        e = np.exp(z - z.max())
    return e / e.sum()


def _check_policy(p, correct) -> tuple[np.ndarray, np.ndarray]:
    p = as_float_array("p", p)
    if p.ndim != 1 or (p < 0).any() or not abs(p.sum() - 1.0) <= 1e-9:
        raise ValueError(f"p must be a 1-D probability vector, got shape {p.shape}, sum {p.sum()}")
    correct = check_bool_mask("correct", correct)
    if correct.shape != p.shape:
        raise ValueError(f"correct must have the shape of p {p.shape}, got {correct.shape}")
    return p, correct


def _check_actions(actions, K: int) -> np.ndarray:
    actions = check_integer("actions", actions, minimum=0).ravel()
    if (actions >= K).any():
        raise ValueError(f"actions must be < K={K}, got actions={actions.max()}")
    return actions


def _check_rewards(R_c: float, R_w: float) -> tuple[float, float]:
    """Finite rewards with R_c > R_w (a correct rollout is worth more than a wrong one)."""
    R_c = check_real_scalar("R_c", R_c)
    R_w = check_real_scalar("R_w", R_w)
    if not R_c > R_w:
        raise ValueError(f"need R_c > R_w, got R_c={R_c}, R_w={R_w}")
    return R_c, R_w


def _check_eta(eta) -> float:
    """A finite step size eta >= 0."""
    eta = check_real_scalar("eta", eta)
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got eta={eta}")
    return eta


def _check_stats(s) -> GroupStats:
    if not isinstance(s, GroupStats):
        raise TypeError(f"s must be a GroupStats (from group_stats), got {type(s).__name__}")
    return s


def sampled_mask(actions, K: int) -> np.ndarray:
    """Boolean (K,): action i was drawn at least once in the group (the distinct sampled set)."""
    K = single("K", check_integer("K", K, minimum=1))
    return np.bincount(_check_actions(actions, K), minlength=K) > 0


@dataclass(frozen=True)
class GroupStats:
    """Masses and squared masses of the distinct sampled / unsampled sets (paper Section 2.3)."""

    N: int
    """group size (draws, with multiplicity)"""
    X: int
    """number of correct draws (with multiplicity)"""
    Q_pos: float
    """sum of p over all correct actions"""
    Q_neg: float
    """sum of p over all incorrect actions (1 - Q_pos, summed directly: no cancellation near
    Q_pos = 1)"""
    P_pos: float
    """sum of p over the distinct sampled correct actions (set A)"""
    P_neg: float
    """sum of p over the distinct sampled incorrect actions (set B)"""
    A_2: float
    """sum of p_i^2 over A"""
    B_2: float
    """sum of p_i^2 over B"""
    U_pos2: float
    """sum of p_i^2 over the unsampled correct actions"""
    U_neg2: float
    """sum of p_i^2 over the unsampled incorrect actions"""
    U_2: float
    """U_pos2 + U_neg2"""
    Q_u_pos: float
    """sum of p over the unsampled correct actions = Q_pos - P_pos"""
    S_R: float
    """batch baseline R_c P_pos + R_w P_neg"""
    R_c: float = 1.0
    """the reward of a correct action that S_R was built with"""
    R_w: float = -1.0
    """the reward of an incorrect action that S_R was built with"""


def group_stats(p, correct, actions, *, R_c: float = 1.0, R_w: float = -1.0) -> GroupStats:
    """All the set sums of paper Section 2.3 for a policy p (K,), a correct mask (K,) and the
    group's action indices (N,)."""
    p, correct = _check_policy(p, correct)
    R_c, R_w = _check_rewards(R_c, R_w)
    actions = _check_actions(actions, p.size)
    sampled = np.bincount(actions, minlength=p.size) > 0
    p2 = p * p
    A, B = sampled & correct, sampled & ~correct
    U_pos, U_neg = ~sampled & correct, ~sampled & ~correct
    P_pos, P_neg = p[A].sum(), p[B].sum()
    U_pos2, U_neg2 = p2[U_pos].sum(), p2[U_neg].sum()
    Q_pos, Q_neg = p[correct].sum(), p[~correct].sum()
    return GroupStats(
        N=int(actions.size),
        X=int(correct[actions].sum()),
        Q_pos=float(Q_pos),
        Q_neg=float(Q_neg),
        P_pos=float(P_pos),
        P_neg=float(P_neg),
        A_2=float(p2[A].sum()),
        B_2=float(p2[B].sum()),
        U_pos2=float(U_pos2),
        U_neg2=float(U_neg2),
        U_2=float(U_pos2 + U_neg2),
        Q_u_pos=float(p[U_pos].sum()),
        S_R=float(R_c * P_pos + R_w * P_neg),
        R_c=R_c,
        R_w=R_w,
    )


def logit_update(
    p, correct, actions, *, eta: float, R_c: float = 1.0, R_w: float = -1.0, gamma: float = 0.0
) -> np.ndarray:
    """Eq. 5: Delta z_i = g (eta/N) p_i (R_i - S_R), with R_i = R_c / R_w on sampled correct /
    incorrect actions and 0 on unsampled ones, so an unsampled action moves by -(eta/N) S_R p_i.

    g = (1 - X/N)^gamma is the focal weight of the group (Eq. 11-13); gamma = 0 gives g = 1, the
    unweighted update. This is the gradient of L = (g/N) sum over distinct sampled a of R_a p_a.
    Returns Delta z (K,).
    """

    p, correct = _check_policy(p, correct)
    gamma = float(single("gamma", check_nonnegative("gamma", gamma)))
    eta = _check_eta(eta)
    R_c, R_w = _check_rewards(R_c, R_w)
    stats = group_stats(p, correct, actions, R_c=R_c, R_w=R_w)
    sampled = sampled_mask(actions, p.size)
    R_i = np.where(sampled, np.where(correct, R_c, R_w), 0.0)
    g = float(focal_weight(stats.X / stats.N, gamma))
    return g * (eta / stats.N) * p * (R_i - stats.S_R)


def _stats_rewards(s: GroupStats, R_c, R_w) -> tuple[float, float]:
    """The rewards ``s`` was built with (its S_R depends on them); ``R_c`` / ``R_w``, when
    given, must be the same."""
    given = _check_rewards(s.R_c if R_c is None else R_c, s.R_w if R_w is None else R_w)
    for name, value, built in zip(("R_c", "R_w"), given, (s.R_c, s.R_w), strict=True):
        if value != built:
            raise ValueError(
                f"{name}={value!r} differs from the {name}={built!r} that s was built with "
                f"(group_stats(..., {name}=...)): S_R depends on it"
            )
    return given


def predicted_delta_q_pos(
    s: GroupStats, *, eta: float, R_c: float | None = None, R_w: float | None = None
) -> float:
    """Eq. 17, first order in eta:
    Delta Q_pos = (eta/N) [ (R_c - S_R) Q_neg A_2 + (S_R - R_w) Q_pos B_2
                            + S_R (Q_pos U_neg,2 - Q_neg U_pos,2) ].
    With focal weighting pass eta * g. The rewards are those ``s`` was built with
    (:func:`group_stats`); ``R_c`` / ``R_w``, when given, must equal them."""
    s, eta = _check_stats(s), _check_eta(eta)
    R_c, R_w = _stats_rewards(s, R_c, R_w)
    S_R = s.S_R
    return (eta / s.N) * (
        (R_c - S_R) * s.Q_neg * s.A_2
        + (S_R - R_w) * s.Q_pos * s.B_2
        + S_R * (s.Q_pos * s.U_neg2 - s.Q_neg * s.U_pos2)
    )


def predicted_delta_q_u_pos(
    s: GroupStats, *, eta: float, R_c: float | None = None, R_w: float | None = None
) -> float:
    """Proposition 3.2, first order in eta:
    Delta Q_u,pos = (eta/N) [ -S_R U_pos,2
                              - Q_u,pos ( (R_c - S_R) A_2 + (R_w - S_R) B_2 - S_R U_2 ) ].
    With S_R > 0 the first term drains unsampled-correct mass even while Q_pos grows. The
    rewards are those ``s`` was built with; ``R_c`` / ``R_w``, when given, must equal them."""
    s, eta = _check_stats(s), _check_eta(eta)
    R_c, R_w = _stats_rewards(s, R_c, R_w)
    S_R = s.S_R
    return (eta / s.N) * (
        -S_R * s.U_pos2 - s.Q_u_pos * ((R_c - S_R) * s.A_2 + (R_w - S_R) * s.B_2 - S_R * s.U_2)
    )


def _expected_distinct_mass(q: np.ndarray, w: np.ndarray, k) -> np.ndarray:
    """sum_o w(o) [1 - (1 - q(o))^k] = -sum_o w(o) expm1(k log1p(-q(o))), for each k."""
    k = np.asarray(k, dtype=np.float64)
    # (k..., K): 1 - (1 - q)^k in log space
    with np.errstate(divide="ignore"):
        log_miss = np.log1p(-np.minimum(q, 1.0))  # (K,), -inf where q = 1
    kk = np.broadcast_to(k[..., None], k.shape + q.shape)
    # k = 0 draws miss every action, also those with q = 1 (avoid 0 * -inf)
    expo = np.multiply(kk, log_miss, out=np.zeros(kk.shape), where=kk > 0)
    hit = -np.expm1(expo)
    return (hit * w).sum(axis=-1)


def expected_p_pos_given_k(p, correct, k) -> np.ndarray:
    """Lemma H.1: E[P_pos | X = k] = sum_{o in C} pi(o) [1 - (1 - q_pos(o))^k], q_pos = pi/mu on C.

    Given X = k, the k correct draws are i.i.d. from p restricted to C; vectorised over k."""
    p, correct = _check_policy(p, correct)
    k = check_integer("k", k, minimum=0)
    mu = p[correct].sum()
    if mu <= 0:
        raise ValueError("the policy puts no mass on correct actions (mu = 0)")
    return _expected_distinct_mass(p[correct] / mu, p[correct], k)


def expected_p_neg_given_k(p, correct, k, N) -> np.ndarray:
    """Lemma H.1: E[P_neg | X = k] = sum_{o not in C} pi(o) [1 - (1 - q_neg(o))^(N - k)],
    q_neg = pi / (1 - mu) off C."""
    p, correct = _check_policy(p, correct)
    k = check_integer("k", k, minimum=0)
    N = int(single("N", check_integer("N", N, minimum=1)))
    if (k > N).any():
        raise ValueError(f"k must be <= N={N}, got k={k.max()}")
    neg = p[~correct].sum()
    if neg <= 0:
        raise ValueError("the policy puts no mass on incorrect actions (mu = 1)")
    return _expected_distinct_mass(p[~correct] / neg, p[~correct], N - k)


def expected_s_r_given_k(p, correct, k, N, *, R_c: float = 1.0, R_w: float = -1.0) -> np.ndarray:
    """E[S_R | X = k] = R_c E[P_pos | X = k] + R_w E[P_neg | X = k]; non-decreasing in k when
    R_c >= 0 >= R_w (Corollary H.2; with R_c < 0 it can decrease, a case the wording
    "R_c > R_w and R_w <= 0" lets through)."""
    R_c, R_w = _check_rewards(R_c, R_w)
    return R_c * expected_p_pos_given_k(p, correct, k) + R_w * expected_p_neg_given_k(
        p, correct, k, N
    )
