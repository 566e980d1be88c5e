"""Models: a tiny Qwen2 built from a config, or any local Hugging Face causal LM.

The built-in base model (our CPU-scale setting) is a Qwen2-architecture decoder with about 1M
parameters (hidden 128, 4 layers, 4 heads, character vocabulary). A user checkpoint is
any local directory that ``AutoModelForCausalLM`` / ``AutoTokenizer`` can read; nothing
is ever downloaded (``local_files_only=True``). Both kinds are saved the same way
(``save_model_and_tokenizer``: weights, config and tokenizer in one directory, written
atomically), so the trainer never needs to know which one it has.

Device and precision: CUDA when available, else CPU; weights stay float32 and
``autocast`` runs the forward pass in bfloat16 on CUDA (plain float32 on CPU). Both can
be overridden (``device="cpu"``, ``dtype="float32"``).
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.utils import logging as hf_logging

from fgrpo_common.files import atomic_directory

_DTYPES = {
    "float32": None,
    "fp32": None,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


@contextlib.contextmanager
def _quiet_hub():
    """Silence transformers' per-shard progress bars while loading / saving tiny files."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _quiet_loading():
    """transformers' own load report (a table of every missing and unexpected weight) off: a
    mismatch is reported by ``_check_loading_info`` in one line instead."""
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _check_loading_info(path: Path, model, info: dict) -> None:
    """A ValueError when the weights in ``path`` do not fill the model its config.json builds
    (another architecture's config beside them, or weights of another model): transformers
    would initialise the missing weights at random and carry on."""
    tied = set()
    for key in getattr(model, "_tied_weights_keys", None) or ():
        tied.update([key] if isinstance(key, str) else list(key))
    missing = [k for k in info.get("missing_keys", ()) if k not in tied]
    unexpected = list(info.get("unexpected_keys", ()))
    mismatched = list(info.get("mismatched_keys", ()))
    if missing or mismatched:
        kind = getattr(model.config, "model_type", "?")
        parts = [f"{len(missing)} weights missing (e.g. {missing[0]})"] if missing else []
        if mismatched:
            parts.append(f"{len(mismatched)} of another shape (e.g. {mismatched[0][0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected (e.g. {unexpected[0]})")
        raise ValueError(
            f"cannot load checkpoint {path}: its weights do not fit the model_type={kind!r} that "
            f"its config.json describes ({'; '.join(parts)}); is config.json from another model?"
        )


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` as a ``torch.device``; None picks CUDA when available, else CPU."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"device must be 'cpu', 'cuda', 'cuda:<i>' or 'auto', got {device!r}"
        ) from err
    if resolved.type not in ("cpu", "cuda"):  # mps, xpu, meta, ...: not supported here
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:<i>' or 'auto', got {device!r}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} requested but CUDA is not available")
    return resolved


def resolve_autocast_dtype(device: torch.device, dtype: str | None = None) -> torch.dtype | None:
    """The autocast dtype: bfloat16 on CUDA, None (plain float32) on CPU, unless overridden.

    ``dtype`` is one of "float32", "bfloat16", "float16" (or "auto"/None for the default).
    """
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else None
    if dtype not in _DTYPES:
        raise ValueError(
            f"dtype must be one of 'auto', 'float32', 'bfloat16', 'float16', got {dtype!r}"
        )
    return _DTYPES[dtype]


def disable_dropout(model) -> str:
    """Switch every dropout of ``model`` off (``nn.Dropout`` modules, and the float ``*dropout*``
    attributes that attention modules pass to the attention kernel, e.g. Qwen2's
    ``attention_dropout``); the saved config keeps its values. Returns what was on, e.g.
    ``"attention_dropout=0.1 x4"``, or "" when nothing was."""
    changed: dict[str, int] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            key = f"{type(module).__name__}(p={module.p:g})"
            changed[key] = changed.get(key, 0) + 1
            module.p = 0.0
        for name, value in list(vars(module).items()):
            if "dropout" in name and isinstance(value, float) and value > 0:
                key = f"{name}={value:g}"
                changed[key] = changed.get(key, 0) + 1
                setattr(module, name, 0.0)
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in changed.items())


def autocast(device: torch.device, dtype: torch.dtype | None):
    """A mixed-precision context for ``device``; a no-op when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def build_tiny_model(
    tokenizer,
    *,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 256,
    seed: int = 0,
) -> PreTrainedModel:
    """A freshly initialised Qwen2ForCausalLM sized for ``tokenizer`` (float32, on CPU).

    Defaults give about 1M parameters with a character vocabulary (our CPU-scale setting). The
    intermediate (MLP) size defaults to ``4 * hidden_size``; input and output embeddings
    are tied. Initialisation is seeded with ``seed`` without touching the global RNG.
    """
    for name, value in (
        ("hidden_size", hidden_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("max_position_embeddings", max_position_embeddings),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
    if hidden_size % num_heads or (hidden_size // num_heads) % 2:
        raise ValueError(
            f"hidden_size / num_heads must be an even integer, got "
            f"hidden_size={hidden_size}, num_heads={num_heads}"
        )
    if intermediate_size is None:
        intermediate_size = 4 * hidden_size
    if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
        raise ValueError("tokenizer must define pad and eos tokens")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.float()


def count_parameters(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


#: Files of which at least one marks a saved tokenizer (fast, sentencepiece or BPE vocabularies).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")

#: Generic tokenizer classes: their ``tokenizer.json`` is the whole pipeline and is loaded as is.
_GENERIC_TOKENIZERS = ("TokenizersBackend", "PreTrainedTokenizerFast")


def _load_tokenizer(path: Path):
    """The tokenizer of checkpoint ``path``.

    transformers 5 ``AutoTokenizer`` replaces the pre-tokenizer of any ``model_type: qwen2``
    checkpoint with Qwen2's byte-level one, which silently breaks our character tokenizer
    (spaces vanish). A checkpoint that declares a generic class is therefore loaded
    verbatim from its ``tokenizer.json``; everything else goes through ``AutoTokenizer``.
    """
    declared = None
    config_file = path / "tokenizer_config.json"
    if config_file.is_file():
        declared = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
    if declared in _GENERIC_TOKENIZERS and (path / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def load_model_and_tokenizer(path, *, device: str | torch.device | None = None):
    """Load a local Hugging Face causal-LM directory and its tokenizer; never downloads.

    Returns ``(model, tokenizer)`` with the model in float32 on ``device`` (see
    ``resolve_device``) and in eval mode. A tokenizer without a pad token gets its eos
    token as pad (masks come from the sampler, never from token ids).
    Raises FileNotFoundError when ``path`` (or its ``config.json``) is missing and
    ValueError when the directory cannot be read as a checkpoint; both name the path.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint directory not found: {path}")
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint path is not a directory: {path}")
    tokenizer_here = any((path / name).is_file() for name in TOKENIZER_FILES)
    if (path / "model" / "config.json").is_file() and not tokenizer_here:
        raise FileNotFoundError(
            f"{path} is a training run, not a checkpoint: its policy is {path / 'model'} "
            f"(and its checkpoints are in {path / 'checkpoints'})"
        )
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"not a Hugging Face checkpoint (no config.json) in {path}")
    if not tokenizer_here:
        raise FileNotFoundError(
            f"no tokenizer in {path} (none of {', '.join(TOKENIZER_FILES)}); save the "
            f"tokenizer next to the model (tokenizer.save_pretrained)"
        )
    _refuse_pickle_only(path)
    resolved = resolve_device(device)
    try:
        with _quiet_hub(), _quiet_loading():
            tokenizer = _load_tokenizer(path)
            model, info = AutoModelForCausalLM.from_pretrained(
                path, local_files_only=True, dtype=torch.float32, output_loading_info=True
            )
    except (
        Exception
    ) as err:  # OSError, JSONDecodeError, SafetensorError, ...: all mean "unreadable"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"cannot load checkpoint {path}: {first}") from err
    _check_loading_info(path, model, info)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(resolved).eval(), tokenizer


#: Weight files that are pickles (loading one can run code): never loaded here.
_PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def _refuse_pickle_only(path: Path) -> None:
    """A ValueError naming ``path`` when its weights exist only as a pickle: we load safetensors
    only, and say so ourselves (rather than pass on torch's advice to unpickle it)."""
    if any(path.glob("*.safetensors")) or any(path.glob("*.safetensors.index.json")):
        return
    pickles = sorted(p.name for pattern in _PICKLE_WEIGHTS for p in path.glob(pattern))
    if pickles:
        raise ValueError(
            f"{path} holds its weights only as a pickle ({pickles[0]}), which fgrpo does not "
            "load (unpickling can run code); save the model as safetensors "
            "(save_pretrained(..., safe_serialization=True)) and load that"
        )


#: Files of a saved model (weights in any of transformers' formats, their index, config,
#: tokenizer): a save replaces them all; anything else in the directory is kept.
_MODEL_FILE = re.compile(
    r"(model|pytorch_model|tf_model|flax_model)[-\w.]*\.(safetensors|bin|h5|msgpack|json)"
    r"|(config|generation_config|tokenizer|tokenizer_config|special_tokens_map|added_tokens"
    r"|vocab|chat_template)\.(json|txt|jinja)|merges\.txt|vocab\.txt|tokenizer\.model"
)


def save_model_and_tokenizer(
    model, tokenizer, path, *, keep: tuple[str, ...] = (), records: dict | None = None
) -> None:
    """Write weights, config and tokenizer to directory ``path`` atomically
    (``files.atomic_directory``: a crash never leaves a half-written checkpoint at ``path``).
    Whatever else an existing ``path`` holds (run logs, an evaluation, a user's files) is kept;
    the model's own files (weights, config, tokenizer) are replaced, except those named in
    ``keep``, which are carried over too. ``records`` ({file name: JSON object, or text written
    as it is}) are written with the weights, in the same atomic step (what the weights are: the
    training step, the settings and the log that made them).
    Non-finite weights are refused (a ValueError naming the first such parameter) so that no
    diverged model is ever saved.
    """
    check_finite_parameters(model)
    path = Path(path)
    with atomic_directory(
        path, carry=lambda name: name in keep or not _MODEL_FILE.fullmatch(name)
    ) as tmp:
        with _quiet_hub():
            model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for name, record in (records or {}).items():
            text = (
                record
                if isinstance(record, str)
                else json.dumps(record, indent=1, sort_keys=True) + "\n"
            )
            (tmp / name).write_text(text)


#: The largest weight magnitude a healthy model holds: beyond it, a float32 dot product of two
#: such weight vectors overflows over a few hundred terms (3.4e38), so sampling from the model
#: fails even though every weight is finite (a diverged run, e.g. too large a learning rate).
MAX_WEIGHT = 1e15


def weight_problem(model) -> str | None:
    """What is wrong with the model's weights, or None: the first parameter that holds NaN or
    inf, or a magnitude beyond :data:`MAX_WEIGHT`."""
    for name, p in model.named_parameters():
        if not torch.isfinite(p).all():
            return f"parameter {name} holds non-finite values (NaN or inf)"
        big = float(p.detach().abs().max()) if p.numel() else 0.0
        if big > MAX_WEIGHT:
            return f"parameter {name} holds a weight of magnitude {big:.3g} (beyond {MAX_WEIGHT:g})"
    return None


def check_finite_parameters(model) -> None:
    """A ValueError naming the first parameter that holds NaN or inf, or a weight beyond
    :data:`MAX_WEIGHT` (weights of a diverged run)."""
    problem = weight_problem(model)
    if problem:
        raise ValueError(f"{problem}: the model diverged; refusing to save it")
