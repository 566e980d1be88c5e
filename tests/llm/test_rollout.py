"""The sampler: masks, recorded old log-probs, filters, determinism (fgrpo_llm.rollout)."""

from __future__ import annotations

import pytest
import torch

from fgrpo_llm.model import build_tiny_model
from fgrpo_llm.rollout import (
    SamplingParams,
    filter_logits,
    sample_completions,
    token_logprobs,
    token_logprobs_and_entropy,
)

TINY = dict(hidden_size=32, num_layers=2, num_heads=2, max_position_embeddings=64)

PROMPTS = ["1 2=3:", "34 5 6=9:", "7=:"]


@pytest.fixture(scope="module")
def tok(char_tokenizer):
    return char_tokenizer


@pytest.fixture(scope="module")
def model(tok):
    m = build_tiny_model(tok, seed=0, **TINY)
    with torch.no_grad():  # make EOS likely so that rows end at different lengths
        m.lm_head.weight.mul_(3.0)
    return m


def _sample(model, tok, seed=0, num_samples=4, **kw):
    """``kw``: the SamplingParams' fields (max_new_tokens 12 unless given)."""
    sampling = SamplingParams(**{"max_new_tokens": 12, **kw})
    generator = torch.Generator().manual_seed(seed)
    return sample_completions(
        model, tok, PROMPTS, num_samples=num_samples, sampling=sampling, generator=generator
    )


def test_shapes_and_grouping(model, tok):
    b = _sample(model, tok)
    M = len(PROMPTS) * 4
    for t in (b.sequences, b.attention_mask, b.completion_mask, b.old_logprobs):
        assert t.shape == b.sequences.shape and t.shape[0] == M
    assert b.prompt_index.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert len(b.completions) == M
    assert not b.completion_mask[:, : b.prompt_length].any()


def test_prompts_are_left_padded(model, tok):
    b = _sample(model, tok)
    for row, prompt in zip(
        b.sequences.tolist(), [p for p in PROMPTS for _ in range(4)], strict=True
    ):
        ids = tok(prompt)["input_ids"]
        P = b.prompt_length
        assert row[P - len(ids) : P] == ids
        assert all(t == tok.pad_token_id for t in row[: P - len(ids)])


def test_completion_mask_ends_at_eos_and_pads_after(model, tok):
    b = _sample(model, tok, max_new_tokens=20)
    eos, pad, P = tok.eos_token_id, tok.pad_token_id, b.prompt_length
    for seq, cmask, amask, fin in zip(
        b.sequences, b.completion_mask, b.attention_mask, b.finished, strict=True
    ):
        gen, m = seq[P:], cmask[P:]
        n = int(m.sum())
        assert m[:n].all() and not m[n:].any()  # one contiguous run from the first generated column
        assert torch.equal(amask[P:], m)
        if fin:
            assert gen[n - 1] == eos and (gen[: n - 1] != eos).all()  # EOS included, only once
        else:
            assert n == 20 and (gen != eos).all()  # cut by the token limit
        assert (gen[n:] == pad).all()  # pad after the end


def test_some_rows_hit_eos_and_lengths_differ(model, tok):
    b = _sample(model, tok, num_samples=8, max_new_tokens=30)
    assert b.finished.any()
    assert len(set(b.completion_lengths.tolist())) > 1


def test_completions_decode_the_masked_tokens(model, tok):
    b = _sample(model, tok)
    for seq, m, text in zip(b.sequences, b.completion_mask, b.completions, strict=True):
        assert text == tok.decode(seq[m].tolist(), skip_special_tokens=True)


def test_old_logprobs_equal_recomputed_token_logprobs(model, tok):
    b = _sample(model, tok, temperature=0.7, top_k=5)  # top-k changes sampling, not pi_old
    model.eval()
    with torch.no_grad():
        lp = token_logprobs(model, b.sequences, b.attention_mask, temperature=0.7)
        lp1 = token_logprobs(model, b.sequences, b.attention_mask)
    m = b.completion_mask
    assert torch.allclose(b.old_logprobs[m], lp[m], atol=1e-5)  # pi_old = softmax(logits / 0.7)
    # ... not the temperature-1 model
    assert not torch.allclose(b.old_logprobs[m], lp1[m], atol=1e-3)
    assert (b.old_logprobs[~m] == 0).all()
    assert (lp[:, 0] == 0).all()


def test_greedy_decoding_records_temperature_one_logprobs(model, tok):
    b = _sample(model, tok, temperature=0.0)
    with torch.no_grad():
        lp = token_logprobs(model, b.sequences, b.attention_mask, temperature=0.0)
        lp1 = token_logprobs(model, b.sequences, b.attention_mask)
    assert torch.equal(lp, lp1)
    assert torch.allclose(b.old_logprobs[b.completion_mask], lp1[b.completion_mask], atol=1e-5)


def _gpt2(tok):
    """A tiny GPT-2: absolute position embeddings, so wrong position ids under left padding show up
    (Qwen2's rotary embeddings are shift-invariant and would hide them)."""
    import transformers

    cfg = transformers.GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        m.transformer.wpe.weight.mul_(10.0)  # make positions matter
        m.lm_head.weight.mul_(3.0)
    return m


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
def test_left_padding_gives_the_unpadded_distribution(model, tok, arch):
    net = model if arch == "qwen2" else _gpt2(tok)
    b = sample_completions(
        net,
        tok,
        ["7=:", "12 34 5=60:"],
        num_samples=3,
        sampling=SamplingParams(max_new_tokens=10),
        generator=torch.Generator().manual_seed(0),
    )
    # really left-padded
    assert b.attention_mask[:3, : b.prompt_length].sum(dim=1).lt(b.prompt_length).all()
    for i in range(b.sequences.shape[0]):  # each row alone, no padding at all
        ids = b.sequences[i][b.attention_mask[i]][None]  # (1, l)
        n = int(b.completion_mask[i].sum())
        with torch.no_grad():
            alone = token_logprobs(net, ids, torch.ones_like(ids, dtype=torch.bool))[0, -n:]
            logits_alone = net(input_ids=ids[:, : ids.shape[1] - n])["logits"][0, -1]
        assert torch.allclose(b.old_logprobs[i][b.completion_mask[i]], alone, atol=1e-5)
        # next-token distribution after the (left-padded) prompt, through the padded full forward
        padded = b.sequences[i : i + 1, : b.prompt_length]
        mask = b.attention_mask[i : i + 1, : b.prompt_length]
        with torch.no_grad():
            logits_padded = net(
                input_ids=padded,
                attention_mask=mask.long(),
                position_ids=(mask.long().cumsum(-1) - 1).clamp(min=0),
            )["logits"][0, -1]
        assert torch.allclose(
            torch.log_softmax(logits_padded, -1), torch.log_softmax(logits_alone, -1), atol=1e-5
        )


def test_entropy_without_grad_has_the_same_values(model, tok):
    b = _sample(model, tok)
    lp_a, H_a = token_logprobs_and_entropy(model, b.sequences, b.attention_mask)
    lp_b, H_b = token_logprobs_and_entropy(model, b.sequences, b.attention_mask, entropy_grad=False)
    assert H_a.requires_grad and not H_b.requires_grad and lp_b.requires_grad
    assert torch.equal(H_a.detach(), H_b) and torch.equal(lp_a.detach(), lp_b.detach())


def test_entropy_is_nonnegative_and_bounded(model, tok):
    b = _sample(model, tok)
    with torch.no_grad():
        _, H = token_logprobs_and_entropy(model, b.sequences, b.attention_mask)
    assert (H >= -1e-6).all() and (H <= torch.log(torch.tensor(float(len(tok)))) + 1e-5).all()


def test_same_generator_seed_same_samples(model, tok):
    a, b = _sample(model, tok, seed=3), _sample(model, tok, seed=3)
    c = _sample(model, tok, seed=4)
    assert torch.equal(a.sequences, b.sequences) and a.completions == b.completions
    assert a.completions != c.completions


def test_chunked_decoding_keeps_the_layout(model, tok):
    b = _sample(model, tok, batch_size=5)
    for _seq, m, amask in zip(b.sequences, b.completion_mask, b.attention_mask, strict=True):
        assert torch.equal(amask[b.prompt_length :], m[b.prompt_length :])
    model.eval()
    with torch.no_grad():
        lp = token_logprobs(model, b.sequences, b.attention_mask)
    assert torch.allclose(b.old_logprobs[b.completion_mask], lp[b.completion_mask], atol=1e-5)


def test_top_k_one_is_greedy(model, tok):
    greedy = _sample(model, tok, temperature=0.0)
    top1 = _sample(model, tok, top_k=1, seed=9)
    assert greedy.completions == top1.completions
    assert all(greedy.completions[i] == greedy.completions[i - i % 4] for i in range(12))


def test_filter_logits_restricts_support():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]]))
    k2 = filter_logits(logits, top_k=2)
    assert torch.isfinite(k2).sum(dim=1).tolist() == [2, 2]
    assert torch.isfinite(k2[0, :2]).all() and torch.isfinite(k2[1, 2:]).all()
    p7 = filter_logits(logits, top_p=0.7)  # 0.5 < 0.7 <= 0.5 + 0.3: the two most likely
    assert torch.isfinite(p7).sum(dim=1).tolist() == [2, 2]
    p5 = filter_logits(logits, top_p=0.5)  # the most likely alone reaches 0.5
    assert torch.isfinite(p5).sum(dim=1).tolist() == [1, 1]
    assert torch.equal(filter_logits(logits), logits)


def test_sampled_tokens_stay_in_top_k_support(model, tok):
    b = _sample(model, tok, top_k=3, num_samples=6)
    model.eval()
    with torch.no_grad():
        logits = model(
            input_ids=b.sequences,
            attention_mask=b.attention_mask.long(),
            position_ids=(b.attention_mask.long().cumsum(-1) - 1).clamp(min=0),
        )["logits"]
    # (M, L-1)
    rank = (logits[:, :-1] > logits[:, :-1].gather(-1, b.sequences[:, 1:, None])).sum(-1)
    assert (rank[b.completion_mask[:, 1:]] < 3).all()


@pytest.mark.parametrize(
    "bad",
    [
        dict(num_samples=0),
        dict(max_new_tokens=0),
        dict(top_p=0.0),
        dict(top_k=-1),
        dict(temperature=-1.0),
    ],
)
def test_bad_arguments_raise_value_error(model, tok, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        _sample(model, tok, **bad)


def test_a_tiny_temperature_is_named_not_the_weights(model, tok):
    # logits / 1e-45 overflow float32 although the weights are fine: the error names the temperature
    with pytest.raises(ValueError, match=r"temperature=1e-45.*overflow"):
        _sample(model, tok, temperature=1e-45)


def test_concat_rollouts_relayouts_batches_with_different_prompt_lengths(model, tok):
    from fgrpo_llm.rollout import concat_rollouts

    g = torch.Generator().manual_seed(0)
    a = sample_completions(
        model, tok, ["7=:"], num_samples=2, sampling=SamplingParams(max_new_tokens=5), generator=g
    )
    b = sample_completions(
        model,
        tok,
        ["12 34 5=60:", "1=:"],
        num_samples=2,
        sampling=SamplingParams(max_new_tokens=9),
        generator=g,
    )
    c = concat_rollouts([a, b], pad_id=tok.pad_token_id)
    assert c.prompt_index.tolist() == [0, 0, 1, 1, 2, 2]
    assert c.completions == a.completions + b.completions
    for src, rows in ((a, [0, 1]), (b, [2, 3, 4, 5])):
        for r_src, r in enumerate(rows):
            assert torch.equal(
                c.sequences[r][c.attention_mask[r]], src.sequences[r_src][src.attention_mask[r_src]]
            )
            assert torch.equal(
                c.old_logprobs[r][c.completion_mask[r]],
                src.old_logprobs[r_src][src.completion_mask[r_src]],
            )
    model.eval()
    with torch.no_grad():
        lp = token_logprobs(model, c.sequences, c.attention_mask)
    assert torch.allclose(c.old_logprobs[c.completion_mask], lp[c.completion_mask], atol=1e-5)


def test_sampling_uses_the_generator_on_the_models_device(model, tok, monkeypatch):
    """A generator on the model's device is used as it is (CPU runs draw what they drew); one
    on another device seeds a new generator on the model's device from one of its draws, so the
    probabilities never leave the device."""
    import fgrpo_llm.rollout as rollout

    g = torch.Generator().manual_seed(3)
    assert rollout.generator_on(g, "cpu") is g
    assert rollout.generator_on(g, torch.device("cpu")) is g
    expected_seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(3)))
    real = torch.Generator
    made = []

    class FakeGen:  # a CUDA generator stands in as a CPU one (no GPU here)
        def __init__(self, device=None):
            made.append(torch.device(device))
            self._g = real()

        def manual_seed(self, seed):
            made.append(seed)
            return self._g.manual_seed(seed)

    monkeypatch.setattr(rollout.torch, "Generator", FakeGen)
    new = rollout.generator_on(g, "cuda")
    assert made == [torch.device("cuda"), expected_seed] and new is not g
