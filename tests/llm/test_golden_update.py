"""Golden one-step test: the trainer's parameter update equals the one computed by hand.

The loop (``fgrpo_llm.trainer.train``) runs one real step on fixed rollouts: three groups of
N = 4 completions with X = 1, 2, 3 correct (so the focal weights (1 - X/N)^gamma differ), of
different lengths (so a per-sequence mean differs from the token mean), and recorded old
log-probabilities shifted away from the policy's (so the ratios r = pi_theta / pi_old spread over
[0.3, 9] and both PPO clip sides and the CISPO cap are active). The expected update is built here
from the paper's formulas alone, without the package's advantage or loss code:

    A_i = (1 - X/N)^gamma * (R_i - mean R) / (std_Bessel R + 1e-6)                  (Eq. 11-13)
    GRPO / DAPO:  l_t = -min(r_t A, clip(r_t, 1 - eps_low, 1 + eps_high) A)
    CISPO:        l_t = -sg(clamp(r_t, 1 - 1, 1 + 5)) A log pi_theta(o_t)
    L = sum_t l_t / (number of completion tokens)                                  (token mean)

then one AdamW step by hand. Adam's epsilon is set to 1 so that the first step is close to
linear in the gradient (with the default 1e-8 it is nearly sign(gradient), blind to a rescaling).
Mutations this catches (each checked by hand when the test was written): gamma ignored, the
weight applied to another group, advantages on the wrong rows, a sign flip, the clip bounds
swapped, the token-mean denominator changed.
"""

from __future__ import annotations

import json

import pytest
import torch

from fgrpo_llm.config import TrainConfig
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.rollout import RolloutBatch
from fgrpo_llm.tasks.base import Problem

N = 4
#: prompt -> its N completions; a completion is correct when it starts with "1" (X = 1, 2, 3).
COMPLETIONS = {
    "0=:": ["1+2", "2", "33", "4*5-6"],
    "1=:": ["12", "1", "3+3+3", "7"],
    "2=:": ["1", "1*1*9", "19", "8-2"],
}
LR, WD, ADAM_EPS, BETAS = 1e-2, 0.01, 1.0, (0.9, 0.999)


class FixedTask:
    """Three prompts; a completion is correct when it starts with "1"; reward 1 / 0."""

    name = "fixed"
    splits = ("train",)

    def problems(self, split):
        return [
            Problem(id=f"p{i}", prompt=p, answer="1", split="train")
            for i, p in enumerate(COMPLETIONS)
        ]

    def is_correct(self, problem, completion):
        return completion.startswith("1")

    def reward(self, problem, completion):
        return 1.0 if self.is_correct(problem, completion) else 0.0


def _fixed_batch(model, tok, prompts: list[str]) -> RolloutBatch:
    """The rollouts of ``prompts`` (rows grouped by prompt), with old log-probs = the policy's
    log-probs at temperature 1 plus a fixed shift per token."""
    vocab = tok.get_vocab()
    rows = [
        (tok(p)["input_ids"], [vocab[c] for c in comp] + [tok.eos_token_id])
        for p in prompts
        for comp in COMPLETIONS[p]
    ]
    P = len(rows[0][0])
    assert all(len(r[0]) == P for r in rows)  # equal prompt lengths: no left padding
    T = max(len(r[1]) for r in rows)
    M = len(rows)
    seq = torch.full((M, P + T), tok.pad_token_id, dtype=torch.long)
    attn = torch.zeros((M, P + T), dtype=torch.bool)
    comp = torch.zeros((M, P + T), dtype=torch.bool)
    for m, (p_ids, c_ids) in enumerate(rows):
        seq[m, : P + len(c_ids)] = torch.tensor(p_ids + c_ids)
        attn[m, : P + len(c_ids)] = True
        comp[m, P : P + len(c_ids)] = True
    with torch.no_grad():
        logp = _token_logprobs(model, seq, attn)
    shift = torch.empty(M, P + T).uniform_(-2.2, 1.2, generator=torch.Generator().manual_seed(7))
    # r = exp(-shift) on the completion
    old = torch.where(comp, logp + shift, torch.zeros_like(logp))
    return RolloutBatch(
        sequences=seq,
        attention_mask=attn,
        completion_mask=comp,
        old_logprobs=old,
        prompt_index=torch.arange(len(prompts)).repeat_interleave(N),
        completions=[c for p in prompts for c in COMPLETIONS[p]],
        prompt_length=P,
        num_samples=N,
        finished=torch.ones(M, dtype=torch.bool),
    )


def _token_logprobs(model, seq, attn):
    """log pi(token_t | <t) per column (column 0: 0), written out here (no left padding)."""
    logits = model(input_ids=seq, attention_mask=attn.long()).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, seq[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros_like(logp[:, :1]), logp], dim=1)


def _surrogate(algo, logp, old, A, mask):
    """l_t per token (M, L), written out: GRPO / DAPO's clipped ratio term, CISPO's capped,
    detached weight times log pi_theta (r = 1 off the mask)."""
    r = torch.exp(torch.where(mask, logp - old, torch.zeros_like(logp)))
    if algo == "cispo":
        return -torch.clamp(r.detach(), 0.0, 6.0) * A * logp
    hi = 0.28 if algo == "dapo" else 0.2
    return -torch.minimum(r * A, torch.clamp(r, 0.8, 1.0 + hi) * A)


def _expected_parameters(
    base_dir, batch: RolloutBatch, prompts: list[str], *, algo: str, gamma: float
):
    model, _ = load_model_and_tokenizer(base_dir)
    model.train()
    task = FixedTask()
    R = torch.tensor([[task.reward(None, c) for c in COMPLETIONS[p]] for p in prompts])  # (B, N)
    X = (
        torch.tensor([[task.is_correct(None, c) for c in COMPLETIONS[p]] for p in prompts])
        .sum(1)
        .double()
    )
    mean = R.mean(1, keepdim=True)
    std = ((R - mean) ** 2).sum(1, keepdim=True).div(N - 1).sqrt()
    A = ((1 - X / N) ** gamma)[:, None] * (R - mean) / (std + 1e-6)  # (B, N)
    A = A.float().flatten()[:, None]  # (M, 1)
    logp = _token_logprobs(model, batch.sequences, batch.attention_mask)
    mask = batch.completion_mask
    per_token = _surrogate(algo, logp, batch.old_logprobs, A, mask)
    loss = torch.where(mask, per_token, torch.zeros_like(per_token)).sum() / mask.sum()
    params = list(model.parameters())
    grads = torch.autograd.grad(loss, params)
    b1, b2 = BETAS
    expected = []
    with torch.no_grad():
        for p, g in zip(params, grads, strict=True):
            m_hat = (1 - b1) * g / (1 - b1)
            v_hat = (1 - b2) * g * g / (1 - b2)
            expected.append(p * (1 - LR * WD) - LR * m_hat / (v_hat.sqrt() + ADAM_EPS))
    return expected, A.flatten(), X


def _train_one_step(base_dir, tmp_path, monkeypatch, **settings):
    """One training step of the trainer on the fixed rollouts; returns ``(run directory, base
    model, tokenizer, the step's prompts in sampling order)``."""
    import fgrpo_llm.trainer as trainer

    base_model, tok = load_model_and_tokenizer(base_dir)
    seen = {}

    def fixed_sampler(model, tokenizer, prompts, **kwargs):
        seen["prompts"] = list(prompts)
        return _fixed_batch(base_model, tok, list(prompts))

    monkeypatch.setattr(trainer, "sample_completions", fixed_sampler)
    out = tmp_path / "run"
    cfg = TrainConfig(
        base=str(base_dir), out=str(out), steps=1, prompts_per_step=3, group_size=N, lr=LR,
        warmup_steps=0, weight_decay=WD, adam_eps=ADAM_EPS, max_new_tokens=8, progress=False,
        **settings,
    )  # fmt: skip
    trainer.train(cfg, task=FixedTask())
    return out, base_model, tok, seen["prompts"]


@pytest.mark.parametrize(
    "algo,gamma", [("grpo", 0.0), ("grpo", 1.0), ("dapo", 0.5), ("cispo", 2.0), ("cispo", 0.0)]
)
def test_one_step_update_equals_the_hand_computed_one(
    tiny_checkpoint, tmp_path, monkeypatch, algo, gamma
):
    out, base_model, tok, prompts = _train_one_step(
        tiny_checkpoint, tmp_path, monkeypatch, algo=algo, gamma=gamma, grad_clip=0.0
    )
    assert sorted(prompts) == sorted(COMPLETIONS)
    batch = _fixed_batch(base_model, tok, prompts)
    expected, A, X = _expected_parameters(tiny_checkpoint, batch, prompts, algo=algo, gamma=gamma)
    trained, _ = load_model_and_tokenizer(out / "model")
    base, _ = load_model_and_tokenizer(tiny_checkpoint)
    moved = 0.0
    for (name, p), q, e in zip(
        trained.named_parameters(), base.parameters(), expected, strict=True
    ):
        torch.testing.assert_close(p, e, rtol=0, atol=2e-7, msg=lambda m, name=name: f"{name}: {m}")
        moved = max(moved, float((p - q).detach().abs().max()))
    assert moved > 1e-4  # the step did move the weights, well above the tolerance

    # the logs show the g the update used, per trained group, on average over all groups and over
    # the active ones (0 < X < N), as the engines define them (``focal_metrics``)
    groups = [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]
    assert [g["num_correct"] for g in groups] == X.int().tolist()
    assert [g["focal_weight"] for g in groups] == pytest.approx(((1 - X / N) ** gamma).tolist())
    line = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    g = (1 - X / N) ** gamma
    active = (X > 0) & (X < N)
    assert line["focal/weight_mean"] == pytest.approx(float(g.mean()))
    assert line["focal/weight_mean_active"] == pytest.approx(float(g[active].mean()))
    if algo != "cispo":
        # both clip sides were active
        assert line["clip_ratio/low_mean"] > 0 and line["clip_ratio/high_mean"] > 0
    else:
        assert line["cap/high_frac"] > 0  # some weights were capped at 6


# ------------------------------------------------------- several updates in one step, by hand
def _token_logprobs_and_entropy(model, seq, attn):
    """(log pi(token_t | <t), H_t = -sum_v pi log pi) per column (column 0: 0), written out."""
    logits = model(input_ids=seq, attention_mask=attn.long()).logits[:, :-1].float()
    logq = torch.log_softmax(logits, dim=-1)  # (M, L-1, V)
    logp = logq.gather(-1, seq[:, 1:, None]).squeeze(-1)
    H = -(logq.exp() * logq).sum(-1)
    zero = torch.zeros_like(logp[:, :1])
    return torch.cat([zero, logp], dim=1), torch.cat([zero, H], dim=1)


def _hand_updates(base_dir, batch, A, *, algo, seed, mini_batches, epochs, grad_clip, ent, kl):
    """The step's ``epochs`` x ``mini_batches`` AdamW updates, each on the token mean over its
    mini-batch of the surrogate - ent * H + kl * k3 (k3 = exp(d) - d - 1, d = log pi_ref -
    log pi_theta, pi_ref the base), its gradient scaled to norm ``grad_clip`` when above it
    (0: no clip); mini-batches of whole groups in the order of randperm from the run's seed."""
    model, _ = load_model_and_tokenizer(base_dir)
    model.train()
    ref, _ = load_model_and_tokenizer(base_dir)
    params = list(model.parameters())
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    b1, b2 = BETAS
    generator = torch.Generator().manual_seed(seed)
    B, t, norms = len(A) // N, 0, []
    for _ in range(epochs):
        for mb in torch.randperm(B, generator=generator).tensor_split(mini_batches):
            rows = (mb[:, None] * N + torch.arange(N)).flatten()
            seq, attn = batch.sequences[rows], batch.attention_mask[rows]
            mask, old = batch.completion_mask[rows], batch.old_logprobs[rows]
            logp, H = _token_logprobs_and_entropy(model, seq, attn)
            with torch.no_grad():
                logp_ref = _token_logprobs(ref, seq, attn)
            d = torch.where(mask, logp_ref - logp, torch.zeros_like(logp))
            per_token = _surrogate(algo, logp, old, A[rows][:, None], mask)
            per_token = per_token - ent * H + kl * (torch.exp(d) - d - 1)
            loss = torch.where(mask, per_token, torch.zeros_like(per_token)).sum() / mask.sum()
            grads = torch.autograd.grad(loss, params)
            norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
            norms.append(float(norm))
            scale = min(1.0, grad_clip / (float(norm) + 1e-6)) if grad_clip > 0 else 1.0
            t += 1
            with torch.no_grad():
                for p, g, m_i, v_i in zip(params, grads, m, v, strict=True):
                    g = g * scale
                    m_i.mul_(b1).add_((1 - b1) * g)
                    v_i.mul_(b2).add_((1 - b2) * g * g)
                    m_hat, v_hat = m_i / (1 - b1**t), v_i / (1 - b2**t)
                    p.mul_(1 - LR * WD).sub_(LR * m_hat / (v_hat.sqrt() + ADAM_EPS))
    return params, norms


@pytest.mark.parametrize(
    "algo,gamma,mini_batches,epochs,micro,grad_clip,ent,kl",
    [
        ("grpo", 1.0, 3, 2, 2, 0.0, 0.05, 0.5),  # entropy bonus and KL penalty, 6 updates
        ("cispo", 2.0, 2, 2, 3, 1e-2, 0.0, 0.0),  # gradient clipping active, 4 updates
    ],
)
def test_a_step_of_several_updates_equals_the_hand_computed_one(
    tiny_checkpoint, tmp_path, monkeypatch, algo, gamma, mini_batches, epochs, micro, grad_clip,
    ent, kl,
):  # fmt: skip
    """PPO epochs x mini-batches in one step (micro-batches of rows that cut across groups), the
    entropy bonus and the KL penalty (its gradient is 0 on the first update, so only later updates
    test it), gradient clipping, and the run's seed in the mini-batch order, each against the
    updates written out by hand. Mutations this catches (each checked when the test was written):
    gradients not zeroed between mini-batches, clipping off, the entropy or KL term detached, the
    mini-batch order not shuffled or not from the run's seed."""
    seed = 5
    out, base_model, tok, prompts = _train_one_step(
        tiny_checkpoint, tmp_path, monkeypatch, algo=algo, gamma=gamma, grad_clip=grad_clip,
        num_mini_batches=mini_batches, ppo_epochs=epochs, micro_batch_size=micro,
        entropy_coef=ent, kl_coef=kl, seed=seed,
    )  # fmt: skip
    batch = _fixed_batch(base_model, tok, prompts)
    _, A, _ = _expected_parameters(tiny_checkpoint, batch, prompts, algo=algo, gamma=gamma)
    expected, norms = _hand_updates(
        tiny_checkpoint, batch, A, algo=algo, seed=seed, mini_batches=mini_batches,
        epochs=epochs, grad_clip=grad_clip, ent=ent, kl=kl,
    )  # fmt: skip
    line = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert line["optim/updates"] == mini_batches * epochs
    assert line["grad_norm"] == pytest.approx(sum(norms) / len(norms), rel=1e-5)
    if grad_clip > 0:
        assert min(norms) > 10 * grad_clip  # every update was clipped
    trained, _ = load_model_and_tokenizer(out / "model")
    moved = 0.0
    for (name, p), q, e in zip(
        trained.named_parameters(), base_model.parameters(), expected, strict=True
    ):
        torch.testing.assert_close(p, e, rtol=0, atol=2e-7, msg=lambda m, name=name: f"{name}: {m}")
        moved = max(moved, float((p - q).detach().abs().max()))
    assert moved > 1e-4  # the updates moved the weights, well above the tolerance
