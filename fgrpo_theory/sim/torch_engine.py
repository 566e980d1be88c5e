"""The batched torch engine of the categorical simulator (paper Section 5.1, Appendix J, Fig. 2):
many (N, gamma, seed) runs as one batch of (R, K) tensors, on a GPU when there is one.

It computes what the dense engine (``fgrpo_theory.sim.dense``) computes, for every option: the
ratio or Eq. 5 surrogate, centred / GRPO / raw advantages, the weighting's table g = w(X/N)
(the focal (1 - X/N)^gamma, Eq. 11-13, by default; ``group.focal_table``), SGD or
bias-corrected Adam, and the same records (Q_pos, M_ret
Eq. 26, entropy, Q_u,pos, tau, the tail miss beside Lemma 3.1). Its draws are torch's: each run
has its own ``torch.Generator`` seeded from (seed, N), and the N draws of a run invert its
cumulative probabilities (``torch.searchsorted`` on a row of the batch), so the samples cannot
match numpy's bit for bit; the results agree with the numpy engines within seed noise (tested
on CPU torch). torch is imported only when this engine is asked for.

    >>> from fgrpo_theory.sim.config import SimConfig
    >>> from fgrpo_theory.sim.torch_engine import simulate_runs_torch   # doctest: +SKIP
    >>> recs = simulate_runs_torch(SimConfig(actions=500, correct=40, steps=5),
    ...                            [(4, 0.0, 0), (16, 1.0, 0)], device="cpu")  # doctest: +SKIP
    >>> recs[(16, 1.0, 0)]["m_ret"].shape                                     # doctest: +SKIP
    (6,)

Shapes: ``R`` runs in a batch, ``K`` actions, ``M`` the largest group of the batch, ``T``
steps.
"""

from __future__ import annotations

import numpy as np

from fgrpo_theory.sim.config import SimConfig
from fgrpo_theory.sim.group import (
    GROUP_RECORDS,
    GRPO_EPS,
    POLICY_RECORDS,
    finish_records,
    focal_table,
)

#: Elements (runs x max(K, largest N)) per batch; larger sweeps run in several batches.
BATCH_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 28}


def _device(torch, device):
    """The torch.device to run on: ``device``, or cuda when available, else cpu; a ValueError
    for a name torch does not know or a device it cannot use."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"device must be a torch device such as 'cpu' or 'cuda', got device={device!r}"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: torch sees no CUDA device here")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got device={device!r}")
    return dev


def check_device(device) -> None:
    """A ValueError unless torch can run on ``device`` (None: the default device)."""
    try:
        import torch
    except ImportError:
        raise ValueError("engine='torch' needs torch (pip install 'fgrpo[llm]')") from None
    _device(torch, device)


def _seed(seed: int, N: int) -> int:
    """A 63-bit torch seed from (seed, N), as numpy's generators are seeded from [seed, N]."""
    a, b = np.random.SeedSequence([seed, N]).generate_state(2, dtype=np.uint32)
    return (int(a) << 31) ^ int(b)


def _batch(cfg: SimConfig, runs, torch, dev, progress) -> dict:
    """Records of the runs [(N, gamma, seed), ...] simulated together on ``dev``."""
    K, C, E, T = cfg.actions, cfg.correct, cfg.rare, cfg.steps
    R_c, R_w = cfg.reward_correct, cfg.reward_wrong
    R = len(runs)
    f64 = dict(dtype=torch.float64, device=dev)
    Ns = torch.tensor([n for n, _, _ in runs], **f64)  # (R,)
    Nmax = max(n for n, _, _ in runs)
    g_table = torch.zeros((R, Nmax + 1), **f64)  # (R, Nmax + 1) g / N per X (the weighting's)
    for r, (n, g, _) in enumerate(runs):
        g_table[r, : n + 1] = torch.as_tensor(focal_table(n, g, cfg.weighting)[0], **f64)
    gens = []
    for n, _, s in runs:
        gen = torch.Generator(device=dev)
        gen.manual_seed(_seed(s, n))
        gens.append(gen)
    z = torch.tensor(cfg.logits0(), **f64).expand(R, K).clone()  # (R, K) logits
    p0 = torch.softmax(z[0], dim=0)[:C]  # (C,)
    Q0 = p0.sum()
    adam = cfg.optimizer == "adam"
    m, v = torch.zeros_like(z), torch.zeros_like(z)
    b1, b2 = cfg.adam_betas
    rec = {k: torch.empty((R, T + 1), **f64) for k in POLICY_RECORDS}
    rec.update({k: torch.empty((R, T), **f64) for k in ("q_u_pos", "mu_hat")})
    rec["tail_miss"] = torch.empty((R, T), dtype=torch.bool, device=dev)
    u = torch.full((R, Nmax), 2.0, **f64)  # (R, M) uniforms, pad 2
    rows = torch.arange(R, device=dev)[:, None] * (K + 1)  # (R, 1) row offsets
    valid = torch.arange(Nmax, device=dev)[None, :] < Ns[:, None]  # (R, M)

    def record(t):
        logp = torch.log_softmax(z, dim=1)  # (R, K)
        p = logp.exp()
        pc = p[:, :C]
        rec["q_pos"][:, t] = pc.sum(dim=1)
        rec["tau"][:, t] = pc[:, 1 : 1 + E].sum(dim=1)
        rec["m_ret"][:, t] = 1.0 - (p0 - pc).clamp_min(0.0).sum(dim=1) / Q0  # Eq. 26
        rec["entropy"][:, t] = -(p * logp).sum(dim=1)
        return p

    for t in range(T):
        p = record(t)
        # --- sample: N_r draws per run by inverting its cumulative probabilities
        cdf = p.cumsum(dim=1)  # (R, K)
        for r, (n, _, _) in enumerate(runs):
            u[r, :n] = torch.rand(n, generator=gens[r], **f64) * cdf[r, -1]
        idx = torch.searchsorted(cdf, u, right=True).clamp_max_(K - 1)
        idx = torch.where(valid, idx, K)  # padding -> column K
        counts = torch.zeros(R * (K + 1), **f64)
        counts.index_add_(0, (idx + rows).reshape(-1), torch.ones(R * Nmax, **f64))
        counts = counts.view(R, K + 1)[:, :K]  # (R, K)
        # --- score and record the group
        X = counts[:, :C].sum(dim=1)  # (R,)
        sampled = counts > 0
        rec["mu_hat"][:, t] = X / Ns
        rec["tail_miss"][:, t] = (X > 0) & (X < Ns) & ~sampled[:, 1 : 1 + E].any(dim=1)
        rec["q_u_pos"][:, t] = rec["q_pos"][:, t] - (p[:, :C] * sampled[:, :C]).sum(dim=1)
        # --- advantages (closed form, as group.group_advantages) and the weight g / N
        if cfg.advantage == "raw":
            r_c, r_w = torch.full_like(X, R_c), torch.full_like(X, R_w)
        else:
            mean = (X * R_c + (Ns - X) * R_w) / Ns
            r_c, r_w = R_c - mean, R_w - mean
            if cfg.advantage == "grpo":
                var = (R_c - R_w) ** 2 * X * (Ns - X) / (Ns * (Ns - 1).clamp_min(1.0))
                scale = 1.0 / (var.sqrt() + GRPO_EPS)
                r_c, r_w = r_c * scale, r_w * scale
        w = g_table.gather(1, X.long()[:, None])[:, 0]  # (R,) g / N = w(X / N) / N
        r_a = torch.empty_like(p)  # (R, K) r of each action
        r_a[:, :C] = r_c[:, None]
        r_a[:, C:] = r_w[:, None]
        # --- ascent direction G (R, K)
        if cfg.surrogate == "ratio":
            G = counts * r_a
            if cfg.advantage == "raw":
                G -= p * (X * r_c + (Ns - X) * r_w)[:, None]
        else:  # Eq. 5, distinct actions
            S_r = (p * sampled * r_a).sum(dim=1, keepdim=True)
            G = p * (sampled * r_a - S_r)
        G *= w[:, None]
        # --- step (ascent)
        if adam:
            m.mul_(b1).add_(G, alpha=1.0 - b1)
            v.mul_(b2).addcmul_(G, G, value=1.0 - b2)
            denom = (v / (1.0 - b2 ** (t + 1))).sqrt_().add_(cfg.adam_eps)
            z.addcdiv_(m, denom, value=cfg.lr / (1.0 - b1 ** (t + 1)))
        else:
            z.add_(G, alpha=cfg.lr)
        if progress is not None:
            progress(R)
    record(T)
    out = {k: a.cpu().numpy() for k, a in rec.items()}
    out["p_tail_miss"] = np.empty((R, T))
    finished = {}
    for r, (n, g, s) in enumerate(runs):
        one = finish_records({k: out[k][r : r + 1] for k in out}, n, lr=cfg.lr)
        finished[n, g, s] = {k: one[k][0] for k in POLICY_RECORDS + GROUP_RECORDS}
    return finished


def simulate_runs_torch(cfg: SimConfig, runs, *, device=None, progress=None, on_run=None) -> dict:
    """Records {(N, gamma, seed): {key: (T + 1,) or (T,)}} of the ``runs``, simulated in
    batches of as many runs as fit ``BATCH_ELEMENTS``; ``on_run(key, records)`` is called as
    each batch finishes, ``progress(R)`` after every step of a batch of R runs."""
    try:
        import torch
    except ImportError:
        raise ValueError("engine='torch' needs torch (pip install 'fgrpo[llm]')") from None
    dev = _device(torch, device)
    runs = sorted(runs, key=lambda r: -r[0])  # similar N together
    limit = BATCH_ELEMENTS[dev.type]
    out, batch = {}, []
    for i, run in enumerate(runs):
        batch.append(run)
        width = max(cfg.actions, max(n for n, _, _ in batch))
        last = i == len(runs) - 1
        if last or (len(batch) + 1) * max(width, runs[i + 1][0]) > limit:
            done = _batch(cfg, batch, torch, dev, progress)
            for key, rec in done.items():
                out[key] = rec
                if on_run is not None:
                    on_run(key, rec)
            batch = []
    return out
