#!/usr/bin/env bash
# Training options compared at the same number of updates, one seed, on real data:
#
#  1. Multi30k, HPARAMS (default tiny) for STEPS updates with --ema_decay and --average_last:
#     test_2016_flickr BLEU of the last checkpoint, of the average of the last 5 and of the
#     moving average (ema/), all at the same step.
#  2. The same run with position_encoding=relative (Shaw et al. 2018) instead of sinusoids.
#  3. Fine-tuning run 1's model to news for FT_STEPS updates against training on news from scratch
#     (benchmarks/finetune_news.sh).
#
#   bash benchmarks/options_at_equal_updates.sh [WORK_DIR]   (data: $T2T_DATA_DIR or ../shared/data;
#                                                         HPARAMS=tiny STEPS=3000 FT_STEPS=1000)
# Every BLEU is cased sacreBLEU (13a) with beam 4, alpha 0.6 (the hparams'), printed with
# t2t_repro.evaluate's other scores. Prints the wall and CPU time of every command and the load.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
data=${T2T_DATA_DIR:-$here/../shared/data}
work=${1:-$here/runs/options}
hparams=${HPARAMS:-tiny}
steps=${STEPS:-3000}
ft_steps=${FT_STEPS:-1000}
cd "$here"
mkdir -p "$work"
source benchmarks/lib.sh
m30k() {  # name, extra train flags
  local name=$1; shift
  timed python -m t2t_repro.train --hparams="$hparams" --problem=translate_ende_multi30k \
    --data_dir="$data" --model_dir="$work/$name" --vocab_dir="$work/vocab" --train_steps="$steps" \
    --save_checkpoints_steps=$((steps / 10)) --keep_checkpoint_max=5 --average_last=5 \
    --ema_decay=0.999 --eval_every_steps=$((steps / 5)) --dev_bleu_lines=0 --best_metric=none \
    --seed=1 "$@"
  for variant in "" averaged ema; do
    bleu1000 "$work/$name/$variant" "$data/multi30k/test_2016_flickr.en" \
      "$data/multi30k/test_2016_flickr.de" "$work/$name${variant:+_$variant}_flickr"
  done
}
m30k sinusoid
m30k relative --hparams_override=position_encoding=relative,max_relative_position=16
FT_STEPS="$ft_steps" MIXED_PRECISION=none bash benchmarks/finetune_news.sh "$work/sinusoid" "$work"
