"""The Maze single-solution experiment (paper Section 5.2, Appendix K, Table 4; SPEC.md section 5).

Protocol: a decoder-only transformer is trained from scratch on the target paths of perfect mazes
(SFT), then RL'd fully on-policy (one update per step) with GRPO (gamma = 0) and F-GRPO
(gamma in {0.5, 1}) for every group size N; pass@k on held-out mazes (k = 1, 2, 4, ..., K) is
measured on the SFT model (step 0) and every ``eval_every`` steps, so GRPO's early pass@K dip
shows when it happens. Every maze has exactly one correct completion, so a pass@K loss here
cannot come from lost within-prompt diversity.

Stages (each is skipped when its outputs exist, so an interrupted run continues where it stopped;
an RL run cut between checkpoints resumes from its last one):

    OUT/config.json                  the resolved MazeConfig
    OUT/sft/model/                   SFT checkpoint (HF format) + sft_metrics.jsonl
    OUT/sft/eval.json                pass@k of the SFT model = step 0 of every RL curve
    OUT/rl/<method>_N<N>/            one trainer run (config.json, metrics.jsonl, ...) + result.json
    OUT/results.json, OUT/table.csv, OUT/table.md, OUT/maze_*.png   the summary beside Table 4

    fgrpo-llm maze --preset reduced --out runs/maze
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fgrpo_llm.tasks.maze import VOCAB, MazeTask

PAPER_TABLE = "table4_maze_heldout"


@dataclass(frozen=True)
class MazeConfig:
    """Every setting of a maze experiment; saved resolved to OUT/config.json."""

    preset: str = "reduced"
    """Name of the preset these values started from (informational)."""
    grid_size: int = 7
    """Odd side of the maze grid, 2 * cells + 1 (paper: 17, i.e. 8x8 cells)."""
    num_train: int = 4000
    """Distinct training mazes (SFT targets and RL prompts)."""
    num_test: int = 64
    """Distinct held-out mazes for pass@k (paper: 256)."""
    seed: int = 0
    """Seed of the mazes, the model initialisation, SFT batches, RL sampling and evaluation."""
    hidden_size: int = 64
    """Transformer width."""
    num_layers: int = 2
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads."""
    sft_steps: int = 1200
    """SFT optimizer steps (paper: 1500)."""
    sft_batch_size: int = 32
    """SFT mazes per step (paper: 32)."""
    sft_lr: float = 3e-3
    """SFT AdamW learning rate (paper: 5e-4)."""
    rl_steps: int = 120
    """RL steps, one on-policy update each (paper: 20,000)."""
    rl_prompts_per_step: int = 16
    """B, mazes per RL step (paper: batch 256)."""
    rl_lr: float = 5e-4
    """RL AdamW learning rate (paper: 1e-4)."""
    rl_warmup_steps: int = 0
    """Linear learning-rate warm-up of the RL stage (0 = constant from the first step)."""
    group_sizes: tuple[int, ...] = (4, 8, 16)
    """The N list (paper: 4, 8, 16, 32, 64, 128)."""
    gammas: tuple[float, ...] = (0.0, 0.5, 1.0)
    """Focal exponents; 0 is GRPO (paper: 0, 0.5, 1)."""
    eval_every: int = 20
    """Evaluate pass@k on the held-out mazes every this many RL steps (and after the last)."""
    eval_k_max: int = 64
    """K: samples per held-out maze; pass@k is reported for k = 1, 2, 4, ..., K (paper: up to 2048)."""
    sample_batch_size: int = 1024
    """Sequences decoded at once when sampling for evaluation and RL."""
    device: str = "auto"
    """"auto" (CUDA when available), "cpu" or "cuda[:i]"."""

    def __post_init__(self):
        def fail(name, rule):
            raise ValueError(f"{name} must be {rule}, got {name}={getattr(self, name)!r}")

        for name in ("grid_size", "num_train", "num_test", "hidden_size", "num_layers", "num_heads", "sft_steps",
                     "sft_batch_size", "rl_steps", "rl_prompts_per_step", "eval_every", "eval_k_max",
                     "sample_batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                fail(name, "an integer >= 1")
        for name in ("seed", "rl_warmup_steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                fail(name, "an integer >= 0")
        if self.grid_size < 5 or self.grid_size % 2 == 0:
            fail("grid_size", "odd and >= 5")
        for name in ("sft_lr", "rl_lr"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < math.inf:
                fail(name, "a finite number > 0")
        object.__setattr__(self, "group_sizes", tuple(self.group_sizes))
        object.__setattr__(self, "gammas", tuple(float(g) for g in self.gammas))
        if not self.group_sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 2
                                       for n in self.group_sizes):
            fail("group_sizes", "a non-empty list of integers >= 2")
        if not self.gammas or any(not 0 <= g < math.inf for g in self.gammas):
            fail("gammas", "a non-empty list of finite numbers >= 0")

    @property
    def cells(self) -> int:
        return (self.grid_size - 1) // 2

    @property
    def max_new_tokens(self) -> int:
        """Longest possible completion: a simple path has at most cells^2 - 1 moves, then END, then EOS."""
        return self.cells**2 + 1

    @property
    def ks(self) -> list[int]:
        """k = 1, 2, 4, ... up to eval_k_max (eval_k_max itself included)."""
        return sorted({2**i for i in range(int(math.log2(self.eval_k_max)) + 1)} | {self.eval_k_max})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "MazeConfig":
        from fgrpo_llm.config import dataclass_from_dict

        return dataclass_from_dict(cls, data, what="maze config")


#: The two presets. ``full`` is the paper's protocol (GPU). ``reduced`` (the MazeConfig defaults) fits in
#: about 10 minutes on 2 shared CPU cores by shrinking everything:
#:
#: ============================  =====================================  ==========================
#:  setting                       reduced                                full (paper)
#: ============================  =====================================  ==========================
#:  maze                          7x7 grid = 3x3 cells                   17x17 grid = 8x8 cells
#:  model                         hidden 64, 2 layers (~0.13M params)    hidden 192, 5 layers (~3.0M)
#:  SFT                           1200 steps x 32, lr 3e-3               1500 steps x 32, lr 5e-4
#:  RL                            120 steps x 16 mazes, lr 5e-4          20,000 steps x 256, lr 1e-4
#:  N list                        4, 8, 16                               4, 8, 16, 32, 64, 128
#:  pass@k                        K <= 64 on 64 held-out mazes           K <= 2048 on 256 held-out
#: ============================  =====================================  ==========================
#:
#: The paper's "batch 256" is read as 256 mazes per step, each with N rollouts (as its LLM batch);
#: pass ``rl_prompts_per_step`` to change that.
PRESETS: dict[str, dict] = {
    "reduced": {},  # the MazeConfig defaults
    "full": dict(preset="full", grid_size=17, num_train=50_000, num_test=256, hidden_size=192, num_layers=5,
                 num_heads=6, sft_steps=1500, sft_batch_size=32, sft_lr=5e-4, rl_steps=20_000,
                 rl_prompts_per_step=256, rl_lr=1e-4, rl_warmup_steps=0, group_sizes=(4, 8, 16, 32, 64, 128),
                 eval_every=500, eval_k_max=2048, sample_batch_size=8192),
}


def make_config(preset: str = "reduced", **overrides) -> MazeConfig:
    """The preset's values, then ``overrides`` (None values ignored)."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    values = {"preset": preset, **PRESETS[preset]}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return MazeConfig.from_dict(values)


def method_name(gamma: float) -> str:
    """``GRPO`` for gamma = 0, else ``F-GRPO gamma=<gamma>`` (the paper's row labels, e.g. gamma=1.0)."""
    return "GRPO" if gamma == 0 else f"F-GRPO gamma={float(gamma)}"


def run_name(gamma: float, N: int) -> str:
    return f"grpo_N{N}" if gamma == 0 else f"fgrpo_g{gamma:g}_N{N}"


def build_task(cfg: MazeConfig) -> MazeTask:
    return MazeTask(grid_size=cfg.grid_size, num_train=cfg.num_train, num_test=cfg.num_test, seed=cfg.seed)


def _write_json(path: Path, data) -> None:
    from fgrpo_llm.files import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1) + "\n")


# -- SFT -----------------------------------------------------------------------------------------

def sft_batch(tokenizer, task: MazeTask, problems, rng: np.random.Generator, batch_size: int):
    """``(input_ids, attention_mask, labels)`` each (B, T): ``<bos> maze > path END <eos>``, right-padded;
    labels are -100 except on the target path, END and EOS (the completion the RL stage samples)."""
    from fgrpo_llm.sft import pad_sft_rows

    rows = []
    for i in rng.integers(len(problems), size=batch_size):
        p = problems[int(i)]
        prompt_ids = tokenizer(p.prompt)["input_ids"]
        target_ids = tokenizer(task.target(p), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((prompt_ids + target_ids, len(prompt_ids)))
    return pad_sft_rows(rows, tokenizer.pad_token_id)


def run_sft(cfg: MazeConfig, task: MazeTask, out: Path, *, progress: bool = True) -> dict:
    """Train a fresh model on the target paths; save it to ``out`` (HF checkpoint). Returns a summary."""
    from tqdm import tqdm

    from fgrpo_llm.model import build_tiny_model, count_parameters, resolve_device, save_model_and_tokenizer
    from fgrpo_llm.sft import completion_loss
    from fgrpo_llm.tokenizer import build_word_tokenizer

    device = resolve_device(cfg.device)
    tokenizer = build_word_tokenizer(list(VOCAB))
    model = build_tiny_model(tokenizer, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers,
                             num_heads=cfg.num_heads, max_position_embeddings=(cfg.grid_size - 2) ** 2 + 2 + cfg.max_new_tokens,
                             seed=cfg.seed).to(device)
    problems = task.problems("train")
    rng = np.random.default_rng([cfg.seed, 7])
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.sft_lr, betas=(0.9, 0.999), weight_decay=0.01)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out.parent / "sft_metrics.jsonl"
    log_path.write_text("")
    model.train()
    start, loss_value = time.perf_counter(), float("nan")
    bar = tqdm(range(1, cfg.sft_steps + 1), desc="maze sft", unit="step", file=sys.stderr, disable=not progress)
    with open(log_path, "a") as log:
        for step in bar:
            input_ids, mask, labels = (x.to(device) for x in sft_batch(tokenizer, task, problems, rng,
                                                                         cfg.sft_batch_size))
            loss = completion_loss(model, input_ids, mask, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            loss_value = float(loss.detach())
            if step % 25 == 0 or step in (1, cfg.sft_steps):
                log.write(json.dumps({"step": step, "sft/loss": loss_value, "sft/grad_norm": float(grad_norm),
                                      "time/elapsed_s": time.perf_counter() - start}) + "\n")
                log.flush()
                bar.set_postfix(loss=f"{loss_value:.3f}")
    model.eval()
    save_model_and_tokenizer(model.cpu(), tokenizer, out)
    return {"sft/loss": loss_value, "sft/seconds": time.perf_counter() - start,
            "model/parameters": count_parameters(model)}


# -- evaluation ----------------------------------------------------------------------------------

def evaluate_heldout(model, tokenizer, task: MazeTask, cfg: MazeConfig) -> dict:
    """pass@k on the held-out mazes, ``{"eval/test/pass@k": ...}``, from K samples per maze.

    The sampling generator is re-seeded at every call, so every checkpoint of every run is scored
    with the same random numbers (common random numbers make curves and methods comparable).
    """
    from fgrpo_llm.evaluation.passk import pass_at_k_table, sample_correct_counts

    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(cfg.seed + 12345)
    counts = sample_correct_counts(model, tokenizer, task, task.problems("test"), n=cfg.eval_k_max,
                                   max_new_tokens=cfg.max_new_tokens, temperature=1.0, generator=generator,
                                   batch_size=cfg.sample_batch_size)
    table = pass_at_k_table(counts, cfg.eval_k_max, cfg.ks)
    metrics = {f"eval/test/{k}": v for k, v in table.items()}
    metrics["eval/test/solved_frac"] = float((counts > 0).mean())
    return metrics


# -- RL ------------------------------------------------------------------------------------------

def run_rl(cfg: MazeConfig, task: MazeTask, sft_dir: Path, run_dir: Path, *, gamma: float, N: int,
           progress: bool = True) -> None:
    """One GRPO / F-GRPO run with the generic trainer (one on-policy update per step), resuming if cut."""
    from fgrpo_llm.checkpoint import latest_checkpoint
    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.model import load_model_and_tokenizer
    from fgrpo_llm.trainer import train

    train_cfg = TrainConfig(
        base=str(sft_dir / "model"), out=str(run_dir), algo="grpo", gamma=gamma, task="maze",
        task_kwargs={"grid_size": cfg.grid_size, "num_train": cfg.num_train, "num_test": cfg.num_test,
                     "seed": cfg.seed},
        steps=cfg.rl_steps, prompts_per_step=cfg.rl_prompts_per_step, group_size=N,
        num_mini_batches=1, ppo_epochs=1,  # one update per step: fully on-policy (ratio = 1)
        lr=cfg.rl_lr, warmup_steps=cfg.rl_warmup_steps, max_new_tokens=cfg.max_new_tokens,
        rollout_batch_size=cfg.sample_batch_size, seed=cfg.seed, eval_every=cfg.eval_every,
        checkpoint_every=cfg.eval_every, keep_checkpoints=1, device=cfg.device, progress=progress)
    resume = latest_checkpoint(run_dir) is not None
    if not resume and run_dir.exists():
        shutil.rmtree(run_dir)  # cut before its first checkpoint: start over
    _, tokenizer = load_model_and_tokenizer(sft_dir / "model", device="cpu")

    def heldout(model, step):
        return evaluate_heldout(model, tokenizer, task, cfg)

    train(train_cfg, resume=resume, evaluators=[heldout], task=task)


def read_curve(run_dir: Path, sft_eval: dict) -> list[dict]:
    """The held-out pass@k curve of a run: step 0 (the SFT model) then every evaluated step."""
    curve = [{"step": 0, **sft_eval}]
    with open(run_dir / "metrics.jsonl") as fh:
        for line in fh:
            record = json.loads(line)
            if "eval/test/pass@1" in record:
                curve.append({"step": record["step"], **{k: v for k, v in record.items() if k.startswith("eval/")}})
    return curve


def dip_statistics(curve: list[dict], ks: list[int]) -> dict:
    """For each k: the largest drop of pass@k below its step-0 value, the step of the minimum,
    and the final value minus the step-0 value ("dip" = 0 when pass@k never fell)."""
    out = {}
    for k in ks:
        key = f"eval/test/pass@{k}"
        values = [c[key] for c in curve]
        i_min = int(np.argmin(values[1:])) + 1 if len(values) > 1 else 0
        out[f"dip/pass@{k}"] = max(0.0, values[0] - values[i_min])
        out[f"dip_step/pass@{k}"] = curve[i_min]["step"]
        out[f"change/pass@{k}"] = values[-1] - values[0]
    return out


# -- summary -------------------------------------------------------------------------------------

def paper_table4() -> dict | None:
    """The paper's Table 4 (``fgrpo_llm.experiments.paper``), or None when it is not in the file
    (the tables then show "-"). Side-by-side only: never a result of this project."""
    from fgrpo_llm.experiments.paper import load_paper_results

    return load_paper_results().get(PAPER_TABLE)


def table_rows(cfg: MazeConfig, results: dict, paper: dict | None) -> list[dict]:
    """Rows shaped like Table 4: one per (metric, N), one column per method, ours beside the paper's (percent)."""
    big = [k for k in (128, 256) if k <= cfg.eval_k_max] or [cfg.eval_k_max]
    metrics = ["pass@1"] + [f"pass@{k}" for k in big]
    if cfg.eval_k_max not in big:
        metrics.append(f"pass@{cfg.eval_k_max}")
    rows = []
    for metric in metrics:
        for N in cfg.group_sizes:
            row = {"metric": metric, "N": N}
            for gamma in cfg.gammas:
                method = method_name(gamma)
                run = results["runs"].get(run_name(gamma, N))
                row[f"ours {method}"] = None if run is None else round(100 * run["final"][f"eval/test/{metric}"], 1)
                values = (paper or {}).get(metric, {}).get(method)
                row[f"paper {method}"] = values[paper["N"].index(N)] if values and N in paper["N"] else None
            rows.append(row)
    return rows


def write_table(rows: list[dict], out: Path, *, sft_eval: dict, cfg: MazeConfig, runs: dict) -> None:
    with open(out / "table.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    cols = list(rows[0])
    fmt = lambda v: "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = [f"Held-out maze pass@k (%), {cfg.num_test} mazes, grid {cfg.grid_size}x{cfg.grid_size}, "
             f"{cfg.rl_steps} RL steps, preset {cfg.preset}; SFT model: "
             + ", ".join(f"pass@{k} {100 * sft_eval[f'eval/test/pass@{k}']:.1f}" for k in (1, cfg.eval_k_max)),
             "'paper' columns: Table 4 of the paper (17x17, 20K steps, 256 mazes, n=1024) for side-by-side only.",
             "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]
    K = cfg.eval_k_max
    lines += ["", f"Early dip: the largest drop of held-out pass@k below the SFT model's (step 0) during RL, "
              "its step, and the final change (points).", "",
              f"| run | pass@1 dip | step | pass@1 change | pass@{K} dip | step | pass@{K} change |",
              "|---|---|---|---|---|---|---|"]
    for name, run in runs.items():
        d = run["dips"]
        cells = [f"{run['method']} N={run['N']}"]
        for k in (1, K):
            dip = d[f"dip/pass@{k}"]
            cells += [f"{100 * dip:.1f}", str(d[f"dip_step/pass@{k}"]) if dip > 0 else "-",
                      f"{100 * d[f'change/pass@{k}']:+.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    (out / "table.md").write_text("\n".join(lines) + "\n")


def plot_curves(axes, cfg: MazeConfig, results: dict, k: int) -> None:
    """pass@k against RL step, one panel per N (``axes`` a sequence), one line per method."""
    for ax, N in zip(axes, cfg.group_sizes):
        for gamma in cfg.gammas:
            run = results["runs"].get(run_name(gamma, N))
            if run is None:
                continue
            steps = [c["step"] for c in run["curve"]]
            ax.plot(steps, [c[f"eval/test/pass@{k}"] for c in run["curve"]], marker="o", ms=3,
                    label=method_name(gamma))
        ax.set_title(f"N = {N}", fontsize=9)
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"held-out pass@{k}")
    axes[0].legend(fontsize=7)


def plot_final(ax, cfg: MazeConfig, results: dict, paper: dict | None, k: int) -> None:
    """Final pass@k against N: ours (solid) and, when k is in Table 4, the paper's (dashed, same colour)."""
    for i, gamma in enumerate(cfg.gammas):
        method, colour = method_name(gamma), f"C{i}"
        Ns = [N for N in cfg.group_sizes if run_name(gamma, N) in results["runs"]]
        ax.plot(Ns, [results["runs"][run_name(gamma, N)]["final"][f"eval/test/pass@{k}"] for N in Ns],
                marker="o", color=colour, label=f"ours {method}")
        values = (paper or {}).get(f"pass@{k}", {}).get(method)
        if values:
            ax.plot(paper["N"], [v / 100 for v in values], ls="--", marker="x", color=colour,
                    label=f"paper {method}")
    ax.axhline(results["sft"][f"eval/test/pass@{k}"], color="grey", ls=":", label="ours, SFT model (step 0)")
    in_paper = bool((paper or {}).get(f"pass@{k}"))
    ax.set_title(f"pass@{k}: ours (solid)" + (", paper Table 4 (dashed)" if in_paper else " (not in Table 4)"),
                 fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel(f"final held-out pass@{k}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)


def write_figures(cfg: MazeConfig, results: dict, paper: dict | None, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    nN = len(cfg.group_sizes)
    fig, axes = plt.subplots(2, nN, figsize=(2.6 * nN + 0.6, 4.6), squeeze=False, sharey="row")
    plot_curves(axes[0], cfg, results, 1)
    plot_curves(axes[1], cfg, results, cfg.eval_k_max)
    fig.suptitle(f"Maze {cfg.grid_size}x{cfg.grid_size}: held-out pass@1 (top), pass@{cfg.eval_k_max} (bottom)",
                 fontsize=9)
    fig.tight_layout()
    paths.append(out / "maze_curves.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    plot_final(axes[0], cfg, results, paper, 1)
    k_big = max(k for k in cfg.ks if k <= 256)
    plot_final(axes[1], cfg, results, paper, k_big)
    fig.tight_layout()
    paths.append(out / "maze_final.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def summarize(cfg: MazeConfig, out: Path) -> dict:
    """Collect every finished run into results.json, table.csv, table.md and the figures."""
    sft_eval = json.loads((out / "sft" / "eval.json").read_text())
    results = {"config": cfg.to_dict(), "sft": sft_eval, "runs": {}}
    for N in cfg.group_sizes:
        for gamma in cfg.gammas:
            path = out / "rl" / run_name(gamma, N) / "result.json"
            if path.is_file():
                results["runs"][run_name(gamma, N)] = json.loads(path.read_text())
    paper = paper_table4()
    rows = table_rows(cfg, results, paper)
    results["table"] = rows
    _write_json(out / "results.json", results)
    write_table(rows, out, sft_eval=sft_eval, cfg=cfg, runs=results["runs"])
    if results["runs"]:
        write_figures(cfg, results, paper, out)
    return results


# -- the whole experiment ------------------------------------------------------------------------

def _check_out(cfg: MazeConfig, out: Path) -> None:
    """OUT may hold a previous run only with the same settings (so finished stages can be reused)."""
    saved = out / "config.json"
    if saved.is_file():
        old = json.loads(saved.read_text())
        # Settings that do not change any finished stage may differ: the lists (more N or gamma), the device.
        free = {"group_sizes", "gammas", "device", "sample_batch_size", "preset"}
        diff = sorted(k for k, v in cfg.to_dict().items() if k not in free and old.get(k) != _jsonable(v))
        if diff:
            raise ValueError(f"{out} holds a maze run with other settings ({', '.join(f'{k}={old.get(k)!r}' for k in diff)}); "
                             "use another --out or the same settings")


def _jsonable(v):
    return list(v) if isinstance(v, tuple) else v


def run_experiment(cfg: MazeConfig, out, *, progress: bool = True) -> dict:
    """Run (or continue) every stage of the experiment in ``out``; return the summary."""
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_device

    out = Path(out)
    _check_out(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "config.json", cfg.to_dict())
    torch.manual_seed(cfg.seed)  # an entry point: global seeding only here
    t0 = time.perf_counter()
    task = build_task(cfg)

    sft_dir = out / "sft"
    if not (sft_dir / "model" / "config.json").is_file():
        summary = run_sft(cfg, task, sft_dir / "model", progress=progress)
        _write_json(sft_dir / "sft_summary.json", summary)
    if not (sft_dir / "eval.json").is_file():
        model, tokenizer = load_model_and_tokenizer(sft_dir / "model", device=resolve_device(cfg.device))
        _write_json(sft_dir / "eval.json", evaluate_heldout(model, tokenizer, task, cfg))
    sft_eval = json.loads((sft_dir / "eval.json").read_text())
    _log(progress, "SFT held-out " + _fmt(sft_eval, cfg))

    for N in cfg.group_sizes:
        for gamma in cfg.gammas:
            run_dir = out / "rl" / run_name(gamma, N)
            if (run_dir / "result.json").is_file():
                continue
            t = time.perf_counter()
            run_rl(cfg, task, sft_dir, run_dir, gamma=gamma, N=N, progress=progress)
            curve = read_curve(run_dir, sft_eval)
            result = {"method": method_name(gamma), "gamma": gamma, "N": N, "curve": curve, "final": curve[-1],
                      "dips": dip_statistics(curve, cfg.ks), "seconds": time.perf_counter() - t}
            _write_json(run_dir / "result.json", result)
            K, dips = cfg.eval_k_max, result["dips"]
            _log(progress, f"{method_name(gamma)} N={N} final " + _fmt(curve[-1], cfg)
                 + f"; largest pass@{K} dip below SFT {dips[f'dip/pass@{K}']:.3f} at step {dips[f'dip_step/pass@{K}']}")
            summarize(cfg, out)
    results = summarize(cfg, out)
    results["seconds_this_call"] = time.perf_counter() - t0
    return results


def _fmt(metrics: dict, cfg: MazeConfig) -> str:
    return ", ".join(f"pass@{k}={metrics[f'eval/test/pass@{k}']:.3f}" for k in (1, cfg.eval_k_max))


def _log(progress: bool, text: str) -> None:
    if progress:
        print(f"[maze] {text}", file=sys.stderr, flush=True)
