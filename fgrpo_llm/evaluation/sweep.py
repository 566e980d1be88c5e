"""The group-size sweep table (paper Table 2) and the learning-rate-matched control (Table 3).

Rows: GRPO at N in {2, 4, 8, 16, 32} and F-GRPO at N = 8, each with in-domain / OOD pass@1 and
pass@k_max and Delta NLL_rare, beside the paper's row of the same name when the paper's numbers
are given (``fgrpo_llm.experiments.paper``). :func:`ordering_sentences` says, per metric, whether
our ordering agrees with the paper's; :func:`lr_control_comparisons` sets GRPO at lr * m_gamma
(the paper's low-LR control: the focal weight shrinks the average update to about
m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) of GRPO's) between F-GRPO and GRPO at its N.
Given the run-to-run noise of a difference (:func:`difference_noise`, from a study's measured
spread), a difference of one run from another that lies within it is called unresolved, not
read as an ordering.

    rows = sweep_rows(runs, paper)
    controls = control_rows(runs)
    lr_control_comparisons(rows, controls, noise=difference_noise(spread))
"""

from __future__ import annotations

import math

import numpy as np

from fgrpo_llm.evaluation.runs import RunInfo, is_base_lr

__all__ = [
    "sweep_rows",
    "control_rows",
    "METRIC_NAMES",
    "ordering_sentences",
    "difference_noise",
    "CONTROL_METRICS",
    "lr_control_comparisons",
    "plot_delta_nll",
    "legend_if_labelled",
]


#: The gamma of the paper's Table 2 F-GRPO row (the table's note: F-GRPO at gamma = 0.5, N = 8).
TABLE2_FOCAL_GAMMA = 0.5


def _eval_value(results: dict | None, role: str, k: int | str) -> float | None:
    """Mean pass@k over the splits of one role (``in_domain`` / ``ood``); k="max" takes the largest
    k."""
    if not results:
        return None
    kk = max(results["ks"]) if k == "max" else int(k)
    vals = [
        e[f"pass@{kk}"]
        for e in results["splits"].values()
        if e["role"] == role and f"pass@{kk}" in e
    ]
    return float(np.mean(vals)) if vals else None


def _eval_problems(results: dict | None) -> dict | None:
    """Problems evaluated per role (``in_domain`` / ``ood``), or None without an evaluation."""
    if not results:
        return None
    out = {}
    for entry in results["splits"].values():
        out[entry["role"]] = out.get(entry["role"], 0) + int(entry.get("num_problems", 0))
    return out


def _run_row(run: RunInfo, table: dict) -> dict:
    """Ours (fractions, in-domain / OOD pass@1 and pass@k_max, Delta NLL_rare; the problems and
    the policy's step the evaluation had, and the run's last step) and the paper's Table 2 row of
    the same name (percent -> fraction), where it exists."""
    kmax = max(run.eval["ks"]) if run.eval else None
    row = {
        "label": run.label,
        "N": run.N,
        "gamma": run.gamma,
        "weighting": run.weighting,
        "lr_scale": run.lr_scale,
        "lr_match_gamma": run.lr_match_gamma,
        "kmax": kmax,
        "id_pass1": _eval_value(run.eval, "in_domain", 1),
        "id_passk": _eval_value(run.eval, "in_domain", "max"),
        "ood_pass1": _eval_value(run.eval, "ood", 1),
        "ood_passk": _eval_value(run.eval, "ood", "max"),
        "delta_nll_rare": run.delta_nll_rare,
        "eval_problems": _eval_problems(run.eval),
        "eval_step": run.eval.get("step") if run.eval else None,
        "steps": run.steps,
    }
    ref = table.get(run.label) if is_base_lr(run.lr_scale) else None
    if ref:
        row["paper"] = {
            "id_pass1": ref["avg_math"]["pass@1"] / 100,
            "id_passk": ref["avg_math"]["pass@256"] / 100,
            "ood_pass1": ref["avg_ood"]["pass@1"] / 100,
            "ood_passk": ref["avg_ood"]["pass@256"] / 100,
            "delta_nll_rare": ref["delta_nll_rare"],
            "gamma": TABLE2_FOCAL_GAMMA if _is_focal(row) else 0.0,
        }
    return row


def _row_order(row: dict):
    return (_is_focal(row), row["N"] or 0, row["gamma"], -row.get("lr_scale", 1.0))


def _is_focal(row: dict) -> bool:
    return row.get("weighting", "focal") == "focal" and (
        row["gamma"] > 0 or row["label"].startswith("F-")
    )


def sweep_rows(runs: list[RunInfo], paper: dict | None) -> list[dict]:
    """One row per point of the group-size sweep (``RunInfo.sweep_point``: GRPO and F-GRPO at
    their configured lr; the rest is left to :func:`control_rows`), GRPO by N then F-GRPO; see
    :func:`_run_row` for the keys."""
    table = (paper or {}).get("table2_group_size_sweep_qwen2.5_7b", {}).get("rows", {})
    return sorted((_run_row(run, table) for run in runs if run.sweep_point), key=_row_order)


def control_rows(runs: list[RunInfo]) -> list[dict]:
    """The same rows for the runs that are not sweep points (GRPO at lr * m_gamma, MaxRL, an
    entropy bonus or KL penalty): compared beside the sweep, never points of it."""
    return sorted((_run_row(run, {}) for run in runs if not run.sweep_point), key=_row_order)


METRIC_NAMES = {
    "id_pass1": "in-domain pass@1",
    "id_passk": "in-domain pass@k_max (paper: pass@256)",
    "ood_pass1": "OOD pass@1",
    "ood_passk": "OOD pass@k_max (paper: pass@256)",
    "delta_nll_rare": "Delta NLL_rare",
}


def _kendall_tau(a, b) -> float:
    """Kendall's rank correlation of two equally long sequences (``scipy.stats.kendalltau``,
    tau-b: ties counted as neither agreeing nor disagreeing, and scaled out); nan below two
    items, or when either sequence is constant."""
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    from scipy.stats import kendalltau  # deferred: scipy stays out of fgrpo_llm's imports

    return float(kendalltau(a, b).statistic)


def difference_noise(spread: dict | None) -> dict[str, float] | None:
    """Per metric, the half-width of the central 95% range of the difference between two runs on
    one base, 1.96 sqrt(2) s_w, with s_w the sd between RL seeds of one base of a study's spread
    (``within_base_sd``, else its ``sd``; ``fgrpo-llm study`` measures it): a difference of one
    run from another inside it cannot be told from the runs' own noise. None without a spread.

    >>> difference_noise({"sd": {"id_pass1": 0.01}})["id_pass1"]
    0.0277...
    """
    sds = (spread or {}).get("within_base_sd") or (spread or {}).get("sd")
    if not isinstance(sds, dict):
        return None
    return {
        k: 1.96 * math.sqrt(2.0) * float(v)
        for k, v in sds.items()
        if isinstance(v, int | float) and np.isfinite(v) and v >= 0
    }


def _within(noise: dict[str, float] | None, key: str, diff: float) -> float | None:
    """noise[key] when the difference lies inside it, else None."""
    n = (noise or {}).get(key)
    return n if n is not None and abs(diff) < n else None


def ordering_sentences(rows: list[dict], noise: dict[str, float] | None = None) -> list[str]:
    """One sentence per ordering: F-GRPO vs GRPO at the same N, and GRPO across N (Kendall tau).
    With ``noise`` (:func:`difference_noise`), an F-GRPO - GRPO difference inside it is not
    resolved by one run, whatever its sign; across N, only the pairs of N whose values differ
    beyond it are read as ordered and compared with the paper's order."""
    out = []
    rows = [r for r in rows if is_base_lr(r.get("lr_scale", 1.0))]  # sweep points only
    by_label = {r["label"]: r for r in rows}
    for key, name in METRIC_NAMES.items():
        for f in (r for r in rows if _is_focal(r) and r.get("paper")):
            base = by_label.get(f["label"][2:])
            if not base or not base.get("paper") or f[key] is None or base[key] is None:
                continue
            ours = np.sign(f[key] - base[key])
            theirs = np.sign(f["paper"][key] - base["paper"][key])
            word = {1: "higher than", -1: "lower than", 0: "equal to"}
            verdict = (
                ("agrees" if ours == theirs else "disagrees")
                if ours != 0
                else "cannot be compared (no difference here)"
            )
            n = _within(noise, key, f[key] - base[key]) if ours != 0 else None
            inside = "" if n is None else f", a difference within one run's noise, +-{n:.3f}"
            here = f"({f[key]:.3f} vs {base[key]:.3f}{inside})"
            if n is not None:
                verdict = "is not resolved by one run"
            other = f["paper"].get("gamma")
            at = (
                f"; the paper's F-GRPO at gamma = {other:g}, ours at gamma = {f['gamma']:g}"
                if other is not None and abs(other - f["gamma"]) > 1e-9
                else ""
            )
            out.append(
                f"{name}: {f['label']} is {word[int(ours)]} {base['label']} here {here} and "
                f"{word[int(theirs)]} it in the paper "
                f"({f['paper'][key]:.3f} vs {base['paper'][key]:.3f}{at}): the ordering {verdict}."
            )
        grpo = sorted(
            (
                r
                for r in rows
                if not _is_focal(r)
                and is_base_lr(r.get("lr_scale", 1.0))
                and r.get("paper")
                and r[key] is not None
            ),
            key=lambda r: r["N"],
        )
        if len(grpo) >= 3:
            ours = [r[key] for r in grpo]
            theirs = [r["paper"][key] for r in grpo]
            Ns = ", ".join(str(r["N"]) for r in grpo)
            if len(set(ours)) == 1:
                out.append(
                    f"{name} across GRPO N = {Ns}: all our values are equal ({ours[0]:.3f}), so "
                    "the ordering cannot be compared with the paper's."
                )
                continue
            kt = _kendall_tau(ours, theirs)
            verdict = "agrees" if kt >= 0.6 else ("partly agrees" if kt > 0 else "disagrees")
            argmax_o, argmax_t = grpo[int(np.argmax(ours))]["N"], grpo[int(np.argmax(theirs))]["N"]
            n = (noise or {}).get(key)
            if n is None:
                out.append(
                    f"{name} across GRPO N = {Ns}: Kendall tau between our values and the "
                    f"paper's = {kt:+.2f} (largest at N={argmax_o} here, N={argmax_t} in the "
                    f"paper): the ordering {verdict}."
                )
                continue
            out.append(_noisy_rank_sentence(name, grpo, ours, theirs, kt, argmax_t, n))
    return out


def _noisy_rank_sentence(name, grpo, ours, theirs, kt, argmax_t, noise: float) -> str:
    """The across-N sentence of :func:`ordering_sentences` given the noise of a difference: only
    the pairs of N whose values differ beyond it are read as ordered (and compared with the
    paper's order); the N within the noise of our largest value are named beside it."""
    Ns = ", ".join(str(r["N"]) for r in grpo)
    pairs = [(i, j) for i in range(len(ours)) for j in range(i + 1, len(ours))]
    resolved = [(i, j) for i, j in pairs if abs(ours[i] - ours[j]) >= noise]
    values = ", ".join(f"{v:.3f}" for v in ours)
    if not resolved:
        return (
            f"{name} across GRPO N = {Ns}: our values ({values}) differ by less than one run's "
            f"noise (+-{noise:.3f}) for every pair of N, so the ordering is not resolved by one "
            "run."
        )
    agree = sum(np.sign(ours[i] - ours[j]) == np.sign(theirs[i] - theirs[j]) for i, j in resolved)
    verdict = (
        "agrees" if agree == len(resolved) else ("disagrees" if agree == 0 else "partly agrees")
    )
    top = int(np.argmax(ours))
    near = [str(grpo[i]["N"]) for i in range(len(ours)) if i != top and ours[top] - ours[i] < noise]
    largest = f"largest at N={grpo[top]['N']} here" + (
        f", within one run's noise of N={', '.join(near)}" if near else ""
    )
    return (
        f"{name} across GRPO N = {Ns}: Kendall tau between our values and the paper's = "
        f"{kt:+.2f} ({largest}; N={argmax_t} in the paper); pairs of N whose values differ "
        f"here beyond one run's noise (+-{noise:.3f}): {len(resolved)} of {len(pairs)}, ordered "
        f"as in the paper: {agree} of {len(resolved)}; where one run resolves it, the ordering "
        f"{verdict}."
    )


CONTROL_METRICS = {
    "id_pass1": "in-domain pass@1",
    "id_passk": "in-domain pass@k_max",
    "delta_nll_rare": "Delta NLL_rare",
}


def lr_control_comparisons(
    rows: list[dict], controls: list[dict], noise: dict[str, float] | None = None
) -> list[dict]:
    """F-GRPO (gamma) vs GRPO vs GRPO at lr * m_gamma, all at the same N (paper Table 3).

    ``rows``: the sweep rows (:func:`sweep_rows`); ``controls``: :func:`control_rows`. For each
    GRPO control with ``lr_match_gamma`` = gamma, finds F-GRPO at (N, gamma) and GRPO at N and
    returns ``{"N", "gamma", "lr_scale", "focal", "grpo", "control", "sentences"}`` with one
    sentence per metric of :data:`CONTROL_METRICS`: share = (control - GRPO) / (F-GRPO - GRPO) is
    how much of F-GRPO's difference from GRPO the smaller step alone reproduces (a share below 0
    or above 1 is said in words: the control moved the other way, or past F-GRPO); the control
    "lands near" whichever of the two it is closer to. With ``noise`` (:func:`difference_noise`)
    an F-GRPO - GRPO difference inside it is left unexplained: one run cannot split it; nor is a
    control within the noise of both placed nearer either.
    """
    out = []
    for c in controls:
        if _is_focal(c) or c.get("lr_match_gamma") is None:
            continue
        g = float(c["lr_match_gamma"])
        focal = next(
            (r for r in rows if _is_focal(r) and r["N"] == c["N"] and abs(r["gamma"] - g) <= 1e-9),
            None,
        )
        grpo = next((r for r in rows if not _is_focal(r) and r["N"] == c["N"]), None)
        if focal is None or grpo is None:
            continue
        out.append(
            {
                "N": c["N"],
                "gamma": g,
                "lr_scale": c["lr_scale"],
                "focal": focal,
                "grpo": grpo,
                "control": c,
                "sentences": [
                    _control_sentence(name, focal, grpo, c, key, noise)
                    for key, name in CONTROL_METRICS.items()
                ],
            }
        )
    return out


def _control_sentence(
    name: str, focal: dict, grpo: dict, control: dict, key: str, noise: dict | None = None
) -> str:
    f, b, c = focal[key], grpo[key], control[key]
    head = f"{name}: {focal['label']} {_v(f)}, {grpo['label']} {_v(b)}, {control['label']} {_v(c)}"
    if f is None or b is None or c is None:
        return f"{head}: a value is missing, so this cannot be judged."
    gap = f - b
    if abs(gap) < 5e-4:  # equal to the three decimals shown: a share of nothing would mislead
        return (
            f"{head}: F-GRPO does not differ from GRPO here (to three decimals), so there is no "
            "difference for the smaller step to explain."
        )
    n = _within(noise, key, gap)
    if n is not None:
        return (
            f"{head}: F-GRPO's difference from GRPO ({gap:+.3f}) lies within one run's noise "
            f"(+-{n:.3f}), so one run cannot tell how much of it the smaller step explains."
        )
    share = (c - b) / gap
    moved = c - b
    if share < 0:  # not "reproduces -117% of ...": the control moved away from F-GRPO
        step = (
            f"the smaller step moves GRPO the other way, {moved:+.3f} against F-GRPO's {gap:+.3f}"
        )
    elif share > 1:
        step = f"the smaller step moves GRPO by {moved:+.3f}, past F-GRPO's {gap:+.3f}"
    else:
        step = f"the smaller step reproduces {100 * share:.0f}% of F-GRPO's {gap:+.3f}"
    n = (noise or {}).get(key)
    if n is not None and abs(c - f) < n and abs(c - b) < n:
        return (
            f"{head} ({step}): the low-LR GRPO lies within one run's noise (+-{n:.3f}) of both "
            "F-GRPO and GRPO, so one run cannot tell which it lands nearer."
        )
    if share > 1:
        verdict = (
            "the low-LR GRPO goes beyond F-GRPO, so the smaller step alone reproduces all of "
            "F-GRPO's difference from GRPO (nothing is left for the focal reweighting)"
        )
    elif abs(c - f) < abs(c - b):
        verdict = (
            "the low-LR GRPO lands nearer F-GRPO, so the smaller step alone reproduces most of "
            "F-GRPO's difference from GRPO (little is left for the focal reweighting)"
        )
    elif abs(c - f) > abs(c - b):
        verdict = (
            "the low-LR GRPO lands nearer GRPO, so the smaller step does not explain F-GRPO's "
            "difference from GRPO (it points to the focal reweighting)"
        )
    else:
        verdict = (
            "the low-LR GRPO lands halfway, so the smaller step explains about half of F-GRPO's "
            "difference"
        )
    return f"{head} ({step}): {verdict}."


def _v(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def plot_delta_nll(ax, rows: list[dict], controls: list[dict] = ()):
    """Delta NLL_rare against N for GRPO (line) and F-GRPO (stars), ours and the paper's; runs at a
    scaled lr (``controls``, e.g. GRPO at lr * m_gamma) as separate triangles, not on the GRPO
    line."""
    artists = []
    rows = [r for r in rows if is_base_lr(r.get("lr_scale", 1.0))]
    grpo = sorted(
        (r for r in rows if not _is_focal(r) and r["delta_nll_rare"] is not None),
        key=lambda r: r["N"],
    )
    focal = [r for r in rows if _is_focal(r) and r["delta_nll_rare"] is not None]
    if grpo:
        artists.append(
            ax.plot(
                [r["N"] for r in grpo],
                [r["delta_nll_rare"] for r in grpo],
                "o-",
                label="GRPO (ours)",
            )[0]
        )
        ref = [r for r in grpo if r.get("paper")]
        if ref:
            artists.append(
                ax.plot(
                    [r["N"] for r in ref],
                    [r["paper"]["delta_nll_rare"] for r in ref],
                    "o--",
                    color="grey",
                    label="GRPO (paper, Qwen2.5-7B)",
                )[0]
            )
    for r in focal:
        artists.append(
            ax.plot([r["N"]], [r["delta_nll_rare"]], "*", ms=12, label=f"{r['label']} (ours)")[0]
        )
        if r.get("paper"):
            artists.append(
                ax.plot(
                    [r["N"]],
                    [r["paper"]["delta_nll_rare"]],
                    "*",
                    ms=12,
                    color="grey",
                    label=f"{r['label']} (paper)",
                )[0]
            )
    for r in controls:
        if r["delta_nll_rare"] is not None and r["N"]:
            artists.append(
                ax.plot([r["N"]], [r["delta_nll_rare"]], "^", ms=9, label=f"{r['label']} (ours)")[0]
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel("Delta NLL_rare (nats/token)")
    ax.axhline(0, color="k", lw=0.5)
    ax.grid(alpha=0.3)
    legend_if_labelled(ax)
    return artists


def legend_if_labelled(ax) -> None:
    """A small legend, only when something is labelled."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
