"""Rollout and training throughput of fgrpo_llm on the tiny built-in model, each beside a baseline
measured in the same run, printed as ratios (higher = ours faster).

- rollout: ``fgrpo_llm.rollout.sample_completions`` (KV cache, masks, old log-probs recorded) vs
  Hugging Face ``model.generate(do_sample=True)`` on the same prompts, N, token limit; generated
  tokens per second (tokens up to and including EOS).
- training: one GRPO loss forward + backward through ``token_logprobs_and_entropy`` (entropy logged,
  not in the loss, as in the trainer's default) and
  ``grpo_loss`` vs a plain causal-LM forward + backward (``model(input_ids, labels=...)``) on the
  same sequences; sequence tokens per second.

    python benchmarks/bench_llm.py [--prompts 16] [--group-size 8] [--max-new-tokens 16]
                                   [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from fgrpo_llm.losses import grpo_loss
from fgrpo_llm.model import build_tiny_model
from fgrpo_llm.rollout import SamplingParams, sample_completions, token_logprobs_and_entropy
from fgrpo_llm.tasks.countdown import ALPHABET, CountdownTask
from fgrpo_llm.tokenizer import build_char_tokenizer


def _median_time(repeats: int, fn) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls (after one warm-up call) and the last result."""
    fn()
    times, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    tok = build_char_tokenizer(ALPHABET)
    model = build_tiny_model(
        tok, seed=0
    ).eval()  # the built-in base's size: hidden 128, 4 layers, ~1M parameters
    prompts = [
        p.prompt
        for p in CountdownTask(seed=0, num_test=20, num_ood=10).problems("train")[: args.prompts]
    ]
    B, N, T = len(prompts), args.group_size, args.max_new_tokens
    print(
        f"tiny Qwen2 ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters), B={B} "
        f"prompts x N={N}, max_new_tokens={T}, torch threads={torch.get_num_threads()}"
    )

    # --- rollout: ours vs HF generate ---
    def ours():
        return sample_completions(
            model,
            tok,
            prompts,
            num_samples=N,
            sampling=SamplingParams(max_new_tokens=T),
            generator=torch.Generator().manual_seed(0),
        )

    enc = tok(prompts, return_tensors="pt", padding=True, padding_side="left")

    def hf():
        torch.manual_seed(0)
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                max_new_tokens=T,
                num_return_sequences=N,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        gen = out[:, enc["input_ids"].shape[1] :]
        ended = (gen == tok.eos_token_id).cumsum(1) - (
            gen == tok.eos_token_id
        ).long()  # EOS counted, not after
        return int((ended == 0).sum())

    t_ours, batch = _median_time(args.repeats, ours)
    t_hf, hf_tokens = _median_time(args.repeats, hf)
    ours_tps = int(batch.completion_mask.sum()) / t_ours
    hf_tps = hf_tokens / t_hf
    print(
        f"rollout  tokens/s: ours {ours_tps:9.0f}   HF generate {hf_tps:9.0f}   ratio ours/HF = "
        f"{ours_tps / hf_tps:.2f}"
    )

    # --- training: GRPO loss forward + backward vs a plain LM forward + backward ---
    model.train()
    seq, attn, cmask = batch.sequences, batch.attention_mask, batch.completion_mask
    A = torch.randn(seq.shape[0], generator=torch.Generator().manual_seed(1))
    labels = seq.masked_fill(~attn, -100)

    def ours_train():
        model.zero_grad(set_to_none=True)
        # as the trainer (no bonus)
        logp, H = token_logprobs_and_entropy(model, seq, attn, entropy_grad=False)
        loss, _ = grpo_loss(logp, batch.old_logprobs, A, cmask)
        loss.backward()

    def plain_train():
        model.zero_grad(set_to_none=True)
        model(input_ids=seq, attention_mask=attn.long(), labels=labels).loss.backward()

    t_ours_train, _ = _median_time(args.repeats, ours_train)
    t_plain, _ = _median_time(args.repeats, plain_train)
    n_tok = seq.numel()
    print(
        f"training tokens/s: ours {n_tok / t_ours_train:9.0f}   plain fwd+bwd "
        f"{n_tok / t_plain:9.0f}   ratio ours/plain = {t_plain / t_ours_train:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
