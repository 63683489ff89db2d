"""float32 against bfloat16 decoding by batch size: CPU time, the two models alternated in one
process (op events and casts per iteration: `benchmarks/decode_ops.py --inference_dtype`).

  python studies/small_batches/dtype_rows.py --model_dir=runs/small300 \
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=64 --rows=1,4,16,64

Loads the model dir twice (`load_for_inference`, float32 and bfloat16: the same weights),
decodes the first `--lines` lines in input order, `--rows` lines per call for each entry of
--rows (1: one sentence at a time), with each model alternately for `--rounds` rounds (after a
warm-up pass), on `--threads` intra-op and `--inter_op` inter-op threads, and prints per rows
and dtype the CPU seconds, output tokens per CPU second, the speed of bfloat16 / float32 per
round, and how many outputs bfloat16 shares with float32.
"""

import argparse
import os
import statistics
import time


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--input_file", required=True)
  parser.add_argument("--lines", type=int, default=64)
  parser.add_argument("--rows", default="1,4,16,64")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--inter_op", type=int, default=1)
  args = parser.parse_args(argv)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  from t2t_repro.data.batching import pad_rows  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import translator  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  decoders, ids = {}, None
  for dtype in ("float32", "bfloat16"):
    model, hp, tokenizer = load_for_inference(args.model_dir, inference_dtype=dtype)
    t = translator.Translator(model, tokenizer, translator.DecodeConfig.resolve(hp, n_best=1))
    decoders[dtype] = lambda x, t=t: t.decode_batch(x)[0].numpy()[:, 0]
    if ids is None:
      with open(args.input_file, encoding="utf-8") as f:
        ids = t.encode([line.strip() for line, _ in zip(f, range(args.lines))])
  print(f"{len(ids)} lines, {args.threads} intra-op, {args.inter_op} inter-op threads")
  print("| rows | dtype | CPU [s] per round | tokens/CPU-s (median) | bf16 / f32 speed per round "
        "| same outputs |\n|---|---|---|---|---|---|")
  for rows in (int(r) for r in args.rows.split(",")):
    batches = [pad_rows(ids[i:i + rows]) for i in range(0, len(ids), rows)]
    outputs = {d: [o for b in batches for o in decode(b).tolist()] for d, decode in decoders.items()}
    tokens = sum(int(np.count_nonzero(o)) for o in outputs["float32"])
    cpu = {d: [] for d in decoders}
    for _ in range(args.rounds):
      for dtype, decode in decoders.items():
        start = time.process_time()
        for b in batches:
          decode(b)
        cpu[dtype].append(time.process_time() - start)
    ratio = [f / b for f, b in zip(cpu["float32"], cpu["bfloat16"])]
    same = sum(a == b for a, b in zip(outputs["float32"], outputs["bfloat16"]))
    for dtype in decoders:
      toks = tokens if dtype == "float32" else sum(int(np.count_nonzero(o))
                                                   for o in outputs[dtype])
      print(f"| {rows} | {dtype} | "
            + ", ".join(f"{c:.2f}" for c in cpu[dtype])
            + f" | {toks / statistics.median(cpu[dtype]):.0f} | "
            + (", ".join(f"{r:.2f}" for r in ratio) if dtype == "bfloat16" else "-")
            + f" | {same}/{len(ids)} |", flush=True)
  print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
  main()
