"""The forecast policy's log-probabilities and exact policy gradient on a set of prompts
(vectorised over a ``Forest``: a gather and segment sums, no loop over prompts).

With z_e = theta0_e + delta_e + phi_{key(e)} on every edge e = (n -> c) of the gathered prompts,

    log p_e = z_e - logsumexp_{e' leaving n} z_e'          (one softmax per node)
    log pi(o | x) = sum over the edges e on o's path of log p_e

and for the surrogate J = sum_o c_o log pi(o | x) (c_o: the summed advantages of the draws of
outcome o, divided by the loss's normaliser) the exact gradient is

    dJ/dz_e = C_e - V_n p_e,   C_e = sum of c_o over the outcomes whose path holds e,
                               V_n = sum of C_e over n's children (the c-mass through n);
    dJ/d delta_e = dJ/dz_e,    dJ/d phi_s = sum of dJ/dz_e over the edges e with key s.

Letters: ``B`` prompts gathered, ``e`` their edges, ``m`` their nodes, ``o`` their outcomes,
``l`` their path entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fgrpo_theory.forecast.tree import Forest

__all__ = ["Gathered", "gather", "edge_logp", "outcome_logp", "policy_gradient", "log1m_mu"]


def _ranges(start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """concatenate(arange(start[i], stop[i]) for i) and the segment each entry came from."""
    n = stop - start
    seg = np.repeat(np.arange(n.size), n)
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    return np.arange(int(n.sum())) - first[seg] + start[seg], seg


def segment_sum(x: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Sum of x[first[i]:first[i] + count[i]] per segment (0 for an empty one); segments are
    consecutive and cover x in order."""
    if first.size == 0:
        return np.zeros(0)
    out = np.add.reduceat(np.append(x, 0.0), first)
    return np.where(count > 0, out, 0.0)


@dataclass(frozen=True)
class Gathered:
    """The flat arrays of a set of B prompts, re-indexed locally (built by ``gather``)."""

    prompts: np.ndarray
    """(B,) global prompt indices."""
    edges: np.ndarray
    """(e,) global edge ids."""
    keys: np.ndarray
    """(e,) shared slot of each edge."""
    theta0: np.ndarray
    """(e,) the base's conditional log-probabilities."""
    edge_node: np.ndarray
    """(e,) local node of each edge."""
    node_first: np.ndarray
    """(m,) local first edge of each node."""
    outcomes: np.ndarray
    """(o,) global outcome ids."""
    outcome_first: np.ndarray
    """(B,) local first outcome of each prompt."""
    outcome_count: np.ndarray
    """(B,) outcomes per prompt (K + 1)."""
    path: np.ndarray
    """(l,) local edge ids along the outcomes' paths."""
    path_first: np.ndarray
    """(o,) local first path entry of each outcome."""
    path_count: np.ndarray
    """(o,) path length of each outcome."""


def gather(f: Forest, prompts) -> Gathered:
    """The arrays of ``prompts`` (global indices, (B,)) from the forest ``f``."""
    prompts = np.asarray(prompts, dtype=np.int64)
    e_lo, e_hi = f.edge_start[prompts], f.edge_start[prompts + 1]
    edges, e_seg = _ranges(e_lo, e_hi)
    e_off = np.concatenate(([0], np.cumsum(e_hi - e_lo)[:-1]))  # (B,) local first edge
    shift = e_off - e_lo  # global edge id + shift[b] = local edge id
    nodes, n_seg = _ranges(f.node_start[prompts], f.node_start[prompts + 1])
    n_off = np.concatenate(([0], np.cumsum(f.node_start[prompts + 1] - f.node_start[prompts])))
    node_shift = n_off[:-1] - f.node_start[prompts]
    o_lo, o_hi = f.outcome_start[prompts], f.outcome_start[prompts + 1]
    outcomes, o_seg = _ranges(o_lo, o_hi)
    p_lo, p_hi = f.path_start[outcomes], f.path_start[outcomes + 1]
    path_global, l_seg = _ranges(p_lo, p_hi)
    path_count = p_hi - p_lo
    return Gathered(
        prompts=prompts,
        edges=edges,
        keys=f.edge_key[edges],
        theta0=f.theta0[edges],
        edge_node=f.edge_node[edges] + node_shift[e_seg],
        node_first=f.node_first_edge[nodes] + shift[n_seg],
        outcomes=outcomes,
        outcome_first=np.concatenate(([0], np.cumsum(o_hi - o_lo)[:-1])),
        outcome_count=o_hi - o_lo,
        path=f.path_edge[path_global] + shift[o_seg[l_seg]],
        path_first=np.concatenate(([0], np.cumsum(path_count)[:-1])),
        path_count=path_count,
    )


def edge_logp(g: Gathered, delta: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """log p_e (e,) of the gathered edges under z = theta0 + delta + phi[key]."""
    z = g.theta0 + delta[g.edges] + phi[g.keys]  # (e,)
    if z.size == 0:
        return z
    mx = np.maximum.reduceat(z, g.node_first)  # (m,)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        lse = mx + np.log(np.add.reduceat(np.exp(z - mx[g.edge_node]), g.node_first))  # (m,)
    return z - lse[g.edge_node]


def outcome_logp(g: Gathered, logp_e: np.ndarray) -> np.ndarray:
    """log pi(o | x) (o,): the sum of log p_e along each outcome's path."""
    return segment_sum(logp_e[g.path], g.path_first, g.path_count)


def policy_gradient(
    g: Gathered, logp_e: np.ndarray, coef: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(dJ/dz (e,), V (m,)) for J = sum_o coef_o log pi(o | x), coef (o,): dJ/dz_e = C_e - V_n
    p_e (module docstring). An edge whose node has V_n = 0 and C_e = 0 gets no gradient."""
    C = np.bincount(g.path, weights=np.repeat(coef, g.path_count), minlength=g.edges.size)  # (e,)
    if C.size == 0:
        return C, np.zeros(0)
    V = np.add.reduceat(C, g.node_first)  # (m,)
    return C - V[g.edge_node] * np.exp(logp_e), V


def log1m_mu(g: Gathered, logp_o: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """log(1 - mu(x)) (B,) as the logsumexp of the incorrect outcomes' log-probabilities (the
    malformed one included), so pass@k = 1 - exp(k log(1 - mu)) keeps its digits as mu -> 1."""
    x = np.where(correct, -np.inf, logp_o)  # (o,)
    mx = np.maximum.reduceat(x, g.outcome_first)  # (B,) every prompt has its MALFORMED outcome
    mx = np.where(np.isfinite(mx), mx, 0.0)
    seg = np.repeat(np.arange(g.prompts.size), g.outcome_count)
    with np.errstate(divide="ignore"):
        return mx + np.log(np.add.reduceat(np.exp(x - mx[seg]), g.outcome_first))
