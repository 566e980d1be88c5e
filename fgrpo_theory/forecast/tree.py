"""The forecast model's structure: every prompt's answers as a prefix tree whose edges carry a
per-prompt logit and a shared one (the categorical policy of paper Section 2.3, with its logits
tied the way an autoregressive model ties them).

A prompt x's outcomes are its K enumerated answers y_1..y_K (token sequences) and one
"malformed" outcome. The answers' tokens form a prefix tree: a node is a prefix, its children
are the next tokens and, where the prefix is itself an answer, END. The policy is

    pi(y | x) = prod over the edges (n -> c) on y's path of  softmax_c(z[x, n, .]),
    z[x, n, c] = theta[x, n, c] + phi[key(n, c)],

with theta per prompt and phi shared: ``key`` maps a (prefix, next token) pair to the same
shared entry in every prompt holding that prefix (``share="prefix"``, the default: the same
first number, then the same first number and operator, ...), as an autoregressive model's
weights tie the same continuation of the same prefix across prompts. ``share="none"`` gives
every edge its own parameter only (no phi: the per-prompt categorical model of Eq. 5).

**Malformed.** The base's mass outside the enumerated answers (``PromptAnswers.malformed_logp``)
becomes one extra child of the root, MALFORMED, whose shared key is the same in every prompt:
where a malformed completion leaves the answers' tree is unknown, so it leaves at the first
decision, and what training teaches about well-formedness in one prompt moves it in all.

**Initialisation.** With m(n) the base's mass of the answers below node n (the root's mass
includes the malformed outcome, so m(root) = 1), theta0[x, n, c] = log m(c) - log m(n) and
phi = 0: the initial policy is the base's distribution exactly. A node of zero mass gets
theta0 = 0 on its children (never reached, so any value reproduces the base).

**Pruning.** An edge that is its node's only child has probability 1 whatever its logit, and
gradient 0: it is left out, so paths hold only the edges of nodes with two or more children.

The build is vectorised: depth by depth, a node is the unique (parent node, token) pair
(``np.unique``), once with the prompt in the root (the tree) and once without (the shared keys).

Arrays are flat over all prompts, each prompt's edges, nodes and outcomes contiguous (its
outcomes: the K answers in ``PromptAnswers`` order, then MALFORMED). Letters: ``P`` prompts,
``E`` edges, ``M`` nodes, ``O`` outcomes, ``L`` path entries, ``S`` shared keys.

    >>> import numpy as np
    >>> from fgrpo_theory.forecast import PromptAnswers, build_forest
    >>> pa = PromptAnswers("p", ("1+2", "1+3"), (("1", "+", "2"), ("1", "+", "3")),
    ...                    np.log([0.5, 0.25]), np.array([True, False]))
    >>> f = build_forest([pa])
    >>> f.num_edges, f.num_shared     # root: "1", MALFORMED; node "1+": "2", "3"
    (4, 4)
    >>> f.key_of(2)
    (('1', '+'), '2')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from fgrpo_theory.forecast.answers import PromptAnswers

__all__ = ["END", "MALFORMED", "SHARING", "Forest", "build_forest"]

#: The end-of-answer child of a node that is itself an answer (not a string: no token equals it).
END = ("<end>",)
#: The malformed outcome, a child of every root.
MALFORMED = ("<malformed>",)
#: How edges share parameters across prompts: by (prefix, next token), or not at all.
SHARING = ("prefix", "none")


@dataclass(frozen=True)
class Forest:
    """All prompts' prefix trees, flattened (see the module docstring for the letters)."""

    prompt_ids: tuple
    """(P,) the prompts' ids, in input order."""
    edge_start: np.ndarray
    """(P + 1,) prompt i's edges are edge_start[i]:edge_start[i + 1]."""
    node_start: np.ndarray
    """(P + 1,) prompt i's nodes (those with >= 2 children)."""
    outcome_start: np.ndarray
    """(P + 1,) prompt i's outcomes: K_i answers, then MALFORMED (K_i + 1 in all)."""
    theta0: np.ndarray
    """(E,) the base's conditional log-probabilities log m(c) - log m(n)."""
    edge_key: np.ndarray
    """(E,) int, the edge's shared entry in phi (S: none, a slot that stays 0)."""
    edge_node: np.ndarray
    """(E,) int, the node the edge leaves (global node index)."""
    node_first_edge: np.ndarray
    """(M,) int, the node's first edge; its children are contiguous."""
    path_start: np.ndarray
    """(O + 1,) outcome o's path is path_edge[path_start[o]:path_start[o + 1]]."""
    path_edge: np.ndarray
    """(L,) int, global edge ids along the paths (kept edges only)."""
    correct: np.ndarray
    """(O,) bool, the verifier's verdict (MALFORMED: False)."""
    base_logp: np.ndarray
    """(O,) log pi_base(o | x) as given (answers' logp, then the malformed remainder)."""
    answer_index: dict
    """(prompt id, answer text) -> global outcome index."""
    num_shared: int
    """S, the number of shared entries."""
    vocab: tuple
    """Token id -> token (0: END, 1: MALFORMED)."""
    seq: np.ndarray
    """(O, D) each outcome's token ids, END (or MALFORMED) last, -1 after."""
    edge_outcome: np.ndarray
    """(E,) an outcome whose path holds the edge; with ``edge_depth`` it names the edge."""
    edge_depth: np.ndarray
    """(E,) the edge's depth (its prefix's length)."""

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_edges(self) -> int:
        return int(self.theta0.size)

    def key_of(self, edge: int) -> tuple:
        """Edge ``edge`` as its (prefix tokens, next token) pair (END / MALFORMED as such)."""
        row, d = self.seq[self.edge_outcome[edge]], int(self.edge_depth[edge])
        return tuple(self.vocab[t] for t in row[:d]), self.vocab[row[d]]

    def prompt_index(self, prompt_id: str) -> int:
        """The index of ``prompt_id`` (a ValueError naming it when absent)."""
        try:
            return self._index[prompt_id]
        except KeyError:
            raise ValueError(f"prompt {prompt_id!r} is not among the forecast's prompts") from None

    def __post_init__(self):
        object.__setattr__(self, "_index", {p: i for i, p in enumerate(self.prompt_ids)})


def _group_logsumexp(x: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """logsumexp of x (k,) per group id in 0..n-1 (-inf for an empty group)."""
    out = np.full(n, -np.inf)
    if group.size == 0:
        return out
    order = np.argsort(group, kind="stable")
    g, xs = group[order], x[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])  # (groups,)
    seg = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, g.size]))  # (k,)
    mx = np.maximum.reduceat(xs, starts)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        out[g[starts]] = mx + np.log(np.add.reduceat(np.exp(xs - mx[seg]), starts))
    return out


def _sequences(prompts: list[PromptAnswers]):
    """(seq (O, D), outcome_prompt (O,), logp (O,), correct (O,), vocab): every outcome's token
    ids with END appended (MALFORMED alone for the malformed outcome), -1 padded; C-level
    iteration (``map``, ``np.fromiter``) over the tokens, sorted vocabulary (same ids each run)."""
    P = len(prompts)
    K = np.fromiter((len(pa.answers) for pa in prompts), np.int64, count=P)
    answers = list(chain.from_iterable(pa.tokens for pa in prompts))
    words = sorted(set(chain.from_iterable(answers)))
    vocab = dict(zip(words, range(2, len(words) + 2), strict=True))
    n_tok = np.fromiter(map(len, answers), np.int64, count=len(answers))
    ids = np.fromiter(map(vocab.__getitem__, chain.from_iterable(answers)), np.int64,
                      count=int(n_tok.sum()))  # fmt: skip
    owner = np.repeat(np.arange(P), K + 1)  # (O,)
    is_mal = np.zeros(owner.size, dtype=bool)
    is_mal[np.cumsum(K + 1) - 1] = True
    length = np.ones(owner.size, dtype=np.int64)
    length[~is_mal] = n_tok + 1
    D = int(length.max())
    seq = np.full((owner.size, D), -1, dtype=np.int64)
    seq[is_mal, 0] = 1
    ans = np.flatnonzero(~is_mal)
    seq[ans, n_tok] = 0  # END
    rows = np.repeat(ans, n_tok)
    cols = np.arange(rows.size) - np.repeat(np.cumsum(n_tok) - n_tok, n_tok)
    seq[rows, cols] = ids
    logp = np.empty(owner.size)
    logp[~is_mal] = np.concatenate([pa.logp for pa in prompts]) if len(ans) else []
    lse = _group_logsumexp(logp[~is_mal], owner[~is_mal], P)  # (P,) the answers' mass
    bad = np.flatnonzero(lse > 1e-9)
    if bad.size:
        raise ValueError(
            f"prompt {prompts[bad[0]].prompt_id!r}: the answers' probabilities sum to "
            f"{np.exp(lse[bad[0]]):.12g} > 1"
        )
    with np.errstate(divide="ignore"):
        logp[is_mal] = np.where(lse >= 0, -np.inf, np.log(-np.expm1(np.minimum(lse, 0.0))))
    correct = np.zeros(owner.size, dtype=bool)
    correct[~is_mal] = np.concatenate([pa.correct for pa in prompts]) if len(ans) else []
    return seq, owner, logp, correct, (END, MALFORMED, *words)


def build_forest(prompts: Sequence[PromptAnswers], *, share: str = "prefix") -> Forest:
    """The flat prefix forest of ``prompts`` (distinct ids), edges keyed by (prefix, next
    token) across prompts (``share="prefix"``) or not shared (``share="none"``)."""
    prompts = list(prompts)
    for pa in prompts:
        if not isinstance(pa, PromptAnswers):
            raise TypeError(f"prompts must be PromptAnswers, got {type(pa).__name__}")
    if not prompts:
        raise ValueError("build_forest needs at least one prompt")
    if share not in SHARING:
        raise ValueError(f"share must be one of {SHARING}, got {share!r}")
    ids = tuple(pa.prompt_id for pa in prompts)
    if len(set(ids)) != len(ids):
        dup = next(p for p in ids if ids.count(p) > 1)
        raise ValueError(f"prompt {dup!r} is listed twice")
    seq, owner, logp, correct, vocab = _sequences(prompts)
    n_out, D = seq.shape
    V, P = len(vocab), len(prompts)

    # --- depth by depth: child node = unique (parent node, token), per prompt and across them
    node = owner.copy()  # (O,) current node of each outcome (roots 0..P-1)
    gnode = np.zeros(n_out, dtype=np.int64)  # the same without the prompt (shared prefixes)
    n_nodes, n_g = P, 1
    parents, children, gkeys, e_out, e_depth = [], [], [], [], []
    edge_at = np.full((n_out, D), -1, dtype=np.int64)  # (O, D) the edge at each depth
    node_lse = [_group_logsumexp(logp, owner, P)]  # m(root) includes the malformed outcome
    n_edges = 0
    for d in range(D):
        live = np.flatnonzero(seq[:, d] >= 0)
        key = node[live] * V + seq[live, d]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        gkey = gnode[live] * V + seq[live, d]
        guniq, ginv = np.unique(gkey, return_inverse=True)
        parents.append(uniq // V)
        children.append(n_nodes + np.arange(uniq.size))
        gkeys.append(gkey[first])
        e_out.append(live[first])
        e_depth.append(np.full(uniq.size, d))
        edge_at[live, d] = n_edges + inv
        node_lse.append(_group_logsumexp(logp[live], inv, uniq.size))
        node[live] = n_nodes + inv
        gnode[live] = n_g + ginv
        n_nodes, n_g, n_edges = n_nodes + uniq.size, n_g + guniq.size, n_edges + uniq.size
    ends = edge_at[seq == 0]  # (answers,) the END edges: one answer each
    if np.unique(ends).size < ends.size:
        o = np.flatnonzero((seq == 0).any(axis=1))[np.flatnonzero(np.bincount(ends)[ends] > 1)[0]]
        raise ValueError(f"prompt {ids[owner[o]]!r}: two answers have the same tokens")
    parent, child = np.concatenate(parents), np.concatenate(children)
    gkey, e_out, e_depth = np.concatenate(gkeys), np.concatenate(e_out), np.concatenate(e_depth)
    lse = np.concatenate(node_lse)  # (all nodes,) log m(n)
    node_prompt = np.concatenate((np.arange(P), np.zeros(n_nodes - P, dtype=np.int64)))
    node_prompt[child] = owner[e_out]

    # --- keep the edges of nodes with >= 2 children, grouped by prompt, then node, then token
    kept = np.bincount(parent, minlength=n_nodes)[parent] >= 2
    idx = np.flatnonzero(kept)
    idx = idx[np.lexsort((seq[e_out[idx], e_depth[idx]], parent[idx], node_prompt[parent[idx]]))]
    rank = np.full(parent.size, -1, dtype=np.int64)
    rank[idx] = np.arange(idx.size)
    par = parent[idx]
    with np.errstate(invalid="ignore"):
        theta0 = np.where(np.isfinite(lse[par]), lse[child[idx]] - lse[par], 0.0)
    new_node = np.r_[True, par[1:] != par[:-1]] if par.size else np.zeros(0, bool)
    edge_node = np.cumsum(new_node) - 1
    node_first = np.flatnonzero(new_node)
    edge_prompt = node_prompt[par]
    edge_start = np.searchsorted(edge_prompt, np.arange(P + 1))
    node_start = np.searchsorted(edge_prompt[node_first], np.arange(P + 1))
    if share == "prefix":
        keys, edge_key = np.unique(gkey[idx], return_inverse=True)
        S = keys.size
    else:
        S, edge_key = 0, np.zeros(idx.size, dtype=np.int64)

    # --- paths: each outcome's kept edges in depth order
    at = np.where(edge_at >= 0, rank[np.maximum(edge_at, 0)], -1)  # (O, D)
    path_edge = at[at >= 0]
    path_start = np.r_[0, np.cumsum((at >= 0).sum(axis=1))]
    outcome_start = np.r_[0, np.cumsum(np.bincount(owner, minlength=P))]
    answer_index = dict(zip(
        zip(chain.from_iterable([pa.prompt_id] * len(pa.answers) for pa in prompts),
            chain.from_iterable(pa.answers for pa in prompts), strict=True),
        np.flatnonzero(~np.isin(np.arange(n_out), outcome_start[1:] - 1)).tolist(),
        strict=True,
    ))  # fmt: skip
    return Forest(
        prompt_ids=ids,
        edge_start=edge_start.astype(np.int64),
        node_start=node_start.astype(np.int64),
        outcome_start=outcome_start.astype(np.int64),
        theta0=theta0,
        edge_key=edge_key.astype(np.int64),
        edge_node=edge_node.astype(np.int64),
        node_first_edge=node_first.astype(np.int64),
        path_start=path_start.astype(np.int64),
        path_edge=path_edge.astype(np.int64),
        correct=correct.astype(bool),
        base_logp=logp,
        answer_index=answer_index,
        num_shared=int(S),
        vocab=vocab,
        seq=seq,
        edge_outcome=e_out[idx],
        edge_depth=e_depth[idx],
    )
