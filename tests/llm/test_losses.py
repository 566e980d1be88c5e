"""GRPO / DAPO / CISPO losses: limiting cases and invariants (fgrpo_llm.losses)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_llm.advantages import focal_advantages, grpo_advantages
from fgrpo_llm.losses import (
    LOSSES,
    cispo_loss,
    dapo_loss,
    grpo_loss,
    k3_kl,
    policy_loss,
    token_mean,
)
from fgrpo_llm.rollout import SamplingParams

M, L, V = 6, 7, 5


def _setup(seed=0):
    """Free logits (M, L, V) as the 'policy', sampled tokens, a ragged mask, per-row advantages."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(M, L, V, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, V, (M, L), generator=g)
    lengths = torch.tensor([7, 5, 3, 6, 1, 4])
    mask = torch.arange(L)[None, :] < lengths[:, None]  # (M, L)
    A = torch.randn(M, generator=g, dtype=torch.float64)
    return logits, tokens, mask, A


def _logprobs(logits, tokens):
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)  # (M, L)


def _grad(loss_fn, logits, tokens, mask, A, old=None, **kw):
    logits.grad = None
    lp = _logprobs(logits, tokens)
    loss, metrics = loss_fn(lp, lp.detach() if old is None else old, A, mask, **kw)
    loss.backward()
    return loss.detach(), logits.grad.clone(), metrics


def test_on_policy_ratio_one_all_three_losses_give_the_same_gradient():
    logits, tokens, mask, A = _setup()
    _, g_grpo, _ = _grad(grpo_loss, logits, tokens, mask, A)
    _, g_dapo, _ = _grad(dapo_loss, logits, tokens, mask, A)
    _, g_cispo, _ = _grad(cispo_loss, logits, tokens, mask, A)
    assert g_grpo.abs().sum() > 0
    torch.testing.assert_close(g_grpo, g_dapo)
    torch.testing.assert_close(g_grpo, g_cispo)
    # ... and it is the REINFORCE gradient -token_mean(A * grad log pi).
    logits.grad = None
    token_mean(-A[:, None] * _logprobs(logits, tokens), mask).backward()
    torch.testing.assert_close(g_grpo, logits.grad)


def test_on_policy_same_gradient_through_a_model(char_tokenizer, tiny_model):
    from fgrpo_llm.rollout import sample_completions, token_logprobs

    tok, model = char_tokenizer, tiny_model
    batch = sample_completions(
        model,
        tok,
        ["1:", "22:"],
        num_samples=3,
        sampling=SamplingParams(max_new_tokens=6),
        generator=torch.Generator().manual_seed(0),
    )
    A = torch.tensor([1.0, -0.5, 0.3, -1.0, 0.2, 0.9])
    grads = []
    for fn in LOSSES.values():
        model.zero_grad()
        lp = token_logprobs(model, batch.sequences, batch.attention_mask)
        fn(lp, batch.old_logprobs, A, batch.completion_mask)[0].backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert grads[0].abs().sum() > 0
    for g in grads[1:]:
        torch.testing.assert_close(g, grads[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gamma_zero_equals_the_base_method(name):
    logits, tokens, mask, _ = _setup(1)
    R = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    base = grpo_advantages(R).flatten()
    focal0 = focal_advantages(R, gamma=0.0).flatten()
    # off-policy
    old = _logprobs(logits, tokens).detach() + 0.3 * torch.randn(M, L, dtype=torch.float64)
    l0, g0, _ = _grad(LOSSES[name], logits, tokens, mask, base, old=old)
    l1, g1, _ = _grad(LOSSES[name], logits, tokens, mask, focal0, old=old)
    assert torch.equal(l0, l1) and torch.equal(g0, g1)
    l2, g2, _ = _grad(
        LOSSES[name], logits, tokens, mask, focal_advantages(R, gamma=1.0).flatten(), old=old
    )
    assert not torch.allclose(g0, g2)  # gamma > 0 does change the update


@settings(max_examples=15, deadline=None)
@given(
    name=st.sampled_from(sorted(LOSSES)),
    seed=st.integers(0, 10_000),
    junk=st.sampled_from([50.0, -50.0]),
)
def test_masked_tokens_contribute_nothing(name, seed, junk):
    logits, tokens, mask, A = _setup(seed % 7)
    old = _logprobs(logits, tokens).detach() + 0.2 * torch.randn(
        M, L, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
    )
    l0, g0, m0 = _grad(LOSSES[name], logits, tokens, mask, A, old=old)
    # Change everything under ~mask: the logits there, the old log-probs (even to -inf) and the
    # tokens.
    with torch.no_grad():
        logits2 = logits.detach().clone()
        logits2[~mask] += junk
    logits2.requires_grad_(True)
    old2 = old.clone()
    old2[~mask] = float("-inf")
    tokens2 = torch.where(mask, tokens, (tokens + 1) % V)
    l1, g1, m1 = _grad(LOSSES[name], logits2, tokens2, mask, A, old=old2)
    assert torch.equal(l0, l1)
    assert torch.equal(g0[mask], g1[mask]) and (g1[~mask] == 0).all()
    assert m0 == m1


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_equal_reward_group_has_zero_gradient(name):
    logits, tokens, mask, _ = _setup(2)
    A = grpo_advantages(torch.ones(2, 3, dtype=torch.float64)).flatten()  # two all-correct groups
    assert (A == 0).all()
    old = _logprobs(logits, tokens).detach() - 0.4
    _, g, _ = _grad(LOSSES[name], logits, tokens, mask, A, old=old)
    assert (g == 0).all()


def _one_token(ratio: float, A: float, fn, **kw):
    lp = torch.tensor([[0.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor(
        [[-torch.log(torch.tensor(ratio, dtype=torch.float64)).item()]], dtype=torch.float64
    )
    loss, metrics = fn(
        lp, old, torch.tensor([A], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool), **kw
    )
    loss.backward()
    return loss.item(), lp.grad.item(), metrics


def test_clip_switches_the_gradient_off_and_dapo_clips_higher():
    # r = 1.25, A > 0: outside GRPO's 1.2, inside DAPO's 1.28.
    _, g, m = _one_token(1.25, 1.0, grpo_loss)
    assert g == 0 and m["clip_ratio/high_mean"] == 1.0
    _, g, m = _one_token(1.25, 1.0, dapo_loss)
    assert g == pytest.approx(-1.25) and m["clip_ratio/high_mean"] == 0.0
    # r = 0.75, A < 0: outside both low clips (0.8).
    for fn in (grpo_loss, dapo_loss):
        _, g, m = _one_token(0.75, -1.0, fn)
        assert g == 0 and m["clip_ratio/low_mean"] == 1.0
    # r = 0.75, A > 0: the min keeps the unclipped term, the gradient flows.
    _, g, _ = _one_token(0.75, 1.0, grpo_loss)
    assert g == pytest.approx(-0.75)


def test_cispo_weight_is_capped_but_gradient_never_off():
    for r, w in [(1.25, 1.25), (10.0, 6.0), (0.01, 0.01)]:
        loss, g, m = _one_token(r, 2.0, cispo_loss)
        assert g == pytest.approx(-2.0 * w)  # d/dlogp of -w A logp
        assert m["cap/high_frac"] == (1.0 if r > 6 else 0.0)
    _, g, _ = _one_token(10.0, 2.0, cispo_loss, is_eps_high=1.0)
    assert g == pytest.approx(-4.0)


def test_token_mean_weights_every_token_equally():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    assert token_mean(x, mask).item() == pytest.approx((1 + 2 + 3 + 4) / 4)
    assert token_mean(x, torch.zeros_like(mask)).item() == 0.0


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    lp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    assert torch.equal(k3_kl(lp, lp.detach()), torch.zeros(3))
    k3_kl(lp, lp.detach()).sum().backward()
    assert (lp.grad == 0).all()
    assert (k3_kl(lp.detach(), torch.tensor([-1.5, -1.0, -0.4])) > 0).all()


def test_policy_loss_adds_entropy_bonus_and_kl():
    logits, tokens, mask, A = _setup(3)
    lp = _logprobs(logits, tokens)
    H = torch.full((M, L), 0.5, dtype=torch.float64)
    ref = lp.detach() - 0.1
    base, _ = policy_loss("grpo", lp, lp.detach(), A, mask)
    full, m = policy_loss(
        "grpo",
        lp,
        lp.detach(),
        A,
        mask,
        entropy=H,
        entropy_coef=0.01,
        ref_logprobs=ref,
        kl_coef=0.1,
    )
    kl = token_mean(k3_kl(lp, ref), mask)
    assert full.item() == pytest.approx(base.item() - 0.01 * 0.5 + 0.1 * kl.item())
    assert m["entropy"] == pytest.approx(0.5) and m["kl"] == pytest.approx(kl.item())
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss("grpo", lp, lp.detach(), A, mask, kl_coef=0.1)
    with pytest.raises(ValueError, match="algo"):
        policy_loss("ppo", lp, lp.detach(), A, mask)


def test_shape_mismatch_raises_value_error():
    logits, tokens, mask, A = _setup()
    lp = _logprobs(logits, tokens)
    with pytest.raises(ValueError, match="advantages"):
        grpo_loss(lp, lp.detach(), A[:3], mask)
    with pytest.raises(ValueError, match="shape"):
        cispo_loss(lp, lp.detach()[:, :3], A, mask)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_masked_tokens_contribute_nothing_to_the_full_objective_with_kl_and_entropy(name):
    """policy_loss with the entropy bonus and the k3 KL: junk under the mask (a reference log-prob
    far above the policy's, where exp(ref - logp) overflows) changes neither the loss nor the
    gradient."""
    logits, tokens, mask, A = _setup(4)
    H = torch.rand(M, L, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    old = _logprobs(logits, tokens).detach() - 0.1
    ref = _logprobs(logits, tokens).detach() + 0.2

    def objective(ref_lp):
        logits.grad = None
        loss, _ = policy_loss(
            name,
            _logprobs(logits, tokens),
            old,
            A,
            mask,
            entropy=H,
            entropy_coef=0.01,
            ref_logprobs=ref_lp,
            kl_coef=0.1,
        )
        loss.backward()
        return loss.detach(), logits.grad.clone()

    l0, g0 = objective(ref)
    junk = torch.where(mask, ref, torch.full_like(ref, 1e4))  # exp(1e4 - logp) = inf off the mask
    l1, g1 = objective(junk)
    assert torch.isfinite(g1).all()
    assert torch.equal(l0, l1) and torch.equal(g0, g1)


def test_token_mean_of_one_token_and_of_no_token():
    """The denominator is the number of unmasked tokens, at least 1 (never 2, never 0)."""
    assert token_mean(torch.tensor([[3.0, 7.0]]), torch.tensor([[True, False]])).item() == 3.0
    assert token_mean(torch.tensor([[3.0]]), torch.tensor([[False]])).item() == 0.0
    assert token_mean(torch.tensor([[1.0, 5.0]]), torch.tensor([[1, 1]])).item() == 3.0  # int mask


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_metrics_of_an_empty_mask_and_their_names(name):
    lp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    old = torch.full((2, 3), -0.5, dtype=torch.float64)
    loss, m = LOSSES[name](
        lp, old, torch.tensor([1.0, -1.0], dtype=torch.float64), torch.zeros(2, 3, dtype=torch.bool)
    )
    assert loss.item() == 0.0 and m["policy/ratio_max"] == 1.0 and m["policy/ratio_mean"] == 0.0
    clip = (
        ("cap/low_frac", "cap/high_frac")
        if name == "cispo"
        else ("clip_ratio/low_mean", "clip_ratio/high_mean")
    )
    assert set(m) == {
        *clip,
        "policy/ratio_mean",
        "policy/ratio_max",
    }


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_ratio_metrics_and_clip_fractions(name):
    # token ratios 1.5 (A > 0), 0.5 (A < 0), 1.0 (A > 0), the last token masked out
    lp = torch.zeros(3, 2, dtype=torch.float64)
    old = -torch.log(torch.tensor([[1.5, 9.0], [0.5, 9.0], [1.0, 9.0]], dtype=torch.float64))
    mask = torch.tensor([[True, False], [True, False], [True, False]])
    A = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    _, m = LOSSES[name](lp, old, A, mask)
    assert m["policy/ratio_max"] == pytest.approx(1.5) and m["policy/ratio_mean"] == pytest.approx(
        1.0
    )
    if name == "cispo":
        assert m["cap/high_frac"] == 0.0 and m["cap/low_frac"] == 0.0  # the weight lies in [0, 6]
    else:
        assert m["clip_ratio/high_mean"] == pytest.approx(1 / 3) and m[
            "clip_ratio/low_mean"
        ] == pytest.approx(1 / 3)


def test_policy_loss_metrics_and_a_disabled_entropy_term():
    logits, tokens, mask, A = _setup(5)
    lp = _logprobs(logits, tokens)
    H = torch.full((M, L), 0.5, dtype=torch.float64)
    base, m0 = policy_loss("dapo", lp, lp.detach(), A, mask)
    same, m1 = policy_loss("dapo", lp, lp.detach(), A, mask, entropy=H, entropy_coef=0.0)
    assert same.item() == base.item() and m1["entropy"] == pytest.approx(0.5)
    assert m0["loss/policy"] == m0["loss/total"] == pytest.approx(base.item())
    full, m2 = policy_loss("dapo", lp, lp.detach(), A, mask, entropy=H, entropy_coef=0.1)
    assert (
        m2["loss/total"] == pytest.approx(base.item() - 0.05)
        and m2["loss/policy"] == m0["loss/policy"]
    )
    assert "kl" not in m2


def test_mask_shape_mismatch_is_a_value_error():
    lp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="mask"):
        grpo_loss(lp, lp, torch.zeros(2), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="advantages"):
        dapo_loss(lp, lp, torch.zeros(2, 1), torch.ones(2, 3, dtype=torch.bool))


def test_policy_loss_passes_algorithm_arguments_and_only_logs_entropy_by_default():
    lp = torch.tensor([[0.0]], dtype=torch.float64, requires_grad=True)
    old = torch.log(torch.tensor([[1 / 1.15]], dtype=torch.float64))  # r = 1.15, A > 0
    A, mask = torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool)
    wide, _ = policy_loss("grpo", lp, old, A, mask)  # eps = 0.2: not clipped
    narrow, m = policy_loss(
        "grpo", lp, old, A, mask, clip_eps_low=0.1, clip_eps_high=0.1
    )  # clipped at 1.1
    assert wide.item() == pytest.approx(-1.15) and narrow.item() == pytest.approx(-1.1)
    assert m["clip_ratio/high_mean"] == 1.0
    H = torch.full((1, 1), 0.7, dtype=torch.float64)
    logged, m = policy_loss("grpo", lp, old, A, mask, entropy=H)  # no entropy_coef: logged only
    assert logged.item() == wide.item() and m["entropy"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"^kl_coef > 0 needs ref_logprobs \(the frozen reference"):
        policy_loss("grpo", lp, old, A, mask, kl_coef=0.1)
    with pytest.raises(ValueError, match=r"^algo must be one of \['cispo', 'dapo', 'grpo'\]"):
        policy_loss("ppo", lp, old, A, mask)


def _metrics(fn, ratios, advantages, **kw):
    """Metrics of ``fn`` on one token per row with the given ratios r and advantages A."""
    r = torch.tensor(ratios, dtype=torch.float64)[:, None]
    lp = torch.zeros_like(r)
    _, m = fn(
        lp,
        -torch.log(r),
        torch.tensor(advantages, dtype=torch.float64),
        torch.ones_like(r, dtype=torch.bool),
        **kw,
    )
    return m


def test_clip_fractions_count_only_the_active_side_of_the_clip():
    """A token is clipped low only when r < 1 - eps_low and A < 0, high only when
    r > 1 + eps_high and A > 0: strict inequalities, zero advantages never clipped."""
    ratios = [1.0, 0.5, 0.5, 1.5, 1.5, 1.0]
    advantages = [-1.0, 0.0, -1.0, 0.0, 1.0, 1.0]
    for fn in (grpo_loss, dapo_loss):
        m = _metrics(fn, ratios, advantages)
        assert m["clip_ratio/low_mean"] == pytest.approx(1 / 6) and m[
            "clip_ratio/high_mean"
        ] == pytest.approx(1 / 6)
    m = _metrics(
        grpo_loss, [1.0, 1.0], [1.0, -1.0], clip_eps_low=0.0, clip_eps_high=0.0
    )  # r = 1 + eps exactly
    assert m["clip_ratio/low_mean"] == 0.0 and m["clip_ratio/high_mean"] == 0.0
    m = _metrics(cispo_loss, [1.0, 6.5, 10.0], [1.0, 1.0, -1.0])
    assert m["cap/high_frac"] == pytest.approx(2 / 3) and m["cap/low_frac"] == 0.0
    m = _metrics(cispo_loss, [1.0], [1.0], is_eps_low=0.0, is_eps_high=0.0)  # r on both caps
    assert m["cap/low_frac"] == 0.0 and m["cap/high_frac"] == 0.0


def test_advantage_shape_message():
    lp = torch.zeros(2, 3)
    with pytest.raises(
        ValueError, match=r"^advantages must have shape \(M,\) = \(2,\), got \(2, 1\)$"
    ):
        grpo_loss(lp, lp, torch.zeros(2, 1), torch.ones(2, 3, dtype=torch.bool))


def test_grpo_refuses_an_asymmetric_clip():
    lp = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="clip_eps_high=0.28"):
        grpo_loss(lp, lp, torch.ones(1), torch.ones(1, 2), clip_eps_high=0.28)
