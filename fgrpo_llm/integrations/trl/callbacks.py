"""TRL callbacks: unbiased pass@k and Delta NLL_rare, with this package's estimator and rare set.

- :class:`PassAtKCallback`: at every evaluation (``eval_strategy``), n samples per problem of a
  task split and the unbiased pass@k, 1 - C(n - c, k) / C(n, k) as a product
  (``fgrpo_llm.evaluation.passk``, paper Section 5), logged as ``eval_pass@k/<split>``; TRL
  itself has no pass@k.
- :class:`DeltaNLLRareCallback`: Delta NLL_rare on a fixed rare-correct set (paper App. M.2,
  ``fgrpo_llm.evaluation.rare``), logged as ``rare/delta_nll`` at every evaluation and every
  ``every_steps`` training steps.

Attach them to the trainer (``PassAtKCallback(...).attach(trainer)``). Then they run on every
process, as a distributed job needs: each process takes every P-th problem (or trajectory),
computes on the model unwrapped by TRL's ``unwrap_model_for_generation`` (DDP's module; ZeRO-3's
parameters gathered), and the outcome counts and NLL sums are gathered to every process. The
metrics go through ``Trainer.log``, so the user's trackers (``report_to``: TensorBoard, trackio,
W&B) see them, and into the run's ``metrics.jsonl`` when the trainer is a ``FocalGRPOTrainer``.
FSDP is refused at attach time: its sharded forward passes would need every process in
lockstep, which per-problem sampling does not keep. Problem p is sampled with a generator on the
model's device seeded by (seed, step, p), so the numbers do not depend on the process count.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from transformers import Trainer, TrainerCallback

from fgrpo_llm.evaluation.passk import default_ks, pass_at_k_table, sample_correct_counts
from fgrpo_llm.evaluation.rare import length_normalised_nll
from fgrpo_llm.rollout import SamplingParams

__all__ = ["PassAtKCallback", "DeltaNLLRareCallback", "trl_sampling"]


def _unwrap(model):
    return getattr(model, "module", model)


def _check_backend(trainer) -> None:
    """Refuse what the callbacks cannot evaluate under, with the reason."""
    if getattr(trainer, "is_fsdp_enabled", False):
        raise ValueError(
            "the fgrpo evaluation callbacks do not run under FSDP: its sharded forward passes "
            "need every process in lockstep, which per-problem sampling does not keep; use DDP "
            "or DeepSpeed ZeRO (1-3), or evaluate the saved checkpoints with `fgrpo-llm eval`"
        )


class _FgrpoCallback(TrainerCallback):
    trainer = None
    """Set by :meth:`attach` (the trainer logs the metrics and writes its run records)."""
    _last: tuple[int, dict] | None = None
    """(step, metrics) of the last measurement: one per step, however many hooks ask."""

    def attach(self, trainer):
        """Register with ``trainer``: needed with more than one process, and for the metrics to
        reach the trainer's loggers."""
        _check_backend(trainer)
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def on_train_begin(self, args, state, control, **kwargs):
        if self.trainer is None and args.world_size > 1:
            raise ValueError(
                f"{type(self).__name__} with {args.world_size} processes needs "
                f"{type(self).__name__}(...).attach(trainer) instead of callbacks=[...]: every "
                "process takes part in the evaluation"
            )

    def _shard(self) -> tuple[int, int]:
        """(this process's index, the process count)."""
        if self.trainer is None:
            return 0, 1
        acc = self.trainer.accelerator
        return int(acc.process_index), int(acc.num_processes)

    def _compute(self, model, fn):
        """``fn(unwrapped model)`` on this process, inside TRL's unwrapping for generation when
        attached, with no gradients, in eval mode; the previous mode restored."""
        if self.trainer is not None:
            from trl.models import unwrap_model_for_generation

            ctx = unwrap_model_for_generation(self.trainer.model_wrapped, self.trainer.accelerator)
        else:
            import contextlib

            ctx = contextlib.nullcontext(_unwrap(model))
        with ctx as m:
            was_training = m.training
            m.eval()
            try:
                with torch.no_grad():
                    return fn(m)
            finally:
                m.train(was_training)

    def _gather(self, items: list) -> list:
        """Every process's items, concatenated in process order (this process's alone when not
        attached)."""
        if self.trainer is None or self.trainer.accelerator.num_processes == 1:
            return list(items)
        from accelerate.utils import gather_object

        return list(gather_object(list(items)))

    def _measure(self, state, model) -> dict:
        """The metrics at ``state.global_step``, measured and logged once per step: a second
        evaluation at the same step (one per dataset of a dict ``eval_dataset``, or an
        evaluation on a step the callback already measured) reuses them."""
        step = int(state.global_step)
        if self._last is not None and self._last[0] == step:
            return self._last[1]
        metrics = self.evaluate(model, step)
        if metrics:
            self._emit(state, metrics)
        self._last = (step, metrics)
        return metrics

    def on_evaluate(self, args, state, control, model=None, metrics=None, **kwargs):
        """Measure, and add the values to the evaluation's ``metrics`` under ``eval_`` names,
        so ``metric_for_best_model`` (``load_best_model_at_end``) can name them (e.g.
        ``pass@64/test`` or ``rare/delta_nll`` with ``greater_is_better=False``)."""
        if model is None:
            return
        measured = self._measure(state, model)
        if metrics is not None:
            metrics.update(
                {k if k.startswith("eval_") else f"eval_{k}": v for k, v in measured.items()}
            )

    def _emit(self, state, metrics: dict) -> None:
        if self.trainer is None:
            state.log_history.append({**metrics, "step": int(state.global_step)})
            return
        recorder = getattr(self.trainer, "recorder", None)
        if recorder is not None:
            recorder.log_metrics(int(state.global_step), metrics)
        # transformers' own log (not TRL's, which would flush its running training metrics):
        # log_history and every reporting callback (report_to). Its on_log clears
        # control.should_log, which at a step end would drop the step's own training log (loss,
        # rewards, focal/*) from the trackers and metrics.jsonl: the flag is kept as it was.
        control = self.trainer.control
        pending = control.should_log
        Trainer.log(self.trainer, dict(metrics))
        self.trainer.control.should_log = pending


def trl_sampling(args, *, warn: bool = True) -> SamplingParams:
    """The sampling settings of a TRL ``GRPOConfig``: the policy its trainer samples
    (``max_completion_length``, ``temperature``, ``top_p``, ``top_k``, each as its
    ``generation_kwargs`` overrides it: TRL's generator takes those last; vLLM's ``max_tokens`` as
    the length). A warning (``warn``) names the settings our sampler does not apply (``min_p``,
    ``repetition_penalty``, greedy ``do_sample=False``)."""
    extra = dict(getattr(args, "generation_kwargs", None) or {})

    def setting(name, default=None):
        return extra[name] if name in extra else getattr(args, name, default)

    ignored = {
        name: setting(name, default)
        for name, default in (("min_p", None), ("repetition_penalty", 1.0), ("do_sample", True))
        if setting(name, default) not in (default, None)
    }
    if ignored and warn:
        warnings.warn(
            f"pass@k samples without the trainer's {ignored}: fgrpo's sampler applies "
            "temperature, top_p and top_k only",
            RuntimeWarning,
            stacklevel=3,
        )
    length = extra.get("max_new_tokens", extra.get("max_tokens", args.max_completion_length))
    top_p = setting("top_p")
    return SamplingParams(
        max_new_tokens=int(length or 64),
        temperature=float(setting("temperature")),
        top_p=float(top_p if top_p is not None else 1.0),
        top_k=int(setting("top_k") or 0),
    )


class PassAtKCallback(_FgrpoCallback):
    """pass@k of ``task``'s ``split`` at each evaluation: ``n`` samples per problem under
    ``sampling``; None: the attached trainer's own settings (``trl_sampling``), so the model is
    evaluated under the policy it is trained with (unattached: 64 new tokens, temperature 1)."""

    def __init__(
        self,
        task,
        tokenizer,
        *,
        split: str = "test",
        n: int = 16,
        ks=None,
        max_problems: int | None = None,
        sampling: SamplingParams | None = None,
        seed: int = 0,
    ):
        if sampling is not None and not isinstance(sampling, SamplingParams):
            raise TypeError(f"sampling must be a SamplingParams or None, got {sampling!r}")
        self.task, self.tokenizer, self.split = task, tokenizer, split
        self.n, self.max_problems, self.sampling, self.seed = n, max_problems, sampling, seed
        self.ks = [int(k) for k in ks] if ks else default_ks(n)
        if min(self.ks) < 1 or max(self.ks) > n:
            raise ValueError(f"every k must lie in [1, n={n}], got ks={self.ks}")
        self.history: list[dict] = []

    def attach(self, trainer):
        if self.sampling is None:
            self.sampling = trl_sampling(trainer.args)
        return super().attach(trainer)

    def evaluate(self, model, step: int) -> dict:
        """pass@k at ``step``: this process's problems sampled, every process's counts gathered."""
        problems = self.task.problems(self.split)
        if self.max_problems is not None:
            problems = problems[: self.max_problems]
        if not problems:
            raise ValueError(f"split {self.split!r} of the task has no problems")
        rank, world = self._shard()
        mine = list(range(rank, len(problems), world))
        sampling = self.sampling or SamplingParams(max_new_tokens=64)

        def counts_of(m) -> list[tuple[int, int]]:
            device = next(m.parameters()).device
            out = []
            for p in mine:  # one generator per problem: samples independent of the shards
                gen = torch.Generator(device=device).manual_seed(
                    ((self.seed * 1_000_003 + step) * 1_000_003 + p) % 2**63
                )
                c = sample_correct_counts(
                    m,
                    self.tokenizer,
                    self.task,
                    [problems[p]],
                    n=self.n,
                    sampling=sampling,
                    generator=gen,
                )
                out.append((p, int(c[0])))
            return out

        pairs = self._gather(self._compute(model, counts_of))
        counts = np.zeros(len(problems), dtype=np.int64)
        for p, c in pairs:
            counts[p] = c
        table = pass_at_k_table(counts, self.n, self.ks)
        metrics = {f"eval_pass@{k}/{self.split}": float(table[f"pass@{k}"]) for k in self.ks}
        self.history.append({"step": step, **metrics})
        return metrics


class DeltaNLLRareCallback(_FgrpoCallback):
    """Delta NLL_rare of a rare-correct set (``fgrpo_llm.evaluation.rare.load_rare_set``). An empty
    set logs nothing (Delta NLL_rare is undefined), with a warning when the callback is made."""

    def __init__(
        self, rare_set, *, every_steps: int = 0, batch_size: int = 64, pad_token_id: int = 0
    ):
        if isinstance(every_steps, bool) or not isinstance(every_steps, int) or every_steps < 0:
            raise ValueError(
                f"every_steps must be an integer >= 0, got every_steps={every_steps!r}"
            )
        self.rare_set = rare_set
        self.every_steps = every_steps
        self.batch_size, self.pad_token_id = batch_size, pad_token_id
        if len(rare_set) == 0:
            warnings.warn(
                "DeltaNLLRareCallback: the rare-correct set is empty, so Delta NLL_rare is "
                "undefined and will not be logged (build the set from more rollouts or prompts)",
                RuntimeWarning,
                stacklevel=2,
            )
        self.history: list[dict] = []

    def evaluate(self, model, step: int) -> dict:
        """Delta NLL_rare at ``step`` (every process scores its share of the trajectories);
        an empty dict for an empty set."""
        rs = self.rare_set
        if len(rs) == 0:
            return {}
        rank, world = self._shard()
        mine = list(range(rank, len(rs), world))

        def nll_of(m) -> list[tuple[int, float]]:
            if not mine:
                return []
            nll = length_normalised_nll(
                m,
                [rs.token_ids[i] for i in mine],
                [rs.prompt_lengths[i] for i in mine],
                pad_token_id=self.pad_token_id,
                batch_size=self.batch_size,
            )
            return list(zip(mine, nll.tolist(), strict=True))

        pairs = self._gather(self._compute(model, nll_of))
        nll = np.zeros(len(rs))
        for i, v in pairs:
            nll[i] = v
        metrics = {
            "rare/delta_nll": float(nll.mean() - rs.base_nll.mean()),
            "rare/nll": float(nll.mean()),
            "rare/size": len(rs),
        }
        self.history.append({"step": step, **metrics})
        return metrics

    def attach(self, trainer):
        args = trainer.args
        if getattr(args, "bf16", False) or getattr(args, "fp16", False):
            warnings.warn(
                "DeltaNLLRareCallback: the trainer runs in mixed precision "
                f"({'bf16' if args.bf16 else 'fp16'}), so the policy is scored under autocast "
                "while the set's base NLL was scored in full precision: an unchanged model reads "
                "a small offset (about 1e-5 to 1e-3), not 0; train with bf16=False and fp16=False "
                "for exact values",
                RuntimeWarning,
                stacklevel=2,
            )
        return super().attach(trainer)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every_steps and state.global_step % self.every_steps == 0 and model is not None:
            self._measure(state, model)
