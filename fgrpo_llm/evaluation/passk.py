"""pass@k evaluation of a policy on a task's splits (paper App. P).

For every problem we draw n completions at temperature 1.0 / top-p 1.0, verify each with the
task's reward, and estimate pass@k with the unbiased product-form estimator of
``fgrpo_theory.passk``:

    pass@k = mean over problems of 1 - C(n - c, k) / C(n, k),

where c is the number of correct samples of the problem. In-domain and out-of-domain splits are
reported separately. The per-sample outcome matrix (problems x n, 0/1) is kept as well so that
two policies can be compared with the paired m-out-of-n subsampling test (App. Q,
``fgrpo-llm compare``).

    fgrpo-llm eval --model runs/base --samples 1024 --k 1,2,4,8,16,32,64,128,256 --out runs/eval
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from fgrpo_common.checks import check_integer
from fgrpo_common.cli import bar_disabled
from fgrpo_common.files import atomic_write_text, read_json, save_figure
from fgrpo_llm.tasks.base import check_split
from fgrpo_theory.passk import mean_pass_at_k, paired_subsampling_test
from fgrpo_theory.passk import pass_at_k_unbiased as pass_at_k

if TYPE_CHECKING:
    from fgrpo_llm.rollout import SamplingParams

#: Name of the files written by :func:`write_eval_outputs`.
EVAL_JSON = "eval.json"
EVAL_CSV = "passk.csv"
EVAL_PLOT = "passk.png"


def _outcome_file(split: str) -> str:
    return f"outcomes_{split}.npy"


def default_ks(n: int) -> list[int]:
    """Powers of two 1, 2, 4, ... up to n (the paper's k grid when n = 1024 stops at 256)."""
    n = int(check_integer("n", n, minimum=1))
    ks, k = [], 1
    while k <= min(n, 256):
        ks.append(k)
        k *= 2
    return ks


def parse_ks(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; a ValueError names anything that is not a positive integer."""
    try:
        ks = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError as err:
        raise ValueError(f"k must be a comma-separated list of integers, got {text!r}") from err
    if not ks or min(ks) < 1:
        raise ValueError(f"k must be a non-empty list of integers >= 1, got {text!r}")
    return sorted(set(ks))


def sampled_chunks(
    model,
    tokenizer,
    problems: list,
    *,
    n: int,
    sampling: SamplingParams,
    generator: torch.Generator,
    progress: str | None = None,
):
    """Yield ``(start, chunk, batch)``: n samples of every problem under ``sampling``, a chunk of
    about ``sampling.batch_size`` sequences at a time, in eval mode (the model's mode is
    restored afterwards).

    Rows of ``batch`` are grouped by prompt (``sample_completions`` contract): row ``b * n + j``
    is sample j of ``chunk[b] = problems[start + b]``. ``progress`` names a tqdm bar (None: none).
    Shared by pass@k evaluation and the rare-correct set.
    """
    # lazy: transformers
    from fgrpo_llm.rollout import sample_completions  # the sampler of the trainer; imported lazily

    rows = sampling.batch_size or 512
    prompts_per_chunk = max(1, rows // n)
    starts = range(0, len(problems), prompts_per_chunk)
    if progress:
        from tqdm import tqdm

        starts = tqdm(starts, desc=progress, unit="chunk", leave=False, disable=bar_disabled())
    was_training = model.training
    model.eval()
    try:
        for start in starts:
            chunk = problems[start : start + prompts_per_chunk]
            yield (
                start,
                chunk,
                sample_completions(
                    model,
                    tokenizer,
                    [p.prompt for p in chunk],
                    num_samples=n,
                    sampling=sampling,
                    generator=generator,
                ),
            )
    finally:
        model.train(was_training)


def sample_outcomes(
    model,
    tokenizer,
    task,
    problems,
    *,
    n: int,
    sampling: SamplingParams,
    generator: torch.Generator,
    progress: bool = False,
) -> np.ndarray:
    """0/1 outcome of each of n samples of each problem under ``sampling``, shape (P, n) with
    P = len(problems)."""
    n = int(check_integer("n", n, minimum=1))
    problems = list(problems)
    if not problems:
        raise ValueError("problems must not be empty")
    outcomes = np.zeros((len(problems), n), dtype=np.int8)  # (P, n)
    for start, chunk, batch in sampled_chunks(
        model,
        tokenizer,
        problems,
        n=n,
        sampling=sampling,
        generator=generator,
        progress="eval" if progress else None,
    ):
        for b, problem in enumerate(chunk):
            for j in range(n):
                outcomes[start + b, j] = task.is_correct(problem, batch.completions[b * n + j])
    return outcomes


def sample_correct_counts(
    model,
    tokenizer,
    task,
    problems,
    *,
    n: int,
    sampling: SamplingParams,
    generator: torch.Generator,
    return_outcomes: bool = False,
):
    """Number of correct samples c out of n for each problem under ``sampling``, shape (P,) int.

    With ``return_outcomes=True`` returns ``(counts, outcomes)`` where ``outcomes`` is the (P, n)
    0/1 matrix needed by the paired significance test.
    """
    outcomes = sample_outcomes(
        model,
        tokenizer,
        task,
        problems,
        n=n,
        sampling=sampling,
        generator=generator,
    )
    counts = outcomes.sum(axis=1).astype(np.int64)
    return (counts, outcomes) if return_outcomes else counts


def pass_at_k_table(counts, n: int, ks) -> dict[str, float]:
    """Mean unbiased pass@k over problems for each k: ``{"pass@1": ..., "pass@2": ...}``.

    pass@k = mean_x [1 - C(n - c_x, k) / C(n, k)]  (product form in ``fgrpo_theory.passk``).
    Every k must satisfy 1 <= k <= n and every count 0 <= c <= n.
    """
    n = int(check_integer("n", n, minimum=1))
    c = check_integer("counts", counts, minimum=0).ravel()
    if (c > n).any():
        raise ValueError(f"counts must be <= n={n}, got counts={int(c.max())}")
    ks = check_integer("ks", ks, minimum=1).ravel()
    if (ks > n).any():
        raise ValueError(f"k must be <= n={n}, got k={int(ks.max())}")
    values = mean_pass_at_k(n, c, ks)
    return {f"pass@{int(k)}": float(v) for k, v in zip(ks, values, strict=True)}


def coverage_against(base, trained, k: int) -> dict:
    """Coverage against the base (the count of Yue et al., NeurIPS 2025): of the problems, how
    many the base solves within k samples that the trained model no longer solves ("lost"), and
    the reverse ("gained"), from the two (P, n) 0/1 outcome matrices of the same problems.

    Per problem, pass@k is the unbiased estimate 1 - C(n - c, k) / C(n, k) (the probability
    that k fresh samples hold a correct one); the counts are expected counts over independent
    samplings: lost = sum_p pass_b (1 - pass_t), gained = sum_p (1 - pass_b) pass_t, also
    both and neither. ``lost_by_sampling`` is the lost count expected from sampling alone, were
    the trained model the base itself: sum_p pass_b (1 - mu_p)^k at each problem's measured base
    rate mu_p = c / n (a second evaluation misses a problem its k samples all get wrong), the
    floor below which a lost count says nothing about the model. ``k`` must be at most both
    matrices' n."""
    b, t = np.asarray(base), np.asarray(trained)
    if b.ndim != 2 or t.ndim != 2 or b.shape[0] != t.shape[0]:
        raise ValueError(
            f"base and trained must be (problems, n) matrices of the same problems, got "
            f"{b.shape} and {t.shape}"
        )
    k = int(check_integer("k", k, minimum=1))
    if k > min(b.shape[1], t.shape[1]):
        raise ValueError(
            f"k must be <= n of both matrices, got k={k}, n={b.shape[1]}, {t.shape[1]}"
        )
    c_b = b.sum(axis=1)  # (P,) the base's correct samples per problem
    pb = np.asarray(pass_at_k(b.shape[1], c_b, k), dtype=np.float64)  # (P,)
    pt = np.asarray(pass_at_k(t.shape[1], t.sum(axis=1), k), dtype=np.float64)  # (P,)
    return {
        "k": k,
        "problems": int(b.shape[0]),
        "lost": float(np.sum(pb * (1 - pt))),
        "gained": float(np.sum((1 - pb) * pt)),
        "both": float(np.sum(pb * pt)),
        "neither": float(np.sum((1 - pb) * (1 - pt))),
        "lost_by_sampling": float(np.sum(pb * (1 - c_b / b.shape[1]) ** k)),
    }


def split_role(split: str) -> str:
    """Which column of the paper's tables a split feeds: ``in_domain`` or ``ood``."""
    return "ood" if "ood" in split.lower() else "in_domain"


def default_eval_splits(task) -> list[str]:
    """Every split except the training one (in-domain test and OOD for the built-in tasks)."""
    splits = [s for s in getattr(task, "splits", ()) if s != "train"]
    return splits or list(getattr(task, "splits", ("train",)))


def evaluate_model(
    model,
    tokenizer,
    task,
    *,
    splits=None,
    n: int,
    ks=None,
    max_problems: int | None = None,
    sampling: SamplingParams,
    generator: torch.Generator,
    progress: bool = False,
) -> tuple[dict, dict[str, np.ndarray]]:
    """pass@k per split, n samples per problem under ``sampling``. Returns
    ``(results, outcomes)``.

    ``results = {"n": n, "ks": [...], "splits": {split: {"role", "num_problems", "problem_ids",
    "counts", "pass@1", ...}}}``; ``outcomes[split]`` is the (P, n) 0/1 matrix. One ``generator``
    draws every chunk in turn, so the samples depend on the seed, ``batch_size`` and the problems
    (``max_problems``): all three are recorded (``batch_size``, ``max_problems``; and
    ``num_problems`` per split).
    """
    n = int(check_integer("n", n, minimum=1))
    if max_problems is not None:
        max_problems = int(check_integer("max_problems", max_problems, minimum=1))
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    if not isinstance(sampling, SamplingParams):
        raise TypeError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
    splits = list(splits) if splits else default_eval_splits(task)
    for split in splits:
        check_split(task, split)
    ks = list(ks) if ks else default_ks(n)
    if min(ks) < 1 or max(ks) > n:
        raise ValueError(f"every k must lie in [1, n={n}], got ks={ks}")
    results = {
        "n": int(n),
        "ks": [int(k) for k in ks],
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_new_tokens": sampling.max_new_tokens,
        "batch_size": sampling.batch_size,
        "max_problems": max_problems,
        "splits": {},
    }
    outcomes = {}
    for split in splits:
        problems = task.problems(split)
        if max_problems is not None:
            problems = problems[:max_problems]
        if not problems:
            raise ValueError(
                f"split {split!r} of task {getattr(task, 'name', task)!r} has no problems"
            )
        counts, out = sample_correct_counts(
            model,
            tokenizer,
            task,
            problems,
            n=n,
            sampling=sampling,
            generator=generator,
            return_outcomes=True,
        )
        entry = {
            "role": split_role(split),
            "num_problems": len(problems),
            "problem_ids": [p.id for p in problems],
            "counts": counts.tolist(),
        }
        entry.update(pass_at_k_table(counts, n, ks))
        results["splits"][split] = entry
        outcomes[split] = out
        if progress:
            import sys

            print(
                f"eval {split}: " + ", ".join(f"pass@{k}={entry[f'pass@{k}']:.3f}" for k in ks),
                file=sys.stderr,
            )
    return results, outcomes


def plot_pass_at_k(ax, results: dict, *, label: str = "", **kwargs):
    """pass@k against k (log2 axis), one line per split. Returns the line artists."""
    lines = []
    ks = results["ks"]
    for split, entry in results["splits"].items():
        ys = [entry[f"pass@{k}"] for k in ks]
        name = f"{label} {split}".strip()
        (line,) = ax.plot(ks, ys, marker="o", label=name, **kwargs)
        lines.append(line)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    return lines


def write_eval_outputs(
    results: dict, outcomes: dict[str, np.ndarray], out_dir, *, label: str = ""
) -> dict:
    """Write eval.json, passk.csv, passk.png and outcomes_<split>.npy under ``out_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for split, matrix in outcomes.items():
        np.save(out / _outcome_file(split), np.asarray(matrix, dtype=np.int8))
    atomic_write_text(out / EVAL_JSON, json.dumps(results, indent=1))
    with open(out / EVAL_CSV, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["split", "role", "num_problems", "k", "pass_at_k"])
        for split, entry in results["splits"].items():
            for k in results["ks"]:
                writer.writerow(
                    [split, entry["role"], entry["num_problems"], k, f"{entry[f'pass@{k}']:.6f}"]
                )
    fig, ax = plt.subplots(figsize=(5, 3.5))
    plot_pass_at_k(ax, results, label=label)
    ax.legend(fontsize=8)
    ax.set_title(f"pass@k (n={results['n']})")
    fig.tight_layout()
    save_figure(fig, out / EVAL_PLOT, dpi=120)
    plt.close(fig)
    return {"json": out / EVAL_JSON, "csv": out / EVAL_CSV, "plot": out / EVAL_PLOT}


def load_eval(out_dir) -> tuple[dict, dict[str, np.ndarray]]:
    """Read back what :func:`write_eval_outputs` wrote (outcome matrices where present)."""
    out = Path(out_dir)
    path = out / EVAL_JSON
    if not path.is_file():
        raise FileNotFoundError(f"no {EVAL_JSON} in {out} (run `fgrpo-llm eval --out {out}` first)")
    results = read_json(path)
    _check_eval(results, path)
    outcomes = {}
    for split, entry in results["splits"].items():
        f = out / _outcome_file(split)
        if f.is_file():
            try:
                matrix = np.load(f, allow_pickle=False)
            except (ValueError, OSError, EOFError) as err:
                raise ValueError(f"{f} is not a readable outcome matrix ({err})") from None
            if (
                not isinstance(matrix, np.ndarray)
                or matrix.dtype.kind not in "biuf"
                or matrix.ndim != 2
                or matrix.shape[0] != entry["num_problems"]
                or not np.isin(matrix, (0, 1)).all()
            ):
                raise ValueError(
                    f"{f} must be a (problems={entry['num_problems']}, n) matrix of 0/1, "
                    f"got shape {getattr(matrix, 'shape', None)}"
                )
            outcomes[split] = matrix
    return results, outcomes


def _check_eval(results, path) -> None:
    """A ValueError naming what is wrong when ``results`` is not shaped like
    ``evaluate_model``'s."""
    if not isinstance(results, dict) or not isinstance(results.get("splits"), dict):
        raise ValueError(
            f"{path} must be an object with a 'splits' mapping (fgrpo-llm eval writes one)"
        )
    if not isinstance(results.get("n"), int) or not isinstance(results.get("ks"), list):
        raise ValueError(f"{path} must give the integer 'n' and the list 'ks'")
    for split, entry in results["splits"].items():
        need = ["role", "num_problems", "problem_ids", "counts"] + [
            f"pass@{k}" for k in results["ks"]
        ]
        missing = [k for k in need if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise ValueError(f"{path}: split {split!r} lacks {missing}")
        ids = entry["problem_ids"]
        if not isinstance(ids, list) or len(ids) != entry["num_problems"]:
            raise ValueError(
                f"{path}: split {split!r} must list num_problems={entry['num_problems']} "
                f"problem_ids, got {len(ids) if isinstance(ids, list) else type(ids).__name__}"
            )


class SplitNotCompared(UserWarning):
    """A split in only one of the two evaluations ``compare_evals`` was given."""


def compare_evals(
    dir_a,
    dir_b,
    *,
    m: int | None = None,
    iterations: int = 50_000,
    ks=(1, 256),
    rng: np.random.Generator,
    finite_population: bool = True,
) -> dict:
    """Paired m-out-of-n subsampling test (App. Q) between two eval outputs, per split and k.

    ``m`` defaults to n // 4 (the paper: m = 256 of n = 1024). An m close to n makes the
    subsampled statistic nearly the full one and the test anti-conservative, so m >= n is an
    error rather than silently clipped. ``finite_population`` as in
    :func:`fgrpo_theory.passk.paired_subsampling_test` (False: the paper's scaling, which rejects
    a true null too often at m = n / 4). Each k is tested on m-subsamples, so only the ``ks`` <= m
    are tested (the others are left out of the report); none <= m is an error.

    Both outputs must hold the same problems per split (in any order: B's rows are matched to
    A's by problem id) and the same n. A split in only one of them is not compared (a
    ``SplitNotCompared`` warning names it). Returns ``{split: {"pass@k": test result dict}}``
    with the test's own fields plus both point estimates.
    """
    res_a, out_a = load_eval(dir_a)
    res_b, out_b = load_eval(dir_b)
    for split in sorted(set(res_a["splits"]) ^ set(res_b["splits"])):
        where = dir_a if split in res_a["splits"] else dir_b
        warnings.warn(
            f"split {split!r} is only in {where}: not compared", SplitNotCompared, stacklevel=2
        )
    report = {}
    for split in res_a["splits"]:
        if split not in res_b["splits"]:
            continue
        if split not in out_a or split not in out_b:
            raise FileNotFoundError(
                f"outcome matrix for split {split!r} missing in {dir_a} or {dir_b}"
            )
        a, b = _paired_outcomes(split, res_a, out_a, res_b, out_b)
        n = a.shape[1]
        m_eff = max(n // 4, 1) if m is None else int(m)
        if not 1 <= m_eff < n:
            raise ValueError(f"m must satisfy 1 <= m < n = {n} samples per problem, got m={m_eff}")
        _check_some_k_fits(ks, m_eff, n)
        report[split] = {}
        for k in ks:
            k = int(k)
            if k > m_eff:
                continue
            result = paired_subsampling_test(
                a.astype(bool),
                b.astype(bool),
                m=m_eff,
                iterations=int(iterations),
                rng=rng,
                k=k,
                finite_population=finite_population,
            )
            report[split][f"pass@{k}"] = _as_dict(result)
            report[split][f"pass@{k}"].update({"m": m_eff, "n": n})
    if not report:
        raise ValueError(f"{dir_a} and {dir_b} share no split with outcome matrices")
    return report


def _paired_outcomes(split: str, res_a, out_a, res_b, out_b) -> tuple[np.ndarray, np.ndarray]:
    """The (P, n) outcome matrices of ``split`` in A and B, B's rows in the order of A's problem
    ids; a ValueError when their shapes differ."""
    a, b = out_a[split], out_b[split]
    ids_a, ids_b = res_a["splits"][split]["problem_ids"], res_b["splits"][split]["problem_ids"]
    if ids_a != ids_b:
        b = _rows_in_order(split, ids_a, ids_b, b)
    if a.shape != b.shape:
        raise ValueError(f"split {split!r}: outcome shapes differ, {a.shape} vs {b.shape}")
    return a, b


def _rows_in_order(split: str, ids_a: list, ids_b: list, b: np.ndarray) -> np.ndarray:
    """B's outcome rows in the order of A's problem ids, or a ValueError saying how the two
    evaluations' problems differ."""
    try:
        set_a, set_b = set(ids_a), set(ids_b)
    except TypeError:  # ids that are not strings or numbers: only equal lists match
        raise ValueError(f"split {split!r}: the two evaluations cover different problems") from None
    if len(set_a) != len(ids_a) or len(set_b) != len(ids_b):
        raise ValueError(
            f"split {split!r}: a problem id repeats, so the two evaluations' problems cannot be "
            "matched by id"
        )
    if set_a != set_b:
        only_a, only_b = sorted(map(str, set_a - set_b)), sorted(map(str, set_b - set_a))
        raise ValueError(
            f"split {split!r}: the two evaluations cover different problems "
            f"({len(only_a)} only in A, e.g. {only_a[:3]}; {len(only_b)} only in B, "
            f"e.g. {only_b[:3]})"
        )
    row = {pid: i for i, pid in enumerate(ids_b)}
    return b[[row[pid] for pid in ids_a]]


def _check_some_k_fits(ks, m: int, n: int) -> None:
    """A ValueError naming the ks and m when every k exceeds the subsample size m (no pass@k can
    be estimated from m samples then)."""
    ks = sorted(int(k) for k in ks)
    if ks and ks[0] > m:
        raise ValueError(
            f"every k exceeds the subsample size m={m} (of n={n} samples per problem), got "
            f"k={','.join(map(str, ks))}; ask for a k <= m or a larger m"
        )


def _as_dict(result) -> dict:
    """The significance-test result as a JSON-friendly dict, whatever container it came in."""
    if isinstance(result, dict):
        items = result.items()
    elif hasattr(result, "to_dict"):
        items = result.to_dict().items()
    elif hasattr(result, "_asdict"):
        items = result._asdict().items()
    elif hasattr(result, "__dataclass_fields__"):
        import dataclasses

        items = dataclasses.asdict(result).items()
    else:
        items = vars(result).items()
    out = {}
    for key, value in items:
        if isinstance(value, np.ndarray):
            if value.size > 16:
                continue  # the bootstrap distribution itself stays out of the report
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[key] = value
    return out
