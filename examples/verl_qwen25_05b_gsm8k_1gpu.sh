#!/usr/bin/env bash
# F-GRPO on verl with one GPU: Qwen2.5-0.5B-Instruct on GSM8K-style problems with \boxed{} answers,
# N = 8 rollouts per prompt, vLLM rollouts, the paper's scorer (math-verify on the last \boxed{}).
#
# NOT RUN ON A GPU HERE (no GPU was lent to this work; docs/engines.md). On a CPU, DRY_RUN=1 prints
# the overrides and composes verl's own config with them through the launch check
# (tests/engines/test_verl.py also validates them with verl's validate_config); examples/gpu_smoke_verl.sh
# is the prepared two-step smoke run for a machine with a GPU.
#
#   MODEL=/models/Qwen2.5-0.5B-Instruct DATA=data/gsm8k bash examples/verl_qwen25_05b_gsm8k_1gpu.sh
#   DRY_RUN=1 PY=.venv-verl/bin/python bash examples/verl_qwen25_05b_gsm8k_1gpu.sh
#
# DATA holds train.jsonl / test.jsonl of {"problem", "answer"} (GSM8K's "#### 42" as "42"); step 1 turns
# them into verl's parquet with our prompt ids. ALGO: grpo | dapo | cispo; GAMMA = 0 is the base method.
# The batch sizes suit one 80 GB GPU; STEPS, TRAIN_BATCH, MINI_BATCH, RESPONSE_LEN, GPU_MEM change them.
set -euo pipefail
ALGO=${ALGO:-grpo}
GAMMA=${GAMMA:-1.0}
N=${N:-8}
STEPS=${STEPS:-200}
TRAIN_BATCH=${TRAIN_BATCH:-64}
MINI_BATCH=${MINI_BATCH:-16}
RESPONSE_LEN=${RESPONSE_LEN:-1024}
GPU_MEM=${GPU_MEM:-0.5}
PY=${PY:-python}
DRY_RUN=${DRY_RUN:-0}
if [ "$DRY_RUN" = 1 ]; then
    MODEL=${MODEL:-/models/Qwen2.5-0.5B-Instruct}
    DATA=${DATA:-data/gsm8k}
else
    MODEL=${MODEL:?set MODEL to a local Qwen2.5-0.5B-Instruct directory}
    DATA=${DATA:?set DATA to a directory with train.jsonl and test.jsonl}
fi
OUT=${OUT:-runs/verl_qwen25_05b_${ALGO}_g${GAMMA}_n${N}}

# the method (F-GRPO / F-DAPO / F-CISPO), printed by the code the tests compose
mapfile -t METHOD < <("$PY" -c "
from fgrpo_llm.integrations.verl.overrides import method_overrides
print('\n'.join(method_overrides('$ALGO', gamma=float('$GAMMA'), group_size=int('$N'))))")
SCORER=$("$PY" -c 'import fgrpo_llm.tasks.boxed_math as m; print(m.__file__)')
# one GPU: the paper's optimiser settings (Table 5) with a smaller batch; response length ours
RUN=(
    data.train_files="$OUT/train.parquet" data.val_files="$OUT/test.parquet"
    data.train_batch_size="$TRAIN_BATCH" data.max_prompt_length=512
    data.max_response_length="$RESPONSE_LEN" data.filter_overlong_prompts=True
    actor_rollout_ref.model.path="$MODEL"
    actor_rollout_ref.model.enable_gradient_checkpointing=True
    actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.optim.lr_warmup_steps=15
    actor_rollout_ref.actor.optim.weight_decay=0.01 actor_rollout_ref.actor.grad_clip=1.0
    actor_rollout_ref.actor.ppo_mini_batch_size="$MINI_BATCH" actor_rollout_ref.actor.ppo_epochs=1
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=1
    actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEM"
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16
    actor_rollout_ref.rollout.temperature=1.0 actor_rollout_ref.rollout.top_p=1.0
    actor_rollout_ref.rollout.top_k=-1
    reward.custom_reward_function.path="$SCORER" reward.custom_reward_function.name=compute_score
    trainer.rollout_data_dir="$OUT/rollouts" trainer.default_local_dir="$OUT/checkpoints"
    trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_training_steps="$STEPS"
    trainer.save_freq=50 trainer.test_freq=25 trainer.logger='[console]'
    trainer.project_name=fgrpo trainer.experiment_name="$(basename "$OUT")"
)

if [ "$DRY_RUN" = 1 ]; then
    printf '%s\n' "${METHOD[@]}" "${RUN[@]}"
    # verl's ppo_trainer config composed with every override, then the launch check (exit 2 on a problem)
    exec "$PY" -m fgrpo_llm.integrations.verl.plugin "${METHOD[@]}" "${RUN[@]}"
fi
mkdir -p "$OUT"

# 1. data: the paper's preparation (system prompt, prompts over the limit and conflicting duplicates dropped)
"$PY" - "$DATA" "$OUT" "$MODEL" <<'PYEOF'
import sys
from transformers import AutoTokenizer
from fgrpo_llm.tasks.boxed_math import BoxedMathTask
from fgrpo_llm.integrations.verl.data import verl_rows, write_parquet
data, out, model = sys.argv[1:]
tok = AutoTokenizer.from_pretrained(model, local_files_only=True)
task = BoxedMathTask(path=f"{data}/train.jsonl", test_path=f"{data}/test.jsonl", tokenizer=tok)
for split in task.splits:
    write_parquet(verl_rows(task, split, data_source="gsm8k"), f"{out}/{split}.parquet")
PYEOF
"$PY" -m fgrpo_llm.integrations.verl.plugin   # fails loudly if verl cannot find focal_grpo

# 2. train
"$PY" -m verl.trainer.main_ppo "${METHOD[@]}" "${RUN[@]}" hydra.run.dir="$OUT/hydra"

# 3. our records from verl's rollout dump (groups.jsonl; metrics.jsonl with the focal metrics per step)
"$PY" - "$DATA" "$OUT" "$MODEL" "$ALGO" "$GAMMA" "$N" <<'PYEOF'
import sys
from transformers import AutoTokenizer
from fgrpo_llm.tasks.boxed_math import BoxedMathTask
from fgrpo_llm.integrations.records import records_from_verl_dump, verl_sampling
from fgrpo_llm.integrations.verl.data import prompt_index
data, out, model, algo, gamma, n = sys.argv[1:]
tok = AutoTokenizer.from_pretrained(model, local_files_only=True)
task = BoxedMathTask(path=f"{data}/train.jsonl", tokenizer=tok)
index = prompt_index(task, "train", tok)
problems = {p.id: p for p in task.problems("train")}
records_from_verl_dump(f"{out}/rollouts", f"{out}/run", algo=algo, group_size=int(n), gamma=float(gamma),
                       prompt_id_of=lambda row: index.get(row["input"]), task=task, problems=problems,
                       sampling=verl_sampling(f"{out}/hydra/.hydra/config.yaml"))
PYEOF
echo "records for fgrpo-llm validate and eval --run: $OUT/run"
