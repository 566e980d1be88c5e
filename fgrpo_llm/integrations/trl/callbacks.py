"""TRL callbacks: unbiased pass@k and Delta NLL_rare, with this package's estimator and rare set.

- :class:`PassAtKCallback`: at every evaluation (``eval_strategy``), n samples per problem of a
  task split and the unbiased pass@k, 1 - C(n - c, k) / C(n, k) as a product
  (``fgrpo_llm.evaluation.passk.evaluate_model``, paper Section 5), logged as
  ``eval_pass@k/<split>``; TRL itself has no pass@k.
- :class:`DeltaNLLRareCallback`: Delta NLL_rare on a fixed rare-correct set (paper App. M.2,
  ``fgrpo_llm.evaluation.rare``), logged as ``rare/delta_nll`` at every evaluation and every
  ``every_steps`` training steps; written to the run's ``metrics.jsonl`` too when the trainer
  is a ``FocalGRPOTrainer``, so ``fgrpo-llm validate`` sees it.

Both run on the main process only, under ``torch.no_grad``, with a seeded generator.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback

__all__ = ["PassAtKCallback", "DeltaNLLRareCallback"]


def _unwrap(model):
    return getattr(model, "module", model)


class _FgrpoCallback(TrainerCallback):
    trainer = None
    """Set by :meth:`attach` (the trainer logs the metrics and writes its run records)."""

    def attach(self, trainer):
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def _emit(self, state, metrics: dict) -> None:
        if self.trainer is not None:
            recorder = getattr(self.trainer, "recorder", None)
            if recorder is not None:
                recorder.log_metrics(int(state.global_step), metrics)
        state.log_history.append({**metrics, "step": int(state.global_step)})


class PassAtKCallback(_FgrpoCallback):
    """pass@k of ``task``'s ``split`` at each evaluation: ``n`` samples per problem, temperature
    1."""

    def __init__(
        self,
        task,
        tokenizer,
        *,
        split: str = "test",
        n: int = 16,
        ks=None,
        max_problems: int | None = None,
        max_new_tokens: int = 64,
        seed: int = 0,
    ):
        self.task, self.tokenizer, self.split = task, tokenizer, split
        self.n, self.ks, self.max_problems, self.max_new_tokens, self.seed = (
            n,
            ks,
            max_problems,
            max_new_tokens,
            seed,
        )
        self.history: list[dict] = []

    def evaluate(self, model, step: int) -> dict:
        from fgrpo_llm.evaluation.passk import evaluate_model

        model = _unwrap(model)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                results, _ = evaluate_model(
                    model,
                    self.tokenizer,
                    self.task,
                    splits=[self.split],
                    n=self.n,
                    ks=self.ks,
                    max_problems=self.max_problems,
                    max_new_tokens=self.max_new_tokens,
                    generator=torch.Generator(device="cpu").manual_seed(self.seed + step),
                )
        finally:
            model.train(was_training)
        entry = results["splits"][self.split]
        metrics = {f"eval_pass@{k}/{self.split}": float(entry[f"pass@{k}"]) for k in results["ks"]}
        self.history.append({"step": step, **metrics})
        return metrics

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        if state.is_world_process_zero and model is not None:
            self._emit(state, self.evaluate(model, int(state.global_step)))


class DeltaNLLRareCallback(_FgrpoCallback):
    """Delta NLL_rare of a rare-correct set (``fgrpo_llm.evaluation.rare.load_rare_set``)."""

    def __init__(
        self, rare_set, *, every_steps: int = 0, batch_size: int = 64, pad_token_id: int = 0
    ):
        from fgrpo_llm.evaluation.rare import make_rare_evaluator

        if isinstance(every_steps, bool) or not isinstance(every_steps, int) or every_steps < 0:
            raise ValueError(
                f"every_steps must be an integer >= 0, got every_steps={every_steps!r}"
            )
        self.every_steps = every_steps
        self._evaluate = make_rare_evaluator(
            rare_set, batch_size=batch_size, pad_token_id=pad_token_id
        )
        self.history: list[dict] = []

    def evaluate(self, model, step: int) -> dict:
        model = _unwrap(model)
        was_training = model.training
        model.eval()
        try:
            metrics = self._evaluate(model, step)
        finally:
            model.train(was_training)
        self.history.append({"step": step, **metrics})
        return metrics

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        if state.is_world_process_zero and model is not None:
            self._emit(state, self.evaluate(model, int(state.global_step)))

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if (
            self.every_steps
            and state.global_step % self.every_steps == 0
            and state.is_world_process_zero
            and model is not None
        ):
            self._emit(state, self.evaluate(model, int(state.global_step)))
