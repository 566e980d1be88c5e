"""Damaged inputs are refused by messages that name the file: a trainer state whose step is not
an integer, a ``groups.jsonl`` whose tail is binary bytes, a model directory that holds its
weights only as a pickle (our own refusal, never torch's advice to pass weights_only=False)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from fgrpo_llm.checkpoint import STATE_JSON, CorruptCheckpoint, _write_state, load_trainer_state
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.tracking import truncate_jsonl


@pytest.mark.parametrize("step", ["x", -1, 2.5, True, None])
def test_a_trainer_state_with_a_bad_step_names_its_file(tmp_path, step):
    state = {"step": step, "optimizer": {}, "scheduler": {}, "rng": {}, "data": {}}
    _write_state(tmp_path, state)  # the checkpoint's own encoding, the step tampered with
    with pytest.raises(CorruptCheckpoint) as err:
        load_trainer_state(tmp_path)
    assert str(tmp_path / STATE_JSON) in str(err.value) and "step" in str(err.value)


def _groups(path, tail: bytes):
    lines = [json.dumps({"step": s, "prompt_id": "p", "N": 2, "num_correct": 1}) for s in (1, 2)]
    path.write_bytes(("\n".join(lines) + "\n").encode() + tail)


def test_a_binary_tail_on_groups_jsonl_is_dropped_as_a_torn_line(tmp_path):
    path = tmp_path / "groups.jsonl"
    _groups(path, b"\x80\xff\x00\x9c binary")
    truncate_jsonl(path, max_step=5)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2]


def test_binary_bytes_before_the_last_line_name_the_file_and_line(tmp_path):
    path = tmp_path / "groups.jsonl"
    _groups(path, b"\x80\xff binary\n" + json.dumps({"step": 3}).encode() + b"\n")
    with pytest.raises(ValueError, match=rf"{path}:3 is damaged"):
        truncate_jsonl(path, max_step=5)


def test_a_model_directory_with_only_a_pickle_is_our_own_refusal(tiny_checkpoint, tmp_path):
    model_dir = tmp_path / "m"
    shutil.copytree(tiny_checkpoint, model_dir)
    weights = sorted(model_dir.glob("*.safetensors"))
    assert weights
    model, _ = load_model_and_tokenizer(tiny_checkpoint, device="cpu")
    for w in weights:
        w.unlink()
    torch.save(model.state_dict(), model_dir / "pytorch_model.bin")
    with pytest.raises(ValueError) as err:
        load_model_and_tokenizer(model_dir, device="cpu")
    text = str(err.value)
    assert str(model_dir) in text and "pickle" in text and "pytorch_model.bin" in text
    assert "weights_only" not in text and "\n" not in text
