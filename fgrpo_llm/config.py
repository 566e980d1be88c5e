"""``TrainConfig``: every setting of an RL run, validated, loadable from YAML/JSON, saved resolved.

Defaults follow the paper's Table 5 where they transfer to a CPU-sized model (AdamW
(0.9, 0.999), weight decay 0.01, grad-norm clip 1.0, 15 warm-up steps then a constant learning
rate, 1 PPO epoch, temperature 1.0, top-p 1.0, no top-k, no KL) and our CPU-scale setting for the
sizes (32 prompts x N = 8, lr 1e-4). Algorithm-dependent settings left as ``None`` are resolved on
construction (DAPO: clip 0.2 / 0.28 and dynamic sampling on; GRPO: clip 0.2 / 0.2), so the
``config.json`` written next to a run states exactly what ran.

    cfg = load_config("my.yaml", algo="dapo", gamma=0.5)   # file, then keyword overrides
    save_config(cfg, "runs/x/config.json")
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from fgrpo_common.fields import (
    SEED,
    Boolean,
    Choice,
    Integer,
    Mapping,
    Optional,
    Real,
    Text,
    check_fields,
    dataclass_from_dict,
)
from fgrpo_common.files import atomic_write_text
from fgrpo_llm.trackers import REPORT_TO
from fgrpo_theory.focal import lr_multiplier
from fgrpo_theory.weighting import WEIGHTINGS as WEIGHTINGS  # the names, for the integrations
from fgrpo_theory.weighting import Weighting, resolve_weighting

ALGOS = ("grpo", "dapo", "cispo")


@dataclass(frozen=True)
class TrainConfig:
    """One RL run. Field docstrings say what each setting means."""

    base: str = "runs/base"
    """Directory of the base model: any local Hugging Face causal-LM checkpoint with its
    tokenizer."""
    out: str = "runs/train"
    """Run directory: config.json, metrics.jsonl, groups.jsonl, checkpoints/, model/."""
    algo: str = "grpo"
    """Policy loss: "grpo" (symmetric clip), "dapo" (clip-higher + dynamic sampling) or "cispo"."""
    gamma: float = 0.0
    """Focal exponent: advantages are multiplied by g = (1 - X/N)^gamma (Eq. 11-13). 0 = base
    method."""
    weighting: str | Weighting = "focal"
    """How a group's success rate weights its advantages (``fgrpo_theory.weighting``): "focal"
    (g = (1 - X/N)^gamma times GRPO's, with ``gamma``; the default), "none" (GRPO), "maxrl"
    (MaxRL's (r - X/N) / (X/N) on the verifier's verdicts r; gamma must be 0), any registered
    rule, a spelling with its exponent ("focal:0.5", which sets ``gamma``) or a ``Weighting``.
    Stored as the rule's name, its exponent in ``gamma``; :attr:`advantage_weighting` is the
    ``Weighting``."""
    task: str = "countdown"
    """Task name for ``fgrpo_llm.tasks.get_task``."""
    task_kwargs: dict = field(default_factory=dict)
    """Keyword arguments of the task (e.g. {"path": "data.jsonl"} for boxed_math)."""
    split: str = "train"
    """Task split the prompts are drawn from."""
    prompt_pool: int | None = None
    """Train on the first P problems of ``split`` only (None: all of them). A small pool makes
    the run revisit its prompts: 150 steps x 32 prompts over a pool of 1,200 visit each about 4
    times (the paper's runs revisit theirs, App. L Table 5)."""
    steps: int = 200
    """Number of training steps (one batch of prompts each)."""
    prompts_per_step: int = 32
    """B: prompts per training step (the global batch is B * N sequences)."""
    group_size: int = 8
    """N: completions sampled per prompt."""
    num_mini_batches: int = 1
    """Optimizer steps per PPO epoch: the step's groups are split into this many mini-batches."""
    ppo_epochs: int = 1
    """Passes over the step's rollouts; the paper uses 1 (with 1 mini-batch: fully on-policy)."""
    micro_batch_size: int | None = None
    """Sequences per forward/backward (gradient accumulation inside a mini-batch); None = whole
    mini-batch."""
    lr: float = 1e-4
    """Peak learning rate of AdamW (before ``lr_multiplier``)."""
    lr_multiplier: float = 1.0
    """Multiplies ``lr``; e.g. m_0.5 = 0.679 for the paper's low-LR control
    (see ``lr_match_gamma``)."""
    lr_match_gamma: float | None = None
    """If set, ``lr_multiplier`` is further multiplied by m_gamma = B(3/2, gamma+3/2)/B(3/2, 3/2)
    (the low-LR control, Table 3)."""
    warmup_steps: int = 15
    """Linear warm-up from lr/warmup_steps to lr over this many training steps, then constant."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    adam_beta1: float = 0.9
    """AdamW beta1."""
    adam_beta2: float = 0.999
    """AdamW beta2."""
    adam_eps: float = 1e-8
    """AdamW epsilon."""
    grad_clip: float = 1.0
    """Maximum global gradient norm (0 disables clipping; the norm is logged either way)."""
    clip_eps_low: float | None = None
    """PPO clip lower bound eps_low (ratio >= 1 - eps_low) for grpo/dapo; None: 0.2."""
    clip_eps_high: float | None = None
    """PPO clip upper bound eps_high (ratio <= 1 + eps_high) for grpo/dapo; None: 0.2 (grpo), 0.28
    (dapo)."""
    cispo_is_eps_low: float = 1.0
    """CISPO importance-weight cap: the detached weight is clamped to >= 1 - cispo_is_eps_low."""
    cispo_is_eps_high: float = 5.0
    """CISPO importance-weight cap: the detached weight is clamped to <= 1 + cispo_is_eps_high."""
    adv_std: str = "bessel"
    """Std convention of the GRPO advantage: "bessel" (TRL, verl), "population" or "none"
    (mean-centred)."""
    adv_eps: float = 1e-6
    """eps added to the group std (verl: 1e-6, TRL: 1e-4)."""
    dynamic_sampling: bool | None = None
    """Drop groups with X = 0 or X = N and sample more prompts to refill; None: on for dapo only."""
    max_sampling_rounds: int = 3
    """Extra sampling rounds allowed per step to refill the batch under dynamic sampling."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (the paper's control uses 0.001)."""
    kl_coef: float = 0.0
    """k3 KL penalty to the frozen base model (the paper's control uses 0.001); > 0 loads a
    reference copy."""
    max_new_tokens: int = 32
    """Token limit of each completion."""
    temperature: float = 1.0
    """Sampling temperature (0 = greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1 = off)."""
    top_k: int = 0
    """Top-k sampling (0 = off)."""
    rollout_batch_size: int | None = None
    """Sequences decoded at once by the sampler; None = all of a sampling round."""
    seed: int = 0
    """Seed of every random stream of the run (sampling, data order, mini-batch shuffling)."""
    eval_every: int = 0
    """Run the evaluation hooks every this many steps (and after the last step); 0 = never."""
    checkpoint_every: int = 50
    """Write a resumable checkpoint every this many steps (and after the last step); 0 = only at the
    end."""
    keep_checkpoints: int = 2
    """Number of most recent checkpoints kept on disk (0 = keep all)."""
    device: str | None = None
    """"cpu", "cuda", "cuda:1", or None/"auto" (CUDA when available)."""
    dtype: str | None = None
    """Autocast dtype: None/"auto" (bf16 on CUDA, float32 on CPU), "float32", "bfloat16" (not
    "float16": its small gradients need a loss scaler, which this trainer does not use)."""
    tensorboard: bool = False
    """Deprecated spelling of ``report_to="tensorboard"`` (read as that, then stored False)."""
    report_to: str = "none"
    """Where the metrics go besides metrics.jsonl (always written): "none", "tensorboard"
    (OUT/tensorboard) or "trackio" (a local tracker); :mod:`fgrpo_llm.trackers`."""
    progress: bool = True
    """Show a tqdm progress bar on stderr."""

    def __post_init__(self):
        def fail(name, rule):
            raise ValueError(f"{name} must be {rule}, got {name}={getattr(self, name)!r}")

        self._resolve_weighting()
        check_fields(self, RULES)  # every field's type and range (fgrpo_common.fields)
        if self.tensorboard:  # the old switch: report_to="tensorboard"
            if self.report_to not in ("none", "tensorboard"):
                fail("tensorboard", f"False with report_to={self.report_to!r} (one tracker)")
            object.__setattr__(self, "report_to", "tensorboard")
            object.__setattr__(self, "tensorboard", False)
        if self.adv_std == "bessel" and self.group_size < 2:
            fail("group_size", "at least 2 with the Bessel std (adv_std='bessel')")
        if self.num_mini_batches > self.prompts_per_step:
            fail("num_mini_batches", f"at most prompts_per_step={self.prompts_per_step}")
        check_training_dtype(self.dtype)
        # Resolve the algorithm-dependent defaults so the saved config states what ran.
        if self.clip_eps_low is None:
            object.__setattr__(self, "clip_eps_low", 0.2)
        if self.clip_eps_high is None:
            object.__setattr__(self, "clip_eps_high", 0.28 if self.algo == "dapo" else 0.2)
        if self.dynamic_sampling is None:
            object.__setattr__(self, "dynamic_sampling", self.algo == "dapo")
        if self.algo == "grpo" and self.clip_eps_low != self.clip_eps_high:
            raise ValueError(
                f"grpo uses a symmetric clip; got clip_eps_low={self.clip_eps_low} != "
                f"clip_eps_high={self.clip_eps_high} (use --algo dapo for an asymmetric clip)"
            )
        lr = self.effective_lr
        if not (math.isfinite(lr) and lr > 0.0):
            raise ValueError(
                f"the effective learning rate lr x lr_multiplier (x m_gamma of lr_match_gamma) "
                f"must be a finite number > 0, got {lr:g} (lr={self.lr}, lr_multiplier="
                f"{self.lr_multiplier}, lr_match_gamma={self.lr_match_gamma})"
            )

    def _resolve_weighting(self) -> None:
        """(weighting, gamma) as the rule's name and its exponent, whatever spelling came in."""
        if not isinstance(self.weighting, (str, Weighting)):
            raise TypeError(
                f"weighting must be a string such as 'focal:0.5' or a Weighting, got "
                f"weighting={self.weighting!r}"
            )
        gamma = self.gamma
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)):
            return  # check_fields names the bad gamma
        w = resolve_weighting(self.weighting, gamma)
        object.__setattr__(self, "weighting", w.kind)
        object.__setattr__(self, "gamma", w.gamma)

    @property
    def advantage_weighting(self) -> Weighting:
        """The run's :class:`~fgrpo_theory.weighting.Weighting` (its ``str`` is the spelling
        run.json records: "focal:0.5", "maxrl")."""
        return Weighting(self.weighting, self.gamma)

    @property
    def effective_lr(self) -> float:
        """lr * lr_multiplier * (m_gamma when ``lr_match_gamma`` is set)."""
        lr = self.lr * self.lr_multiplier
        if self.lr_match_gamma is not None:
            lr *= float(lr_multiplier(self.lr_match_gamma))
        return lr

    def sampling(self, device=None):
        """The run's :class:`~fgrpo_llm.rollout.SamplingParams`: its rollouts' settings, which its
        evaluations (pass@k, the rare-correct set) use too; ``device`` resolves the autocast
        dtype."""
        from fgrpo_llm.model import resolve_autocast_dtype  # lazy: torch, transformers
        from fgrpo_llm.rollout import SamplingParams  # lazy: torch, transformers

        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            batch_size=self.rollout_batch_size,
            autocast_dtype=resolve_autocast_dtype(device, self.dtype) if device else None,
        )

    def loss_kwargs(self) -> dict:
        """Keyword arguments of the algorithm's loss in ``fgrpo_llm.losses``."""
        if self.algo in ("grpo", "dapo"):
            return {"clip_eps_low": self.clip_eps_low, "clip_eps_high": self.clip_eps_high}
        return {"is_eps_low": self.cispo_is_eps_low, "is_eps_high": self.cispo_is_eps_high}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        """Build from a mapping; unknown keys are an error naming them (typos never pass
        silently)."""
        return dataclass_from_dict(cls, data, what="config")


def check_training_dtype(dtype) -> None:
    """A ValueError for float16 training: without a loss scaler (this package's loops use none)
    float16 flushes a token-mean loss's small gradients to zero; bfloat16 keeps float32's range."""
    if dtype in ("float16", "fp16"):
        raise ValueError(
            f"dtype must be 'auto', 'float32' or 'bfloat16' for training, got dtype={dtype!r}: "
            "float16 flushes the token-mean loss's small gradients to zero without a loss scaler, "
            "which these training loops do not use"
        )


_POSITIVE, _COUNT = Integer(minimum=1), Integer(minimum=0)
_NONNEG, _POSITIVE_REAL = Real(minimum=0), Real(minimum=0, open_low=True)

#: Type and range of every TrainConfig field (cross-field rules live in ``__post_init__``).
RULES = {
    "base": Text(),
    "out": Text(),
    "algo": Choice(ALGOS),
    "gamma": _NONNEG,
    "weighting": Text(),  # a registered rule's name (checked by resolve_weighting)
    "task": Text(),
    "task_kwargs": Mapping(),
    "split": Text(),
    "prompt_pool": Optional(_POSITIVE),
    "steps": _POSITIVE,
    "prompts_per_step": _POSITIVE,
    "group_size": _POSITIVE,
    "num_mini_batches": _POSITIVE,
    "ppo_epochs": _POSITIVE,
    "micro_batch_size": Optional(_POSITIVE),
    "lr": _POSITIVE_REAL,
    "lr_multiplier": _POSITIVE_REAL,
    "lr_match_gamma": Optional(_NONNEG),
    "warmup_steps": _COUNT,
    "weight_decay": _NONNEG,
    "adam_beta1": Real(0, 1, open_high=True),
    "adam_beta2": Real(0, 1, open_high=True),
    "adam_eps": _POSITIVE_REAL,
    "grad_clip": _NONNEG,
    "clip_eps_low": Optional(_NONNEG),
    "clip_eps_high": Optional(_NONNEG),
    "cispo_is_eps_low": _NONNEG,
    "cispo_is_eps_high": _NONNEG,
    "adv_std": Choice(("bessel", "population", "none")),
    "adv_eps": _NONNEG,
    "dynamic_sampling": Optional(Boolean()),
    "max_sampling_rounds": _COUNT,
    "entropy_coef": _NONNEG,
    "kl_coef": _NONNEG,
    "max_new_tokens": _POSITIVE,
    "temperature": _NONNEG,
    "top_p": Real(0, 1, open_low=True),
    "top_k": _COUNT,
    "rollout_batch_size": Optional(_POSITIVE),
    "seed": SEED,
    "eval_every": _COUNT,
    "checkpoint_every": _COUNT,
    "keep_checkpoints": _COUNT,
    "device": Optional(Text()),
    "dtype": Optional(Text()),
    "tensorboard": Boolean(),
    "report_to": Choice(REPORT_TO),
    "progress": Boolean(),
}


def _unique_pairs(pairs) -> dict:
    """A JSON object's pairs as a dict; a key given twice is an error (not: the last one wins)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _yaml_unique(text: str):
    """yaml.safe_load, refusing a mapping that names a key twice (PyYAML keeps the last)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        keys = set()  # the mapping's own keys: a merge (<<) may be overridden, as YAML says
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=deep)
            if key in keys:
                raise ValueError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            keys.add(key)
        return loader.construct_mapping(node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects


def read_config_file(path) -> dict:
    """The mapping in a YAML (.yaml/.yml) or JSON file, keys with "-" read as "_";
    FileNotFoundError / ValueError naming the file (also for text that is not UTF-8 and for a
    key given twice, in either spelling)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            data = _yaml_unique(text)
        else:
            data = json.loads(text, object_pairs_hook=_unique_pairs)
    except Exception as err:  # yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError, ...
        raise ValueError(f"cannot parse config file {path}: {str(err).splitlines()[0]}") from err
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping, got {type(data).__name__}")
    out, spelled = {}, {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name in out:
            raise ValueError(
                f"config file {path} sets {name} twice (as {spelled[name]!r} and {key!r})"
            )
        out[name], spelled[name] = value, key
    return out


def load_config(path=None, **overrides) -> TrainConfig:
    """Defaults, then the file at ``path`` (if any), then ``overrides`` (None values ignored)."""
    data = read_config_file(path) if path is not None else {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig.from_dict(data)


def refuse_a_model_directory(out) -> None:
    """A ValueError when ``out`` holds a model (its config.json is a model's: it names a
    ``model_type``), not a training run: a run's directory is its own, and a model's config.json
    is not a run's settings."""
    try:
        data = json.loads((Path(out) / "config.json").read_text())
    except (OSError, ValueError, RecursionError, UnicodeDecodeError):
        return  # no config.json, or one that the run's own checks name
    if isinstance(data, dict) and "model_type" in data:
        raise ValueError(
            f"{out} holds a model (its config.json is a model's), not a training run; "
            "give the run a directory of its own (--out)"
        )


def save_config(cfg: TrainConfig, path) -> None:
    """Write the resolved config as JSON (atomically); ``load_config`` reads it back unchanged."""
    atomic_write_text(path, json.dumps(cfg.to_dict(), indent=2, sort_keys=True) + "\n")


def run_sampling(model_dir):
    """The :class:`~fgrpo_llm.rollout.SamplingParams` a trained policy was sampled with, when
    ``model_dir`` is a run's ``model/`` or one of its ``checkpoints/step_*`` (the run directory
    holds the run's config.json and run.json); None for any other checkpoint (a base, a
    download); a ValueError naming the file when the run's config.json is damaged. Its
    evaluations then sample the policy that was trained, not another one."""
    from pathlib import Path

    run_dir = Path(model_dir).resolve().parent
    if run_dir.name == "checkpoints":  # RUN/checkpoints/step_NNNNNN
        run_dir = run_dir.parent
    if not ((run_dir / "run.json").is_file() and (run_dir / "config.json").is_file()):
        return None
    path = run_dir / "config.json"
    try:
        data = json.loads(path.read_text())
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise ValueError(f"{path} is not readable JSON (the run's settings)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object (the run's settings)")
    try:
        return TrainConfig.from_dict(data).sampling()
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: {err}") from None
