"""The forecast model's structure: every prompt's answers as a prefix tree whose edges carry a
per-prompt logit and a shared one (the categorical policy of paper Section 2.3, with its logits
tied the way an autoregressive model ties them).

A prompt x's outcomes are its K enumerated answers y_1..y_K (token sequences) and one
"malformed" outcome. The answers' tokens form a prefix tree: a node is a prefix, its children
are the next tokens and, where the prefix is itself an answer, END. The policy is

    pi(y | x) = prod over the edges (n -> c) on y's path of  softmax_c(z[x, n, .]),
    z[x, n, c] = theta[x, n, c] + phi[key(n, c)],

with theta per prompt and phi shared: ``key`` maps a (prefix, next token) pair to the same
shared entry in every prompt holding that prefix (``prefix_key``, the default: the same first
number, then the same first number and operator, ...), as an autoregressive model's weights
tie the same continuation of the same prefix across prompts. ``untied`` gives every edge its
own parameter (no phi: the per-prompt categorical model of Eq. 5).

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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fgrpo_theory.forecast.answers import PromptAnswers

__all__ = ["END", "MALFORMED", "Forest", "build_forest", "prefix_key", "untied"]

#: The end-of-answer child of a node that is itself an answer (not a string: no token equals it).
END = ("<end>",)
#: The malformed outcome, a child of every root.
MALFORMED = ("<malformed>",)


def prefix_key(prefix: tuple, child) -> tuple:
    """The shared key of edge (prefix -> child): the pair itself, so every prompt holding this
    prefix and continuation shares one phi entry (an autoregressive model's tying)."""
    return (prefix, child)


def untied(prefix: tuple, child) -> None:
    """No shared key: the edge has only its per-prompt logit."""
    return None


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
    shared_keys: tuple
    """(S,) the shared keys, in phi's order."""

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_edges(self) -> int:
        return int(self.theta0.size)

    @property
    def num_shared(self) -> int:
        return len(self.shared_keys)

    def prompt_index(self, prompt_id: str) -> int:
        """The index of ``prompt_id`` (a ValueError naming it when absent)."""
        try:
            return self._index[prompt_id]
        except KeyError:
            raise ValueError(f"prompt {prompt_id!r} is not among the forecast's prompts") from None

    def __post_init__(self):
        object.__setattr__(self, "_index", {p: i for i, p in enumerate(self.prompt_ids)})


def _one_tree(pa: PromptAnswers):
    """Prompt ``pa``'s tree: (edges as (node prefix, child, theta0)) grouped by node, and each
    outcome's path as a list of (node prefix, child) pairs, pruned of single-child nodes."""
    children: dict[tuple, list] = {(): []}
    mass: dict[tuple, list] = {(): []}  # node prefix -> the log-masses of its answers
    for k, toks in enumerate(pa.tokens):
        prefix = ()
        for tok in toks:
            nxt = prefix + (tok,)
            if nxt not in children:
                children[nxt] = []
                children[prefix].append(tok)
                mass[nxt] = []
            mass[prefix].append(pa.logp[k])
            prefix = nxt
        if END in children[prefix]:
            raise ValueError(f"prompt {pa.prompt_id!r}: two answers have the same tokens {toks}")
        children[prefix].append(END)
        mass[prefix].append(pa.logp[k])
    children[()].append(MALFORMED)
    mal = pa.malformed_logp
    log_m = {n: _logsumexp(v) for n, v in mass.items()}
    log_m[()] = _logsumexp(mass[()] + [mal])
    answer_logp = dict(zip(pa.tokens, pa.logp, strict=True))
    edges = []  # (node, child, theta0)
    for node, kids in children.items():
        if len(kids) < 2:
            continue
        for c in kids:
            if c is END:
                lm = answer_logp[node]
            elif c is MALFORMED:
                lm = mal
            else:
                lm = log_m[node + (c,)]
            t0 = 0.0 if log_m[node] == -math.inf else lm - log_m[node]
            edges.append((node, c, t0))
    kept = {(n, c) for n, c, _ in edges}
    paths = []
    for toks in pa.tokens:
        steps = [(toks[:i], toks[i]) for i in range(len(toks))] + [(toks, END)]
        paths.append([s for s in steps if s in kept])
    paths.append([s for s in [((), MALFORMED)] if s in kept])
    return edges, paths


def _logsumexp(values) -> float:
    if not values:
        return -math.inf
    m = max(values)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(v - m) for v in values))


def build_forest(
    prompts: Sequence[PromptAnswers], *, share: Callable[[tuple, object], object] = prefix_key
) -> Forest:
    """The flat prefix forest of ``prompts`` (distinct ids), edges keyed by ``share(prefix,
    child)`` (``prefix_key``: the autoregressive tying; ``untied``: no shared part)."""
    prompts = list(prompts)
    for pa in prompts:
        if not isinstance(pa, PromptAnswers):
            raise TypeError(f"prompts must be PromptAnswers, got {type(pa).__name__}")
    ids = tuple(pa.prompt_id for pa in prompts)
    if len(set(ids)) != len(ids):
        dup = next(p for p in ids if ids.count(p) > 1)
        raise ValueError(f"prompt {dup!r} is listed twice")
    if not callable(share):
        raise TypeError(f"share must be a function (prefix, child) -> key, got {share!r}")
    keys: dict = {}
    theta0, edge_key, edge_node, node_first, path_edge = [], [], [], [], []
    edge_start, node_start, outcome_start, path_start = [0], [0], [0], [0]
    correct, base_logp, answer_index = [], [], {}
    for pa in prompts:
        edges, paths = _one_tree(pa)
        local: dict = {}
        prev = None
        for n, c, t0 in edges:
            if n != prev:  # edges come grouped by node
                node_first.append(len(theta0))
                prev = n
            local[(n, c)] = len(theta0)
            theta0.append(t0)
            k = share(n, c)
            edge_key.append(-1 if k is None else keys.setdefault(k, len(keys)))
            edge_node.append(len(node_first) - 1)
        for path in paths:
            path_edge.extend(local[s] for s in path)
            path_start.append(len(path_edge))
        o0 = len(correct)
        for k, text in enumerate(pa.answers):
            answer_index[(pa.prompt_id, text)] = o0 + k
        correct.extend(pa.correct.tolist() + [False])
        base_logp.extend(pa.logp.tolist() + [pa.malformed_logp])
        edge_start.append(len(theta0))
        node_start.append(len(node_first))
        outcome_start.append(len(correct))
    S = len(keys)
    edge_key = np.array(edge_key, dtype=np.int64)
    edge_key[edge_key < 0] = S  # the unshared slot, phi[S] = 0 always
    i64 = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return Forest(
        prompt_ids=ids,
        edge_start=i64(edge_start),
        node_start=i64(node_start),
        outcome_start=i64(outcome_start),
        theta0=np.array(theta0, dtype=np.float64),
        edge_key=edge_key,
        edge_node=i64(edge_node),
        node_first_edge=i64(node_first),
        path_start=i64(path_start),
        path_edge=i64(path_edge),
        correct=np.array(correct, dtype=bool),
        base_logp=np.array(base_logp, dtype=np.float64),
        answer_index=answer_index,
        shared_keys=tuple(keys),
    )
