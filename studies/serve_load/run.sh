#!/bin/bash
# The load tables of docs/SERVER_LOAD.md:
#   bash studies/serve_load/run.sh tiny|small savedmodel|ctranslate2|defaults|inter_op
# tiny = runs/quickstart (the README's main job), small = runs/small300 (`train
# --hparams=small --train_steps=300` on Multi30k), each exported (a SavedModel, CTranslate2
# float32 and int8) under runs/bench/ if not there yet. savedmodel: `serve` of the SavedModel
# with each lever on and off; ctranslate2: `serve` of the two CTranslate2 exports; defaults:
# `serve` at its defaults on the SavedModel, the two CTranslate2 exports and the LiteRT
# float32 export (`export --format=tflite`), 2 rounds; inter_op: the SavedModel at the
# defaults and with --tensorflow_inter_op_parallelism=1, 2 rounds. Writes
# studies/serve_load/<size>_<group>.json (a rerun skips a group whose file exists) and prints
# its table.
set -euo pipefail
size=${1:-}
group=${2:-}
case $size in
  tiny) model_dir=runs/quickstart ;;
  small) model_dir=runs/small300 ;;
  *) echo "usage: bash studies/serve_load/run.sh tiny|small savedmodel|ctranslate2|defaults|inter_op" >&2; exit 2 ;;
esac
rounds=3
case $group in
  savedmodel|ctranslate2) ;;
  defaults|inter_op) rounds=2 ;;
  *) echo "usage: bash studies/serve_load/run.sh tiny|small savedmodel|ctranslate2|defaults|inter_op" >&2; exit 2 ;;
esac
out=studies/serve_load/${size}_${group}.json
if [ -e "$out" ]; then
  python benchmarks/serve_load.py --table_of="$out"
  exit 0
fi
M=runs/bench/${size}_sm C=runs/bench/${size}_ct2 I=runs/bench/${size}_ct2i8 L=runs/bench/${size}_litert
[ -d $M/1 ] || python -m t2t_repro.export --model_dir=$model_dir --export_dir=$M/1
[ -d $C/1 ] || python -m t2t_repro.export --model_dir=$model_dir --format=ctranslate2 \
  --export_dir=$C/1
[ -d $I/1 ] || python -m t2t_repro.export --model_dir=$model_dir --format=ctranslate2 \
  --quantization=int8 --export_dir=$I/1
[ $group != defaults ] || [ -d $L/1 ] || python -m t2t_repro.export --model_dir=$model_dir \
  --format=tflite --export_dir=$L/1
case $group in
  savedmodel) servers=(
    "1 thread, no wait=--model_base_path=$M --num_batch_threads=1 --batch_timeout_micros=0"
    "1 thread, wait 20 ms=--model_base_path=$M --num_batch_threads=1 --batch_timeout_micros=20000"
    "2 threads, no wait=--model_base_path=$M --batch_timeout_micros=0"
    "2 threads, wait 2 ms (defaults)=--model_base_path=$M"
    "2 threads, 32 rows, wait 20 ms=--model_base_path=$M --max_batch_size=32 --batch_timeout_micros=20000") ;;
  ctranslate2) servers=(
    "CT2 float32 (defaults)=--model_base_path=$C"
    "CT2 int8 (defaults)=--model_base_path=$I") ;;
  defaults) servers=(
    "SavedModel (defaults)=--model_base_path=$M"
    "CT2 float32 (defaults)=--model_base_path=$C"
    "CT2 int8 (defaults)=--model_base_path=$I"
    "LiteRT float32 (defaults)=--model_base_path=$L") ;;
  inter_op) servers=(
    "SavedModel (defaults)=--model_base_path=$M"
    "SavedModel, 1 inter-op thread=--model_base_path=$M --tensorflow_inter_op_parallelism=1") ;;
esac
python benchmarks/serve_load.py --model_dir=$model_dir --model_base_path=$M --rounds=$rounds \
  "${servers[@]/#/--server=}" --output="$out.tmp"
mv "$out.tmp" "$out"
