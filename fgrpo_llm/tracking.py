"""Run tracking: metrics.jsonl (always), TensorBoard (optional), a tqdm progress bar.

One flat dict of slash-keyed metrics per step, written as one JSON line and flushed at once, so
a crashed run keeps every finished step. On resume the lines of steps after the checkpoint are
dropped first (they will be recomputed), so the file reads as if the run never stopped.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from tqdm.auto import tqdm

from fgrpo_llm.files import atomic_write_text

__all__ = ["JsonlWriter", "MetricsLogger", "truncate_jsonl"]


def _clean(value):
    """JSON-safe scalars: NaN/inf become null (strict JSON), tensors/numpy scalars become floats."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _step_of(line: str) -> float:
    """The "step" of one JSON line; a line torn by a crash mid-write counts as after every step."""
    try:
        return json.loads(line).get("step", 0)
    except (json.JSONDecodeError, AttributeError):
        return math.inf


def truncate_jsonl(path, *, max_step: int) -> None:
    """Keep only the lines of ``path`` whose "step" is <= ``max_step`` (no-op if the file is missing).

    Unreadable lines (the torn last line of a killed run) are dropped too.
    """
    path = Path(path)
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and _step_of(line) <= max_step]
    atomic_write_text(path, "".join(line + "\n" for line in kept))


class JsonlWriter:
    """Append one JSON object per line to ``path``, flushed after every write."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a")

    def write(self, record: dict) -> None:
        self._f.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class MetricsLogger:
    """metrics.jsonl + optional TensorBoard + progress bar for steps ``start_step+1 .. total_steps``."""

    def __init__(self, out_dir, *, total_steps: int, start_step: int = 0, tensorboard: bool = False,
                 progress: bool = True):
        out_dir = Path(out_dir)
        truncate_jsonl(out_dir / "metrics.jsonl", max_step=start_step)
        self.jsonl = JsonlWriter(out_dir / "metrics.jsonl")
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out_dir / "tensorboard"), purge_step=start_step + 1)
            except ImportError:
                print("fgrpo-llm: tensorboard is not installed; writing metrics.jsonl only", file=sys.stderr)
        self.bar = tqdm(total=total_steps, initial=start_step, file=sys.stderr, disable=not progress,
                        desc="train", dynamic_ncols=True)

    def log(self, step: int, metrics: dict) -> None:
        """Write one line {"step": step, **metrics} and advance the bar."""
        self.jsonl.write({"step": step, **metrics})
        if self.tb is not None:
            for key, value in metrics.items():
                value = _clean(value)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.tb.add_scalar(key, value, step)
        self.bar.set_postfix({k: f"{metrics[k]:.3g}" for k in ("reward/mean", "loss/total") if k in metrics
                              and isinstance(metrics[k], (int, float))}, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()
        self.bar.close()
