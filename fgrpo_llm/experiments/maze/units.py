"""The Maze study's per-unit table: one row per (base, RL seed, method, N) run with every number
the claims of Section 5.2 / Table 4 read, written as ``OUT/units.csv`` beside results.json
(committed as ``docs/data/maze_study_units.csv``), and the claims judged again from that file
alone (``judge_units``), so that every Maze verdict can be recomputed from the repository.

Columns: the unit (base, the base's kernel family, RL seed), the run's settings (method, gamma,
lr_match_gamma: the gamma whose m_gamma scales the control's lr, empty for a run at rl_lr; N;
its lr; K = eval_k_max), the run's metrics as the study reads them (``maze.study._value``), as
fractions in [0, 1] exactly as result.json holds them (the study reports 100 x):

    final_pass1, final_passK   pass@1 and pass@K at the last evaluated step,
    dip_passK                  max_t (pass@K(0) - pass@K(t))^+, the largest pass@K dip,

and the SFT model's held-out pass@1 and pass@K for the unit's RL seed (``sft_pass1``,
``sft_passK``; the study's SFT row, read by no claim). ``family`` is set in a study pooled over
SFT models (``maze.bases``: intervals over bases) and empty for one SFT model (intervals over RL
seeds); judging the file takes the same intervals.

    fgrpo-llm maze --from-units docs/data/maze_study_units.csv
"""

from __future__ import annotations

from pathlib import Path

from fgrpo_llm.experiments.maze.config import MazeConfig, method_name, run_name
from fgrpo_llm.experiments.maze.study import sft_units, study, unit
from fgrpo_llm.experiments.tables import CsvTable

__all__ = [
    "COLUMNS",
    "unit_rows",
    "write_units",
    "read_units",
    "results_from_units",
    "config_from_units",
    "study_from_units",
    "judge_units",
]

#: Every column of units.csv, in order.
COLUMNS = ("base", "family", "seed", "method", "gamma", "lr_match_gamma", "N", "lr", "K",
           "final_pass1", "final_passK", "dip_passK", "sft_pass1", "sft_passK")  # fmt: skip

#: The table's typed columns (ints, text; every other one a float).
TABLE = CsvTable(COLUMNS, ints={"base", "seed", "N", "K"}, text={"family", "method"})
#: The columns every row must fill (the claims read them).
_REQUIRED = ("base", "seed", "method", "gamma", "N", "K", "final_pass1", "final_passK",
             "dip_passK")  # fmt: skip


def unit_rows(cfg: MazeConfig, results: dict) -> list[dict]:
    """The rows of units.csv from the study's ``results`` (``maze.study.collect``, or pooled
    by ``maze.bases.merge_bases``), in the order of ``results["runs"]``."""
    K = cfg.eval_k_max
    families = results.get("bases") or {}
    sft = sft_units(results)
    rows = []
    for r in results["runs"].values():
        b, s = unit(r)
        e = sft.get((b, s), {})
        rows.append(
            {
                "base": b,
                "family": families.get(str(b)),
                "seed": s,
                "method": r["method"],
                "gamma": float(r["gamma"]),
                "lr_match_gamma": r["lr_match_gamma"],
                "N": int(r["N"]),
                "lr": r.get("lr"),
                "K": K,
                "final_pass1": r["final"]["eval/test/pass@1"],
                "final_passK": r["final"][f"eval/test/pass@{K}"],
                "dip_passK": r["dips"][f"dip/pass@{K}"],
                "sft_pass1": e.get("eval/test/pass@1"),
                "sft_passK": e.get(f"eval/test/pass@{K}"),
            }
        )
    return rows


def write_units(path, rows: list[dict]) -> Path:
    """Write ``rows`` (:func:`unit_rows`) atomically as CSV with the header :data:`COLUMNS` (an
    empty cell for a missing value; floats in full, so the file gives back the study's
    numbers bit for bit)."""
    return TABLE.write(path, rows)


def read_units(path) -> list[dict]:
    """units.csv -> its rows (the values :func:`unit_rows` wrote); a ValueError naming the file
    and the missing column of a file without the Maze study's columns, or the line of a row
    that leaves a required cell empty or holds text in a number column."""
    rows = []
    for i, row in TABLE.read(path, what="a Maze units.csv"):
        empty = [c for c in _REQUIRED if row[c] is None]
        if empty:
            raise ValueError(f"{path}:{i}: no value in column {empty[0]!r}")
        if row["method"] != method_name(row["gamma"], row["lr_match_gamma"]):
            raise ValueError(
                f"{path}:{i}: method {row['method']!r} is not that of gamma="
                f"{row['gamma']:g}, lr_match_gamma={row['lr_match_gamma']}"
            )
        rows.append(row)
    return rows


def results_from_units(rows: list[dict]) -> dict:
    """The ``results`` that :func:`fgrpo_llm.experiments.maze.study.study` reads, from the rows:
    each run's final pass@1 and pass@K and its dip, the SFT evaluations, and ``bases`` (the
    kernel family of each base) when the rows come from a study pooled over SFT models."""
    if not rows:
        raise ValueError("a units.csv without rows judges nothing")
    Ks = {r["K"] for r in rows}
    if len(Ks) != 1:
        raise ValueError(f"the rows hold several K = eval_k_max: {sorted(Ks)}")
    (K,) = Ks
    if len({r["family"] is None for r in rows}) != 1:
        raise ValueError("the rows mix runs with a kernel family (pooled) and without")
    pooled = rows[0]["family"] is not None
    runs, sft, families = {}, {}, {}
    for r in rows:
        b, s = r["base"], r["seed"]
        prefix = f"base{b}/" if pooled or b else ""  # one SFT model's keys: "seed<s>/<run>"
        key = f"{prefix}seed{s}/{run_name(r['gamma'], r['N'], r['lr_match_gamma'])}"
        if key in runs:
            raise ValueError(f"the rows hold the run {key} twice")
        runs[key] = {
            "method": r["method"],
            "gamma": r["gamma"],
            "lr_match_gamma": r["lr_match_gamma"],
            "N": r["N"],
            "seed": s,
            "base": b,
            "lr": r["lr"],
            "final": {
                "eval/test/pass@1": r["final_pass1"],
                f"eval/test/pass@{K}": r["final_passK"],
            },
            "dips": {f"dip/pass@{K}": r["dip_passK"]},
        }
        if r["sft_pass1"] is not None and r["sft_passK"] is not None:
            sft[f"{b}/{s}" if pooled or b else str(s)] = {
                "eval/test/pass@1": r["sft_pass1"],
                f"eval/test/pass@{K}": r["sft_passK"],
            }
        if r["family"] is not None:
            families[str(b)] = r["family"]
    results = {"sft": sft, "runs": runs}
    if pooled:
        results["bases"] = families
    return results


def config_from_units(rows: list[dict]) -> MazeConfig:
    """The plan the rows show: their group sizes, gammas, lr-matched gammas, RL seeds and K (the
    settings the claims read; every other field the reduced preset's)."""
    return MazeConfig(
        group_sizes=tuple(sorted({r["N"] for r in rows})),
        gammas=tuple(sorted({r["gamma"] for r in rows if r["lr_match_gamma"] is None})),
        lr_matched_gammas=tuple(
            sorted({r["lr_match_gamma"] for r in rows if r["lr_match_gamma"] is not None})
        ),
        rl_seeds=tuple(sorted({r["seed"] for r in rows})),
        eval_k_max=rows[0]["K"],
    )


def study_from_units(path, cfg: MazeConfig | None = None) -> dict:
    """``maze.study.study`` on the results rebuilt from units.csv alone (intervals, paired
    differences, claims). ``cfg``: the study's settings (their group sizes, gammas and
    lr-matched gammas name the cells; a cell without rows is not resolved); None: the plan the
    rows show (:func:`config_from_units`)."""
    rows = read_units(path)
    results = results_from_units(rows)
    if cfg is None:
        cfg = config_from_units(rows)
    elif cfg.eval_k_max != rows[0]["K"]:
        raise ValueError(
            f"{path} holds pass@{rows[0]['K']}, the settings read pass@{cfg.eval_k_max}"
        )
    return study(cfg, results)


def judge_units(path, cfg: MazeConfig | None = None) -> dict:
    """Every Maze claim judged from units.csv alone: the claim records (by key, a-d) that
    ``study(cfg, results)["claims"]`` gives (``cfg`` as in :func:`study_from_units`)."""
    return study_from_units(path, cfg)["claims"]
