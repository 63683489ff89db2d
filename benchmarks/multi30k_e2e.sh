#!/usr/bin/env bash
# End to end on real data on this CPU: train `small` on Multi30k En-De (task 1) for at most
# TRAIN_MINUTES of wall time, then translate test_2016_flickr with beam search (beam 4,
# alpha 0.6) and score it with sacreBLEU (cased, 13a). Prints the wall time of each phase.
#
#   bash benchmarks/multi30k_e2e.sh [MODEL_DIR]        (data: $T2T_DATA_DIR or ../shared/data)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
data=${T2T_DATA_DIR:-$here/../shared/data}
model_dir=${1:-$here/runs/multi30k_small}
train_minutes=${TRAIN_MINUTES:-50}
start=$(date +%s)
python -m t2t_repro.train --hparams=small --problem=translate_ende_multi30k --data_dir="$data" \
  --model_dir="$model_dir" --train_minutes="$train_minutes" --eval_every_steps=1000 \
  --dev_bleu_lines=0 --save_checkpoints_steps=500 --keep_checkpoint_max=5
trained=$(date +%s)
python -m t2t_repro.translate --model_dir="$model_dir" \
  --input_file="$data/multi30k/test_2016_flickr.en" --output_file="$model_dir/test_2016_flickr.hyp.de" \
  --evaluate --ref="$data/multi30k/test_2016_flickr.de"
end=$(date +%s)
echo "wall time: train $((trained - start)) s, translate+score $((end - trained)) s, total $((end - start)) s"
