#!/usr/bin/env bash
# Multi30k En-De end to end on this CPU, one command: learn the BPE, train HPARAMS (default
# multi30k_cpu_hour) for at most TRAIN_MINUTES of wall time in MIXED_PRECISION, saving every SAVE_STEPS updates,
# average the last AVERAGE_LAST checkpoints (model_dir/averaged/), choose beam size and alpha on val, and
# score test_2016_flickr,
# test_2017_flickr and test_2017_mscoco (cased sacreBLEU, chrF, lowercased Moses-tokenized
# BLEU) with benchmarks/multi30k_score.py. Prints the wall and CPU time of each phase.
#
#   bash benchmarks/multi30k_e2e.sh [MODEL_DIR]      (data: $T2T_DATA_DIR or ../shared/data;
#                                                     SEED=1, TRAIN_MINUTES=53, HPARAMS=...,
#                                                     MIXED_PRECISION=mixed_bfloat16 or none
#                                                     (default: mixed_bfloat16 where the CPU has
#                                                     bfloat16 instructions, avx512_bf16 or
#                                                     amx_bf16; else none: emulated bfloat16
#                                                     is slower than float32, docs/RESULTS.md),
#                                                     TRAIN_STEPS=20000, SAVE_STEPS=400, AVERAGE_LAST=5,
#                                                     HPARAMS_OVERRIDE=, e.g. subword_alpha=0.1,
#                                                     BEAM_SIZES=4,5 and ALPHAS=0.6,1.0: the
#                                                     grid chosen from on val)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
data=${T2T_DATA_DIR:-$here/../shared/data}
model_dir=${1:-$here/runs/multi30k}
hparams=${HPARAMS:-multi30k_cpu_hour}
average_last=${AVERAGE_LAST:-5}
cd "$here"
source benchmarks/lib.sh
if [ -z "${MIXED_PRECISION:-}" ]; then
  if grep -qw -e avx512_bf16 -e amx_bf16 /proc/cpuinfo 2>/dev/null; then
    MIXED_PRECISION=mixed_bfloat16
  else
    MIXED_PRECISION=none
  fi
fi
echo "mixed precision: $MIXED_PRECISION"
uptime
timed python -m t2t_repro.train --hparams="$hparams" --problem=translate_ende_multi30k \
  --data_dir="$data" --model_dir="$model_dir" --train_minutes="${TRAIN_MINUTES:-53}" \
  --train_steps="${TRAIN_STEPS:-20000}" --save_checkpoints_steps="${SAVE_STEPS:-400}" --keep_checkpoint_max="$average_last" \
  --average_last="$average_last" \
  --eval_every_steps=1000 --dev_bleu_lines=0 --best_metric=loss --test_bleu_lines=0 \
  --seed="${SEED:-1}" --mixed_precision="$MIXED_PRECISION" \
  --hparams_override="${HPARAMS_OVERRIDE:-}"
timed python benchmarks/multi30k_score.py --model_dir="$model_dir/averaged" --data_dir="$data" \
  --beam_sizes="${BEAM_SIZES:-4,5}" --alphas="${ALPHAS:-0.6,1.0}" --out="$model_dir/scores.json"
uptime
