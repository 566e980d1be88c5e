"""The Maze experiment's configuration (``MazeConfig``, presets, flags) and its runs (``plan``).
Imports nothing from its package; the stages are ``fgrpo_llm.experiments.maze.stages``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import NamedTuple

from fgrpo_common.fields import (
    SEED,
    Integer,
    Optional,
    Real,
    Sequence,
    Text,
    check_fields,
    dataclass_from_dict,
)

PAPER_TABLE = "table4_maze_heldout"
#: Offset of the held-out evaluation seed: seed s is scored with torch seed s + EVAL_SEED_OFFSET.
EVAL_SEED_OFFSET = 12345


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
    """Seed of the mazes, the model initialisation and the SFT batches (one SFT model)."""
    rl_seeds: tuple[int, ...] | None = None
    """RL seeds: every (method, N) run is trained once per seed from the one SFT model, and seed
    s's held-out evaluation uses its own random numbers. None: (seed,), a single-seed run."""
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
    lr_matched_gammas: tuple[float, ...] | None = None
    """The lr-matched control: GRPO at rl_lr * m_gamma for each gamma here (m_0.5 = 0.679,
    m_1 = 0.5; ``fgrpo_theory.focal.lr_multiplier``), at every N. Each must be a positive value
    of ``gammas``. None: every positive value of ``gammas``; () : no control."""
    eval_every: int = 20
    """Evaluate pass@k on the held-out mazes every this many RL steps (and after the last)."""
    eval_k_max: int = 64
    """K: samples per held-out maze; pass@k for k = 1, 2, 4, ..., K (paper: up to 2048)."""
    sample_batch_size: int = 1024
    """Sequences decoded at once when sampling for evaluation and RL."""
    threads: int = 1
    """torch intra-op threads of every stage and RL run (the numbers depend on it: float sums
    are split differently over threads; a fixed value keeps them machine-independent)."""
    device: str = "auto"
    """"auto" (CUDA when available), "cpu" or "cuda[:i]"."""

    def __post_init__(self):
        check_fields(self, MAZE_RULES)  # every field's type and range (fgrpo_common.fields)
        if self.grid_size % 2 == 0:
            raise ValueError(
                f"grid_size must be odd (2 * cells + 1), got grid_size={self.grid_size}"
            )
        if self.hidden_size % self.num_heads or (self.hidden_size // self.num_heads) % 2:
            raise ValueError(  # the model's own rule (fgrpo_llm.model), checked before any stage
                f"hidden_size / num_heads must be an even integer, got "
                f"hidden_size={self.hidden_size}, num_heads={self.num_heads}"
            )
        if self.rl_seeds is None:
            object.__setattr__(self, "rl_seeds", (self.seed,))
        if self.lr_matched_gammas is None:
            matched = tuple(g for g in self.gammas if g > 0)
            object.__setattr__(self, "lr_matched_gammas", matched)
        if not set(self.lr_matched_gammas) <= set(self.gammas):
            raise ValueError(
                "lr_matched_gammas must be distinct positive values of gammas="
                f"{list(self.gammas)}, got lr_matched_gammas="
                f"{list(self.lr_matched_gammas)!r}"
            )

    @property
    def cells(self) -> int:
        return (self.grid_size - 1) // 2

    @property
    def max_new_tokens(self) -> int:
        """Longest completion: a simple path has at most cells^2 - 1 moves, then END, then EOS."""
        return self.cells**2 + 1

    @property
    def ks(self) -> list[int]:
        """k = 1, 2, 4, ... up to eval_k_max (eval_k_max itself included)."""
        powers = {2**i for i in range(int(math.log2(self.eval_k_max)) + 1)}
        return sorted(powers | {self.eval_k_max})

    def to_dict(self) -> dict:
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: dict) -> MazeConfig:
        return dataclass_from_dict(cls, data, what="maze config")


_POSITIVE, _COUNT = Integer(1), Integer(0)
_POSITIVE_REAL = Real(0, open_low=True)

#: Type and range of every MazeConfig field (the rules between fields live in ``__post_init__``).
MAZE_RULES = {
    "preset": Text(),
    "grid_size": Integer(5),
    "num_train": _POSITIVE,
    "num_test": _POSITIVE,
    "seed": SEED,
    "rl_seeds": Optional(Sequence(SEED, distinct=True)),
    "hidden_size": _POSITIVE,
    "num_layers": _POSITIVE,
    "num_heads": _POSITIVE,
    "sft_steps": _POSITIVE,
    "sft_batch_size": _POSITIVE,
    "sft_lr": _POSITIVE_REAL,
    "rl_steps": _POSITIVE,
    "rl_prompts_per_step": _POSITIVE,
    "rl_lr": _POSITIVE_REAL,
    "rl_warmup_steps": _COUNT,
    "group_sizes": Sequence(Integer(2), distinct=True),
    "gammas": Sequence(Real(0), distinct=True),
    "lr_matched_gammas": Optional(Sequence(_POSITIVE_REAL, nonempty=False, distinct=True)),
    "eval_every": _POSITIVE,
    "eval_k_max": _POSITIVE,
    "sample_batch_size": _POSITIVE,
    "threads": _POSITIVE,
    "device": Optional(Text()),
}


#: The presets. ``full`` is the paper's protocol (GPU). ``reduced`` (the MazeConfig defaults)
#: shrinks everything to fit 2 CPU cores:
#:
#: ============================  =====================================  ==========================
#:  setting                       reduced                                full (paper)
#: ============================  =====================================  ==========================
#:  maze                          7x7 grid = 3x3 cells                   17x17 grid = 8x8 cells
#:  model                         hidden 64, 2 layers (~0.13M params)    hidden 192, 5 layers (~3M)
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
    "full": dict(
        grid_size=17,
        num_train=50_000,
        num_test=256,
        hidden_size=192,
        num_layers=5,
        num_heads=6,
        sft_steps=1500,
        sft_batch_size=32,
        sft_lr=5e-4,
        rl_steps=20_000,
        rl_prompts_per_step=256,
        rl_lr=1e-4,
        rl_warmup_steps=0,
        group_sizes=(4, 8, 16, 32, 64, 128),
        eval_every=500,
        eval_k_max=2048,
        sample_batch_size=8192,
    ),
}


def make_config(preset: str = "reduced", **overrides) -> MazeConfig:
    """The preset's values, then ``overrides`` (None values ignored)."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    values = {**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
    values["preset"] = preset
    return MazeConfig.from_dict(values)


#: MazeConfig field -> its ``fgrpo-llm maze`` flag (the CLI is built from this, and
#: :func:`command_for` writes a config back as a command).
FLAGS = {
    "grid_size": "--grid-size",
    "num_train": "--num-train",
    "num_test": "--num-test",
    "seed": "--seed",
    "rl_seeds": "--seeds",
    "hidden_size": "--hidden-size",
    "num_layers": "--num-layers",
    "num_heads": "--num-heads",
    "sft_steps": "--sft-steps",
    "sft_batch_size": "--sft-batch-size",
    "sft_lr": "--sft-lr",
    "rl_steps": "--rl-steps",
    "rl_prompts_per_step": "--prompts-per-step",
    "rl_lr": "--rl-lr",
    "rl_warmup_steps": "--rl-warmup-steps",
    "group_sizes": "--group-size",
    "gammas": "--gamma",
    "lr_matched_gammas": "--lr-matched-gammas",
    "eval_every": "--eval-every",
    "eval_k_max": "--k-max",
    "sample_batch_size": "--sample-batch-size",
    "threads": "--threads",
    "device": "--device",
}


def command_for(cfg: MazeConfig, out: str = "OUT") -> str:
    """The ``fgrpo-llm maze`` command that reproduces ``cfg``: the preset, then every field that
    differs from it (``--workers`` is left out: it changes no number)."""
    base = make_config(cfg.preset).to_dict() if cfg.preset in PRESETS else {}
    parts = ["fgrpo-llm maze", f"--preset {cfg.preset}"]
    for name, value in cfg.to_dict().items():
        if name in FLAGS and base.get(name) != value:
            text = (
                ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
                if isinstance(value, list)
                else str(value)
            )
            parts.append(f"{FLAGS[name]} {text or ','}")
    return " ".join(parts + [f"--out {out}"])


# -- the runs ------------------------------------------------------------------------------------


def method_name(gamma: float, lr_match_gamma: float | None = None) -> str:
    """``GRPO``, ``F-GRPO gamma=<gamma>`` (the paper's row labels, e.g. gamma=1.0) or, for the
    control, ``GRPO lr x m(gamma=<gamma>)``."""
    if lr_match_gamma is not None:
        return f"GRPO lr x m(gamma={float(lr_match_gamma)})"
    return "GRPO" if gamma == 0 else f"F-GRPO gamma={float(gamma)}"


def run_name(gamma: float, N: int, lr_match_gamma: float | None = None) -> str:
    if lr_match_gamma is not None:
        return f"grpo_lrm_g{lr_match_gamma:g}_N{N}"
    return f"grpo_N{N}" if gamma == 0 else f"fgrpo_g{gamma:g}_N{N}"


class MazeRun(NamedTuple):
    """One RL run of the experiment."""

    seed: int
    """RL seed (sampling, prompt order, held-out evaluation)."""
    N: int
    """Group size."""
    gamma: float
    """Focal exponent of the update (0: GRPO)."""
    lr_match_gamma: float | None = None
    """The control: GRPO trained at rl_lr * m_gamma for this gamma; None for rl_lr."""

    @property
    def name(self) -> str:
        return run_name(self.gamma, self.N, self.lr_match_gamma)

    @property
    def method(self) -> str:
        return method_name(self.gamma, self.lr_match_gamma)

    @property
    def key(self) -> str:
        """``seed<s>/<name>``: the run's folder under OUT/rl and its key in results.json."""
        return f"seed{self.seed}/{self.name}"


def methods(cfg: MazeConfig) -> list[tuple[float, float | None]]:
    """(gamma, lr_match_gamma) of every method: the gammas, then the lr-matched controls."""
    return [(g, None) for g in cfg.gammas] + [(0.0, g) for g in cfg.lr_matched_gammas]


def plan(cfg: MazeConfig) -> list[MazeRun]:
    """Every run, in the fixed order of the summaries: seed, then N, then method."""
    return [
        MazeRun(s, N, g, m) for s in cfg.rl_seeds for N in cfg.group_sizes for g, m in methods(cfg)
    ]
