"""Shared fixtures for the LLM tests: a tiny random model and tokenizers, built in seconds.

Nothing downloads. Fixtures:

- ``char_tokenizer`` (session): the Countdown character tokenizer (pad 0, bos 1, eos 2, unk 3).
- ``word_tokenizer`` (session): a word-level tokenizer over a few maze-like symbols.
- ``tiny_model`` (function, fresh each test): a random Qwen2ForCausalLM for ``char_tokenizer``
  (hidden 32, 2 layers, 2 heads; about 25k parameters), float32 on CPU, eval mode.
- ``countdown_task`` (session): ``CountdownTask(seed=0, num_test=20, num_ood=10)``.
- ``tiny_checkpoint`` (session): a directory holding a saved tiny model + tokenizer, loadable
  with ``load_model_and_tokenizer``. Do not write into it.
- ``llm_data_dir`` (session): ``tests/llm/data`` (small JSONL fixtures, some corrupt rows).
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.model import build_tiny_model, save_model_and_tokenizer  # noqa: E402
from fgrpo_llm.tasks.countdown import ALPHABET, CountdownTask  # noqa: E402
from fgrpo_llm.tokenizer import build_char_tokenizer, build_word_tokenizer  # noqa: E402

TINY = dict(hidden_size=32, num_layers=2, num_heads=2, max_position_embeddings=64)


@pytest.fixture(scope="session")
def char_tokenizer():
    return build_char_tokenizer(ALPHABET)


@pytest.fixture(scope="session")
def word_tokenizer():
    return build_word_tokenizer(["#", ".", "S", "G", "U", "D", "L", "R", "|"])


@pytest.fixture
def tiny_model(char_tokenizer):
    return build_tiny_model(char_tokenizer, seed=0, **TINY).eval()


@pytest.fixture(scope="session")
def countdown_task():
    return CountdownTask(seed=0, num_test=20, num_ood=10)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, char_tokenizer):
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_model_and_tokenizer(build_tiny_model(char_tokenizer, seed=0, **TINY), char_tokenizer, path)
    return path


@pytest.fixture(scope="session")
def llm_data_dir():
    return Path(__file__).parent / "data"
