"""Resumable training checkpoints: written atomically, verified on load, never pickled.

A checkpoint is a directory ``OUT/checkpoints/step_000050/`` holding

- the model and tokenizer as a standard Hugging Face checkpoint (safetensors weights), so
  ``load_model_and_tokenizer`` and the evaluators read it like any base model;
- the trainer state (optimizer, LR scheduler, step, every random stream, the data cursor) as
  ``trainer_state.safetensors`` (its tensors) plus ``trainer_state.json`` (everything else): no
  pickle, so a crafted run directory cannot execute code on ``--resume``;
- ``manifest.json``, written last: the size and SHA-256 of every other file.

The directory is built under a temporary name and renamed into place when complete
(``fgrpo_common.files.atomic_directory``), so a kill never leaves a partial checkpoint under its
final name; :func:`resume_point` checks each checkpoint's manifest and falls back, saying so, from
a damaged one (a truncated file, a changed byte) to the previous complete one. Restoring all of it
makes a resumed run produce the same metrics as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from fgrpo_common.files import atomic_directory, atomic_write_text

__all__ = [
    "save_checkpoint",
    "list_checkpoints",
    "latest_checkpoint",
    "verify_checkpoint",
    "load_trainer_state",
    "resume_point",
    "capture_rng",
    "restore_rng",
    "CorruptCheckpoint",
]

_NAME = re.compile(r"^step_(\d+)$")
STATE_TENSORS = "trainer_state.safetensors"
STATE_JSON = "trainer_state.json"
MANIFEST = "manifest.json"
#: The run's settings a checkpoint was made with (those a resume may not change).
SETTINGS_JSON = "run_settings.json"
#: What a checkpoint's manifest must list (with the model's weights, whose file name varies).
REQUIRED_FILES = (STATE_JSON, STATE_TENSORS, "config.json")


class CorruptCheckpoint(ValueError):
    """A checkpoint directory whose files do not match its manifest, or cannot be read."""


def capture_rng(generator: torch.Generator) -> dict:
    """Every random state of a run: its explicit generator (sampling and mini-batch shuffling)
    plus the global ones (dropout, Python)."""
    state = {
        "torch_generator": generator.get_state(),
        "torch_generator_device": generator.device.type,
        "torch_global": torch.get_rng_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict, generator: torch.Generator) -> None:
    """Undo ``capture_rng``: put every random stream back where it was (the numpy state that
    earlier versions saved, of a generator nothing drew from, is not needed).

    The sampling generator's state only fits a generator of the same device type (CPU and CUDA
    generators differ), so resuming on another kind of device is a ValueError naming both.
    """
    saved_on = state.get("torch_generator_device", generator.device.type)
    if saved_on != generator.device.type:
        raise ValueError(
            f"the checkpoint's sampling generator was saved on {saved_on!r} and cannot be "
            f"restored on {generator.device.type!r}; resume with --device {saved_on}"
        )
    generator.set_state(state["torch_generator"])
    torch.set_rng_state(state["torch_global"])
    random.setstate(state["python"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state["torch_cuda"]))


# ----------------------------------------------------------------------------- pickle-free state
def _encode(obj, tensors: dict, path: str):
    """``obj`` as plain JSON, its tensors moved into ``tensors`` under their path in the structure.

    Tuples and dicts with non-string keys are tagged so that :func:`_decode` rebuilds them exactly.
    """
    if isinstance(obj, torch.Tensor):
        key = path or "root"
        tensors[key] = obj.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {"__dict__": {k: _encode(v, tensors, f"{path}.{k}") for k, v in obj.items()}}
        return {
            "__items__": [
                [_encode(k, tensors, f"{path}.k{i}"), _encode(v, tensors, f"{path}.{i}")]
                for i, (k, v) in enumerate(obj.items())
            ]
        }
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} at {path or 'root'} in a checkpoint")


def _decode(obj, tensors: dict):
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if "__dict__" in obj:
        return {k: _decode(v, tensors) for k, v in obj["__dict__"].items()}
    if "__items__" in obj:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__items__"]}
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors) for v in obj["__tuple__"])
    if "__float__" in obj:
        return float(obj["__float__"])
    raise ValueError(f"unknown entry in a trainer state: {sorted(obj)}")


def _write_state(directory: Path, state: dict) -> None:
    from safetensors.torch import save_file

    tensors: dict = {}
    encoded = _encode(state, tensors, "")
    save_file(tensors, str(directory / STATE_TENSORS))
    (directory / STATE_JSON).write_text(json.dumps(encoded))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_manifest(directory: Path) -> None:
    files = {
        p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(directory.iterdir())
        if p.is_file()
    }
    atomic_write_text(directory / MANIFEST, json.dumps({"files": files}, indent=1, sort_keys=True))


# ----------------------------------------------------------------------------- writing and finding
def list_checkpoints(run_dir) -> list[tuple[int, Path]]:
    """``(step, directory)`` of every checkpoint under ``run_dir/checkpoints`` that has a manifest,
    oldest first (a directory without one was never completed)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _NAME.match(p.name)) and (p / MANIFEST).is_file()
    ]
    return sorted(found)


def latest_checkpoint(run_dir) -> Path | None:
    """The checkpoint with the highest step under ``run_dir/checkpoints``, or None."""
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def save_checkpoint(
    run_dir,
    step: int,
    *,
    model,
    tokenizer,
    optimizer,
    scheduler,
    rng: dict,
    data_state: dict,
    keep: int = 0,
    settings: dict | None = None,
) -> Path:
    """Write ``run_dir/checkpoints/step_<step>`` atomically; keep the ``keep`` newest (0 = all).
    ``settings`` (the run's, as JSON) are saved with it (``run_settings.json``), so that a resume
    can tell a checkpoint of another run.

    Non-finite weights are refused (``fgrpo_llm.model.check_finite_parameters``): a diverged policy
    is never checkpointed.
    """
    from fgrpo_llm.model import _quiet_hub, check_finite_parameters  # lazy: transformers

    check_finite_parameters(model)
    final = Path(run_dir) / "checkpoints" / f"step_{step:06d}"
    with atomic_directory(final) as tmp:
        with _quiet_hub():
            model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _write_state(
            tmp,
            {
                "step": step,
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": rng,
                "data": data_state,
            },
        )
        if settings is not None:
            (tmp / SETTINGS_JSON).write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n")
        _write_manifest(tmp)
    if keep > 0:
        for _, old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def verify_checkpoint(checkpoint_dir) -> None:
    """A :class:`CorruptCheckpoint` naming the first file that is missing, truncated or changed."""
    directory = Path(checkpoint_dir)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CorruptCheckpoint(
            f"{directory}: unreadable {MANIFEST} ({type(err).__name__})"
        ) from None
    if not isinstance(manifest, dict) or not all(
        isinstance(name, str) and isinstance(entry, dict) for name, entry in manifest.items()
    ):
        raise CorruptCheckpoint(f"{directory}: {MANIFEST} does not map file names to entries")
    missing = [name for name in REQUIRED_FILES if name not in manifest]
    if missing:
        raise CorruptCheckpoint(f"{directory}: {MANIFEST} does not list {missing[0]}")
    for name, entry in manifest.items():
        path = directory / name
        if not path.is_file():
            raise CorruptCheckpoint(f"{directory}: {name} is missing")
        if path.stat().st_size != entry.get("bytes"):
            raise CorruptCheckpoint(
                f"{directory}: {name} has {path.stat().st_size} bytes, expected "
                f"{entry.get('bytes')}"
            )
        if _sha256(path) != entry.get("sha256"):
            raise CorruptCheckpoint(f"{directory}: {name} does not match its checksum")


def load_trainer_state(checkpoint_dir) -> dict:
    """The trainer state of a checkpoint (optimizer, scheduler, step, rng, data), read without
    pickle."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(checkpoint_dir)
    if not (directory / STATE_JSON).is_file():
        old = (
            " (an older, pickle-based format this version refuses to load)"
            if (directory / "trainer_state.pt").is_file()
            else ""
        )
        raise FileNotFoundError(f"not a training checkpoint (no {STATE_JSON}){old}: {directory}")
    try:
        tensors = load_file(str(directory / STATE_TENSORS))
        state = _decode(json.loads((directory / STATE_JSON).read_text()), tensors)
    except (OSError, ValueError, KeyError, RecursionError, SafetensorError) as err:
        raise CorruptCheckpoint(
            f"{directory}: unreadable trainer state ({type(err).__name__}: {err})"
        ) from None
    if not isinstance(state, dict) or not {"step", "optimizer", "scheduler", "rng", "data"} <= set(
        state
    ):
        raise CorruptCheckpoint(f"{directory}: the trainer state lacks required entries")
    step = state["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CorruptCheckpoint(
            f"{directory / STATE_JSON}: step must be an integer >= 0, got step={step!r}"
        )
    return state


def resume_point(run_dir, *, device=None):
    """The newest checkpoint that verifies and loads: ``(directory, model, tokenizer, state)``, or
    None when the run has no checkpoint at all.

    A damaged checkpoint is skipped for the previous one, and reported on stderr when an earlier
    one loads; when every checkpoint is damaged, one :class:`CorruptCheckpoint` names them all.
    """
    from fgrpo_llm.model import load_model_and_tokenizer  # lazy: transformers

    found = list_checkpoints(run_dir)
    problems = []
    for _step, directory in reversed(found):
        try:
            verify_checkpoint(directory)
            state = load_trainer_state(directory)
            model, tokenizer = load_model_and_tokenizer(directory, device=device)
        except (CorruptCheckpoint, ValueError, FileNotFoundError) as err:
            problems.append(f"{directory.name}: {err}")
            continue
        for problem in problems:
            print(f"fgrpo-llm: skipping damaged checkpoint {problem}", file=sys.stderr)
        if problems:
            print(
                f"fgrpo-llm: resuming from the previous complete checkpoint, {directory.name}",
                file=sys.stderr,
            )
        return directory, model, tokenizer, state
    if found:
        raise CorruptCheckpoint(
            f"every checkpoint under {Path(run_dir) / 'checkpoints'} is damaged: "
            + "; ".join(problems)
        )
    return None
