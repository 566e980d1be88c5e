"""Experiment trackers our trainer reports its metrics to, besides metrics.jsonl (always written):
``report_to`` "none" (the default), "tensorboard" (OUT/tensorboard, TensorBoard's event files) or
"trackio" (Hugging Face's local tracker, ``trackio show`` to view; project "fgrpo", the run
directory's name as the run's). Both packages are optional extras (``fgrpo[tensorboard]``,
``fgrpo[trackio]``), imported only when asked for; a missing one is a one-line ValueError.

    fgrpo-llm train --base BASE --out runs/r1 --report-to trackio
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path

__all__ = ["REPORT_TO", "Tracker", "open_tracker", "require_tracker"]

#: The trackers ``TrainConfig.report_to`` and ``fgrpo-llm train --report-to`` take.
REPORT_TO = ("none", "tensorboard", "trackio")

#: report_to -> (the module to import, the requirement to install)
_PACKAGE = {
    "tensorboard": ("torch.utils.tensorboard", "tensorboard>=2.14"),
    "trackio": ("trackio", "trackio>=0.4"),
}


def require_tracker(report_to: str):
    """The module behind ``report_to`` (None for "none"), imported now; a ValueError naming the
    missing package and its extra when it is not installed."""
    if report_to not in REPORT_TO:
        raise ValueError(f"report_to must be one of {REPORT_TO}, got report_to={report_to!r}")
    if report_to == "none":
        return None
    module, requirement = _PACKAGE[report_to]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(
            f"report_to={report_to!r} needs the {report_to} package, which is not installed: "
            f"pip install '{requirement}' (or the fgrpo[{report_to}] extra)"
        ) from None


class Tracker:
    """One tracker's run: ``log(step, metrics)`` its finite numbers, ``close()`` at the end."""

    def __init__(self, log, close):
        self._log, self._close = log, close

    def log(self, step: int, metrics: dict) -> None:
        numbers = {}
        for key, value in metrics.items():
            value = value.item() if hasattr(value, "item") else value  # tensor, numpy scalar
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if math.isfinite(value):
                    numbers[key] = float(value)
        self._log(step, numbers)

    def close(self) -> None:
        self._close()


def open_tracker(
    report_to: str, out_dir, *, start_step: int = 0, config: dict | None = None
) -> Tracker | None:
    """The tracker of a run in ``out_dir`` that goes on after ``start_step`` (a resumed run
    continues its tracker's run: TensorBoard purges the steps after it, trackio resumes the run
    of the same name); None for "none"."""
    module = require_tracker(report_to)
    out_dir = Path(out_dir)
    if report_to == "tensorboard":
        writer = module.SummaryWriter(str(out_dir / "tensorboard"), purge_step=start_step + 1)

        def log_tb(step, numbers):
            for key, value in numbers.items():
                writer.add_scalar(key, value, step)

        return Tracker(log_tb, writer.close)
    if report_to == "trackio":
        module.init(
            project="fgrpo",
            name=out_dir.resolve().name,
            config=config,
            resume="allow" if start_step > 0 else "never",
        )
        return Tracker(lambda step, numbers: module.log(numbers, step=step), module.finish)
    return None
