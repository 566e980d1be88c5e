"""Small tokenizers for the built-in tasks, made with the ``tokenizers`` library.

Both are wrapped as a standard ``transformers.PreTrainedTokenizerFast`` and saved with
``save_pretrained`` next to the model, so a built-in checkpoint loads through exactly the
same code path as any user Hugging Face checkpoint (``model.load_model_and_tokenizer``).

Special tokens (fixed ids): ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3. Padding is
never the end-of-sequence token, so a mask can never be confused with a stop. Encoding
prepends ``<bos>`` (``add_special_tokens=True``, the default); ``<eos>`` is what the model
generates to stop and is never added by the tokenizer.

    tok = build_char_tokenizer("0123456789 +-*=:")
    tok("3 5 7=22:").input_ids   # [1, ...one id per character...]
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
RESERVED_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3

#: Printable ASCII plus newline: a character alphabet for free-form text tasks.
PRINTABLE_ALPHABET = "".join(sorted(set(string.printable) - set("\t\r\x0b\x0c")))


def _special_vocab() -> dict[str, int]:
    return {tok: i for i, tok in enumerate(RESERVED_TOKENS)}


def _wrap(core: Tokenizer) -> PreTrainedTokenizerFast:
    """Add the <bos> post-processor and wrap as a transformers fast tokenizer."""
    bos_id = core.token_to_id(BOS)
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK
    )


def build_char_tokenizer(alphabet: str) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: one token per character of ``alphabet``.

    Characters outside the alphabet encode to ``<unk>``. Decoding concatenates the
    characters (no spaces are inserted), so ``decode(encode(s)) == s`` for any ``s`` over
    the alphabet (with ``skip_special_tokens=True``).
    """
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError(f"alphabet must be a non-empty string, got {alphabet!r}")
    vocab = _special_vocab()
    for ch in dict.fromkeys(alphabet):  # unique, order kept
        vocab[ch] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.add_special_tokens(list(RESERVED_TOKENS))
    # Every single character is its own piece: whitespace included.
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return _wrap(core)


def build_word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over whitespace-separated symbols (e.g. maze cells, moves).

    Text is split on whitespace; each symbol in ``words`` is one token, anything else is
    ``<unk>``. Decoding joins symbols with single spaces.
    """
    words = list(words) if words is not None else []
    if not words:
        raise ValueError(f"words must be a non-empty list of symbols, got {words!r}")
    bad = [w for w in words if not isinstance(w, str) or not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"words must be non-empty strings without whitespace, got {bad[0]!r}")
    vocab = _special_vocab()
    for w in dict.fromkeys(words):
        vocab.setdefault(w, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.add_special_tokens(list(RESERVED_TOKENS))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return _wrap(core)
