#!/usr/bin/env bash
# GPU smoke test of F-GRPO with TRL: the shipped one-GPU recipe (examples/trl_qwen25_05b_gsm8k.yaml) for
# two steps, through the launcher, with vLLM colocated, pass@k and Delta NLL_rare; then the run records
# are checked (run.json, groups.jsonl, metrics.jsonl with focal/weight_mean).
#
# PREPARED, NOT RUN: no GPU was lent to this work (docs/engines.md). It needs a CUDA machine with the TRL
# environment plus vLLM (pip install -e ".[llm,trl]" vllm), and the model on local disk:
#
#   MODEL=/models/Qwen2.5-0.5B-Instruct bash examples/gpu_smoke_trl.sh
#
# DATA (optional): a directory with train.jsonl / test.jsonl of {"problem", "answer"}; without it, 64
# GSM8K-style problems are written. Exit status 0 when every check passes; 2 when no GPU or no model.
set -euo pipefail
PY=${PY:-python}
OUT=${OUT:-runs/gpu_smoke_trl}
MODEL=${MODEL:-}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_smoke_trl: no GPU here (nvidia-smi finds none); this smoke test needs one" >&2
    exit 2
fi
if [ -z "$MODEL" ] || [ ! -d "$MODEL" ]; then
    echo "gpu_smoke_trl: set MODEL to a local Qwen2.5-0.5B-Instruct directory (got '$MODEL')" >&2
    exit 2
fi
mkdir -p "$OUT"
DATA=${DATA:-$OUT/data}
if [ ! -f "$DATA/train.jsonl" ]; then
    mkdir -p "$DATA"
    "$PY" - "$DATA" <<'PYEOF'
import json, random, sys
rng = random.Random(0)
for split, n in (("train", 64), ("test", 16)):
    with open(f"{sys.argv[1]}/{split}.jsonl", "w") as fh:
        for _ in range(n):
            a, b, c = rng.randint(2, 40), rng.randint(2, 40), rng.randint(2, 9)
            problem = (f"Sam has {a} marbles. He buys {b} more, then gives each of his {c} friends "
                       f"one marble. How many marbles does Sam have now?")
            fh.write(json.dumps({"problem": problem, "answer": str(a + b - c)}) + "\n")
PYEOF
fi
# the base model's rare-correct set (small: 8 prompts x 16 rollouts)
"$PY" -m fgrpo_llm.cli rare-set --base "$MODEL" --task boxed_math --task-arg path="$DATA/train.jsonl" \
    --prompts 8 --rollouts 16 --top 0.1 --max-new-tokens 256 --out "$OUT/rare_set.json"
# two steps of the shipped recipe, smaller batches, one evaluation at the end
"$PY" -m fgrpo_llm.integrations.trl.launch --config "$(dirname "$0")/trl_qwen25_05b_gsm8k.yaml" \
    --model_name_or_path "$MODEL" --task_train_file "$DATA/train.jsonl" --task_test_file "$DATA/test.jsonl" \
    --rare_set "$OUT/rare_set.json" --rare_every_steps 1 --output_dir "$OUT/f-grpo" \
    --max_steps 2 --eval_steps 2 --save_steps 2 --per_device_train_batch_size 16 \
    --gradient_accumulation_steps 1 --max_completion_length 256 --passk_n 4 --passk_ks 1 4 \
    --passk_max_problems 4 --per_device_eval_batch_size 16
"$PY" - "$OUT/f-grpo/_fgrpo_run" <<'PYEOF'
import json, math, sys
from fgrpo_llm.evaluation.runs import load_run
run_dir = sys.argv[1]
run = load_run(run_dir)
assert run.engine == "trl" and {g["step"] for g in run.groups} == {1, 2}, run.groups[:2]
lines = [json.loads(x) for x in open(f"{run_dir}/metrics.jsonl")]
weights = [m["focal/weight_mean"] for m in lines if "focal/weight_mean" in m]
assert len(weights) == 2 and all(0.0 <= w <= 1.0 for w in weights), lines
assert any("eval_pass@1/test" in m for m in lines), "pass@k was not logged"
assert all(not (isinstance(v, float) and math.isnan(v)) for m in lines for v in m.values())
print(f"gpu_smoke_trl: OK ({len(run.groups)} groups, focal/weight_mean {weights})")
PYEOF
