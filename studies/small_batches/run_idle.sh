#!/bin/bash
# The small-batch record of docs/BENCHMARKS.md section 0, before and after a change, on an
# idle machine (nothing else running: the CPU-second ratios of a shared machine are noise):
#   bash studies/small_batches/run_idle.sh [BASE_REVISION] [ROUNDS] [AFTER_ONLY_MODES] [RESULTS]
# Runs from the repository root. BASE_REVISION (default main) is extracted with `git archive`
# under runs/idle_src/REV (no worktree). Each round runs decode_throughput.py's small-batch
# command once with BASE_REVISION's code ("before") and once with the working tree's
# ("after"), alternately; each run appends one line {"variant", "round", "revision", "cpu",
# "results": decode_throughput's --json_out list} to RESULTS (default
# studies/small_batches/step_cost.jsonl),
# and a rerun skips the (variant, round) pairs already there. AFTER_ONLY_MODES (e.g.
# litert_float32,litert_float16,litert_dynamic_range) are measured in the "after" runs only,
# beside the others, for modes the base revision does not have. Then prints the table of each
# variant and the after / before ratios (studies/small_batches/table.py). The model,
# runs/small300 (`train --hparams=small --train_steps=300` on Multi30k), is trained first if
# absent (about 10 minutes). About 7-10 minutes per run on 2 cores: 30-40 minutes for the
# default 2 rounds (4 runs).
set -euo pipefail
base=${1:-main}
rounds=${2:-2}
after_only=${3:+,$3}
model_dir=runs/small300
data=../shared/data
out=${4:-studies/small_batches/step_cost.jsonl}
revision=$(git rev-parse --short "$base")
after_revision=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo "+changes")
src=runs/idle_src/$revision
if [ ! -d "$model_dir" ]; then
  python -m t2t_repro.train --hparams=small --problem=translate_ende_multi30k --data_dir=$data \
    --model_dir=$model_dir --train_steps=300 --eval_every_steps=0 --dev_bleu_lines=0
fi
if [ ! -d "$src" ]; then
  mkdir -p "$src.tmp"
  git archive "$base" | tar -x -C "$src.tmp"
  mv "$src.tmp" "$src"
fi
touch $out
for round in $(seq 1 "$rounds"); do
  for variant in before after; do
    if grep -q "\"variant\": \"$variant\", \"round\": $round," $out; then
      echo "round $round $variant: in $out, skipped"
      continue
    fi
    if [ $variant = before ]; then tree=$PWD/$src rev=$revision extra=""
    else tree=$PWD rev=$after_revision extra=$after_only; fi
    json=$(mktemp --suffix=.json)
    PYTHONPATH=$tree python "$tree/benchmarks/decode_throughput.py" --model_dir="$PWD/$model_dir" \
      --lines=256 --uncached_lines=0 --input_file=$data/multi30k/test_2016_flickr.en \
      --batchings=sorted,unsorted,one \
      --modes=cached,cached_bfloat16,ctranslate2_float32,ctranslate2_int8$extra --threads=1,2x1 \
      --rounds=1 --json_out="$json"
    PYTHONPATH=$PWD python - "$json" "$out" "$variant" "$round" "$rev" <<'PY'
import json, sys
from t2t_repro.logs import cpu_name
results, out, variant, round_, rev = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
with open(results, encoding="utf-8") as f:
  runs = json.load(f)
for run in runs:  # the ids of float32 ours only: before and after must be equal
  if run["mode"] != "cached":
    run.pop("outputs", None)
with open(out, "a", encoding="utf-8") as f:
  f.write(json.dumps({"variant": variant, "round": round_, "revision": rev, "cpu": cpu_name(),
                      "results": runs}) + "\n")
PY
    rm -f "$json"
  done
done
python studies/small_batches/table.py $out
