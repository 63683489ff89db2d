#!/usr/bin/env bash
# Fine-tuning a trained model to another domain at equal updates, one seed, on real data: SOURCE_DIR
# (a Multi30k model dir) trained FT_STEPS more updates on news (newstest2011 + newstest2012, 6,006
# pairs; dev newstest2013) with --init_from, against a model of the same hparams trained on those
# pairs from scratch for the same updates (its own vocabulary, learned on the news pairs);
# BLEU on the first 1,000 lines of newstest2014 before and after.
#
#   bash benchmarks/finetune_news.sh SOURCE_DIR [WORK_DIR]   (data: $T2T_DATA_DIR or ../shared/data;
#                                                            FT_STEPS=1000, MIXED_PRECISION=none)
# Every BLEU is cased sacreBLEU (13a) with the hparams' beam and alpha, printed with t2t_repro.evaluate's
# other scores. Prints the wall and CPU time of every command and the load.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
data=${T2T_DATA_DIR:-$here/../shared/data}
source_dir=$1
work=${2:-$source_dir-news}
ft_steps=${FT_STEPS:-1000}
news=$data/wmt_news_other_years
test_src=$data/wmt14/newstest2014-full.en-de.en
test_tgt=$data/wmt14/newstest2014-full.en-de.de
cd "$here"
mkdir -p "$work"
source benchmarks/lib.sh
news_flags=(--problem=parallel_text --train_src="$news/newstest2011.en,$news/newstest2012.en"
  --train_tgt="$news/newstest2011.de,$news/newstest2012.de" --dev_src="$data/wmt14/newstest2013.en"
  --dev_tgt="$data/wmt14/newstest2013.de" --train_steps="$ft_steps"
  --save_checkpoints_steps="$ft_steps" --eval_every_steps="$ft_steps" --dev_bleu_lines=0
  --best_metric=none --seed=1 --mixed_precision="${MIXED_PRECISION:-none}")
bleu1000 "$source_dir" "$test_src" "$test_tgt" "$work/before_news"
timed python -m t2t_repro.train --hparams="$source_dir/hparams.json" --model_dir="$work/finetuned" \
  --init_from="$source_dir" "${news_flags[@]}"
bleu1000 "$work/finetuned" "$test_src" "$test_tgt" "$work/finetuned_news"
timed python -m t2t_repro.train --hparams="$source_dir/hparams.json" --model_dir="$work/scratch" \
  "${news_flags[@]}"
bleu1000 "$work/scratch" "$test_src" "$test_tgt" "$work/scratch_news"
uptime
