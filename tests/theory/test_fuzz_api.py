"""Hypothesis fuzz test of the public API of ``fgrpo_theory`` and of its closed-form CLI.

Every public function of tail_miss, passk, focal, advantages, categorical, montecarlo and checks,
and the ``tail-miss`` / ``peak`` / ``pass-at-k`` commands, is called with three kinds of input:

- *valid*: inside the documented domain; the call must return finite values in range
  (probabilities in [0, 1], no NaN / inf except where the docstring defines them);
- *edge*: valid values at the extremes (subnormal masses, N up to 1e300, integers near 2^63);
  a clear ValueError / TypeError naming an argument is also accepted there;
- *hostile*: one or two arguments replaced by a value outside the domain or of the wrong type
  (NaN, inf, bool, str, datetime64, complex, object and masked arrays, 2^63, 10^400, ragged
  lists, ...), or a relation broken (tau > mu, c > n); the call must raise ValueError or
  TypeError whose message names one of the bad arguments.

Anything else fails: another exception type, a NaN / inf / out-of-range value for valid input,
hostile input accepted, an error that names no argument, or a call that runs past a per-call
deadline (a hang). ``make test`` runs a few examples per function; ``make test-slow`` (the
``slow`` marker) runs at least 10,000 in all. The CLI tests live in ``test_fuzz_cli.py`` (so that
``make mutation``, which runs this file, need not run the slower CLI examples).

The same cases measure a source tree, counting instead of failing:

    python tests/theory/test_fuzz_api.py --per-case 800                 # this tree
    PYTHONPATH=/path/to/old/tree python tests/theory/test_fuzz_api.py   # another one
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import io
import json
import math
import re
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: Wall-clock seconds one call may take before it counts as a hang (generous: every call here
#: is milliseconds; only a runaway loop or allocation gets near it).
DEADLINE_S = 20.0
#: Examples per case: a few in ``make test``, many in ``make test-slow``.
FAST_EXAMPLES = 10
SLOW_EXAMPLES = 260

# ----------------------------------------------------------------------------------------------
# deadline
# ----------------------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised in the main thread when a call runs past DEADLINE_S (BaseException: a library's
    ``except Exception`` cannot swallow it)."""


@contextlib.contextmanager
def deadline(seconds: float):
    def on_alarm(signum, frame):
        raise Hang(f"call still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ----------------------------------------------------------------------------------------------
# argument strategies
# ----------------------------------------------------------------------------------------------

TINY = 5e-324

_prob_edge = st.sampled_from([0.0, 1.0, TINY, 1e-300, 1e-12, 0.5, 1 - 2**-53, 1 - 1e-9])
prob = st.one_of(st.floats(0.0, 1.0), _prob_edge)
prob_inner = st.floats(1e-6, 1 - 1e-6)
group_size = st.one_of(st.integers(1, 10**6), st.floats(1.0, 1e6))
group_size_edge = st.sampled_from([1, 2, 2**53, 1e15, 1e300, 2**63 - 1])
gamma_s = st.one_of(st.floats(0.0, 8.0), st.sampled_from([0.0, 0.5, 1.0, 2.0]))
gamma_edge = st.sampled_from([0.0, 1e-300, 50.0, 1e6, 1e300])

#: Values of the wrong type or shape, hostile to any argument.
WRONG_TYPE = [
    None,
    "0.5",
    b"1",
    True,
    False,
    np.True_,
    np.datetime64("2020-01-01"),
    np.timedelta64(1, "D"),
    1 + 0j,
    complex(0.5, 1.0),
    np.array(["a"]),
    np.array([0.5, None], dtype=object),
    {"a": 1},
    [],
    [[0.1], [0.2, 0.3]],
    np.ma.masked_array([0.5, 0.2], mask=[0, 1]),
    np.array([True, False]),
    object(),
    [0.5, "x"],
]
NOT_A_NUMBER = [float("nan"), [0.5, float("nan")], np.array([np.nan])]
hostile_prob = st.sampled_from(
    WRONG_TYPE
    + NOT_A_NUMBER
    + [-0.1, 1.5, math.inf, -math.inf, 1e308, 2**64, 10**400, -TINY, [0.2, 1.2]]
)
hostile_group_size = st.sampled_from(
    WRONG_TYPE + NOT_A_NUMBER + [0.5, 0, -1, math.inf, -math.inf, 10**400, [2, 0]]
)
hostile_int = st.sampled_from(
    WRONG_TYPE
    + NOT_A_NUMBER
    + [2**63, 2**64, 1e19, 10**400, -1, 2.5, math.inf, -math.inf, 1e300, [4, 2**63]]
)
hostile_nonneg = st.sampled_from(WRONG_TYPE + NOT_A_NUMBER + [-1.0, -1e-300, math.inf, -math.inf])
hostile_real = st.sampled_from(WRONG_TYPE + NOT_A_NUMBER + [math.inf, -math.inf, [1.0, 2.0]])
hostile_rewards = st.sampled_from(
    WRONG_TYPE
    + NOT_A_NUMBER
    + [
        0.7,
        [[1.0, math.inf]],
        [[1.0, float("nan")]],
        [[True, False]],
        [["a", "b"]],
        [[]],
        np.array([[1 + 1j, 0]]),
    ]
)
hostile_rng = st.sampled_from([None, 0, "seed", np.random.RandomState(0), 1.5, True])
hostile_std = st.sampled_from(["sample", None, 1, True, ["bessel"], "BESSEL"])


def scalar_or_array(elements, length):
    """A scalar when length is None, else a 1-D float array of that length."""
    if length is None:
        return elements
    return st.lists(elements, min_size=length, max_size=length).map(np.array)


lengths = st.one_of(st.none(), st.integers(1, 4))


@dataclass
class Case:
    """One public function: how to draw valid kwargs, hostile values per argument, how to call
    it and what a valid result must satisfy."""

    name: str
    call: Callable[[dict], object]
    valid: Callable  # draw -> kwargs (valid)
    hostile: dict = field(default_factory=dict)  # argument -> strategy of hostile values
    check: Callable[[dict, object], str | None] = lambda kw, out: None  # None: result fine
    edge: Callable | None = None  # draw -> kwargs at the extremes of the domain
    violate: Callable | None = None  # (draw, kwargs) -> (kwargs, names): a broken relation
    allowed_error: str | None = None  # a documented ValueError for valid input (regex)


def _mod(name: str):
    """A library module by name: ``checks`` is ``fgrpo_common``'s, the others ``fgrpo_theory``'s."""
    package = "fgrpo_common" if name == "checks" else "fgrpo_theory"
    return importlib.import_module(f"{package}.{name}")


# ----------------------------------------------------------------------------------------------
# result checks
# ----------------------------------------------------------------------------------------------


def _arr(out) -> np.ndarray:
    return np.asarray(out, dtype=np.float64)


def in_unit(out, what="value") -> str | None:
    x = _arr(out)
    if not np.isfinite(x).all():
        return f"non-finite {what}: {x.ravel()[~np.isfinite(x.ravel())][0]}"
    if (x < 0).any() or (x > 1).any():
        return f"{what} outside [0, 1]: {x.ravel()[(x.ravel() < 0) | (x.ravel() > 1)][0]}"
    return None


def finite(out, what="value") -> str | None:
    x = _arr(out)
    if not np.isfinite(x).all():
        return f"non-finite {what}: {x.ravel()[~np.isfinite(x.ravel())][0]}"
    return None


def log_prob(out) -> str | None:
    x = _arr(out)
    if np.isnan(x).any() or (x > 0).any():
        return f"log-probability NaN or > 0: {x.ravel()[np.isnan(x.ravel()) | (x.ravel() > 0)][0]}"
    return None


def first_error(*errors) -> str | None:
    return next((e for e in errors if e), None)


# ----------------------------------------------------------------------------------------------
# valid-input strategies per module
# ----------------------------------------------------------------------------------------------


@st.composite
def mu_tau_N(draw, *, with_N=True, edge=False):
    L = draw(lengths)
    p = _prob_edge if edge else prob
    mu = draw(scalar_or_array(p, L))
    frac = draw(scalar_or_array(p, L))
    kw = {"mu": mu, "tau": np.asarray(mu) * np.asarray(frac) if L else mu * frac}
    if with_N:
        kw["N"] = draw(scalar_or_array(group_size_edge if edge else group_size, L))
    return kw


@st.composite
def mu_rho_N(draw, edge=False):
    L = draw(lengths)
    p = _prob_edge if edge else prob
    return {
        "mu": draw(scalar_or_array(p, L)),
        "rho": draw(scalar_or_array(p, L)),
        "N": draw(scalar_or_array(group_size_edge if edge else group_size, L)),
    }


@st.composite
def mu_N(draw, edge=False):
    L = draw(lengths)
    return {
        "mu": draw(scalar_or_array(_prob_edge if edge else prob, L)),
        "N": draw(scalar_or_array(group_size_edge if edge else group_size, L)),
    }


def _tau_gt_mu(draw, kw):
    mu = float(np.ravel(kw["mu"])[0])
    if mu >= 1.0:
        mu = 0.5
    return {**kw, "mu": mu, "tau": min(1.0, mu + draw(st.floats(1e-9, 1.0)))}, ("tau", "mu")


def _tm_given_active_check(kw, out):
    r = _arr(out)
    pa = _arr(_mod("tail_miss").p_active(kw["mu"], kw["N"]))
    r, pa = np.broadcast_arrays(r, pa)
    if (np.isnan(r) != (pa == 0)).any():
        return "NaN where P(A) > 0, or a number where P(A) = 0"
    return in_unit(r[~np.isnan(r)]) if (~np.isnan(r)).any() else None


def _tm_count_check(kw, out):
    B = np.broadcast(np.asarray(kw["mu"]), np.asarray(kw["tau"])).size
    x = _arr(out)
    return finite(x) or (f"count outside [0, {B}]: {x}" if ((x < 0) | (x > B)).any() else None)


def _tm_stationary_check(kw, out):
    x = _arr(out)
    mu, tau = np.broadcast_arrays(_arr(kw["mu"]), _arr(kw["tau"]))
    x = np.broadcast_to(x, mu.shape)
    degenerate = (tau >= mu) | (mu <= 0) | (mu >= 1)
    rising = (tau == 0) & ~degenerate
    ok = ~degenerate & ~rising
    if not np.isnan(x[degenerate]).all() or not np.isposinf(x[rising]).all():
        return f"wrong special value: {x}"
    if not (np.isfinite(x[ok]) & (x[ok] > 1)).all():
        return f"N_c not a finite number > 1: {x[ok]}"
    return None


def _tm_peak_check(kw, out):
    n_star, p_star = out
    n = np.asarray(n_star)
    if n.dtype.kind not in "iu" or (n < 1).any():
        return f"N* not an integer >= 1: {n_star}"
    if kw.get("n_max") is not None and (n > np.asarray(kw["n_max"])).any():
        return f"N* above n_max: {n_star}"
    return in_unit(p_star, "P*")


@st.composite
def _tm_peak_valid(draw, edge=False):
    kw = draw(mu_tau_N(with_N=False, edge=edge))
    if draw(st.booleans()) or np.any(np.asarray(kw["tau"]) == 0):
        kw["n_max"] = draw(st.integers(1, 10**6))
    return kw


def _tail_miss_cases() -> list[Case]:
    tm = _mod("tail_miss")
    H = {"mu": hostile_prob, "tau": hostile_prob, "N": hostile_group_size}

    prob_check = lambda kw, out: in_unit(out)  # noqa: E731
    cases = [
        Case(
            "p_active",
            lambda kw: tm.p_active(**kw),
            mu_N(),
            {"mu": hostile_prob, "N": hostile_group_size},
            prob_check,
            mu_N(edge=True),
        ),
        Case(
            "log_p_active",
            lambda kw: tm.log_p_active(**kw),
            mu_N(),
            {"mu": hostile_prob, "N": hostile_group_size},
            lambda kw, out: log_prob(out),
            mu_N(edge=True),
        ),
        Case(
            "p_tail_miss",
            lambda kw: tm.p_tail_miss(**kw),
            mu_tau_N(),
            H,
            prob_check,
            mu_tau_N(edge=True),
            _tau_gt_mu,
        ),
        Case(
            "log_p_tail_miss",
            lambda kw: tm.log_p_tail_miss(**kw),
            mu_tau_N(),
            H,
            lambda kw, out: log_prob(out),
            mu_tau_N(edge=True),
            _tau_gt_mu,
        ),
        Case(
            "p_tail_miss_rho",
            lambda kw: tm.p_tail_miss_rho(**kw),
            mu_rho_N(),
            {"mu": hostile_prob, "rho": hostile_prob, "N": hostile_group_size},
            prob_check,
            mu_rho_N(edge=True),
        ),
        Case(
            "log_p_tail_miss_rho",
            lambda kw: tm.log_p_tail_miss_rho(**kw),
            mu_rho_N(),
            {"mu": hostile_prob, "rho": hostile_prob, "N": hostile_group_size},
            lambda kw, out: log_prob(out),
            mu_rho_N(edge=True),
        ),
        Case(
            "p_tail_miss_given_active",
            lambda kw: tm.p_tail_miss_given_active(**kw),
            mu_tau_N(),
            H,
            _tm_given_active_check,
            mu_tau_N(edge=True),
            _tau_gt_mu,
        ),
        Case(
            "expected_tail_miss_count",
            lambda kw: tm.expected_tail_miss_count(**kw),
            mu_tau_N(),
            H,
            _tm_count_check,
            mu_tau_N(edge=True),
            _tau_gt_mu,
        ),
        Case(
            "stationary_group_size",
            lambda kw: tm.stationary_group_size(**kw),
            mu_tau_N(with_N=False),
            {"mu": hostile_prob, "tau": hostile_prob},
            _tm_stationary_check,
            mu_tau_N(with_N=False, edge=True),
            _tau_gt_mu,
            allowed_error=r"outside what float64 resolves",
        ),
        Case(
            "peak_group_size",
            lambda kw: tm.peak_group_size(**kw),
            _tm_peak_valid(),
            {
                "mu": hostile_prob,
                "tau": hostile_prob,
                "n_max": hostile_group_size.filter(lambda v: v is not None),
            },  # None: no cap
            _tm_peak_check,
            _tm_peak_valid(edge=True),
            _tau_gt_mu,
            allowed_error=r"beyond 2\^53|at most 2\^53|outside what float64 resolves",
        ),
    ]
    return cases


@st.composite
def _pk_unbiased_valid(draw, edge=False):
    L = draw(lengths)
    top = 2**63 - 1 if edge else 10**9
    n = np.array(draw(st.lists(st.integers(1, top), min_size=L or 1, max_size=L or 1)))
    c = np.array([draw(st.integers(0, int(v))) for v in n])
    k = np.array([draw(st.integers(1, int(min(v, 5000)))) for v in n])
    if L is None:
        n, c, k = int(n[0]), int(c[0]), int(k[0])
    return {"n": n, "c": c, "k": k}


def _pk_unbiased_violate(draw, kw):
    n = int(np.ravel(kw["n"])[0])
    which = draw(st.sampled_from(["c", "k"]))
    kw = {"n": n, "c": n + 1 if which == "c" else 0, "k": n + 1 if which == "k" else 1}
    return kw, (which,)


def _pk_paired_check(kw, out):
    return first_error(
        in_unit(out.p_value, "p_value"),
        in_unit(out.pass_at_k_a, "pass@k A"),
        in_unit(out.pass_at_k_b, "pass@k B"),
        finite(out.statistic),
        finite(out.subsample_std),
        None if out.subsample_std >= 0 else "std < 0",
    )


def _pk_size_check(kw, out):
    rate, low, high = out
    return first_error(
        in_unit(rate, "rate"),
        None if 0 <= low <= rate <= high <= 1 else f"interval ({low}, {high}) around {rate}",
    )


def _passk_cases() -> list[Case]:
    pk = _mod("passk")

    @st.composite
    def exact_valid(draw, edge=False):
        L = draw(lengths)
        k = st.sampled_from([1, 2**53, 2**63 - 1]) if edge else st.integers(1, 10**6)
        return {
            "p": draw(scalar_or_array(_prob_edge if edge else prob, L)),
            "k": draw(scalar_or_array(k, L)),
        }

    @st.composite
    def mean_valid(draw):
        n = draw(st.integers(1, 2000))
        P = draw(st.integers(1, 5))
        return {
            "n": n,
            "c_per_problem": draw(st.lists(st.integers(0, n), min_size=P, max_size=P)),
            "ks": draw(st.lists(st.integers(1, n), min_size=1, max_size=3)),
        }

    @st.composite
    def paired_valid(draw):
        P, n = draw(st.integers(1, 4)), draw(st.integers(3, 24))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        k = draw(st.integers(1, n - 2))
        return {
            "correct_a": rng.random((P, n)) < draw(prob_inner),
            "correct_b": (rng.random((P, n)) < draw(prob_inner)).astype(int),
            "m": draw(st.integers(k, n - 1)),
            "iterations": draw(st.integers(1, 50)),
            "rng": np.random.default_rng(seed + 1),
            "k": k,
        }

    def paired_violate(draw, kw):
        n = kw["correct_a"].shape[1]
        return {**kw, "m": n}, ("m",)

    @st.composite
    def size_valid(draw):
        n = draw(st.integers(3, 16))
        k = draw(st.integers(1, n - 2))
        return {
            "n": n,
            "m": draw(st.integers(k, n - 1)),
            "k": k,
            "problems": draw(st.integers(1, 3)),
            "tests": draw(st.integers(1, 3)),
            "iterations": draw(st.integers(1, 5)),
            "alpha": draw(prob),
            "finite_population": draw(st.booleans()),
            "rng": np.random.default_rng(draw(st.integers(0, 2**32 - 1))),
        }

    return [
        Case(
            "pass_at_k_exact",
            lambda kw: pk.pass_at_k_exact(**kw),
            exact_valid(),
            {"p": hostile_prob, "k": hostile_int},
            lambda kw, out: in_unit(out),
            exact_valid(edge=True),
        ),
        Case(
            "pass_at_k_unbiased",
            lambda kw: pk.pass_at_k_unbiased(**kw),
            _pk_unbiased_valid(),
            {"n": hostile_int, "c": hostile_int, "k": hostile_int},
            lambda kw, out: in_unit(out),
            _pk_unbiased_valid(edge=True),
            _pk_unbiased_violate,
        ),
        Case(
            "mean_pass_at_k",
            lambda kw: pk.mean_pass_at_k(**kw),
            mean_valid(),
            {"n": hostile_int, "c_per_problem": hostile_int, "ks": hostile_int},
            lambda kw, out: in_unit(out),
        ),
        Case(
            "paired_subsampling_test",
            lambda kw: pk.paired_subsampling_test(**kw),
            paired_valid(),
            {
                "correct_a": hostile_rewards,
                "correct_b": hostile_rewards,
                "m": hostile_int,
                "iterations": hostile_int,
                "rng": hostile_rng,
                "k": hostile_int,
            },
            _pk_paired_check,
            violate=paired_violate,
        ),
        Case(
            "null_rejection_rate",
            lambda kw: pk.null_rejection_rate(**kw),
            size_valid(),
            {
                "n": hostile_int,
                "m": hostile_int,
                "k": hostile_int,
                "problems": hostile_int,
                "tests": hostile_int,
                "iterations": hostile_int,
                "alpha": hostile_prob,
                "rng": hostile_rng,
            },
            _pk_size_check,
        ),
    ]


def _focal_cases() -> list[Case]:
    fo = _mod("focal")

    @st.composite
    def weight_valid(draw, edge=False):
        L = draw(lengths)
        return {
            "mu_hat": draw(scalar_or_array(_prob_edge if edge else prob, L)),
            "gamma": draw(scalar_or_array(gamma_edge if edge else gamma_s, L)),
        }

    @st.composite
    def magnitude_valid(draw, edge=False):
        L = draw(lengths)
        mu = st.sampled_from([TINY, 1e-300, 0.5, 1 - 2**-53]) if edge else prob_inner
        return {
            "mu": draw(scalar_or_array(mu, L)),
            "gamma": draw(scalar_or_array(gamma_edge if edge else gamma_s, L)),
        }

    def magnitude_check(kw, out):
        pos, neg = out
        return first_error(
            finite(pos, "pos"),
            finite(neg, "neg"),
            "negative magnitude" if (_arr(pos) < 0).any() or (_arr(neg) < 0).any() else None,
        )

    return [
        Case(
            "focal_weight",
            lambda kw: fo.focal_weight(**kw),
            weight_valid(),
            {"mu_hat": hostile_prob, "gamma": hostile_nonneg},
            lambda kw, out: in_unit(out),
            weight_valid(edge=True),
        ),
        Case(
            "focal_advantage_magnitudes",
            lambda kw: fo.focal_advantage_magnitudes(**kw),
            magnitude_valid(),
            {"mu": hostile_prob, "gamma": hostile_nonneg},
            magnitude_check,
            magnitude_valid(edge=True),
        ),
        Case(
            "lr_multiplier",
            lambda kw: fo.lr_multiplier(**kw),
            st.fixed_dictionaries({"gamma": gamma_s}),
            {"gamma": hostile_nonneg},
            lambda kw, out: in_unit(out),
            st.fixed_dictionaries({"gamma": gamma_edge}),
        ),
    ]


@st.composite
def reward_groups(draw, edge=False):
    B, N = draw(st.integers(1, 4)), draw(st.integers(2, 9))
    if edge:
        value = st.sampled_from([0.0, 1.0, 0.7, 0.1, 1e-300, 1 - 2**-53])
    else:
        value = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))
    R = np.array(draw(st.lists(st.lists(value, min_size=N, max_size=N), min_size=B, max_size=B)))
    if draw(st.booleans()):  # a constant group of an arbitrary reward
        R[0, :] = draw(value)
    return R


def _constant_groups_zero(R, A) -> str | None:
    R, A = np.asarray(R, float), np.asarray(A)
    const = (R == R[..., :1]).all(axis=-1)
    if (A[const] != 0).any():
        return f"a constant group got nonzero advantages: {A[const][A[const] != 0][0]}"
    return None


def _advantage_cases() -> list[Case]:
    ad = _mod("advantages")
    std_eps = {
        "std": st.sampled_from(["bessel", "population"]),
        "eps": st.sampled_from([0.0, 1e-6, 1e-4, 1.0]),
    }

    def adv_check(kw, out):
        return first_error(finite(out), _constant_groups_zero(kw["rewards"], out))

    H = {"rewards": hostile_rewards}
    rw = {"reward_correct": st.just(1.0), "reward_wrong": st.just(0.0)}
    H_rw = {"reward_correct": hostile_real, "reward_wrong": hostile_real}

    def rw_violate(draw, kw):
        kw = {**kw, "reward_correct": 0.0, "reward_wrong": 1.0}
        return kw, ("reward_correct", "reward_wrong")

    def rewards_out_of_range(draw, kw):
        R = np.array(kw["rewards"], dtype=float)
        R[0, 0] = draw(st.sampled_from([1.5, -0.5, 2.0]))
        return {**kw, "rewards": R}, ("rewards",)

    return [
        Case(
            "mean_centred_advantages",
            lambda kw: ad.mean_centred_advantages(**kw),
            st.fixed_dictionaries({"rewards": reward_groups()}),
            H,
            adv_check,
            st.fixed_dictionaries({"rewards": reward_groups(edge=True)}),
        ),
        Case(
            "grpo_advantages",
            lambda kw: ad.grpo_advantages(**kw),
            st.fixed_dictionaries({"rewards": reward_groups(), **std_eps}),
            {**H, "std": hostile_std, "eps": hostile_nonneg},
            adv_check,
            st.fixed_dictionaries({"rewards": reward_groups(edge=True), **std_eps}),
        ),
        Case(
            "group_success_rate",
            lambda kw: ad.group_success_rate(**kw),
            st.fixed_dictionaries({"rewards": reward_groups(), **rw}),
            {**H, **H_rw},
            lambda kw, out: in_unit(out),
            st.fixed_dictionaries({"rewards": reward_groups(edge=True)}),
            rewards_out_of_range,
        ),
        Case(
            "focal_group_weights",
            lambda kw: ad.focal_group_weights(**kw),
            st.fixed_dictionaries({"rewards": reward_groups(), "gamma": gamma_s, **rw}),
            {**H, "gamma": hostile_nonneg, **H_rw},
            lambda kw, out: in_unit(out),
            st.fixed_dictionaries({"rewards": reward_groups(edge=True), "gamma": gamma_edge}),
            rw_violate,
        ),
        Case(
            "focal_advantages",
            lambda kw: ad.focal_advantages(**kw),
            st.fixed_dictionaries({"rewards": reward_groups(), "gamma": gamma_s, **std_eps}),
            {**H, "gamma": hostile_nonneg, "std": hostile_std, "eps": hostile_nonneg, **H_rw},
            adv_check,
            st.fixed_dictionaries(
                {"rewards": reward_groups(edge=True), "gamma": gamma_edge, **std_eps}
            ),
            rewards_out_of_range,
        ),
    ]


@st.composite
def policies(draw, edge=False):
    """p = softmax(z) (K,), a correct mask with both classes, a group of actions."""
    K = draw(st.integers(2, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 30.0, 300.0] if edge else [0.1, 1.0, 3.0]))
    z = rng.normal(0.0, scale, K)
    p = np.exp(z - z.max())
    p /= p.sum()
    correct = np.zeros(K, dtype=bool)
    correct[rng.choice(K, draw(st.integers(1, K - 1)), replace=False)] = True
    actions = rng.integers(0, K, draw(st.integers(1, 16)))
    R_w = draw(st.floats(-2.0, 1.0))
    return {
        "z": z,
        "p": p,
        "correct": correct,
        "actions": actions,
        "R_w": R_w,
        "R_c": R_w + draw(st.floats(0.1, 3.0)),
        "eta": draw(st.floats(0.0, 1.0)),
        "gamma": draw(gamma_s),
        "k": draw(st.integers(0, 16)),
    }


@dataclass
class _Build:
    """Arguments of group_stats, called inside the measured call."""

    args: tuple


def _ca_softmax_check(kw, out):
    x = _arr(out)
    return first_error(in_unit(x), None if abs(x.sum() - 1) < 1e-12 else f"sum {x.sum()}")


def _ca_stats_check(kw, out):
    fields = (
        "Q_pos",
        "Q_neg",
        "P_pos",
        "P_neg",
        "A_2",
        "B_2",
        "U_pos2",
        "U_neg2",
        "U_2",
        "Q_u_pos",
    )
    vals = [getattr(out, f) for f in fields]
    return first_error(
        *(
            in_unit(min(1.0, max(0.0, v)) if abs(v - min(1, max(0, v))) < 1e-12 else v)
            for v in vals
        ),
        finite(out.S_R),
    )


def _ca_r_violate(draw, kw):
    return {**kw, "R_c": -1.0, "R_w": 1.0}, ("R_c", "R_w")


def _ca_neg_k(d):
    N = int(d["actions"].size)
    return {"p": d["p"], "correct": d["correct"], "k": np.arange(N + 1), "N": N}


def _ca_s_r(d):
    N = int(d["actions"].size)
    return {
        "p": d["p"],
        "correct": d["correct"],
        "k": np.arange(N + 1),
        "N": N,
        "R_c": d["R_c"],
        "R_w": d["R_w"],
    }


def _ca_k_gt_N(draw, kw):
    return {**kw, "k": kw["N"] + 1}, ("k",)


def _categorical_cases() -> list[Case]:
    ca = _mod("categorical")

    def pick(*names):
        def make(draw_kw):
            return {n: draw_kw[n] for n in names}

        return policies().map(make)

    hostile_p = st.sampled_from(
        WRONG_TYPE + NOT_A_NUMBER + [[0.5, 0.6], [[0.5, 0.5]], [-0.5, 1.5], [math.inf, 0.0], 0.5]
    )
    hostile_mask = st.sampled_from(
        [
            None,
            "ab",
            [0.5, 2.0],
            np.array([2, 0]),
            [[True]],
            1.5,
            np.ma.masked_array([True, False]),
            np.array(["x", "y"]),
        ]
    )
    hostile_actions = st.sampled_from(WRONG_TYPE + NOT_A_NUMBER + [[-1], [10**6], [0.5], [2**63]])
    hostile_z = st.sampled_from(
        WRONG_TYPE + NOT_A_NUMBER + [[math.inf, 0.0], [-math.inf, -math.inf], [[0.0, 1.0]]]
    )
    P = {"p": hostile_p, "correct": hostile_mask}
    R = {"R_c": hostile_real, "R_w": hostile_real}

    def with_stats(fn):
        def call(kw):
            s = kw["s"]
            if isinstance(s, _Build):  # (p, correct, actions): the GroupStats of these rewards
                s = ca.group_stats(*s.args, R_c=kw["R_c"], R_w=kw["R_w"])
            return fn(s, eta=kw["eta"], R_c=kw["R_c"], R_w=kw["R_w"])

        return call

    stats_args = policies().map(
        lambda d: {
            "s": _Build((d["p"], d["correct"], d["actions"])),
            "eta": d["eta"],
            "R_c": d["R_c"],
            "R_w": d["R_w"],
        }
    )
    hostile_s = st.sampled_from([None, {"S_R": 0.1}, 0.5, "stats", (1, 2)])

    return [
        Case(
            "softmax",
            lambda kw: ca.softmax(**kw),
            pick("z"),
            {"z": hostile_z},
            _ca_softmax_check,
            policies(edge=True).map(lambda d: {"z": d["z"]}),
        ),
        Case(
            "sampled_mask",
            lambda kw: ca.sampled_mask(kw["actions"], kw["K"]),
            policies().map(lambda d: {"actions": d["actions"], "K": d["p"].size}),
            {"actions": hostile_actions, "K": hostile_int},
            lambda kw, out: None if np.asarray(out).dtype == bool else "not a bool mask",
        ),
        Case(
            "group_stats",
            lambda kw: ca.group_stats(**kw),
            pick("p", "correct", "actions", "R_c", "R_w"),
            {**P, "actions": hostile_actions, **R},
            _ca_stats_check,
            policies(edge=True).map(lambda d: {k: d[k] for k in ("p", "correct", "actions")}),
            _ca_r_violate,
        ),
        Case(
            "logit_update",
            lambda kw: ca.logit_update(**kw),
            pick("p", "correct", "actions", "eta", "R_c", "R_w", "gamma"),
            {**P, "actions": hostile_actions, "eta": hostile_nonneg, **R, "gamma": hostile_nonneg},
            lambda kw, out: finite(out),
            None,
            _ca_r_violate,
        ),
        Case(
            "predicted_delta_q_pos",
            with_stats(ca.predicted_delta_q_pos),
            stats_args,
            {"s": hostile_s, "eta": hostile_nonneg, **R},
            lambda kw, out: finite(out),
            None,
            _ca_r_violate,
        ),
        Case(
            "predicted_delta_q_u_pos",
            with_stats(ca.predicted_delta_q_u_pos),
            stats_args,
            {"s": hostile_s, "eta": hostile_nonneg, **R},
            lambda kw, out: finite(out),
            None,
            _ca_r_violate,
        ),
        Case(
            "expected_p_pos_given_k",
            lambda kw: ca.expected_p_pos_given_k(**kw),
            pick("p", "correct", "k"),
            {**P, "k": hostile_int},
            lambda kw, out: in_unit(out),
        ),
        Case(
            "expected_p_neg_given_k",
            lambda kw: ca.expected_p_neg_given_k(**kw),
            policies().map(_ca_neg_k),
            {**P, "k": hostile_int, "N": hostile_int},
            lambda kw, out: in_unit(out),
            violate=_ca_k_gt_N,
        ),
        Case(
            "expected_s_r_given_k",
            lambda kw: ca.expected_s_r_given_k(**kw),
            policies().map(_ca_s_r),
            {**P, "k": hostile_int, "N": hostile_int, **R},
            lambda kw, out: finite(out),
            None,
            _ca_r_violate,
        ),
    ]


def _montecarlo_cases() -> list[Case]:
    mc = _mod("montecarlo")

    @st.composite
    def mc_valid(draw, with_tau=True, scalar=False):
        kw = draw(mu_tau_N(with_N=False)) if with_tau else {"mu": draw(prob)}
        if scalar:
            kw = {k: float(np.ravel(v)[0]) for k, v in kw.items()}
            if with_tau:
                kw["tau"] = min(kw["tau"], kw["mu"])
        kw["N"] = draw(st.integers(1, 10**6))
        kw["trials"] = draw(st.integers(1, 200))
        kw["rng"] = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        return kw

    H = {"mu": hostile_prob, "N": hostile_int, "trials": hostile_int, "rng": hostile_rng}

    def est_check(kw, out):
        return first_error(in_unit(out.estimate, "estimate"), finite(out.stderr, "stderr"))

    def regions_check(kw, out):
        counts = np.asarray(out)
        if counts.shape != (kw["trials"], 3) or (counts.sum(axis=1) != kw["N"]).any():
            return f"region counts of shape {counts.shape} not summing to N"
        return None

    return [
        Case(
            "simulate_group_regions",
            lambda kw: mc.simulate_group_regions(**kw),
            mc_valid(scalar=True),
            {**H, "tau": hostile_prob},
            regions_check,
            None,
            _tau_gt_mu,
        ),
        Case(
            "mc_p_active", lambda kw: mc.mc_p_active(**kw), mc_valid(with_tau=False), H, est_check
        ),
        Case(
            "mc_p_tail_miss",
            lambda kw: mc.mc_p_tail_miss(**kw),
            mc_valid(),
            {**H, "tau": hostile_prob},
            est_check,
            None,
            _tau_gt_mu,
        ),
    ]


def _checks_cases() -> list[Case]:
    ch = _mod("checks")
    floats = st.lists(st.floats(-1e300, 1e300), min_size=1, max_size=4).map(np.array)

    def chk(fn, **fixed):
        return lambda kw: fn("value", kw["value"], **fixed)

    def float_check(kw, out):
        x = np.asarray(out)
        return None if x.dtype == np.float64 and not np.isnan(x).any() else f"bad array {x!r}"

    def int_check(kw, out):
        x = np.asarray(out)
        return None if x.dtype == np.int64 and (x >= 0).all() else f"bad integers {x!r}"

    hostile_value = {"value": st.sampled_from(WRONG_TYPE + NOT_A_NUMBER)}
    return [
        Case(
            "as_float_array",
            chk(ch.as_float_array),
            st.fixed_dictionaries({"value": floats}),
            hostile_value,
            float_check,
        ),
        Case(
            "check_probability",
            chk(ch.check_probability),
            st.fixed_dictionaries({"value": scalar_or_array(prob, 3)}),
            {"value": hostile_prob},
            lambda kw, out: in_unit(out),
        ),
        Case(
            "check_group_size",
            chk(ch.check_group_size),
            st.fixed_dictionaries({"value": group_size}),
            {"value": hostile_group_size},
            lambda kw, out: finite(out),
        ),
        Case(
            "check_integer",
            chk(ch.check_integer, minimum=0),
            st.fixed_dictionaries({"value": st.integers(0, 2**63 - 1)}),
            {"value": hostile_int},
            int_check,
        ),
        Case(
            "check_nonnegative",
            chk(ch.check_nonnegative),
            st.fixed_dictionaries({"value": gamma_s}),
            {"value": hostile_nonneg},
            lambda kw, out: finite(out),
        ),
    ]


# ----------------------------------------------------------------------------------------------
# the closed-form CLI
# ----------------------------------------------------------------------------------------------

_TMP = tempfile.mkdtemp(prefix="fgrpo-fuzz-")
BAD_TOKENS = [
    "nan",
    "inf",
    "-inf",
    "-1",
    "1e400",
    "abc",
    "",
    ",",
    "0x10",
    "1e19",
    "True",
    "9" * 40,
    "0.3,nan",
    "1,,2",
    "2.5",
]
BAD_PATHS = [
    _TMP,
    f"{_TMP}/no/such/dir/x.png",
    f"{_TMP}/x.unknown",
    "/proc/x.png",
    "",
    f"{_TMP}/nul\0.png",
    "/etc/passwd/x.png",
    "/dev/null/x.png",
    f"{_TMP}/noext",
]


@st.composite
def cli_argv(draw, hostile: bool):
    """(argv, names of the flags made hostile)."""
    command = draw(st.sampled_from(["tail-miss", "peak", "pass-at-k"]))

    def lst(elem):
        return st.lists(elem, min_size=1, max_size=3).map(lambda v: ",".join(map(str, v)))

    if command == "pass-at-k":
        if draw(st.booleans()):
            flags = {"--p": draw(lst(st.floats(0, 1))), "--k": draw(lst(st.integers(1, 300)))}
        else:
            n = draw(st.integers(1, 10**9))
            flags = {
                "--samples": str(n),
                "--c": draw(lst(st.integers(0, n))),
                "--k": draw(lst(st.integers(1, min(n, 300)))),
            }
    else:
        mu = draw(st.floats(0.01, 0.99))
        flags = {"--mu": f"{mu:.4g}"}
        if draw(st.booleans()):
            flags["--rho"] = draw(lst(st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5])))
        else:
            flags["--tau"] = f"{mu * draw(st.floats(0.01, 0.9)):.4g}"
        if command == "tail-miss":
            if draw(st.booleans()):
                flags["--group-size"] = draw(lst(st.integers(1, 10**6)))
            else:
                flags["--max-group-size"] = str(draw(st.integers(1, 200)))
            if draw(st.integers(0, 9)) == 0:
                flags["--plot"] = f"{_TMP}/plot.png"
    bad = ()
    if hostile:
        name = draw(st.sampled_from(sorted(flags)))
        flags[name] = draw(st.sampled_from(BAD_PATHS if name == "--plot" else BAD_TOKENS))
        bad = (name,)
    argv = [command] + [x for kv in flags.items() for x in kv]
    if draw(st.booleans()):
        argv.append("--json")
    return argv, bad


def run_cli(argv):
    """(exit code, stdout, stderr) of ``fgrpo-theory argv``, in-process."""
    from fgrpo_theory.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _strict_json(text: str):
    def no_constant(name):
        raise ValueError(f"non-strict JSON token {name}")

    return json.loads(text, parse_constant=no_constant)


def _classify_cli_success(argv, bad, out: str) -> tuple[str, str]:
    """A call that exited 0: wrong when it accepted a hostile value, or printed --json that is
    not strict JSON or holds a probability out of [0, 1]."""
    if bad:
        return "wrong", f"hostile {bad} accepted"
    if "--json" not in argv:
        return "ok", ""
    try:
        rows = _strict_json(out)
    except ValueError as exc:
        return "wrong", f"--json output is not strict JSON: {exc}"
    for row in rows:
        for key in ("p_active", "p_tail_miss", "P_star", "pass_at_k"):
            if key in row and in_unit(row[key]):
                return "wrong", f"{key}={row[key]} out of range"
    return "ok", ""


def classify_cli(argv, bad) -> tuple[str, str]:
    try:
        with deadline(DEADLINE_S):
            code, out, err = run_cli(argv)
    except Hang as exc:
        return "hang", str(exc)
    except Exception as exc:  # noqa: BLE001 - a traceback is the finding
        return "crash", f"{type(exc).__name__}: {exc}"
    lines = err.strip().splitlines()
    if code == 0:
        return _classify_cli_success(argv, bad, out)
    if code != 2 or len(lines) != 1 or "Traceback" in err:
        return "crash", f"exit {code}, stderr {err[-300:]!r}"
    if bad and not any(b in lines[0] for b in bad):
        return "unnamed", f"error names none of {bad}: {lines[0]}"
    if not bad:
        return "rejected-valid", lines[0]
    return "ok", ""


# ----------------------------------------------------------------------------------------------
# classification of one library call
# ----------------------------------------------------------------------------------------------


def _names(message: str, names) -> bool:
    return any(
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names
    )


def classify(case: Case, mode: str, kwargs: dict, bad: tuple) -> tuple[str, str]:
    """('ok' | 'crash' | 'hang' | 'wrong' | 'unnamed' | 'rejected-valid', detail)."""
    try:
        with deadline(DEADLINE_S), np.errstate(all="ignore"):
            out = case.call(kwargs)
    except Hang as exc:
        return "hang", str(exc)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        if mode == "hostile":
            return ("ok", "") if _names(msg, bad) else ("unnamed", f"{type(exc).__name__}: {msg}")
        if mode == "edge" and _names(msg, kwargs):
            return "ok", ""
        if case.allowed_error and re.search(case.allowed_error, msg):
            return "ok", ""
        return "rejected-valid", f"{type(exc).__name__}: {msg}"
    except Exception as exc:  # noqa: BLE001 - any other type is the finding
        return "crash", f"{type(exc).__name__}: {str(exc)[:200]}"
    if mode == "hostile":
        return "wrong", f"hostile {bad} accepted, returned {str(out)[:80]}"
    try:
        problem = case.check(kwargs, out)
    except Exception as exc:  # noqa: BLE001 - a result the check cannot even read is wrong
        problem = f"unreadable result {type(exc).__name__}: {exc}"
    return ("wrong", problem) if problem else ("ok", "")


@st.composite
def examples(draw, case: Case):
    """(mode, kwargs, hostile argument names) for one call of ``case``."""
    modes = ["valid", "valid", "hostile", "hostile"] + (["edge"] if case.edge is not None else [])
    modes += ["violate"] if case.violate is not None else []
    mode = draw(st.sampled_from(modes))
    if mode == "edge":
        return "edge", draw(case.edge), ()
    kwargs = dict(draw(case.valid))
    if mode == "valid":
        return "valid", kwargs, ()
    if mode == "violate":
        kwargs, names = case.violate(draw, kwargs)
        return "hostile", kwargs, tuple(names)
    names = draw(
        st.lists(st.sampled_from(sorted(case.hostile)), min_size=1, max_size=2, unique=True)
    )
    for name in names:
        kwargs[name] = draw(case.hostile[name])
    return "hostile", kwargs, tuple(names)


def all_cases() -> dict[str, Case]:
    cases = (
        _tail_miss_cases()
        + _passk_cases()
        + _focal_cases()
        + _advantage_cases()
        + _categorical_cases()
        + _montecarlo_cases()
        + _checks_cases()
    )
    return {c.name: c for c in cases}


CASES = all_cases()
CLI_CASES = ["cli-valid", "cli-hostile"]


def _library_example(name: str, max_examples: int):
    case = CASES[name]

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(ex=examples(case))
    def run(ex):
        mode, kwargs, bad = ex
        outcome, detail = classify(case, mode, kwargs, bad)
        assert outcome == "ok", f"{name} [{mode}] {outcome}: {detail}\n  kwargs={kwargs!r:.400}"

    run()


def _cli_example(hostile: bool, max_examples: int):
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(ex=cli_argv(hostile))
    def run(ex):
        argv, bad = ex
        outcome, detail = classify_cli(argv, bad)
        assert outcome == "ok", f"fgrpo-theory {argv!r}: {outcome}: {detail}"

    run()


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_function(name):
    _library_example(name, FAST_EXAMPLES)


#: Values wrong for every argument of every case: a string, a bool, NaN.
_ALWAYS_BAD = ["x", True, float("nan")]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_argument_is_named_when_bad(name):
    """Deterministic complement of the random draws: each argument in turn gets each value of
    _ALWAYS_BAD, the others stay valid, and the error must name that argument."""
    case = CASES[name]

    @settings(
        max_examples=2,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(kwargs=case.valid)
    def run(kwargs):
        for arg in sorted(case.hostile):
            for bad in _ALWAYS_BAD:
                outcome, detail = classify(case, "hostile", {**kwargs, arg: bad}, (arg,))
                assert outcome == "ok", f"{name}({arg}={bad!r}): {outcome}: {detail}"

    run()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_public_function_many_examples(name):
    _library_example(name, SLOW_EXAMPLES)


# ----------------------------------------------------------------------------------------------
# measurement: counts instead of assertions
# ----------------------------------------------------------------------------------------------


def measure(per_case: int, cli_examples: int) -> dict:
    """Outcome counts per case (and in total) over ``per_case`` examples of every library case
    and ``cli_examples`` CLI invocations of each kind; nothing fails, everything is counted."""
    counts: dict[str, collections.Counter] = {}
    samples: dict[str, str] = {}

    crash_types = collections.Counter()

    def record(key, outcome, detail):
        counts.setdefault(key, collections.Counter())[outcome] += 1
        if outcome == "crash":
            crash_types[detail.split(":")[0].split(",")[0]] += 1
        if outcome != "ok":
            samples.setdefault(f"{key}: {outcome}", detail[:240])

    def campaign(name, case):
        @settings(
            max_examples=per_case,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(ex=examples(case))
        def run(ex):
            mode, kwargs, bad = ex
            record(name, *classify(case, mode, kwargs, bad))

        return run

    for name, case in CASES.items():
        try:
            campaign(name, case)()
        except Exception as exc:  # noqa: BLE001 - a case that cannot even be drawn is reported
            record(name, "harness-error", f"{type(exc).__name__}: {exc}")
    for hostile in (False, True):

        @settings(
            max_examples=cli_examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(ex=cli_argv(hostile))
        def run_c(ex):
            record("cli", *classify_cli(*ex))

        run_c()
    return {"counts": counts, "samples": samples, "crash_types": crash_types}


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-case", type=int, default=800, help="examples per library function")
    parser.add_argument(
        "--cli", type=int, default=240, help="CLI invocations, valid and hostile each"
    )
    parser.add_argument(
        "--memory-gib",
        type=float,
        default=6.0,
        help="address-space limit, so a runaway allocation is a MemoryError",
    )
    parser.add_argument("--samples", action="store_true", help="print one example per finding")
    args = parser.parse_args()
    import resource

    limit = int(args.memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import fgrpo_theory

    result = measure(args.per_case, args.cli)
    total = collections.Counter()
    lib = collections.Counter()
    for key, c in sorted(result["counts"].items()):
        total.update(c)
        if key != "cli":
            lib.update(c)
        bad = {k: v for k, v in c.items() if k != "ok"}
        findings = " ".join(f"{k}={v}" for k, v in sorted(bad.items()))
        print(f"{key:28s} calls={sum(c.values()):6d} {findings}")
    cli = result["counts"].get("cli", collections.Counter())
    print(f"source: {Path(fgrpo_theory.__file__).parent}")
    for label, c in (("library", lib), ("cli", cli)):
        print(
            f"{label}: calls={sum(c.values())} crashes={c['crash'] + c['hang']} "
            f"(hangs={c['hang']}) wrong={c['wrong']} unnamed-errors={c['unnamed']} "
            f"rejected-valid={c['rejected-valid']} "
            f"harness-errors={c['harness-error']}"
        )
    print("crash types: " + ", ".join(f"{k} {v}" for k, v in result["crash_types"].most_common()))
    if args.samples:
        for key, detail in sorted(result["samples"].items()):
            print(f"  {key}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
