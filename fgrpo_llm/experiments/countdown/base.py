"""Supervised pretraining of the built-in base model on skewed Countdown demonstrations
(our CPU-scale setting).

The base model must solve a moderate fraction of prompts and have *common and rare*
correct modes, the situation the paper's tail-miss argument (Lemma 3.1) is about. Each
demonstration for a prompt x is drawn as:

- with probability ``wrong_fraction``: a wrong expression over x's numbers;
- otherwise a correct one, picked from x's ranked correct expressions ``c_0, c_1, ...``
  (``CountdownTask.solutions``) with weight w_k = 1 / (k + 1)^alpha, alpha = 1.5; with
  probability ``reverse_fraction`` the ranking is reversed first. A few forms are common,
  the rest form a long tail.

With probability ``ood_fraction`` the prompt is a random four-number prompt instead (never
one of the OOD evaluation prompts), so the base solves some OOD prompts.

The loop is AdamW (lr 3e-3, batch 128; warm-up then cosine decay over the step budget) for
``max_steps`` steps, so the base is the same on every machine however busy it is; the loss is the
token-mean cross-entropy over completion tokens (EOS included). A wall-clock cap is optional and
off by default; a run that hits one says so in its summary (``stopped_by``). Outputs in OUT: the
Hugging Face checkpoint (weights, ``config.json`` of the model, tokenizer), ``pretrain_config.json``
(this run's resolved :class:`PretrainConfig`), ``pretrain_metrics.jsonl`` and ``environment.json``
(what made it: ``fgrpo_llm.environment.write_environment``).

    fgrpo-llm pretrain --out runs/base            # 600 steps, a few minutes on one CPU core
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fgrpo_common.fields import SEED, Choice, Integer, Real, Text, check_fields, dataclass_from_dict
from fgrpo_common.files import check_not_working_directory, refuse_other_settings
from fgrpo_llm.config import check_training_dtype
from fgrpo_llm.environment import write_environment
from fgrpo_llm.model import (
    build_tiny_model,
    count_parameters,
    resolve_autocast_dtype,
    resolve_device,
    save_model_and_tokenizer,
)
from fgrpo_llm.rollout import SamplingParams, sample_completions
from fgrpo_llm.sft import pad_sft_rows, sft_loop
from fgrpo_llm.tasks.countdown import ALPHABET, CountdownTask, all_expressions
from fgrpo_llm.tokenizer import build_char_tokenizer

CONFIG_NAME = "pretrain_config.json"
METRICS_NAME = "pretrain_metrics.jsonl"


@dataclass(frozen=True)
class PretrainConfig:
    """Everything ``fgrpo-llm pretrain`` needs; saved to OUT/pretrain_config.json."""

    seed: int = 0
    """Seed of the model initialisation, the demonstration stream and the evaluation samples."""
    seconds: float = 0.0
    """Optional wall-clock cap on training in seconds; 0 (the default) means none. The step budget
    ``max_steps`` decides the base; a run stopped by the cap says so (summary ``stopped_by``) and
    its base then depends on the machine's speed."""
    max_steps: int = 600
    """The step budget: optimizer steps of batch ``batch_size``."""
    batch_size: int = 128
    """Demonstrations per optimizer step."""
    lr: float = 3e-3
    """AdamW learning rate (constant after warm-up)."""
    warmup_steps: int = 20
    """Linear learning-rate warm-up steps."""
    lr_schedule: str = "cosine"
    """"constant", or "cosine": after warm-up, decay to ``min_lr_ratio * lr`` over the step
    budget."""
    min_lr_ratio: float = 0.1
    """Final learning rate of the cosine schedule, as a fraction of ``lr``."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    hidden_size: int = 128
    """Model width (our CPU-scale setting: 128)."""
    num_layers: int = 4
    """Transformer blocks (our CPU-scale setting: 4)."""
    num_heads: int = 4
    """Attention heads (our CPU-scale setting: 4)."""
    max_position_embeddings: int = 128
    """Longest sequence the model accepts (Countdown sequences are ~20 tokens)."""
    task_seed: int = 0
    """Seed of the Countdown splits (must match the one used for RL and evaluation)."""
    num_test: int = 200
    """Countdown in-domain test prompts (held out of the demonstrations)."""
    num_ood: int = 200
    """Countdown out-of-domain (4-number) prompts."""
    rank_exponent: float = 1.5
    """alpha in the demonstration weights w_k = 1 / (k + 1)^alpha over ranked correct forms."""
    reverse_fraction: float = 0.1
    """Probability of drawing from the reversed ranking instead."""
    wrong_fraction: float = 0.15
    """Probability that a demonstration is a wrong answer."""
    ood_fraction: float = 0.1
    """Probability that a demonstration's prompt has ``ood_num_numbers`` numbers (drawn outside
    the OOD split), so that the OOD split is not unsolvable for the base and measures transfer."""
    eval_prompts: int = 100
    """Test prompts for the final pass@1 estimate (0 disables evaluation)."""
    eval_samples: int = 16
    """Samples per evaluation prompt (temperature 1)."""
    max_new_tokens: int = 16
    """Token limit of an evaluation completion."""
    log_every: int = 25
    """Write a metrics line every this many steps."""
    device: str = "auto"
    """"auto" (CUDA if available, else CPU), "cpu" or "cuda"."""
    dtype: str = "auto"
    """Autocast dtype: "auto" (bf16 on CUDA, float32 on CPU), "float32", "bfloat16" (not
    "float16": no loss scaler, ``fgrpo_llm.config.check_training_dtype``)."""

    def __post_init__(self):
        check_fields(self, PRETRAIN_RULES)  # every field's type and range (fgrpo_common.fields)
        if self.eval_prompts > self.num_test:
            raise ValueError(
                f"eval_prompts must be <= num_test, got {self.eval_prompts} > {self.num_test}"
            )
        resolve_autocast_dtype(torch.device("cpu"), self.dtype)  # validates the name
        check_training_dtype(self.dtype)
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise ValueError(
                f"device must be 'auto', 'cpu' or 'cuda[:i]', got device={self.device!r}"
            )

    @classmethod
    def from_dict(cls, values: dict) -> PretrainConfig:
        """Build from a mapping; unknown keys are a ValueError naming them."""
        return dataclass_from_dict(cls, values, what="pretrain config")


_FRACTION = Real(0, 1)
#: Type and range of every PretrainConfig field.
PRETRAIN_RULES = {
    "seed": SEED,
    "seconds": Real(0),
    "max_steps": Integer(1),
    "batch_size": Integer(1),
    "lr": Real(0, open_low=True),
    "warmup_steps": Integer(0),
    "lr_schedule": Choice(("constant", "cosine")),
    "min_lr_ratio": _FRACTION,
    "weight_decay": Real(0),
    "hidden_size": Integer(1),
    "num_layers": Integer(1),
    "num_heads": Integer(1),
    "max_position_embeddings": Integer(1),
    "task_seed": SEED,
    "num_test": Integer(0),
    "num_ood": Integer(0),
    "rank_exponent": Real(0),
    "reverse_fraction": _FRACTION,
    "wrong_fraction": _FRACTION,
    "ood_fraction": _FRACTION,
    "eval_prompts": Integer(0),
    "eval_samples": Integer(1),
    "max_new_tokens": Integer(1),
    "log_every": Integer(1),
    "device": Text(),
    "dtype": Text(),
}


# -- demonstrations ------------------------------------------------------------------------


def skewed_weights(K: int, alpha: float) -> np.ndarray:
    """w_k = (k + 1)^(-alpha) / sum_j (j + 1)^(-alpha), k = 0..K-1 (computed in log space)."""
    log_w = -alpha * np.log1p(np.arange(K, dtype=np.float64))
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def sample_demonstration(
    solutions: list[str],
    wrong: list[str],
    rng: np.random.Generator,
    *,
    rank_exponent: float,
    reverse_fraction: float,
    wrong_fraction: float,
) -> str:
    """One demonstration completion: a wrong answer w.p. ``wrong_fraction``, else a correct form
    drawn with weights ``skewed_weights`` from the ranking (reversed w.p. ``reverse_fraction``)."""
    if wrong and rng.random() < wrong_fraction:
        return wrong[int(rng.integers(len(wrong)))]
    ranked = solutions[::-1] if rng.random() < reverse_fraction else solutions
    return ranked[int(rng.choice(len(ranked), p=skewed_weights(len(ranked), rank_exponent)))]


def _split_answers(problem, operators) -> tuple[list[str], list[str]]:
    """The expressions over a Countdown problem's numbers (``all_expressions``, in its ranking)
    that reach its target, and those that do not."""
    numbers, target = problem.answer
    exprs = all_expressions(numbers, operators)
    return [e for e, v in exprs if v == target], [e for e, v in exprs if v != target]


class DemonstrationStream:
    """Batches of tokenized demonstrations for the training split of a Countdown task."""

    def __init__(
        self, task: CountdownTask, tokenizer, cfg: PretrainConfig, rng: np.random.Generator
    ):
        self.task = task
        self.problems = task.problems("train")
        self.operators = task.operators
        self._answers: dict[
            int, tuple[list[str], list[str]]
        ] = {}  # index -> (correct ranked, wrong)
        self.vocab = tokenizer.get_vocab()
        self.bos, self.eos, self.pad = (
            tokenizer.bos_token_id,
            tokenizer.eos_token_id,
            tokenizer.pad_token_id,
        )
        self.cfg, self.rng = cfg, rng

    def answers(self, i: int) -> tuple[list[str], list[str]]:
        """Ranked correct expressions (as ``CountdownTask.solutions``) and wrong ones of problem
        i."""
        if i not in self._answers:
            self._answers[i] = _split_answers(self.problems[i], self.operators)
        return self._answers[i]

    def encode(self, prompt: str, completion: str) -> tuple[list[int], int]:
        """``<bos> prompt completion <eos>`` ids (same as the tokenizer) and the prompt length."""
        ids = [self.bos] + [self.vocab[c] for c in prompt]
        return ids + [self.vocab[c] for c in completion] + [self.eos], len(ids)

    def batch(self) -> tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]:
        """``(input_ids, attention_mask, labels)``, each (B, T); labels -100 off the completion."""
        cfg, rows = self.cfg, []
        for i in self.rng.integers(len(self.problems), size=cfg.batch_size):
            if cfg.ood_fraction and self.rng.random() < cfg.ood_fraction:
                # a four-number prompt, not an OOD test one
                problem = self.task.sample_ood_like(self.rng)
                answers = _split_answers(problem, self.operators)
            else:
                problem, answers = self.problems[i], self.answers(int(i))
            completion = sample_demonstration(
                *answers,
                self.rng,
                rank_exponent=cfg.rank_exponent,
                reverse_fraction=cfg.reverse_fraction,
                wrong_fraction=cfg.wrong_fraction,
            )
            rows.append(self.encode(problem.prompt, completion))
        return pad_sft_rows(rows, self.pad)


# -- training ------------------------------------------------------------------------------


def lr_multiplier(step: int, progress: float, cfg: PretrainConfig) -> float:
    """Learning-rate factor at optimizer step ``step`` (0-based) with ``progress`` in [0, 1] of
    the budget: linear warm-up, then constant or cosine decay to ``cfg.min_lr_ratio``."""
    warm = min(1.0, (step + 1) / max(cfg.warmup_steps, 1))
    if cfg.lr_schedule == "constant":
        return warm
    p = min(max(progress, 0.0), 1.0)
    return warm * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * 0.5 * (1.0 + np.cos(np.pi * p)))


@torch.no_grad()
def estimate_pass_at_1(
    model,
    tokenizer,
    task,
    problems,
    *,
    num_samples: int,
    max_new_tokens: int,
    generator: torch.Generator,
    autocast_dtype=None,
) -> dict:
    """pass@1 = mean reward over ``num_samples`` temperature-1 samples per problem, plus the mean
    number of distinct correct forms per problem and the fraction of problems solved at least
    once."""
    batch = sample_completions(
        model,
        tokenizer,
        [p.prompt for p in problems],
        num_samples=num_samples,
        sampling=SamplingParams(
            max_new_tokens=max_new_tokens, temperature=1.0, autocast_dtype=autocast_dtype
        ),
        generator=generator,
    )
    rewards = np.array(
        [
            task.is_correct(problems[b], c)
            for b, c in zip(batch.prompt_index.tolist(), batch.completions, strict=True)
        ],
        dtype=np.float64,
    )
    rewards = rewards.reshape(len(problems), num_samples)  # (B, N)
    forms = [
        {
            task.solution_form(problems[b], c)
            for c in batch.completions[b * num_samples : (b + 1) * num_samples]
        }
        - {None}
        for b in range(len(problems))
    ]
    return {
        "pass@1": float(rewards.mean()),
        f"pass@{num_samples}": float((rewards.max(axis=1) > 0).mean()),
        "distinct_correct_forms": float(np.mean([len(f) for f in forms])),
    }


def _build(cfg: PretrainConfig, device):
    """The task, tokenizer, freshly initialised model (seed ``cfg.seed``, on ``device``), the
    demonstration stream (its own generator, seed ``cfg.seed``) and the AdamW optimizer."""
    task = CountdownTask(seed=cfg.task_seed, num_test=cfg.num_test, num_ood=cfg.num_ood)
    tokenizer = build_char_tokenizer(ALPHABET)
    model = build_tiny_model(
        tokenizer,
        hidden_size=cfg.hidden_size,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        seed=cfg.seed,
    ).to(device)
    stream = DemonstrationStream(task, tokenizer, cfg, np.random.default_rng(cfg.seed))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), weight_decay=cfg.weight_decay
    )
    return task, tokenizer, model, stream, optimizer


def _step_record(r: dict) -> dict:
    """One line of the pretraining metrics from ``sft_loop``'s step report."""
    return {
        "step": r["step"],
        "train/loss": r["loss"],
        "train/grad_norm": r["grad_norm"],
        "train/lr": r["lr"],
        "time/elapsed_s": r["elapsed_s"],
        "perf/tokens_per_s": r["tokens"] / r["elapsed_s"],
    }


def _check_out(cfg: PretrainConfig, out: Path) -> dict:
    """Refuse an ``out`` that holds anything but a base, or a base made with other settings;
    the settings as the saved file reads them."""
    check_not_working_directory(out, "out")
    others = (
        sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) if out.is_dir() else []
    )
    if others and not (out / CONFIG_NAME).is_file():  # saving replaces the whole directory
        raise ValueError(
            f"{out} is not empty and holds no base model (no {CONFIG_NAME}; it holds "
            f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): pretraining into it "
            "would replace it; use another --out"
        )
    settings = json.loads(json.dumps(dataclasses.asdict(cfg)))  # as the saved file reads
    refuse_other_settings(
        out / CONFIG_NAME,
        settings,
        free=("device",),
        what=f"{out} holds a base model",
        advice="use another --out (or delete it)",
    )
    return settings


def _evaluate_base(cfg: PretrainConfig, model, tokenizer, task, device, amp_dtype) -> dict:
    """``{"eval/test/<metric>": value}``: pass@1 on the first ``eval_prompts`` test problems,
    sampled with a generator seeded by ``cfg.seed``."""
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    test = task.problems("test")[: cfg.eval_prompts]
    results = estimate_pass_at_1(
        model,
        tokenizer,
        task,
        test,
        num_samples=cfg.eval_samples,
        max_new_tokens=cfg.max_new_tokens,
        generator=generator,
        autocast_dtype=amp_dtype,
    )
    return {f"eval/test/{name}": value for name, value in results.items()}


def pretrain(cfg: PretrainConfig, out, *, progress: bool = True) -> dict:
    """Train the base model described by ``cfg`` and save it to directory ``out``.

    Returns a summary dict (steps, seconds, final loss, evaluation metrics). An ``out`` that
    holds a base made with other settings is refused (runs may point to it), as is one that holds
    anything but a base (a run: saving replaces the whole directory); the settings and
    the metrics are written with the weights, in one atomic step, so a failed or killed run
    leaves an existing base as it was.
    """
    out = Path(out)
    settings = _check_out(cfg, out)
    device = resolve_device(cfg.device)
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / f".{METRICS_NAME}.partial"  # moved in with the weights at the end
    metrics_path.write_text("")
    amp_dtype = resolve_autocast_dtype(device, cfg.dtype)

    task, tokenizer, model, stream, optimizer = _build(cfg, device)

    def log(record: dict) -> None:
        with open(metrics_path, "a") as fh:
            fh.write(json.dumps(record) + "\n")

    def log_step(r: dict) -> None:
        log(_step_record(r))

    done = sft_loop(
        model,
        optimizer,
        stream.batch,
        steps=cfg.max_steps,
        device=device,
        # the schedule counts steps only
        lr_at=lambda step: cfg.lr * lr_multiplier(step, step / cfg.max_steps, cfg),
        autocast_dtype=amp_dtype,
        log=log_step,
        log_at=lambda step: step % cfg.log_every == 0 or step == 1,
        seconds=cfg.seconds,
        desc="pretrain",
        progress=progress,
    )
    step, stopped_by, loss_value = done["steps"], done["stopped_by"], done["loss"]
    if stopped_by != "step budget":
        print(
            f"pretrain: stopped by the {stopped_by}; the base depends on this machine's speed",
            file=sys.stderr,
        )
    train_seconds = done["seconds"]
    summary = {
        "step": step,
        "stopped_by": stopped_by,
        "train/loss": loss_value,
        "time/train_s": train_seconds,
        "model/parameters": count_parameters(model),
        "data/train_prompts": len(stream.problems),
    }

    if cfg.eval_prompts:
        summary.update(_evaluate_base(cfg, model, tokenizer, task, device, amp_dtype))
    log(summary)
    records = {CONFIG_NAME: settings, METRICS_NAME: metrics_path.read_text()}
    save_model_and_tokenizer(model.cpu(), tokenizer, out, records=records)
    metrics_path.unlink()
    write_environment(out, device)  # what made it, as a study's bases record
    return summary
