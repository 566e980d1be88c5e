"""``fgrpo-llm forecast``: the theory as a forecast of a Countdown study (docs/forecast.md).

``fit`` fits the tied prefix-tree categorical model's two step sizes on every base's GRPO N = 8,
lr x 1, RL seed 0 run (exact evaluations computed when missing) and predicts every other cell of
the study before it is trained, with the null models; it writes forecast.json. ``score`` scores
a forecast against the runs trained since, blind cells first, held-out published ones second
(``fgrpo_llm.experiments.countdown.forecast_score``), and writes score.json, score.md (the
scores as a table) and a figure.

    fgrpo-llm forecast fit runs/study --out docs/data/forecast.json [--replicates 2]
    fgrpo-llm forecast score runs/study --forecast docs/data/forecast.json --out runs/score
"""

from __future__ import annotations

from pathlib import Path

from fgrpo_common.cli import add_json_flag, add_progress_flag, json_result
from fgrpo_common.files import atomic_write_text, writable_directory, writable_file, write_json


def _fit(args) -> dict:
    from fgrpo_llm.experiments.countdown.forecast_study import fit_study  # lazy: scipy
    from fgrpo_theory.forecast import write_forecast  # lazy: scipy

    if args.out is None:
        raise ValueError("forecast fit needs --out (the forecast.json to write)")
    writable_file(args.out, what="--out")  # before the minutes of work
    res = fit_study(
        args.study_dir, replicates=args.replicates, seed=args.seed, progress=not args.no_progress
    )
    extra = {**res["extra"], "timings": res["timings"]}
    path = write_forecast(
        args.out, fitted=res["fitted"], fit_cells=res["fit_cells"], cells=res["cells"], extra=extra
    )
    return {
        "path": str(path),
        "fitted": {
            "lr_theta_scale": res["fitted"].lr_theta_scale,
            "lr_phi_scale": res["fitted"].lr_phi_scale,
            "loss": res["fitted"].loss,
        },
        "bases": res["extra"]["study"]["bases"],
        "cells": len(res["cells"]),
        "timings": res["timings"],
    }


def _score(args) -> dict:
    from fgrpo_llm.experiments.countdown.forecast_score import (  # lazy: scipy
        score_forecast,
        score_table,
    )
    from fgrpo_llm.experiments.countdown.forecast_study import score_rows  # lazy: scipy
    from fgrpo_theory.forecast import read_forecast  # lazy: scipy

    if args.forecast is None or args.out is None:
        raise ValueError("forecast score needs --forecast FILE and --out DIR")
    doc = read_forecast(args.forecast)
    out = writable_directory(args.out, what="--out")
    rows = score_rows(args.study_dir, doc, progress=not args.no_progress)
    scores = score_forecast(rows, n_boot=args.bootstrap, seed=args.seed)
    path = out / "score.json"
    write_json(path, scores)  # atomic, strict JSON (NaN as null)
    atomic_write_text(out / "score.md", score_table(scores) + "\n")
    figure = _figure(rows, scores, out / "forecast_score.png")
    return {
        "path": str(path),
        "figure": str(figure),
        **{s: {"verdict": v["verdict"], "cells": v["cells"]} for s, v in scores.items()},
    }


def _figure(rows, scores, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fgrpo_llm.experiments.countdown.forecast_score import (  # lazy: scipy
        plot_cells,
        plot_rare,
    )

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    plot_cells(axes[0], scores["blind"], label="(blind)")
    plot_cells(axes[1], scores["published"], label="(held-out published)")
    pairs = [
        pm
        for r in rows
        if r["measured"] and r.get("per_rare") and r["stage"] != "fit"  # held-out cells only
        for pm in zip(r["per_rare"], r["measured"]["per_rare"], strict=True)
    ]
    plot_rare(axes[2], [p for p, _ in pairs], [m for _, m in pairs])
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _forecast(args) -> int:
    if not Path(args.study_dir).is_dir():
        raise FileNotFoundError(f"study directory not found: {args.study_dir}")
    summary = _fit(args) if args.action == "fit" else _score(args)
    if args.json:
        return json_result(args, summary)
    if args.action == "fit":
        f = summary["fitted"]
        print(
            f"fitted on {len(summary['bases'])} bases: s_theta={f['lr_theta_scale']:.4g}, "
            f"s_phi={f['lr_phi_scale']:.4g} (loss {f['loss']:.3g}); {summary['cells']} "
            f"cells predicted"
        )
        t = summary["timings"]
        print(
            f"time: inputs {t['inputs_s']:.1f} s, fit {t['fit_s']:.1f} s, predictions "
            f"{t['predict_s']:.1f} s (one cell {t['cell_s_median']:.2f} s)"
        )
    else:
        for stage in ("blind", "published"):
            print(f"{stage}: {summary[stage]['verdict']}")
        print(f"figure: {summary['figure']}")
    print(f"wrote {summary['path']}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "forecast",
        help="fit the theory's forecast of a Countdown study, or score it on the runs since",
        description="fit: the two step sizes on GRPO N = 8 lr x 1 (RL seed 0) of every base, "
        "and every other cell predicted (OUT is forecast.json). score: the forecast against the "
        "runs trained since, blind cells first (OUT is a directory).",
    )
    p.add_argument("action", choices=("fit", "score"), help="fit a forecast, or score one")
    p.add_argument("study_dir", help="the study's directory (fgrpo-llm study --out)")
    p.add_argument("--out", default=None, help="fit: forecast.json to write; score: a directory")
    p.add_argument("--forecast", default=None, help="score: the forecast.json to score")
    p.add_argument("--replicates", type=int, default=1, help="fit: model runs averaged per cell")
    p.add_argument("--bootstrap", type=int, default=2000, help="score: bootstrap draws")
    p.add_argument("--seed", type=int, default=0, help="seed of the model's draws / bootstrap")
    add_progress_flag(p)
    add_json_flag(p, "the fitted step sizes and timings (fit) or the verdicts (score)")
    p.set_defaults(func=_forecast)
