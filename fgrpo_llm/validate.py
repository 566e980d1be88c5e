"""Theory-vs-LLM cross-check: Lemma 3.1 on real training groups and the group-size sweep.

Tail-miss (paper Lemma 3.1, SPEC §2). A training group of size N is *active* when
0 < X < N; it is a *tail miss* when it is active and none of its N rollouts lands in the rare
event E(x). With the per-prompt base estimates (mu, tau) of the rare-correct set
(``fgrpo_llm.rare``),

    P(B_{E,N}) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N      (``fgrpo_theory.tail_miss``).

The trainer logs every group to ``groups.jsonl`` ({step, prompt_id, N, num_correct, forms});
a group *hits* E(x) when one of its correct forms is in E(x). We compare the observed tail-miss
frequency with the mean predicted probability, per N, early in training (where the policy is
still close to the base the estimates come from) and over the whole run.

Group-size sweep (paper Table 2): GRPO at N in {2, 4, 8, 16, 32} and F-GRPO at N = 8 from the same
base, next to the paper's numbers from ``reference/paper_results.json``, with one sentence per
ordering saying whether ours agrees.

Learning-rate-matched control (SPEC §2 "Learning-rate matching", §6 "Controls"): the focal weight
(1 - mu)^gamma shrinks the average update to about m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) of
GRPO's, so GRPO at lr * m_gamma tells a smaller step apart from the focal reweighting. Such a run
(``lr_match_gamma`` or ``lr_multiplier`` in its config) is labelled ``"GRPO N=8 (lr x0.50)"``; it
takes part in the tail-miss check but is not a point of the group-size sweep (those rows are the
paper's Table 2, all at the same lr): :func:`lr_control_comparisons` sets it between F-GRPO and
GRPO at its N.

    fgrpo-llm validate --rare-set runs/demo/rare_set.json --run runs/demo/grpo_n8 \
        --run runs/demo/fgrpo_n8 --out runs/demo/validate
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fgrpo_theory.checks import check_integer

#: Where the paper's numbers live relative to the repository root.
DEFAULT_PAPER_RESULTS = Path("..") / "shared" / "reference" / "paper_results.json"
Z95 = 1.959963984540054


# ----------------------------------------------------------------------------- reading runs
def read_jsonl(path) -> list[dict]:
    """One dict per non-empty line; a FileNotFoundError names a missing file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    rows = []
    with open(path) as fh:
        for i, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{i} is not JSON ({err.msg})") from err
    return rows


@dataclass
class RunInfo:
    """What the cross-check needs from one training run directory."""

    path: Path
    label: str
    algo: str
    N: int | None
    gamma: float
    groups: list[dict] = field(default_factory=list)
    delta_nll_rare: float | None = None
    eval: dict | None = None
    steps: int | None = None
    lr_scale: float = 1.0
    """Effective lr / configured lr: lr_multiplier * m_gamma (when ``lr_match_gamma`` is set)."""
    lr_match_gamma: float | None = None
    """The gamma whose m_gamma scaled the lr (the low-LR control), or None."""


def _read_config(run_dir: Path) -> dict:
    """The run's resolved config (JSON or YAML; the trainer saves one next to its outputs)."""
    for name in ("config.json", "train_config.json", "config.yaml", "config.yml", "train_config.yaml"):
        path = run_dir / name
        if path.is_file():
            text = path.read_text()
            if name.endswith("json"):
                data = json.loads(text)
            else:
                import yaml

                data = yaml.safe_load(text)
            if isinstance(data, dict) and "model_type" not in data:  # not the HF model config.json
                return data
    return {}


def _lookup(cfg: dict, *names, default=None):
    for name in names:
        if name in cfg:
            return cfg[name]
        for value in cfg.values():  # one level of nesting (e.g. {"train": {...}})
            if isinstance(value, dict) and name in value:
                return value[name]
    return default


def run_label(algo: str, N: int | None, gamma: float, lr_scale: float = 1.0) -> str:
    """The paper's row name: ``"GRPO N=8"`` for gamma = 0, ``"F-GRPO N=8"`` otherwise; a run at a
    scaled learning rate (the low-LR control) gets ``" (lr x0.50)"`` appended."""
    name = algo.upper()
    if gamma > 0:
        name = f"F-{name}"
    name = f"{name} N={N}" if N is not None else name
    return name if is_base_lr(lr_scale) else f"{name} (lr x{lr_scale:.2f})"


def is_base_lr(lr_scale: float) -> bool:
    """True when a run trained at its configured lr (lr_scale = 1): a point of the group-size sweep."""
    return abs(float(lr_scale) - 1.0) <= 1e-9


def lr_scale_of(cfg: dict) -> tuple[float, float | None]:
    """(lr_multiplier * m_gamma, lr_match_gamma) from a run's config (SPEC §2, learning-rate matching)."""
    from fgrpo_theory.focal import lr_multiplier

    scale = float(_lookup(cfg, "lr_multiplier", default=1.0) or 1.0)
    match = _lookup(cfg, "lr_match_gamma")
    if match is not None:
        match = float(match)
        scale *= float(lr_multiplier(match))
    return scale, match


def load_run(run_dir, *, label: str | None = None, eval_dir=None) -> RunInfo:
    """Read groups.jsonl, metrics.jsonl (last ``rare/delta_nll``), the config (N, gamma and the lr
    scale) and ``eval/eval.json``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory not found: {run_dir}")
    cfg = _read_config(run_dir)
    groups = read_jsonl(run_dir / "groups.jsonl") if (run_dir / "groups.jsonl").is_file() else []
    N = _lookup(cfg, "group_size", "N", "num_generations")
    if N is None and groups:
        N = int(groups[0]["N"])
    gamma = float(_lookup(cfg, "gamma", default=0.0) or 0.0)
    algo = str(_lookup(cfg, "algo", "algorithm", default="grpo"))
    lr_scale, lr_match = lr_scale_of(cfg)
    delta, steps = None, None
    if (run_dir / "metrics.jsonl").is_file():
        for row in read_jsonl(run_dir / "metrics.jsonl"):
            value = row.get("rare/delta_nll")
            if isinstance(value, (int, float)) and np.isfinite(value):
                delta = float(row["rare/delta_nll"])
            if "step" in row:
                steps = int(row["step"])
    eval_path = Path(eval_dir) if eval_dir else run_dir / "eval"
    results = json.loads((eval_path / "eval.json").read_text()) if (eval_path / "eval.json").is_file() else None
    N = None if N is None else int(N)
    return RunInfo(path=run_dir, label=label or run_label(algo, N, gamma, lr_scale), algo=algo, N=N, gamma=gamma,
                   groups=groups, delta_nll_rare=delta, eval=results, steps=steps, lr_scale=lr_scale,
                   lr_match_gamma=lr_match)


# ----------------------------------------------------------------------------- tail-miss check
def tail_miss_records(groups: list[dict], rare_set, *, max_step: int | None = None) -> dict[str, np.ndarray]:
    """Per logged group (of a prompt with a rare event E(x)): observed flags and Lemma 3.1.

    Returns arrays ``step, N, active, hit, tail_miss`` (observed) and ``p_active, p_tail_miss``
    (predicted at the prompt's base (mu, tau)), plus ``prompt_id`` (object array).
    """
    from fgrpo_theory.tail_miss import p_active, p_tail_miss

    rows = []
    for g in groups:
        step = int(g.get("step", 0))
        if max_step is not None and step > max_step:
            continue
        info = rare_set.prompts.get(str(g["prompt_id"]))
        if not info or not info.get("rare_forms"):
            continue
        N = int(g["N"])
        X = int(g["num_correct"])
        rare = set(info["rare_forms"])
        hit = any(f is not None and str(f) in rare for f in g.get("forms") or [])
        active = 0 < X < N
        rows.append((step, N, active, hit, active and not hit, float(info["mu"]), float(info["tau"]),
                     str(g["prompt_id"])))
    if not rows:
        empty = np.zeros(0)
        return {"step": empty.astype(int), "N": empty.astype(int), "active": empty.astype(bool),
                "hit": empty.astype(bool), "tail_miss": empty.astype(bool), "p_active": empty,
                "p_tail_miss": empty, "mu": empty, "tau": empty, "prompt_id": np.zeros(0, dtype=object)}
    step, N, active, hit, miss, mu, tau, pid = map(np.array, zip(*rows))
    return {"step": step.astype(int), "N": N.astype(int), "active": active.astype(bool), "hit": hit.astype(bool),
            "tail_miss": miss.astype(bool), "mu": mu, "tau": tau,
            "p_active": np.asarray(p_active(mu, N), dtype=np.float64),
            "p_tail_miss": np.asarray(p_tail_miss(mu, tau, N), dtype=np.float64),
            "prompt_id": pid.astype(object)}


def wilson_interval(successes: int, trials: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def summarise_tail_miss(records: dict[str, np.ndarray]) -> list[dict]:
    """One row per N: observed tail-miss / active frequencies (Wilson 95% CI) against the mean
    Lemma 3.1 prediction, with the 95% range of the observed frequency if the prediction is right
    (a sum of independent Bernoulli(p_i): mean sum p_i, variance sum p_i (1 - p_i))."""
    out = []
    for N in sorted(set(records["N"].tolist())):
        sel = records["N"] == N
        G = int(sel.sum())
        miss = int(records["tail_miss"][sel].sum())
        act = int(records["active"][sel].sum())
        p = records["p_tail_miss"][sel]
        pred = float(p.mean())
        sd = math.sqrt(float((p * (1 - p)).sum())) / G
        lo, hi = wilson_interval(miss, G)
        out.append({"N": int(N), "groups": G, "observed": miss / G, "observed_lo": lo, "observed_hi": hi,
                    "predicted": pred, "predicted_lo": max(0.0, pred - Z95 * sd),
                    "predicted_hi": min(1.0, pred + Z95 * sd),
                    "observed_active": act / G, "predicted_active": float(records["p_active"][sel].mean()),
                    "agrees": bool(lo <= pred <= hi or pred - Z95 * sd <= miss / G <= pred + Z95 * sd)})
    return out


def calibration_bins(records: dict[str, np.ndarray], *, bins: int = 5) -> list[dict]:
    """Groups binned by predicted P(B) (quantile bins): mean predicted vs observed (Wilson CI)."""
    p = records["p_tail_miss"]
    if len(p) == 0:
        return []
    edges = np.unique(np.quantile(p, np.linspace(0, 1, bins + 1)))
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, max(len(edges) - 2, 0))
    out = []
    for b in range(max(len(edges) - 1, 1)):
        sel = which == b
        G = int(sel.sum())
        if G == 0:
            continue
        miss = int(records["tail_miss"][sel].sum())
        lo, hi = wilson_interval(miss, G)
        out.append({"predicted": float(p[sel].mean()), "observed": miss / G, "observed_lo": lo, "observed_hi": hi,
                    "groups": G})
    return out


def predicted_curve(rare_set, Ns, *, bootstrap: int = 200, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Mean over the rare-set prompts of Lemma 3.1 at each N, with a 95% band from a parametric
    bootstrap of the (mu, tau) estimates (each prompt's M rollouts re-drawn multinomially over
    E, C minus E and not-C)."""
    from fgrpo_theory.tail_miss import p_tail_miss

    ids, mu, tau = rare_set.mu_tau()
    Ns = check_integer("Ns", Ns, minimum=1).ravel()
    if not ids:
        nan = np.full(len(Ns), np.nan)
        return {"N": Ns, "mean": nan, "lo": nan, "hi": nan}
    M = np.array([rare_set.prompts[i]["num_rollouts"] for i in ids])

    def curve(mu_, tau_):
        return np.array([float(np.mean(p_tail_miss(mu_, tau_, int(n)))) for n in Ns])

    mean = curve(mu, tau)
    draws = []
    probs = np.stack([tau, mu - tau, 1 - mu], axis=1).clip(0, 1)  # (P, 3)
    probs = probs / probs.sum(axis=1, keepdims=True)
    for _ in range(int(bootstrap)):
        counts = np.array([rng.multinomial(m, pr) for m, pr in zip(M, probs)])  # (P, 3)
        tau_b = counts[:, 0] / M
        mu_b = (counts[:, 0] + counts[:, 1]) / M
        draws.append(curve(mu_b, tau_b))
    draws = np.array(draws) if draws else mean[None, :]
    return {"N": Ns, "mean": mean, "lo": np.quantile(draws, 0.025, axis=0),
            "hi": np.quantile(draws, 0.975, axis=0)}


def plot_tail_miss_vs_N(ax, curve: dict, summaries: dict[str, list[dict]]):
    """Lemma 3.1 mean prediction against N (line and band) with observed frequencies (points)."""
    artists = []
    if np.isfinite(np.asarray(curve["mean"], dtype=float)).any():
        artists.append(ax.plot(curve["N"], curve["mean"], color="k", label="Lemma 3.1 at base (mu, tau)")[0])
        artists.append(ax.fill_between(curve["N"], curve["lo"], curve["hi"], color="k", alpha=0.15,
                                       label="95% band (estimate)"))
    else:
        artists.append(ax.text(0.5, 0.5, "no prompt with a rare event", ha="center", transform=ax.transAxes))
    for i, (name, rows) in enumerate(summaries.items()):
        if not rows:
            continue
        x = np.array([r["N"] for r in rows], dtype=float) * (1 + 0.04 * i)
        y = np.array([r["observed"] for r in rows])
        err = np.array([[r["observed"] - r["observed_lo"] for r in rows], [r["observed_hi"] - r["observed"] for r in rows]])
        artists.append(ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, label=f"observed: {name}"))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel("P(tail miss)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    return artists


def plot_predicted_vs_observed(ax, points: list[dict], *, label_key: str = "label"):
    """Observed against predicted tail-miss frequency (Wilson 95% bars), y = x diagonal."""
    artists = [ax.plot([0, 1], [0, 1], color="k", lw=1, ls="--", label="y = x")[0]]
    for pt in points:
        err = [[pt["observed"] - pt["observed_lo"]], [pt["observed_hi"] - pt["observed"]]]
        xerr = None
        if "predicted_lo" in pt:
            xerr = [[pt["predicted"] - pt["predicted_lo"]], [pt["predicted_hi"] - pt["predicted"]]]
        artists.append(ax.errorbar([pt["predicted"]], [pt["observed"]], yerr=err, xerr=xerr, fmt="o", capsize=3,
                                   label=pt.get(label_key)))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted P(tail miss) (Lemma 3.1)")
    ax.set_ylabel("observed frequency")
    ax.grid(alpha=0.3)
    return artists


# ----------------------------------------------------------------------------- sweep table
def load_paper_results(path=None) -> dict | None:
    """The paper's numbers, or None when the file is absent (the report then omits them)."""
    repo = Path(__file__).resolve().parents[1]
    candidates = [Path(path)] if path else [repo / "reference" / "paper_results.json",  # shipped copy
                                            DEFAULT_PAPER_RESULTS,
                                            repo.parent / "shared" / "reference" / "paper_results.json"]
    for p in candidates:
        if p.is_file():
            return json.loads(p.read_text())
    return None


def _eval_value(results: dict | None, role: str, k: int | str) -> float | None:
    """Mean pass@k over the splits of one role (``in_domain`` / ``ood``); k="max" takes the largest k."""
    if not results:
        return None
    kk = max(results["ks"]) if k == "max" else int(k)
    vals = [e[f"pass@{kk}"] for e in results["splits"].values() if e["role"] == role and f"pass@{kk}" in e]
    return float(np.mean(vals)) if vals else None


def _run_row(run: RunInfo, table: dict) -> dict:
    """Ours (fractions, in-domain / OOD pass@1 and pass@k_max, Delta NLL_rare) and the paper's
    Table 2 row of the same name (percent -> fraction), where it exists."""
    kmax = max(run.eval["ks"]) if run.eval else None
    row = {"label": run.label, "N": run.N, "gamma": run.gamma, "lr_scale": run.lr_scale,
           "lr_match_gamma": run.lr_match_gamma, "kmax": kmax,
           "id_pass1": _eval_value(run.eval, "in_domain", 1), "id_passk": _eval_value(run.eval, "in_domain", "max"),
           "ood_pass1": _eval_value(run.eval, "ood", 1), "ood_passk": _eval_value(run.eval, "ood", "max"),
           "delta_nll_rare": run.delta_nll_rare}
    ref = table.get(run.label) if is_base_lr(run.lr_scale) else None
    if ref:
        row["paper"] = {"id_pass1": ref["avg_math"]["pass@1"] / 100, "id_passk": ref["avg_math"]["pass@256"] / 100,
                        "ood_pass1": ref["avg_ood"]["pass@1"] / 100, "ood_passk": ref["avg_ood"]["pass@256"] / 100,
                        "delta_nll_rare": ref["delta_nll_rare"]}
    return row


def _row_order(row: dict):
    return (_is_focal(row), row["N"] or 0, row["gamma"], -row.get("lr_scale", 1.0))


def _is_focal(row: dict) -> bool:
    return row["gamma"] > 0 or row["label"].startswith("F-")


def sweep_rows(runs: list[RunInfo], paper: dict | None) -> list[dict]:
    """One row per point of the group-size sweep (runs at their configured lr; the low-LR control
    is left to :func:`control_rows`), GRPO by N then F-GRPO; see :func:`_run_row` for the keys."""
    table = (paper or {}).get("table2_group_size_sweep_qwen2.5_7b", {}).get("rows", {})
    return sorted((_run_row(run, table) for run in runs if is_base_lr(run.lr_scale)), key=_row_order)


def control_rows(runs: list[RunInfo]) -> list[dict]:
    """The same rows for the runs at a scaled lr (e.g. GRPO at lr * m_gamma), never sweep points."""
    return sorted((_run_row(run, {}) for run in runs if not is_base_lr(run.lr_scale)), key=_row_order)


METRIC_NAMES = {"id_pass1": "in-domain pass@1", "id_passk": "in-domain pass@k_max (paper: pass@256)",
                "ood_pass1": "OOD pass@1", "ood_passk": "OOD pass@k_max (paper: pass@256)",
                "delta_nll_rare": "Delta NLL_rare"}


def _kendall_tau(a, b) -> float:
    """Kendall rank correlation (tau-a) of two equally long sequences; nan below two items."""
    n = len(a)
    if n < 2:
        return float("nan")
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            s += np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
    return float(s / (n * (n - 1) / 2))


def ordering_sentences(rows: list[dict]) -> list[str]:
    """One sentence per ordering: F-GRPO vs GRPO at the same N, and GRPO across N (Kendall tau)."""
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
            verdict = ("agrees" if ours == theirs else "disagrees") if ours != 0 else \
                "cannot be compared (no difference here)"
            out.append(f"{name}: {f['label']} is {word[int(ours)]} {base['label']} here "
                       f"({f[key]:.3f} vs {base[key]:.3f}) and {word[int(theirs)]} it in the paper "
                       f"({f['paper'][key]:.3f} vs {base['paper'][key]:.3f}): the ordering {verdict}.")
        grpo = sorted((r for r in rows if not _is_focal(r) and is_base_lr(r.get("lr_scale", 1.0)) and r.get("paper")
                       and r[key] is not None), key=lambda r: r["N"])
        if len(grpo) >= 3:
            ours = [r[key] for r in grpo]
            theirs = [r["paper"][key] for r in grpo]
            kt = _kendall_tau(ours, theirs)
            verdict = "agrees" if kt >= 0.6 else ("partly agrees" if kt > 0 else "disagrees")
            Ns = ", ".join(str(r["N"]) for r in grpo)
            if len(set(ours)) == 1:
                out.append(f"{name} across GRPO N = {Ns}: all our values are equal ({ours[0]:.3f}), so the "
                           f"ordering cannot be compared with the paper's.")
                continue
            argmax_o, argmax_t = grpo[int(np.argmax(ours))]["N"], grpo[int(np.argmax(theirs))]["N"]
            out.append(f"{name} across GRPO N = {Ns}: Kendall tau between our values and the paper's = {kt:+.2f} "
                       f"(largest at N={argmax_o} here, N={argmax_t} in the paper): the ordering {verdict}.")
    return out


# ----------------------------------------------------------------------------- learning-rate-matched control
CONTROL_METRICS = {"id_pass1": "in-domain pass@1", "id_passk": "in-domain pass@k_max",
                   "delta_nll_rare": "Delta NLL_rare"}


def lr_control_comparisons(rows: list[dict], controls: list[dict]) -> list[dict]:
    """F-GRPO (gamma) vs GRPO vs GRPO at lr * m_gamma, all at the same N (SPEC §6, "Controls").

    ``rows``: the sweep rows (:func:`sweep_rows`); ``controls``: :func:`control_rows`. For each
    GRPO control with ``lr_match_gamma`` = gamma, finds F-GRPO at (N, gamma) and GRPO at N and
    returns ``{"N", "gamma", "lr_scale", "focal", "grpo", "control", "sentences"}`` with one
    sentence per metric of :data:`CONTROL_METRICS`: share = (control - GRPO) / (F-GRPO - GRPO) is
    how much of F-GRPO's difference from GRPO the smaller step alone reproduces; the control
    "lands near" whichever of the two it is closer to.
    """
    out = []
    for c in controls:
        if _is_focal(c) or c.get("lr_match_gamma") is None:
            continue
        g = float(c["lr_match_gamma"])
        focal = next((r for r in rows if _is_focal(r) and r["N"] == c["N"] and abs(r["gamma"] - g) <= 1e-9), None)
        grpo = next((r for r in rows if not _is_focal(r) and r["N"] == c["N"]), None)
        if focal is None or grpo is None:
            continue
        out.append({"N": c["N"], "gamma": g, "lr_scale": c["lr_scale"], "focal": focal, "grpo": grpo, "control": c,
                    "sentences": [_control_sentence(name, focal, grpo, c, key)
                                  for key, name in CONTROL_METRICS.items()]})
    return out


def _control_sentence(name: str, focal: dict, grpo: dict, control: dict, key: str) -> str:
    f, b, c = focal[key], grpo[key], control[key]
    head = f"{name}: {focal['label']} {_v(f)}, {grpo['label']} {_v(b)}, {control['label']} {_v(c)}"
    if f is None or b is None or c is None:
        return f"{head}: a value is missing, so this cannot be judged."
    gap = f - b
    if abs(gap) < 5e-4:  # equal to the three decimals shown: a share of nothing would mislead
        return (f"{head}: F-GRPO does not differ from GRPO here (to three decimals), so there is no difference "
                f"for the smaller step to explain.")
    share = (c - b) / gap
    if abs(c - f) < abs(c - b):
        verdict = ("the low-LR GRPO lands nearer F-GRPO, so the smaller step alone reproduces most of F-GRPO's "
                   "difference from GRPO (little is left for the focal reweighting)")
    elif abs(c - f) > abs(c - b):
        verdict = ("the low-LR GRPO lands nearer GRPO, so the smaller step does not explain F-GRPO's difference "
                   "from GRPO (it points to the focal reweighting)")
    else:
        verdict = "the low-LR GRPO lands halfway, so the smaller step explains about half of F-GRPO's difference"
    return f"{head} (the smaller step reproduces {100 * share:.0f}% of F-GRPO's {gap:+.3f}): {verdict}."


def _v(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


# ----------------------------------------------------------------------------- the whole check
def cross_check(runs: list[RunInfo], rare_set, out_dir, *, early_steps: int = 10, paper_path=None,
                rng: np.random.Generator, Ns_curve=(1, 2, 4, 8, 16, 32, 64, 128)) -> dict:
    """Run the tail-miss check and the sweep table; write figures and ``validation.json`` to ``out_dir``.

    Returns a dict with ``tail_miss`` (per window, per run: rows by N), ``calibration``, ``curve``,
    ``sweep`` (rows of the group-size sweep), ``controls`` (rows of runs at a scaled lr),
    ``lr_control`` (:func:`lr_control_comparisons`), ``orderings`` (sentences) and ``figures``
    (paths relative to ``out_dir``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    windows = {f"first {early_steps} steps": early_steps, "all steps": None}
    tail = {w: {} for w in windows}
    pooled = {w: [] for w in windows}
    for w, max_step in windows.items():
        for run in runs:
            if not run.groups:
                continue
            rec = tail_miss_records(run.groups, rare_set, max_step=max_step)
            tail[w][run.label] = summarise_tail_miss(rec)
            pooled[w].append(rec)
    early = list(windows)[0]
    calib = []
    if pooled[early]:
        merged = {k: np.concatenate([r[k] for r in pooled[early]]) for k in pooled[early][0]}
        calib = calibration_bins(merged)
    observed_Ns = sorted({r["N"] for rows in tail[early].values() for r in rows})
    Ns = sorted(set(int(n) for n in Ns_curve) | set(observed_Ns))
    curve = predicted_curve(rare_set, Ns, rng=rng)

    figures = {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    plot_tail_miss_vs_N(axes[0], curve, tail[early])
    axes[0].set_title(f"tail miss per N ({early})")
    _legend(axes[0])
    points = [dict(r, label=f"{name}, N={r['N']}") for name, rows in tail[early].items() for r in rows]
    plot_predicted_vs_observed(axes[1], points)
    if calib:
        axes[1].plot([c["predicted"] for c in calib], [c["observed"] for c in calib], "s--", color="grey",
                     label="per-group bins (pooled)")
    _legend(axes[1])
    axes[1].set_title("predicted vs observed (95% intervals)")
    fig.tight_layout()
    fig.savefig(out / "tail_miss_check.png", dpi=120)
    plt.close(fig)
    figures["tail_miss"] = "tail_miss_check.png"

    paper = load_paper_results(paper_path)
    rows = sweep_rows(runs, paper)
    controls = control_rows(runs)
    sentences = ordering_sentences(rows) if paper else []
    if any(r["delta_nll_rare"] is not None and np.isfinite(r["delta_nll_rare"]) and r["N"] for r in rows + controls):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        plot_delta_nll(ax, rows, controls)
        fig.tight_layout()
        fig.savefig(out / "delta_nll_rare.png", dpi=120)
        plt.close(fig)
        figures["delta_nll"] = "delta_nll_rare.png"
    result = {"tail_miss": tail, "calibration": calib,
              "curve": {k: np.asarray(v).tolist() for k, v in curve.items()}, "sweep": rows,
              "controls": controls, "lr_control": lr_control_comparisons(rows, controls), "orderings": sentences,
              "paper_available": paper is not None, "figures": figures,
              "early_steps": early_steps}
    (out / "validation.json").write_text(json.dumps(result, indent=1, default=_json_default))
    return result


def plot_delta_nll(ax, rows: list[dict], controls: list[dict] = ()):
    """Delta NLL_rare against N for GRPO (line) and F-GRPO (stars), ours and the paper's; runs at a
    scaled lr (``controls``, e.g. GRPO at lr * m_gamma) as separate triangles, not on the GRPO line."""
    artists = []
    rows = [r for r in rows if is_base_lr(r.get("lr_scale", 1.0))]
    grpo = sorted((r for r in rows if not _is_focal(r) and r["delta_nll_rare"] is not None), key=lambda r: r["N"])
    focal = [r for r in rows if _is_focal(r) and r["delta_nll_rare"] is not None]
    if grpo:
        artists.append(ax.plot([r["N"] for r in grpo], [r["delta_nll_rare"] for r in grpo], "o-", label="GRPO (ours)")[0])
        ref = [r for r in grpo if r.get("paper")]
        if ref:
            artists.append(ax.plot([r["N"] for r in ref], [r["paper"]["delta_nll_rare"] for r in ref], "o--",
                                   color="grey", label="GRPO (paper, Qwen2.5-7B)")[0])
    for r in focal:
        artists.append(ax.plot([r["N"]], [r["delta_nll_rare"]], "*", ms=12, label=f"{r['label']} (ours)")[0])
        if r.get("paper"):
            artists.append(ax.plot([r["N"]], [r["paper"]["delta_nll_rare"]], "*", ms=12, color="grey",
                                   label=f"{r['label']} (paper)")[0])
    for r in controls:
        if r["delta_nll_rare"] is not None and r["N"]:
            artists.append(ax.plot([r["N"]], [r["delta_nll_rare"]], "^", ms=9, label=f"{r['label']} (ours)")[0])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel("Delta NLL_rare (nats/token)")
    ax.axhline(0, color="k", lw=0.5)
    ax.grid(alpha=0.3)
    _legend(ax)
    return artists


def _legend(ax) -> None:
    """A small legend, only when something is labelled."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
