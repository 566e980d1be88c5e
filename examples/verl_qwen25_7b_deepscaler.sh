#!/usr/bin/env bash
# F-GRPO on verl: the paper's main setting (Qwen2.5-7B, DeepScaleR, N = 8, Table 5 hyperparameters).
#
# NOT RUN HERE: it needs a GPU node (8 x 80 GB) with verl's GPU install (verl[vllm] or verl[sglang])
# and the model and data on local disk. What this project did test, on CPU, is everything this script
# relies on: the focal_grpo estimator through verl's real advantage path, verl's config composed with
# exactly these method and Table 5 overrides (tests/engines/test_verl.py), the plug-in found inside a Ray
# worker, and the conversion of verl's rollout dump into our run records.
#
#   ALGO=grpo GAMMA=1.0 MODEL=/models/Qwen2.5-7B DATA=/data/deepscaler bash examples/verl_qwen25_7b_deepscaler.sh
#
# DATA holds train.jsonl / test.jsonl of {"problem", "answer"} records (DeepScaleR); step 1 turns them into
# verl's parquet with our prompt ids. ALGO: grpo | dapo | cispo. GAMMA = 0 is the base method exactly.
set -euo pipefail
ALGO=${ALGO:-grpo}
GAMMA=${GAMMA:-1.0}
N=${N:-8}
MODEL=${MODEL:?set MODEL to a local Qwen2.5-7B directory}
DATA=${DATA:?set DATA to a directory with train.jsonl and test.jsonl}
OUT=${OUT:-runs/verl_${ALGO}_g${GAMMA}_n${N}}
PY=${PY:-python}
mkdir -p "$OUT"

# 1. data: the paper's preparation (system prompt, prompts over 1024 tokens and conflicting duplicates dropped)
"$PY" - "$DATA" "$OUT" "$MODEL" <<'PYEOF'
import sys
from transformers import AutoTokenizer
from fgrpo_llm.tasks.boxed_math import BoxedMathTask
from fgrpo_llm.integrations.verl.data import verl_rows, write_parquet
data, out, model = sys.argv[1:]
tok = AutoTokenizer.from_pretrained(model, local_files_only=True)
task = BoxedMathTask(path=f"{data}/train.jsonl", test_path=f"{data}/test.jsonl", tokenizer=tok)
for split in task.splits:
    write_parquet(verl_rows(task, split, data_source="deepscaler"), f"{out}/{split}.parquet")
print(task.stats["train"].summary())
PYEOF

# 2. the overrides: method (F-GRPO / F-DAPO / F-CISPO) + Table 5, printed by the same code the tests compose
mapfile -t OVERRIDES < <("$PY" -c "
from fgrpo_llm.integrations.verl.overrides import method_overrides, table5_overrides
print('\n'.join(method_overrides('$ALGO', gamma=float('$GAMMA'), group_size=int('$N')) + table5_overrides()))")
"$PY" -m fgrpo_llm.integrations.verl.plugin   # fails loudly if verl cannot find focal_grpo

# 3. train (response length and the per-GPU sizes are this script's choices, not the paper's)
"$PY" -m verl.trainer.main_ppo \
    "${OVERRIDES[@]}" \
    data.train_files="$OUT/train.parquet" data.val_files="$OUT/test.parquet" \
    data.max_response_length=4096 \
    actor_rollout_ref.model.path="$MODEL" \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
    reward.custom_reward_function.path="$("$PY" -c 'import fgrpo_llm.tasks.boxed_math as m; print(m.__file__)')" \
    reward.custom_reward_function.name=compute_score \
    trainer.rollout_data_dir="$OUT/rollouts" \
    trainer.default_local_dir="$OUT/checkpoints" \
    trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.logger='[console]' \
    trainer.project_name=fgrpo trainer.experiment_name="$(basename "$OUT")" \
    hydra.run.dir="$OUT/hydra"   # the run's composed config: $OUT/hydra/.hydra/config.yaml

# 4. our records from verl's rollout dump, for `fgrpo-llm validate` (prompt ids matched to the task's)
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
                       sampling=verl_sampling(f"{out}/hydra/.hydra/config.yaml"))  # for eval --run
PYEOF
echo "records for fgrpo-llm validate and eval --run: $OUT/run"
