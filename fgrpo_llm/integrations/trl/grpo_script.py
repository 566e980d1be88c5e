"""The F-GRPO training script that :mod:`fgrpo_llm.integrations.trl.launch` (``fgrpo-trl``)
starts under ``accelerate launch``: TRL's ``trl grpo`` script (``trl/scripts/grpo.py``) with
``FocalGRPOConfig`` / ``FocalGRPOTrainer`` (the focal weight g = (1 - X/N)^gamma, paper Eq. 13),
this package's boxed-math task and its pass@k and Delta NLL_rare callbacks (paper Section 5,
App. M.2).

Arguments are TRL's (a recipe YAML with ``--config``, command-line flags over it): the script's
own (:class:`FGRPOScriptArguments`: TRL's GRPO script arguments and ours), ``FocalGRPOConfig``,
TRL's ``ModelConfig`` and ``DatasetMixtureConfig``. Data: ``task_train_file`` (a JSON-lines
file of ``{"problem", "answer"}``, answers checked on the last ``\\boxed{}`` with math-verify,
the paper's scorer) or, as ``trl grpo``, a Hub dataset (``dataset_name``) with TRL's reward
functions. Run it through the launcher; alone it trains in one process:

    python -m fgrpo_llm.integrations.trl.grpo_script --config examples/trl_qwen25_05b_gsm8k.yaml
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field

from trl.scripts.grpo import GRPOScriptArguments

from fgrpo_llm.evaluation.rare import load_rare_set
from fgrpo_llm.integrations.trl import DeltaNLLRareCallback, FocalGRPOTrainer, PassAtKCallback
from fgrpo_llm.integrations.trl.trainer import FocalGRPOConfig, task_dataset, task_reward_func
from fgrpo_llm.tasks.boxed_math import BoxedMathTask

__all__ = ["FGRPOScriptArguments", "make_parser", "main", "reward_functions", "load_task"]


@dataclass
class FGRPOScriptArguments(GRPOScriptArguments):
    """TRL's GRPO script arguments plus the task and the callbacks of this package."""

    task_train_file: str | None = field(
        default=None,
        metadata={
            "help": "JSON lines of {problem, answer} (GSM8K-style, answers in \\boxed{}): the "
            "training prompts, with the paper's system prompt; replaces dataset_name."
        },
    )
    task_test_file: str | None = field(
        default=None, metadata={"help": "JSON lines of {problem, answer}: pass@k's problems."}
    )
    passk_n: int = field(
        default=0,
        metadata={"help": "Samples per problem for pass@k at each evaluation (0: no pass@k)."},
    )
    passk_ks: list[int] | None = field(
        default=None, metadata={"help": "The k of pass@k (default: powers of 2 up to passk_n)."}
    )
    passk_max_problems: int | None = field(
        default=None, metadata={"help": "Test problems pass@k (and TRL's evaluation) use."}
    )
    rare_set: str | None = field(
        default=None,
        metadata={
            "help": "A rare-correct set (fgrpo-llm rare-set --base MODEL ...): Delta NLL_rare at "
            "each evaluation and every rare_every_steps steps."
        },
    )
    rare_every_steps: int = field(
        default=0, metadata={"help": "Delta NLL_rare every this many steps (0: at evaluations)."}
    )
    dry_run: bool = field(
        default=False,
        metadata={
            "help": "Check the recipe (config, reward functions, task files, rare set) and print "
            "what would run, as JSON; start nothing."
        },
    )


def make_parser(prog: str | None = None):
    """TRL's parser of ``trl grpo``, with this script's and F-GRPO's dataclasses."""
    from trl import DatasetMixtureConfig, ModelConfig, TrlParser

    types = (FGRPOScriptArguments, FocalGRPOConfig, ModelConfig, DatasetMixtureConfig)
    return TrlParser(types, prog=prog)


def load_task(script_args, tokenizer=None):
    """The boxed-math task of ``task_train_file`` / ``task_test_file``, or None."""
    if not script_args.task_train_file:
        if script_args.task_test_file:
            raise ValueError("task_test_file needs task_train_file")
        return None

    for name in ("task_train_file", "task_test_file"):
        path = getattr(script_args, name)
        if path and not os.path.isfile(path):
            raise ValueError(f"{name}: no such file: {path}")
    return BoxedMathTask(
        path=script_args.task_train_file,
        test_path=script_args.task_test_file,
        tokenizer=tokenizer,
    )


def reward_functions(script_args, task=None) -> list:
    """The reward functions, as ``trl grpo`` resolves them (TRL's registry names, dotted import
    paths, a reward model's path), plus ``task_reward``: the task's verifier
    (:func:`fgrpo_llm.integrations.trl.trainer.task_reward_func`), the default with a task."""
    from trl.rewards import (
        accuracy_reward,
        get_soft_overlong_punishment,
        reasoning_accuracy_reward,
        think_format_reward,
    )

    registry = {
        "accuracy_reward": accuracy_reward,
        "reasoning_accuracy_reward": reasoning_accuracy_reward,
        "think_format_reward": think_format_reward,
        "get_soft_overlong_punishment": get_soft_overlong_punishment(
            max_completion_len=1280, soft_punish_cache=256
        ),
    }
    names = list(script_args.reward_funcs or ([] if task is None else ["task_reward"]))
    funcs = [script_args.reward_model_name_or_path] if script_args.reward_model_name_or_path else []
    for name in names:
        if name == "task_reward":
            if task is None:
                raise ValueError("reward function 'task_reward' needs task_train_file")
            funcs.append(task_reward_func(task))
        elif name in registry:
            funcs.append(registry[name])
        elif "." in name:
            module, attr = name.rsplit(".", 1)
            sys.path.insert(0, os.getcwd())
            try:
                funcs.append(getattr(importlib.import_module(module), attr))
            except (ImportError, AttributeError) as err:
                raise ValueError(f"reward function {name!r} cannot be imported: {err}") from None
        else:
            raise ValueError(
                f"reward function {name!r} is not one of {['task_reward', *registry]} nor a "
                "dotted import path"
            )
    if not funcs:
        raise ValueError("no reward function: give reward_funcs, or task_train_file")
    return funcs


def _datasets(script_args, training_args, dataset_args, task):
    """(train, eval) datasets: the task's splits (chat prompts with the system prompt), or as
    ``trl grpo`` loads them."""

    if task is not None:
        train = task_dataset(task, "train", chat=True)
        evaluate = None
        if training_args.eval_strategy != "no" and "test" in task.splits:
            evaluate = task_dataset(task, "test", chat=True)
            if script_args.passk_max_problems:
                evaluate = evaluate.select(
                    range(min(script_args.passk_max_problems, len(evaluate)))
                )
        return train, evaluate
    from datasets import load_dataset
    from trl import get_dataset

    if dataset_args.datasets:
        data = get_dataset(dataset_args)
    elif script_args.dataset_name:
        data = load_dataset(
            script_args.dataset_name,
            name=script_args.dataset_config,
            streaming=script_args.dataset_streaming,
        )
    else:
        raise ValueError("give task_train_file, or (as trl grpo) datasets or dataset_name")
    evaluate = data[script_args.dataset_test_split] if training_args.eval_strategy != "no" else None
    return data[script_args.dataset_train_split], evaluate


def main(script_args, training_args, model_args, dataset_args) -> None:
    """Train F-GRPO as ``trl grpo`` trains GRPO, with this package's callbacks attached."""
    import transformers
    from packaging.version import Version
    from transformers import AutoTokenizer
    from trl import get_peft_config, get_quantization_config

    model_init_kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.model_name_or_path,
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
    )
    task = load_task(script_args, tokenizer)
    train, evaluate = _datasets(script_args, training_args, dataset_args, task)
    trainer = FocalGRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=reward_functions(script_args, task),
        args=training_args,
        train_dataset=train,
        eval_dataset=evaluate,
        processing_class=tokenizer,
        quantization_config=get_quantization_config(model_args),
        peft_config=get_peft_config(model_args),
        task=task,
    )
    if script_args.passk_n:
        if task is None or "test" not in task.splits:
            raise ValueError("passk_n needs task_test_file (pass@k's problems)")
        PassAtKCallback(
            task,
            tokenizer,
            n=script_args.passk_n,
            ks=script_args.passk_ks,
            max_problems=script_args.passk_max_problems,
            seed=training_args.seed,
        ).attach(trainer)
    if script_args.rare_set:
        DeltaNLLRareCallback(
            load_rare_set(script_args.rare_set),
            every_steps=script_args.rare_every_steps,
            pad_token_id=tokenizer.pad_token_id or 0,
        ).attach(trainer)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"F-GRPO model saved to {training_args.output_dir}")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
    if Version(transformers.__version__) >= Version("5.18.0"):
        trainer.end()


if __name__ == "__main__":
    parsed = make_parser().parse_args_and_config(fail_with_unknown_args=False)
    main(*parsed[:4])
