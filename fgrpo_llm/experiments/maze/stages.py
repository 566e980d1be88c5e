"""The Maze single-solution experiment (paper Section 5.2, Appendix K, Table 4).

Protocol: a decoder-only transformer is trained from scratch on the target paths of perfect mazes
(SFT), then RL'd fully on-policy (one update per step) with GRPO (gamma = 0), F-GRPO (gamma in
{0.5, 1}) and the learning-rate-matched control (GRPO at rl_lr * m_gamma, ``lr_matched_gammas``)
for every group size N and every RL seed; pass@k on held-out mazes (k = 1, 2, 4, ..., K) is
measured on the SFT model (step 0) and every ``eval_every`` steps, so GRPO's early pass@K dip
shows when it happens. Every maze has exactly one correct completion, so a pass@K loss here
cannot come from lost within-prompt diversity.

Seeds. ``seed`` draws the mazes, the model's initialisation and the SFT batches: there is ONE SFT
model. Each RL seed s in ``rl_seeds`` seeds the RL sampling and prompt order of every run and the
held-out evaluation of seed s (the same random numbers for every method and step of that seed,
so the differences between methods are paired). The study statistics (means and t intervals over
seeds, paired differences, verdicts on the paper's claims) are ``maze.study``'s.

Same command, same numbers: every budget is a step count; torch runs ``threads`` intra-op threads
in every stage (default 1: the float sums, hence the sampled rollouts, then do not depend on the
machine's core count); the RL runs go to ``workers`` spawned processes, each run's outputs depend
only on its own settings and the results are collected in a fixed order, so the worker count and
the order the runs finish in change nothing. Wall and CPU times go to OUT/timings.json only.

Stages (each is skipped when its outputs exist, so an interrupted study continues where it
stopped; an RL run killed mid-way resumes from its last checkpoint):

    OUT/config.json                 the resolved MazeConfig
    OUT/sft/model/                  SFT checkpoint (HF format, task.json), OUT/sft/sft_metrics.jsonl
    OUT/sft/eval_seed<s>.json       pass@k of the SFT model with seed s's evaluation = step 0
    OUT/rl/seed<s>/<run>/           one trainer run (config.json, metrics.jsonl, ...) + result.json
    OUT/results.json, OUT/table.{csv,md}, OUT/report.{md,json}, OUT/maze_*.png   the summary
    OUT/timings.json                wall and CPU seconds of every stage and call

    fgrpo-llm maze --preset reduced --out runs/maze
    fgrpo-llm maze --preset reduced --seeds 0,1,2 --workers 2 --out runs/maze_study
"""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path

import numpy as np
import torch

from fgrpo_llm.config import TrainConfig
from fgrpo_llm.evaluation.passk import pass_at_k_table, sample_correct_counts
from fgrpo_llm.experiments.maze.config import EVAL_SEED_OFFSET, MazeConfig, MazeRun
from fgrpo_llm.sft import pad_sft_rows, sft_loop
from fgrpo_llm.tasks.for_model import write_task_record
from fgrpo_llm.tasks.maze import VOCAB, MazeTask


def build_task(cfg: MazeConfig) -> MazeTask:
    return _task(cfg.grid_size, cfg.num_train, cfg.num_test, cfg.seed)


@functools.lru_cache(maxsize=2)
def _task(grid_size: int, num_train: int, num_test: int, seed: int) -> MazeTask:
    """One MazeTask per process and setting (its mazes are generated once, then shared)."""
    return MazeTask(grid_size=grid_size, num_train=num_train, num_test=num_test, seed=seed)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` torch intra-op threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# -- SFT -----------------------------------------------------------------------------------------


def sft_batch(tokenizer, task: MazeTask, problems, rng: np.random.Generator, batch_size: int):
    """``(input_ids, attention_mask, labels)`` each (B, T): ``<bos> maze > path END <eos>``,
    right-padded; labels are -100 except on the target path, END and EOS (the completion the RL
    stage samples)."""
    rows = []
    for i in rng.integers(len(problems), size=batch_size):
        p = problems[int(i)]
        prompt_ids = tokenizer(p.prompt)["input_ids"]
        target_ids = tokenizer(task.target(p), add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids + target_ids + [tokenizer.eos_token_id], len(prompt_ids)))
    return pad_sft_rows(rows, tokenizer.pad_token_id)


def run_sft(cfg: MazeConfig, task: MazeTask, out: Path, *, progress: bool = True) -> dict:
    """Train a fresh model on the target paths for ``sft_steps`` steps; save it to ``out`` (HF
    checkpoint, with its task recorded: ``tasks.for_model.TASK_RECORD``) and its loss curve beside
    it (OUT/sft/sft_metrics.jsonl). Returns a summary."""
    from fgrpo_llm.model import (  # lazy: transformers
        build_tiny_model,
        count_parameters,
        resolve_device,
        save_model_and_tokenizer,
    )
    from fgrpo_llm.tokenizer import build_word_tokenizer  # lazy: tokenizers, transformers

    device = resolve_device(cfg.device)
    tokenizer = build_word_tokenizer(list(VOCAB))
    positions = (cfg.grid_size - 2) ** 2 + 2 + cfg.max_new_tokens
    model = build_tiny_model(
        tokenizer,
        hidden_size=cfg.hidden_size,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
        max_position_embeddings=positions,
        seed=cfg.seed,
    ).to(device)
    problems = task.problems("train")
    rng = np.random.default_rng([cfg.seed, 7])
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.sft_lr, betas=(0.9, 0.999), weight_decay=0.01
    )
    out.mkdir(parents=True, exist_ok=True)
    log_path = out.parent / "sft_metrics.jsonl"
    log_path.write_text("")
    with open(log_path, "a") as log:

        def log_step(r: dict) -> None:
            record = {"step": r["step"], "sft/loss": r["loss"], "sft/grad_norm": r["grad_norm"]}
            log.write(json.dumps(record) + "\n")
            log.flush()

        done = sft_loop(
            model,
            optimizer,
            lambda: sft_batch(tokenizer, task, problems, rng, cfg.sft_batch_size),
            steps=cfg.sft_steps,
            device=device,
            log=log_step,
            log_at=lambda step: step % 25 == 0 or step in (1, cfg.sft_steps),
            desc="maze sft",
            progress=progress,
        )
    loss_value = done["loss"]
    save_model_and_tokenizer(model.cpu(), tokenizer, out)
    write_task_record(out, "maze")  # training it on another task is refused
    return {"sft/loss": loss_value, "model/parameters": count_parameters(model)}


# -- evaluation ----------------------------------------------------------------------------------


def eval_seed(rl_seed: int) -> int:
    """The torch seed of RL seed ``rl_seed``'s held-out evaluation."""
    return rl_seed + EVAL_SEED_OFFSET


def evaluate_heldout(model, tokenizer, task: MazeTask, cfg: MazeConfig, *, rl_seed: int) -> dict:
    """pass@k on the held-out mazes, ``{"eval/test/pass@k": ...}``, from K samples per maze.

    The sampling generator is re-seeded with :func:`eval_seed` at every call, so every checkpoint
    of every run of one RL seed is scored with the same random numbers (common random numbers:
    the paired differences between methods do not carry independent evaluation noise).
    """
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(eval_seed(rl_seed))
    counts = sample_correct_counts(
        model,
        tokenizer,
        task,
        task.problems("test"),
        n=cfg.eval_k_max,
        sampling=SamplingParams(
            max_new_tokens=cfg.max_new_tokens, temperature=1.0, batch_size=cfg.sample_batch_size
        ),
        generator=generator,
    )
    table = pass_at_k_table(counts, cfg.eval_k_max, cfg.ks)
    metrics = {f"eval/test/{k}": v for k, v in table.items()}
    metrics["eval/test/solved_frac"] = float((counts > 0).mean())
    return metrics


# -- RL ------------------------------------------------------------------------------------------


def train_config(
    cfg: MazeConfig, sft_dir: Path, run_dir: Path, run: MazeRun, *, progress: bool = True
):
    """The trainer's config of one run: fully on-policy (one update per step, ratio = 1)."""
    return TrainConfig(
        base=str(sft_dir / "model"),
        out=str(run_dir),
        algo="grpo",
        gamma=run.gamma,
        task="maze",
        task_kwargs={
            "grid_size": cfg.grid_size,
            "num_train": cfg.num_train,
            "num_test": cfg.num_test,
            "seed": cfg.seed,
        },
        steps=cfg.rl_steps,
        prompts_per_step=cfg.rl_prompts_per_step,
        group_size=run.N,
        num_mini_batches=1,
        ppo_epochs=1,
        lr=cfg.rl_lr,
        lr_match_gamma=run.lr_match_gamma,
        warmup_steps=cfg.rl_warmup_steps,
        max_new_tokens=cfg.max_new_tokens,
        rollout_batch_size=cfg.sample_batch_size,
        seed=run.seed,
        eval_every=cfg.eval_every,
        checkpoint_every=cfg.eval_every,
        keep_checkpoints=1,
        device=cfg.device,
        progress=progress,
    )


def run_rl(
    cfg: MazeConfig,
    task: MazeTask,
    sft_dir: Path,
    run_dir: Path,
    run: MazeRun,
    *,
    progress: bool = True,
) -> None:
    """One GRPO / F-GRPO / control run with the generic trainer; a killed run resumes from its
    last checkpoint (or starts again when it had none)."""
    from fgrpo_llm.model import load_model_and_tokenizer  # lazy: transformers
    from fgrpo_llm.trainer import train  # lazy: transformers

    train_cfg = train_config(cfg, sft_dir, run_dir, run, progress=progress)
    _, tokenizer = load_model_and_tokenizer(sft_dir / "model", device="cpu")

    def heldout(model, step):
        return evaluate_heldout(model, tokenizer, task, cfg, rl_seed=run.seed)

    train(train_cfg, resume=True, evaluators=[heldout], task=task)


def read_curve(run_dir: Path, sft_eval: dict) -> list[dict]:
    """The held-out pass@k curve of a run: step 0 (the SFT model) then every evaluated step."""
    curve = [{"step": 0, **sft_eval}]
    with open(run_dir / "metrics.jsonl") as fh:
        for line in fh:
            record = json.loads(line)
            if "eval/test/pass@1" in record:
                curve.append(
                    {
                        "step": record["step"],
                        **{k: v for k, v in record.items() if k.startswith("eval/")},
                    }
                )
    return curve


def dip_statistics(curve: list[dict], ks: list[int]) -> dict:
    """For each k: the largest drop of pass@k below its step-0 value over the evaluated steps,
    the step of the minimum, and the final value minus the step-0 value ("dip" = 0 when pass@k
    never fell)."""
    out = {}
    for k in ks:
        key = f"eval/test/pass@{k}"
        values = [c[key] for c in curve]
        i_min = int(np.argmin(values[1:])) + 1 if len(values) > 1 else 0
        out[f"dip/pass@{k}"] = max(0.0, values[0] - values[i_min])
        out[f"dip_step/pass@{k}"] = curve[i_min]["step"]
        out[f"change/pass@{k}"] = values[-1] - values[0]
    return out
