# Shell functions shared by the benchmark scripts (source it after cd to the repository root).
#   timed COMMAND...                      the load, then COMMAND's wall and CPU time
#   bleu1000 MODEL_DIR SOURCE REFERENCE OUT_PREFIX
#                                         translate the first 1,000 lines of SOURCE with MODEL_DIR
#                                         (OUT_PREFIX.src/.ref/.hyp) and print t2t_repro.evaluate's
#                                         scores (cased sacreBLEU 13a first), German references
timed() { uptime; /usr/bin/time -f "%C: %e s wall, %U s user + %S s system CPU" "$@"; }
bleu1000() {
  head -n 1000 "$2" > "$4.src"
  head -n 1000 "$3" > "$4.ref"
  timed python -m t2t_repro.translate --model_dir="$1" --input_file="$4.src" \
    --output_file="$4.hyp" --noprogress
  echo "== $(basename "$4") ($1)"
  python -m t2t_repro.evaluate --hyp="$4.hyp" --ref="$4.ref" --tgt_lang=de | head -3
}
