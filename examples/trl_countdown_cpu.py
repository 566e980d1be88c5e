"""F-GRPO with TRL on a CPU: the built-in tiny Countdown base, a few FocalGRPOTrainer steps.

Runs in about a minute on 2 CPU cores, in one process or several (``make test-engines`` runs it
both ways). It

1. pretrains a small Countdown base (``fgrpo_llm.experiments.countdown.base.pretrain``, a step
budget);
2. builds a small rare-correct set from the base's own samples (paper App. M.2);
3. trains ``FocalGRPOTrainer`` (TRL's ``GRPOTrainer`` + the focal weight, our GRPO conventions via
   ``method_args``) with the pass@k and Delta NLL_rare callbacks;
4. leaves a run directory that ``fgrpo-llm validate`` reads (run.json, groups.jsonl, metrics.jsonl)
   and the final checkpoint (a Hugging Face directory that ``fgrpo-llm eval`` loads).

    .venv-trl/bin/python examples/trl_countdown_cpu.py --out runs/trl_cpu --steps 4 --gamma 1.0
    .venv-trl/bin/python -m torch.distributed.run --nproc_per_node 2 \
        examples/trl_countdown_cpu.py --out runs/trl_cpu2 --steps 4

(On a CPU, ``accelerate launch --cpu --num_processes 2`` starts one process unless it is given
an MPI hostfile; torch's launcher starts two, which talk over gloo.)

With several processes the main one pretrains the base and builds the rare set while the others
wait, then every process loads them, trains on its share of each batch and evaluates its share
of the problems.

The numbers of so few steps on a tiny model show that the pipeline runs, not what F-GRPO does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--pretrain-steps", type=int, default=80, help="SFT steps of the tiny base")
    ap.add_argument("--steps", type=int, default=4, help="FocalGRPOTrainer steps")
    ap.add_argument("--gamma", type=float, default=1.0, help="focal exponent")
    ap.add_argument("--algo", default="grpo", choices=["grpo", "dapo", "cispo"])
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--prompts-per-step", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from importlib.util import find_spec

    missing = [name for name in ("trl", "accelerate") if find_spec(name) is None]
    if missing:
        ap.error(
            f"needs {' and '.join(missing)}, not installed in this environment: run it with "
            ".venv-trl/bin/python (make .venv-trl/.installed builds it)"
        )

    import torch
    from accelerate import PartialState

    from fgrpo_llm.evaluation.rare import build_rare_set, load_rare_set, save_rare_set
    from fgrpo_llm.experiments.countdown.base import PretrainConfig, pretrain
    from fgrpo_llm.integrations.trl import (
        DeltaNLLRareCallback,
        FocalGRPOConfig,
        FocalGRPOTrainer,
        PassAtKCallback,
        method_args,
        task_dataset,
        task_reward_func,
    )
    from fgrpo_llm.model import load_model_and_tokenizer
    from fgrpo_llm.rollout import SamplingParams
    from fgrpo_llm.tasks.countdown import CountdownTask

    out = Path(a.out)
    cfg = PretrainConfig(
        seed=a.seed,
        seconds=0,
        max_steps=a.pretrain_steps,
        batch_size=64,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        num_test=16,
        num_ood=8,
        eval_prompts=0,
        warmup_steps=5,
    )
    state = PartialState(cpu=True)
    task = CountdownTask(seed=cfg.task_seed, num_test=cfg.num_test, num_ood=cfg.num_ood)
    if state.is_main_process:
        pretrain(cfg, out / "base", progress=False)
        model, tok = load_model_and_tokenizer(out / "base", device="cpu")
        rare = build_rare_set(
            model,
            tok,
            task,
            task.problems("train")[:8],
            num_rollouts=32,
            top_fraction=0.05,
            sampling=SamplingParams(max_new_tokens=12),
            generator=torch.Generator().manual_seed(a.seed),
        )
        save_rare_set(rare, out / "rare_set.json")
    state.wait_for_everyone()
    model, tok = load_model_and_tokenizer(out / "base", device="cpu")
    rare = load_rare_set(out / "rare_set.json")

    G = a.group_size
    args = FocalGRPOConfig(
        output_dir=str(out / "trainer"),
        focal_run_dir=str(out / "run"),  # the run records, beside the trainer's output
        focal_gamma=a.gamma,
        focal_algo=a.algo,
        **method_args(a.algo),
        num_generations=G,
        per_device_train_batch_size=G * a.prompts_per_step,
        max_completion_length=12,
        learning_rate=1e-4,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=1.0,
        max_steps=a.steps,
        temperature=1.0,
        top_p=1.0,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=a.steps,
        per_device_eval_batch_size=G,
        num_generations_eval=G,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=a.seed,
        data_seed=a.seed,
        disable_tqdm=True,
        # float32 on the CPU, as our trainer: TRL's default bf16=True patches the model's forward
        # with a bf16 autocast, so the callbacks would measure Delta NLL_rare in bf16 (~1e-3 off the
        # fp32 value)
        bf16=False,
    )
    train = task_dataset(task, "train")
    trainer = FocalGRPOTrainer(
        model=model,
        reward_funcs=[task_reward_func(task)],
        args=args,
        train_dataset=train,
        eval_dataset=task_dataset(task, "test").select(range(1)),
        processing_class=tok,
        task=task,
    )
    # pass@k under the trainer's own sampling settings (max_completion_length, temperature, ...)
    passk = PassAtKCallback(task, tok, split="test", n=8, ks=[1, 2, 4, 8], seed=a.seed).attach(
        trainer
    )
    rare_cb = DeltaNLLRareCallback(rare, every_steps=2, pad_token_id=tok.pad_token_id).attach(
        trainer
    )
    trainer.train()
    trainer.save_model(str(out / "final"))
    if state.is_main_process:
        tok.save_pretrained(str(out / "final"))
        summary = {
            "steps": int(trainer.state.global_step),
            "pass@k": passk.history[-1] if passk.history else None,
            "rare": rare_cb.history[-1] if rare_cb.history else None,
            "rare_set_size": len(rare),
            "processes": state.num_processes,
            "run_dir": str(out / "run"),
            "final": str(out / "final"),
        }
        print(json.dumps(summary, indent=1))
    # every process leaves together and closes the process group itself: a process that exits
    # with gloo's threads still running aborts ("terminate called without an active exception")
    state.wait_for_everyone()
    state.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
