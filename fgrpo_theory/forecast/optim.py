"""The forecast's optimizer: SGD or AdamW on the rows of a parameter table that receive a
gradient this step (the LLM trainer's optimizer, applied to the categorical model's tables).

Ascent on the surrogate J with gradient G, step size lr_t = lr * min(1, (t + 1) / warmup) (the
LLM trainer's linear warm-up):

    sgd:    w += lr_t G
    adamw:  w *= 1 - lr_t lambda;   m = b1 m + (1 - b1) G;   v = b2 v + (1 - b2) G^2;
            w += lr_t m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - b1^k), v_hat = v / (1 - b2^k)

(torch.optim.AdamW's update). **Lazy rows**: a row's moments and its count k advance only at the
steps where it receives a gradient (torch.optim.SparseAdam's rule), so a prompt's parameters move
when the prompt is trained and stay put between its visits; decay pulls a row toward its
initial value (the tables hold the deviation from the base, not the base's logits, whose decay
toward 0 has no counterpart in an LLM, where weights decay, not logits).

    >>> import numpy as np
    >>> opt = Optimizer("adam")
    >>> w, state = np.zeros(3), opt.state(3)
    >>> opt.step(w, state, np.array([0, 2]), np.array([0.5, -2.0]), lr=0.1)
    >>> w.round(6).tolist()                                 # first Adam step: lr * sign(G)
    [0.1, 0.0, -0.1]
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["Optimizer", "OPTIMIZERS"]

OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class Optimizer:
    """The optimizer of a forecast run (defaults: the LLM trainer's AdamW, with no decay)."""

    kind: str = "adam"
    """'adam' (AdamW, lazy rows) or 'sgd'."""
    betas: tuple = (0.9, 0.999)
    """Adam (b1, b2)."""
    eps: float = 1e-8
    """Adam epsilon."""
    weight_decay: float = 0.0
    """Decoupled decay lambda, toward the base (the deviation tables decay to 0)."""
    warmup_steps: int = 0
    """Linear warm-up over this many steps (0 or 1: none), as the LLM trainer's scheduler."""

    def __post_init__(self):
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.kind!r}")
        b = tuple(self.betas)
        if len(b) != 2 or not all(isinstance(x, numbers.Real) and 0 <= x < 1 for x in b):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        object.__setattr__(self, "betas", tuple(float(x) for x in b))
        for name in ("eps", "weight_decay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int):
            raise TypeError(f"warmup_steps must be an int, got {self.warmup_steps!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")

    def schedule(self, t: int) -> float:
        """The lr factor at step t = 0, 1, ...: min(1, (t + 1) / warmup)."""
        return min(1.0, (t + 1) / max(self.warmup_steps, 1))

    def state(self, size: int) -> dict:
        """Fresh moments (m, v) and per-row step counts k for a table of ``size`` rows."""
        if self.kind == "sgd":
            return {}
        return {"m": np.zeros(size), "v": np.zeros(size), "k": np.zeros(size, dtype=np.int64)}

    def step(self, w: np.ndarray, state: dict, idx: np.ndarray, G: np.ndarray, *, lr: float):
        """In place: ascend the rows ``idx`` (distinct) of ``w`` along G (same shape as idx)."""
        if self.weight_decay:
            w[idx] *= 1.0 - lr * self.weight_decay
        if self.kind == "sgd":
            w[idx] += lr * G
            return
        b1, b2 = self.betas
        k = state["k"][idx] + 1
        state["k"][idx] = k
        m = b1 * state["m"][idx] + (1.0 - b1) * G
        v = b2 * state["v"][idx] + (1.0 - b2) * G * G
        state["m"][idx], state["v"][idx] = m, v
        m_hat, v_hat = m / (1.0 - b1**k), v / (1.0 - b2**k)
        w[idx] += lr * m_hat / (np.sqrt(v_hat) + self.eps)
