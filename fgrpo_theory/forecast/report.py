"""``forecast.json``: the forecast as a file, committed before the cells it predicts are trained
(the rules of the forecast study; git history dates it).

    {"model": {...}, "fitted": {"lr_theta_scale", "lr_phi_scale"}, "fit_cells": [...],
     "cells": [{"cell", "base", "predicted": {"delta_nll_rare", "pass@1", "pass@64"}}],
     "code_commit": "<git sha>", "created": "<ISO time, UTC>"}

    write_forecast("docs/data/forecast.json", fitted=fit, fit_cells=[...], cells=[...])
"""

from __future__ import annotations

import json
import math
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from fgrpo_common.files import atomic_write_text
from fgrpo_theory.forecast.fit import FitResult

__all__ = ["MODEL", "write_forecast", "code_commit", "read_forecast"]

#: What the forecast model is (written into every forecast.json).
MODEL = {
    "name": "tied prefix-tree categorical policy",
    "version": 1,
    "description": (
        "A categorical policy over each prompt's enumerated answers and one malformed outcome; "
        "pi(y|x) is a product of softmaxes along y's path in the prompt's prefix tree of "
        "tokens, with logit theta[x, node, child] + phi[(prefix, next token)]: theta per "
        "prompt, phi shared by every prompt holding the same prefix and continuation. The "
        "malformed outcome is a root child with one shared key. Initialised at the base's exact "
        "distribution (phi = 0). Trained on the LLM run's prompt order, N, weighting, lr, "
        "warm-up and AdamW (lazy rows, decay toward the base), loss averaged over the B*N rows "
        "of a step; exact Delta NLL_rare and pass@k from the final distribution."
    ),
    "free_parameters": {
        "lr_theta_scale": "step size of the per-prompt logits, in units of the LLM lr",
        "lr_phi_scale": "step size of the shared logits, in units of the LLM lr",
    },
}


def code_commit(repo: str | Path | None = None) -> str:
    """The git commit (HEAD) of ``repo`` (default: this package's checkout); a ValueError when
    it is not a git checkout or has uncommitted changes under fgrpo_theory/forecast."""
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "fgrpo_theory/forecast"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as e:
        raise ValueError(f"{repo} is not a git checkout: {e}") from None
    if dirty:
        raise ValueError(f"the forecast code has uncommitted changes in {repo}: commit it first")
    return sha


def _finite(name: str, value) -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def write_forecast(
    path,
    *,
    fitted: FitResult,
    fit_cells: list,
    cells: list,
    commit: str | None = None,
    extra: dict | None = None,
) -> Path:
    """Write forecast.json at ``path`` (atomically). ``cells``: [{"cell", "base", "predicted":
    {"delta_nll_rare", "pass@1", "pass@64"}}]; ``fit_cells``: the cells fitted on (names or
    records); a cell's other entries (its per-trajectory values, say) are kept as they are;
    ``commit``: the code's commit (default ``code_commit()``); ``extra``: more
    top-level entries (the null models' predictions, say)."""
    out_cells = []
    for c in cells:
        pred = c.get("predicted", {})
        missing = {"delta_nll_rare", "pass@1", "pass@64"} - set(pred)
        if "cell" not in c or "base" not in c or missing:
            raise ValueError(f"a cell needs 'cell', 'base' and predicted {sorted(missing)}: {c}")
        out_cells.append({
            **{k: v for k, v in c.items() if k not in ("cell", "base", "predicted")},
            "cell": str(c["cell"]),
            "base": c["base"],
            "predicted": {k: _finite(f"{c['cell']} {k}", v) for k, v in pred.items()},
        })  # fmt: skip
    doc = {
        "model": MODEL,
        "fitted": {
            "lr_theta_scale": _finite("lr_theta_scale", fitted.lr_theta_scale),
            "lr_phi_scale": _finite("lr_phi_scale", fitted.lr_phi_scale),
            "loss": _finite("loss", fitted.loss),
        },
        "fit_cells": list(fit_cells),
        "cells": out_cells,
        "code_commit": commit if commit is not None else code_commit(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if extra:
        clash = set(extra) & set(doc)
        if clash:
            raise ValueError(f"extra entries {sorted(clash)} would overwrite the forecast's own")
        doc.update(extra)
    return atomic_write_text(Path(path), json.dumps(doc, indent=2, sort_keys=False) + "\n")


def read_forecast(path) -> dict:
    """forecast.json as a dict (a ValueError naming the file when it is not one)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable forecast.json ({e})") from None
    if not isinstance(doc, dict) or not {"model", "fitted", "cells", "code_commit"} <= set(doc):
        raise ValueError(f"{path}: not a forecast.json (needs model, fitted, cells, code_commit)")
    return doc
