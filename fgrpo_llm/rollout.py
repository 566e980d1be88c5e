"""Rollouts: N sampled completions per prompt, with their masks and old log-probabilities.

The sampler of the RL loop (paper Table 5: temperature 1.0, top-p 1.0, no top-k).
``sample_completions`` left-pads the prompts, decodes with a KV cache, stops each row at its
EOS token or at ``max_new_tokens``, and returns a :class:`RolloutBatch` that carries every mask
the losses need, made once, here, and never re-derived from token ids (pad != eos is not assumed).
It also records ``old_logprobs``: log pi_old(o_t | x, o_<t) of each sampled token under the
sampling policy pi_old = softmax(logits / temperature) (the top-k/top-p filters are left out, as in
verl and TRL), the denominator of the ratio r = pi_theta / pi_old of the losses in
``fgrpo_llm.losses``; the trainer scores pi_theta at the same temperature (``token_logprobs(...,
temperature=...)``), so r = 1 exactly on policy. Greedy decoding (temperature 0) records the
temperature-1 log-probs. The paper samples at temperature 1, where all of this is the plain model.

Dimension letters: ``B`` prompts, ``N`` group size, ``M = B*N`` sequences, ``P`` prompt columns,
``L`` sequence columns, ``V`` vocabulary.

    batch = sample_completions(model, tok, ["1 2 3 -> 6:"], num_samples=8,
                               sampling=SamplingParams(max_new_tokens=16),
                               generator=torch.Generator().manual_seed(0))
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from fgrpo_llm.model import autocast
from fgrpo_llm.tasks.base import encode_prompt

__all__ = [
    "RolloutBatch",
    "sample_completions",
    "token_logprobs",
    "token_logprobs_and_entropy",
    "filter_logits",
    "position_ids_from_mask",
    "concat_rollouts",
    "logit_temperature",
]


@dataclass
class RolloutBatch:
    """N completions for each of B prompts; rows grouped: prompt b -> rows b*N .. b*N+N-1."""

    sequences: torch.LongTensor  # (M, L) left-padded prompt, then completion, right-padded
    # (M, L) True on prompt tokens and on completion tokens up to EOS
    attention_mask: torch.BoolTensor
    completion_mask: torch.BoolTensor  # (M, L) True on generated tokens up to and including EOS
    old_logprobs: torch.Tensor  # (M, L) log pi_old(token_t | <t) on the completion, 0 elsewhere
    prompt_index: torch.LongTensor  # (M,) index of the prompt (0..B-1) each row belongs to
    completions: list[str]  # decoded completion text, special tokens stripped
    prompt_length: int  # completion starts at column prompt_length
    num_samples: int = 1  # N
    finished: torch.BoolTensor | None = (
        None  # (M,) True where the row ended with EOS, not the token limit
    )

    @property
    def completion_lengths(self) -> torch.LongTensor:
        """(M,) number of generated tokens of each row, EOS included."""
        return self.completion_mask.sum(dim=1)

    def select(self, rows: torch.LongTensor) -> RolloutBatch:
        """The sub-batch of the given rows (same columns); ``prompt_index`` is kept as is."""
        idx = rows.tolist()
        return RolloutBatch(
            sequences=self.sequences[rows],
            attention_mask=self.attention_mask[rows],
            completion_mask=self.completion_mask[rows],
            old_logprobs=self.old_logprobs[rows],
            prompt_index=self.prompt_index[rows],
            completions=[self.completions[i] for i in idx],
            prompt_length=self.prompt_length,
            num_samples=self.num_samples,
            finished=None if self.finished is None else self.finished[rows],
        )


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.LongTensor:
    """Positions 0, 1, 2, ... counted over attended tokens only, so left padding does not shift
    them.

    (M, L) -> (M, L); padded columns get 0 (their value never matters: nothing attends to them).
    """
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def filter_logits(logits: torch.Tensor, *, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Set to -inf every logit outside the top-k set and outside the top-p nucleus.

    ``top_k = 0`` and ``top_p = 1`` disable the filters. The nucleus is the smallest set of
    highest-probability tokens whose mass reaches ``top_p`` (the most likely token always stays).
    (M, V) -> (M, V).
    """
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (M, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (M, V)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # mass of strictly more likely tokens
        drop_sorted = mass_before >= top_p  # first token never dropped (mass_before = 0)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def logit_temperature(temperature: float) -> float:
    """The temperature the log-probs are taken at: ``temperature``, or 1 for greedy decoding (0)."""
    return temperature if temperature > 0 else 1.0


def _cache_kwarg(model) -> str:
    """Name of the KV-cache argument: ``cache`` in recent transformers, ``past_key_values``
    before."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _cache_of(output):
    return output["cache"] if "cache" in output else output["past_key_values"]


def _encode_prompts(
    tokenizer, prompts: list[str], pad_id: int
) -> tuple[torch.LongTensor, torch.BoolTensor]:
    """Tokenize and left-pad: (B, P) ids and (B, P) mask."""
    ids = [encode_prompt(tokenizer, p) for p in prompts]
    if any(len(x) == 0 for x in ids):
        raise ValueError("every prompt must encode to at least one token, got an empty prompt")
    P = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), P), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), P), dtype=torch.bool)
    for b, x in enumerate(ids):
        input_ids[b, P - len(x) :] = torch.tensor(x, dtype=torch.long)
        mask[b, P - len(x) :] = True
    return input_ids, mask


@torch.no_grad()
def _generate_chunk(model, prompt_ids, prompt_mask, *, sampling, eos_id, pad_id, generator):
    """Decode one chunk with a KV cache under ``sampling`` (a :class:`SamplingParams`). Returns
    (M, T) tokens, (M, T) mask, (M, T) log-probs, (M,) finished."""
    max_new_tokens, temperature = sampling.max_new_tokens, sampling.temperature
    top_p, top_k, autocast_dtype = sampling.top_p, sampling.top_k, sampling.autocast_dtype
    device = prompt_ids.device
    M = prompt_ids.shape[0]
    cache_kw = _cache_kwarg(model)
    attn = prompt_mask.long()  # (M, P), grows by one column per step
    pos = position_ids_from_mask(attn)  # (M, P)
    tokens, logps, alive_cols = [], [], []
    alive = torch.ones(M, dtype=torch.bool, device=device)  # (M,) not yet past EOS
    with autocast(device, autocast_dtype):
        out = model(input_ids=prompt_ids, attention_mask=attn, position_ids=pos, use_cache=True)
    cache, logits = _cache_of(out), out["logits"][:, -1, :].float()  # (M, V)
    next_pos = pos[:, -1:] + 1  # (M, 1)
    T_logp = logit_temperature(temperature)
    for t in range(max_new_tokens):
        logprobs = torch.log_softmax(logits / T_logp, dim=-1)  # (M, V): pi_old, the sampling policy
        if temperature == 0:
            token = logits.argmax(dim=-1)  # greedy
        else:
            probs = torch.softmax(
                filter_logits(logits / temperature, top_k=top_k, top_p=top_p), dim=-1
            )
            try:
                token = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (M,)
            except RuntimeError as err:  # inf / NaN / negative probabilities
                if bool(torch.isfinite(logits).all()):  # finite logits: 1 / temperature overflowed
                    raise ValueError(
                        f"cannot sample at temperature={temperature}: logits / temperature "
                        "overflow float32 (use temperature 0 for greedy decoding)"
                    ) from err
                raise ValueError(
                    "cannot sample: the model's next-token probabilities are not finite (its "
                    f"weights overflow, or diverged): {str(err).splitlines()[0]}"
                ) from err
        token = torch.where(alive, token, torch.full_like(token, pad_id))  # (M,)
        tokens.append(token)
        logps.append(torch.where(alive, logprobs.gather(1, token[:, None]).squeeze(1), 0.0))
        alive_cols.append(alive.clone())
        if eos_id is not None:
            alive &= token != eos_id  # the EOS itself is part of the completion
        if not alive.any() or t == max_new_tokens - 1:  # no forward pass for a token never sampled
            break
        attn = torch.cat([attn, alive[:, None].long()], dim=1)
        with autocast(device, autocast_dtype):
            out = model(
                input_ids=token[:, None],
                attention_mask=attn,
                position_ids=next_pos,
                use_cache=True,
                **{cache_kw: cache},
            )
        cache, logits = _cache_of(out), out["logits"][:, -1, :].float()
        next_pos = next_pos + 1
    gen = torch.stack(tokens, dim=1)  # (M, T)
    gen_mask = torch.stack(alive_cols, dim=1)  # (M, T)
    finished = (
        (gen == eos_id).any(dim=1)
        if eos_id is not None
        else torch.zeros(M, dtype=torch.bool, device=device)
    )
    return gen, gen_mask, torch.stack(logps, dim=1), finished


def generator_on(generator: torch.Generator, device) -> torch.Generator:
    """A generator on ``device`` for sampling there: ``generator`` itself when it is on that
    device, else a new one seeded by one draw from it (so a CUDA model with a CPU generator
    samples on the GPU, seeded and reproducible, instead of copying (rows, vocab) probabilities
    to the host at every token)."""
    device = torch.device(device)
    if generator.device.type == device.type and (
        device.index is None or generator.device.index in (None, device.index)
    ):
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


@dataclass(frozen=True)
class SamplingParams:
    """How a policy is sampled: one set of settings, built once (``TrainConfig.sampling``, or
    from a CLI's flags) and handed as ``sampling`` to training rollouts, pass@k, the rare-correct
    set and exact (mu, tau), so that a run is evaluated under the policy it was trained with.

        sp = SamplingParams(max_new_tokens=16, temperature=0.7, top_k=20)
        sample_completions(model, tok, prompts, num_samples=8, sampling=sp, generator=g)
    """

    max_new_tokens: int
    temperature: float = 1.0
    """0 decodes greedily."""
    top_p: float = 1.0
    """1 = off."""
    top_k: int = 0
    """0 = off."""
    batch_size: int | None = None
    """Rows decoded at once (None: all)."""
    autocast_dtype: torch.dtype | None = None

    def __post_init__(self):
        if isinstance(self.max_new_tokens, bool) or int(self.max_new_tokens) != self.max_new_tokens:
            raise TypeError(f"max_new_tokens must be an integer, got {self.max_new_tokens!r}")
        if self.max_new_tokens < 1:
            raise ValueError(
                f"max_new_tokens must be >= 1, got max_new_tokens={self.max_new_tokens}"
            )
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got temperature={self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got top_p={self.top_p}")
        if isinstance(self.top_k, bool) or int(self.top_k) != self.top_k or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0, got top_k={self.top_k!r}")
        if self.batch_size is not None and (
            isinstance(self.batch_size, bool)
            or int(self.batch_size) != self.batch_size
            or self.batch_size < 1
        ):
            raise ValueError(
                f"batch_size must be >= 1 (an integer), got batch_size={self.batch_size!r}"
            )
        for name, kind in (("max_new_tokens", int), ("temperature", float), ("top_p", float),
                           ("top_k", int)):  # fmt: skip
            object.__setattr__(self, name, kind(getattr(self, name)))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", int(self.batch_size))

    def policy(self) -> dict:
        """What decides the sampled distribution (not how it is batched): for records."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
        }


def sample_completions(
    model,
    tokenizer,
    prompts: list[str],
    *,
    num_samples: int,
    sampling: SamplingParams,
    generator: torch.Generator,
) -> RolloutBatch:
    """Sample ``num_samples`` (N) completions for each prompt with a KV cache, under
    ``sampling`` (:class:`SamplingParams`, checked on construction).

    Each row stops at the tokenizer's EOS (kept, masked True) or after ``max_new_tokens``; columns
    after a row's end hold the pad id with all masks False. ``temperature = 0`` decodes greedily.
    ``top_k = 0`` and ``top_p = 1`` disable those filters. Randomness comes only from ``generator``:
    same generator state, same samples. ``batch_size`` caps the rows decoded at once (default all).
    ``old_logprobs`` are log-probs of softmax(logits / temperature) (temperature 1 when greedy).
    The model is put in eval mode for sampling and its previous mode is restored afterwards.
    """
    if not prompts:
        raise ValueError("prompts must not be empty, got []")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got num_samples={num_samples}")
    if not isinstance(sampling, SamplingParams):
        raise TypeError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
    eos_id = tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    if pad_id is None:
        raise ValueError("the tokenizer has neither a pad nor an EOS token")
    device = next(model.parameters()).device
    generator = generator_on(generator, device)
    N = num_samples
    prompt_ids, prompt_mask = _encode_prompts(tokenizer, prompts, pad_id)  # (B, P)
    prompt_ids = prompt_ids.repeat_interleave(N, dim=0).to(device)  # (M, P)
    prompt_mask = prompt_mask.repeat_interleave(N, dim=0).to(device)  # (M, P)
    M, P = prompt_ids.shape
    chunk = sampling.batch_size or M

    was_training = model.training
    model.eval()
    try:
        parts = [
            _generate_chunk(
                model,
                prompt_ids[s : s + chunk],
                prompt_mask[s : s + chunk],
                sampling=sampling,
                eos_id=eos_id,
                pad_id=pad_id,
                generator=generator,
            )
            for s in range(0, M, chunk)
        ]
    finally:
        model.train(was_training)

    T = max(p[0].shape[1] for p in parts)

    def right_pad(x, value):  # (m, t) -> (m, T)
        return torch.nn.functional.pad(x, (0, T - x.shape[1]), value=value)

    gen = torch.cat([right_pad(p[0], pad_id) for p in parts])  # (M, T)
    gen_mask = torch.cat([right_pad(p[1], False) for p in parts])  # (M, T)
    gen_logp = torch.cat([right_pad(p[2], 0.0) for p in parts])  # (M, T)
    finished = torch.cat([p[3] for p in parts])  # (M,)

    no_prompt = torch.zeros((M, P), dtype=torch.bool, device=device)
    completions = [
        tokenizer.decode(row[m].tolist(), skip_special_tokens=True)
        for row, m in zip(gen.cpu(), gen_mask.cpu(), strict=True)
    ]
    return RolloutBatch(
        sequences=torch.cat([prompt_ids, gen], dim=1),  # (M, L)
        attention_mask=torch.cat([prompt_mask, gen_mask], dim=1),  # (M, L)
        completion_mask=torch.cat([no_prompt, gen_mask], dim=1),  # (M, L)
        old_logprobs=torch.cat([torch.zeros((M, P), device=device), gen_logp], dim=1),  # (M, L)
        prompt_index=torch.arange(len(prompts), device=device).repeat_interleave(N),  # (M,)
        completions=completions,
        prompt_length=P,
        num_samples=N,
        finished=finished,
    )


def token_logprobs_and_entropy(
    model,
    sequences: torch.LongTensor,
    attention_mask: torch.Tensor,
    *,
    with_entropy: bool = True,
    autocast_dtype: torch.dtype | None = None,
    temperature: float = 1.0,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(token_t | tokens_<t) and the entropy H_t of pi(. | tokens_<t), both (M, L).

    pi = softmax(logits / temperature) (temperature 0 is read as 1, see ``logit_temperature``).
    Column 0 has no context and is 0 in both. Differentiable (call under ``torch.no_grad()`` when
    no gradient is wanted); ``entropy_grad=False`` computes H from detached logits, so a logged-only
    entropy does not keep an extra (M, L, V) tensor alive through the backward pass.
    Positions are counted over attended tokens, as in the sampler.
    """
    with autocast(sequences.device, autocast_dtype):
        logits = model(
            input_ids=sequences,
            attention_mask=attention_mask.long(),
            position_ids=position_ids_from_mask(attention_mask),
        )["logits"]
    # (M, L-1, V) predicts columns 1..L-1
    logits = logits[:, :-1, :].float() / logit_temperature(temperature)
    logz = torch.logsumexp(logits, dim=-1)  # (M, L-1)
    logp = logits.gather(-1, sequences[:, 1:, None]).squeeze(-1) - logz  # (M, L-1)
    zero = torch.zeros_like(logp[:, :1])  # (M, 1)
    logp = torch.cat([zero, logp], dim=1)  # (M, L)
    if not with_entropy:
        return logp, None
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        p = torch.softmax(logits, dim=-1)  # (M, L-1, V)
        H = logz - (p * logits).sum(dim=-1)  # H = -sum p log p = log Z - sum p * logit
    return logp, torch.cat([zero, H], dim=1)


def token_logprobs(
    model,
    sequences: torch.LongTensor,
    attention_mask: torch.Tensor,
    *,
    autocast_dtype: torch.dtype | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """log pi(token_t | tokens_<t) for every column, (M, L); column 0 is 0. Differentiable."""
    return token_logprobs_and_entropy(
        model,
        sequences,
        attention_mask,
        with_entropy=False,
        autocast_dtype=autocast_dtype,
        temperature=temperature,
    )[0]


def concat_rollouts(batches: list[RolloutBatch], *, pad_id: int) -> RolloutBatch:
    """Stack rollout batches (e.g. several dynamic-sampling rounds) into one.

    Prompts are re-left-padded to the longest prompt part and completions right-padded to the
    longest completion part, so the layout of :class:`RolloutBatch` holds; ``prompt_index`` of batch
    k is offset by the number of prompts in batches 0..k-1. All batches must share ``num_samples``.
    """
    if not batches:
        raise ValueError("batches must not be empty")
    N = batches[0].num_samples
    if any(b.num_samples != N for b in batches):
        raise ValueError(
            f"all batches must share num_samples, got {[b.num_samples for b in batches]}"
        )
    P = max(b.prompt_length for b in batches)
    T = max(b.sequences.shape[1] - b.prompt_length for b in batches)
    pad = torch.nn.functional.pad
    cols = {
        k: []
        for k in ("sequences", "attention_mask", "completion_mask", "old_logprobs", "prompt_index")
    }
    offset, completions, finished = 0, [], []
    for b in batches:
        left, right = P - b.prompt_length, T - (b.sequences.shape[1] - b.prompt_length)
        cols["sequences"].append(pad(b.sequences, (left, right), value=pad_id))
        cols["attention_mask"].append(pad(b.attention_mask, (left, right), value=False))
        cols["completion_mask"].append(pad(b.completion_mask, (left, right), value=False))
        cols["old_logprobs"].append(pad(b.old_logprobs, (left, right), value=0.0))
        cols["prompt_index"].append(b.prompt_index + offset)
        offset += int(b.prompt_index.max()) + 1 if len(b.prompt_index) else 0
        completions += b.completions
        finished.append(
            b.finished
            if b.finished is not None
            else torch.zeros(len(b.completions), dtype=torch.bool)
        )
    return RolloutBatch(
        **{k: torch.cat(v) for k, v in cols.items()},
        completions=completions,
        prompt_length=P,
        num_samples=N,
        finished=torch.cat(finished),
    )
