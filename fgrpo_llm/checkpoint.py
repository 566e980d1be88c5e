"""Resumable training checkpoints, written atomically.

A checkpoint is a directory ``OUT/checkpoints/step_000050/`` holding the model and tokenizer as a
standard Hugging Face checkpoint (so ``load_model_and_tokenizer`` and the evaluators read it like
any base model) plus ``trainer_state.pt``: optimizer, LR scheduler, step, every random state
(the sampling ``torch.Generator``, torch's global RNG, the numpy ``Generator``, Python's
``random``) and the data-order cursor. Everything is written to a temporary sibling directory
that is renamed into place only when complete, so a crash never leaves a partial checkpoint;
``latest_checkpoint`` only ever sees complete ones. Restoring all of it makes a resumed run
produce the same metrics as an uninterrupted one.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

__all__ = ["save_checkpoint", "latest_checkpoint", "load_trainer_state", "capture_rng", "restore_rng"]

def _quiet():
    """Silence transformers' per-shard progress bar while writing a small checkpoint."""
    from fgrpo_llm.model import _quiet_hub

    return _quiet_hub()


_NAME = re.compile(r"^step_(\d+)$")
STATE_FILE = "trainer_state.pt"


def capture_rng(generator: torch.Generator, np_rng: np.random.Generator) -> dict:
    """Every random state of a run: the explicit generators plus the global ones (dropout, Python)."""
    state = {"torch_generator": generator.get_state(), "torch_generator_device": generator.device.type,
             "torch_global": torch.get_rng_state(),
             "numpy": np_rng.bit_generator.state, "python": random.getstate()}
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict, generator: torch.Generator, np_rng: np.random.Generator) -> None:
    """Undo ``capture_rng``: put every random stream back where it was.

    The sampling generator's state only fits a generator of the same device type (CPU and CUDA
    generators differ), so resuming on another kind of device is a ValueError naming both.
    """
    saved_on = state.get("torch_generator_device", generator.device.type)
    if saved_on != generator.device.type:
        raise ValueError(f"the checkpoint's sampling generator was saved on {saved_on!r} and cannot be "
                         f"restored on {generator.device.type!r}; resume with --device {saved_on}")
    generator.set_state(state["torch_generator"])
    torch.set_rng_state(state["torch_global"])
    np_rng.bit_generator.state = state["numpy"]
    random.setstate(state["python"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


def _checkpoints(run_dir) -> list[tuple[int, Path]]:
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _NAME.match(p.name)) and (p / STATE_FILE).is_file()]
    return sorted(found)


def latest_checkpoint(run_dir) -> Path | None:
    """The complete checkpoint with the highest step under ``run_dir/checkpoints``, or None."""
    found = _checkpoints(run_dir)
    return found[-1][1] if found else None


def save_checkpoint(run_dir, step: int, *, model, tokenizer, optimizer, scheduler, rng: dict,
                    data_state: dict, keep: int = 0) -> Path:
    """Write ``run_dir/checkpoints/step_<step>`` atomically; keep the ``keep`` newest (0 = all)."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=root))
    try:
        with _quiet():
            model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        torch.save({"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "rng": rng, "data": data_state}, tmp / STATE_FILE)
        if final.exists():  # a rerun of the same step: replace it
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if keep > 0:
        for _, old in _checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_trainer_state(checkpoint_dir) -> dict:
    """The ``trainer_state.pt`` of a checkpoint (optimizer, scheduler, step, rng, data)."""
    path = Path(checkpoint_dir) / STATE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"not a training checkpoint (no {STATE_FILE}): {checkpoint_dir}")
    return torch.load(path, map_location="cpu", weights_only=False)
