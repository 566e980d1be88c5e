#!/usr/bin/env bash
# GPU smoke test of F-GRPO with verl: examples/verl_qwen25_05b_gsm8k_1gpu.sh for two steps with small
# batches, then its run records are checked (groups.jsonl; metrics.jsonl with focal/weight_mean per step).
#
# PREPARED, NOT RUN: no GPU was lent to this work (docs/engines.md). It needs a CUDA machine with verl's GPU
# install (verl[vllm]) and this package (pip install -e ".[llm,verl]"), and the model on local disk:
#
#   MODEL=/models/Qwen2.5-0.5B-Instruct bash examples/gpu_smoke_verl.sh
#
# DATA (optional): a directory with train.jsonl / test.jsonl of {"problem", "answer"}; without it, 64
# GSM8K-style problems are written. Exit status 0 when every check passes; 2 when no GPU or no model.
set -euo pipefail
PY=${PY:-python}
OUT=${OUT:-runs/gpu_smoke_verl}
MODEL=${MODEL:-}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_smoke_verl: no GPU here (nvidia-smi finds none); this smoke test needs one" >&2
    exit 2
fi
if [ -z "$MODEL" ] || [ ! -d "$MODEL" ]; then
    echo "gpu_smoke_verl: set MODEL to a local Qwen2.5-0.5B-Instruct directory (got '$MODEL')" >&2
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
MODEL="$MODEL" DATA="$DATA" OUT="$OUT/run_dir" PY="$PY" STEPS=2 TRAIN_BATCH=16 MINI_BATCH=8 \
    RESPONSE_LEN=256 GPU_MEM=0.4 bash "$(dirname "$0")/verl_qwen25_05b_gsm8k_1gpu.sh"
"$PY" - "$OUT/run_dir/run" <<'PYEOF'
import json, sys
from fgrpo_llm.evaluation.runs import load_run
run_dir = sys.argv[1]
run = load_run(run_dir)
assert run.engine == "verl" and {g["step"] for g in run.groups} == {1, 2}, run.groups[:2]
assert all(g["N"] == 8 for g in run.groups)
lines = [json.loads(x) for x in open(f"{run_dir}/metrics.jsonl")]
weights = {m["step"]: m["focal/weight_mean"] for m in lines if "focal/weight_mean" in m}
assert sorted(weights) == [1, 2] and all(0.0 <= w <= 1.0 for w in weights.values()), lines
print(f"gpu_smoke_verl: OK ({len(run.groups)} groups, focal/weight_mean {weights})")
PYEOF
