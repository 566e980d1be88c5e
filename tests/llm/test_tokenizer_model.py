"""Tokenizers (round trip, special ids) and models (build, save/load, errors, device/dtype)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_llm.model import (
    autocast,
    build_tiny_model,
    count_parameters,
    load_model_and_tokenizer,
    resolve_autocast_dtype,
    resolve_device,
    save_model_and_tokenizer,
)
from fgrpo_llm.rollout import SamplingParams
from fgrpo_llm.tasks.countdown import ALPHABET
from fgrpo_llm.tokenizer import PRINTABLE_ALPHABET, build_char_tokenizer, build_word_tokenizer

_CHAR = build_char_tokenizer(ALPHABET)  # module level: hypothesis examples share it


def test_special_token_ids_are_fixed_and_pad_is_not_eos(char_tokenizer, word_tokenizer):
    for tok in (char_tokenizer, word_tokenizer):
        assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (
            0,
            1,
            2,
            3,
        )
        assert tok.pad_token_id != tok.eos_token_id
    assert len(char_tokenizer) == 4 + len(ALPHABET)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=30))
def test_char_round_trip_one_token_per_character(text):
    tok = _CHAR
    ids = tok(text).input_ids
    assert ids[0] == tok.bos_token_id and len(ids) == len(text) + 1
    assert tok.decode(ids + [tok.eos_token_id, tok.pad_token_id], skip_special_tokens=True) == text


def test_char_unknown_character_maps_to_unk(char_tokenizer):
    assert (
        char_tokenizer("3x", add_special_tokens=False).input_ids[1] == char_tokenizer.unk_token_id
    )


def test_printable_alphabet_round_trip():
    tok = build_char_tokenizer(PRINTABLE_ALPHABET)
    text = "Let x = {1, 2}; \\boxed{\\frac{1}{2}}\n"
    assert tok.decode(tok(text).input_ids, skip_special_tokens=True) == text


def test_word_tokenizer_round_trip(word_tokenizer):
    text = "# . S\nG U  L"
    ids = word_tokenizer(text).input_ids
    assert len(ids) == 1 + 6 and word_tokenizer.unk_token_id not in ids
    assert word_tokenizer.decode(ids, skip_special_tokens=True) == "# . S G U L"
    assert (
        word_tokenizer("# X", add_special_tokens=False).input_ids[1] == word_tokenizer.unk_token_id
    )


@pytest.mark.parametrize("bad", ["", None])
def test_char_tokenizer_rejects_empty_alphabet(bad):
    with pytest.raises(ValueError, match="alphabet"):
        build_char_tokenizer(bad)


@pytest.mark.parametrize("bad", [[], ["a b"], [""]])
def test_word_tokenizer_rejects_bad_words(bad):
    with pytest.raises(ValueError, match="words"):
        build_word_tokenizer(bad)


def test_a_chat_template_that_writes_bos_gets_one_bos():
    """A template that writes the BOS token itself (Llama 3's) into a tokenizer that also
    prepends one: the sampler, the exact scorer and boxed math's length filter read one BOS,
    not two; a prompt without it still gets the tokenizer's."""
    from fgrpo_llm.rollout import _encode_prompts
    from fgrpo_llm.tasks.base import encode_prompt
    from fgrpo_llm.tasks.boxed_math import format_prompt

    tok = build_char_tokenizer(PRINTABLE_ALPHABET)
    tok.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    text = format_prompt("1+1?", tok, system_prompt="S")
    assert text.startswith(tok.bos_token)
    ids = encode_prompt(tok, text)
    assert ids[0] == tok.bos_token_id and ids[1] != tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == "S1+1?"
    assert _encode_prompts(tok, [text], tok.pad_token_id)[0][0].tolist() == ids
    assert encode_prompt(tok, "1+1?") == tok("1+1?")["input_ids"]  # BOS prepended once


def test_default_model_is_about_one_million_parameters(char_tokenizer):
    model = build_tiny_model(char_tokenizer)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert 0.8e6 < count_parameters(model) < 1.3e6
    assert model.config.pad_token_id == 0 and model.config.eos_token_id == 2


def test_same_seed_same_weights_and_global_rng_untouched(char_tokenizer):
    state = torch.random.get_rng_state()
    a = build_tiny_model(char_tokenizer, hidden_size=32, num_layers=1, num_heads=2, seed=3)
    assert torch.equal(state, torch.random.get_rng_state())
    b = build_tiny_model(char_tokenizer, hidden_size=32, num_layers=1, num_heads=2, seed=3)
    c = build_tiny_model(char_tokenizer, hidden_size=32, num_layers=1, num_heads=2, seed=4)
    wa, wb, wc = (m.model.layers[0].mlp.up_proj.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


@pytest.mark.parametrize("kwargs", [dict(hidden_size=0), dict(num_heads=3), dict(num_layers=-1)])
def test_build_rejects_bad_sizes(char_tokenizer, kwargs):
    with pytest.raises(ValueError):
        build_tiny_model(char_tokenizer, **kwargs)


def test_save_load_round_trip_same_logits(tiny_model, char_tokenizer, tmp_path):
    x = torch.tensor([char_tokenizer("3 5 7=22:3*5+7").input_ids])  # (1, T)
    with torch.no_grad():
        before = tiny_model(x).logits
    save_model_and_tokenizer(tiny_model, char_tokenizer, tmp_path / "ck")
    model, tok = load_model_and_tokenizer(tmp_path / "ck", device="cpu")
    assert tok("3 5 7=22:3*5+7").input_ids == x[0].tolist()
    assert tok.pad_token_id == 0 and tok.eos_token_id == 2
    with torch.no_grad():
        after = model(x).logits
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    assert not model.training


def test_atomic_save_replaces_the_models_files_and_keeps_the_rest(
    tiny_model, char_tokenizer, tmp_path
):
    path = tmp_path / "ck"
    save_model_and_tokenizer(tiny_model, char_tokenizer, path)
    (path / "log.jsonl").write_text("x\n")
    (path / "notes.txt").write_text("mine\n")
    (path / "pytorch_model.bin").write_bytes(b"stale weights")  # a model file: replaced
    save_model_and_tokenizer(tiny_model, char_tokenizer, path, keep=("log.jsonl",))
    assert (path / "log.jsonl").read_text() == "x\n"
    assert (path / "notes.txt").read_text() == "mine\n"  # not the model's: kept
    assert not (path / "pytorch_model.bin").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]  # no temporary leftovers


def test_load_missing_checkpoint_names_the_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="nope"):
        load_model_and_tokenizer(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        load_model_and_tokenizer(empty)
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    with pytest.raises(FileNotFoundError, match="file.txt"):
        load_model_and_tokenizer(afile)


def test_load_corrupt_checkpoint_is_value_error(tiny_checkpoint, tmp_path):
    import shutil

    bad = tmp_path / "corrupt"
    shutil.copytree(tiny_checkpoint, bad)
    (bad / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="corrupt"):
        load_model_and_tokenizer(bad)
    bad_config = tmp_path / "badcfg"
    shutil.copytree(tiny_checkpoint, bad_config)
    (bad_config / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="badcfg"):
        load_model_and_tokenizer(bad_config)


def test_load_tiny_checkpoint_fixture(tiny_checkpoint):
    model, tok = load_model_and_tokenizer(tiny_checkpoint)
    assert json.loads((tiny_checkpoint / "config.json").read_text())["model_type"] == "qwen2"
    assert model.config.vocab_size == len(tok)


def test_device_and_dtype_resolution():
    cpu = resolve_device("cpu")
    assert cpu.type == "cpu"
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_autocast_dtype(cpu) is None
    assert resolve_autocast_dtype(torch.device("cuda")) == torch.bfloat16
    assert resolve_autocast_dtype(cpu, "bfloat16") == torch.bfloat16
    assert resolve_autocast_dtype(torch.device("cuda"), "float32") is None
    with pytest.raises(ValueError, match="dtype"):
        resolve_autocast_dtype(cpu, "int8")
    with pytest.raises(ValueError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            resolve_device("cuda")


def test_autocast_context(tiny_model, char_tokenizer):
    x = torch.tensor([char_tokenizer("1 2=3:").input_ids])
    with torch.no_grad(), autocast(torch.device("cpu"), None):
        assert tiny_model(x).logits.dtype == torch.float32
    with torch.no_grad(), autocast(torch.device("cpu"), torch.bfloat16):
        assert tiny_model(x).logits.dtype == torch.bfloat16


# -- a checkpoint as verl or TRL saves it: a BPE tokenizer with a chat template --------------------

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _bpe_chat_tokenizer():
    """A byte-level BPE tokenizer trained here on a few lines, with Qwen-style chat tokens
    (nothing downloads)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    corpus = [
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "What is 1+1? The answer is \\boxed{2}.",
        "Compute 3/6 as a fraction: \\boxed{\\frac{1}{2}}",
    ] * 20
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def test_engine_style_checkpoint_with_bpe_and_chat_template(tmp_path, llm_data_dir):
    import warnings

    from fgrpo_llm.evaluation.passk import evaluate_model
    from fgrpo_llm.evaluation.rare import build_rare_set
    from fgrpo_llm.tasks import chat_messages
    from fgrpo_llm.tasks.boxed_math import SYSTEM_PROMPT, BoxedMathTask

    tok = _bpe_chat_tokenizer()
    model = build_tiny_model(
        tok, hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=256, seed=0
    )
    ck = tmp_path / "engine_ckpt"
    model.save_pretrained(ck)  # what verl's HF export and TRL's save_model write
    tok.save_pretrained(ck)
    loaded, tok2 = load_model_and_tokenizer(ck, device="cpu")
    text = "What is 1+1? \\boxed{2}"
    assert tok2(text).input_ids == tok(text).input_ids and tok2.decode(tok2(text).input_ids) == text
    assert tok2.chat_template == CHAT_TEMPLATE and tok2.eos_token == "<|im_end|>"
    x = torch.tensor([tok(text).input_ids])
    with torch.no_grad():
        torch.testing.assert_close(loaded(x).logits, model(x).logits, rtol=0, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = BoxedMathTask(
            path=llm_data_dir / "boxed_train.jsonl",
            test_path=llm_data_dir / "boxed_test.jsonl",
            tokenizer=tok2,
        )
    p = task.problems("test")[0]
    assert p.prompt.startswith("<|im_start|>system\n" + SYSTEM_PROMPT) and p.prompt.endswith(
        "<|im_start|>assistant\n"
    )
    # the chat messages an engine gets (verl's rows, TRL's conversational dataset) are the
    # prompt our trainer and evaluations feed the model, once the engine applies the template
    messages = chat_messages(p)
    assert [m["role"] for m in messages] == ["system", "user"]
    rendered = tok2.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == p.prompt
    results, outcomes = evaluate_model(
        loaded,
        tok2,
        task,
        splits=["test"],
        n=2,
        ks=[1, 2],
        sampling=SamplingParams(max_new_tokens=4),
        generator=torch.Generator().manual_seed(0),
    )
    assert outcomes["test"].shape == (2, 2) and 0 <= results["splits"]["test"]["pass@2"] <= 1
    rare = build_rare_set(
        loaded,
        tok2,
        task,
        task.problems("train")[:2],
        num_rollouts=4,
        sampling=SamplingParams(max_new_tokens=4),
        generator=torch.Generator().manual_seed(0),
    )
    assert set(rare.prompts) == {q.id for q in task.problems("train")[:2]}
