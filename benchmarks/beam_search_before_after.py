"""Decoding of a git revision vs the working tree, alternated in one process.

Loads the `t2t_repro` package as it was at `--before` (`git archive`, imported under another
name: model, decoding step and beam search of that revision) next to the current one, each
loading the model dir's weights (`--inference_dtype` of both), decodes the first `--lines` lines of `--input_file` with each in
`translate`'s batches (sorted, `--decode_batch_tokens` source tokens; or with
`--batching=unsorted` `--unsorted_rows` lines per batch in input order, or `one` line at a
time: `decode_throughput.py`'s batchings), beam and alpha of the model's hparams, max length
source + decode_extra_length, alternating them for `--rounds` rounds, and prints wall and CPU
seconds per pass, output tokens per CPU second, whether the ids are equal and the largest
score difference. `--threads` sets TensorFlow's intra-op threads and `--inter_op` its inter-op
threads (0: TensorFlow's defaults); a machine shared with other jobs gives ratios, not speeds.

  python benchmarks/beam_search_before_after.py --model_dir=runs/m30k_b --before=185d00a \
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=500 --rounds=2
"""

import argparse
import importlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_throughput  # noqa: E402  pylint: disable=wrong-import-position

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BEFORE = "t2t_repro_before"


def load_revision(revision, folder):
  """(beam_search, loading) modules of the `t2t_repro` package as of `revision`, imported as
  `t2t_repro_before` (every `t2t_repro` of its source renamed; its configs/ as its
  `configs` subpackage)."""
  archive = subprocess.run(["git", "archive", revision, "t2t_repro", "configs"], cwd=_REPO,
                           check=True, capture_output=True).stdout
  with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
    tar.extractall(folder, filter="data")
  package = os.path.join(folder, _BEFORE)
  os.rename(os.path.join(folder, "t2t_repro"), package)
  os.rename(os.path.join(folder, "configs"), os.path.join(package, "configs"))
  for root, _, files in os.walk(package):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(root, name)
        with open(path, encoding="utf-8") as f:
          text = re.sub(r"\bt2t_repro\b", _BEFORE, f.read())
        with open(path, "w", encoding="utf-8") as f:
          f.write(text)
  sys.path.insert(0, folder)
  return (importlib.import_module(f"{_BEFORE}.decoding.beam_search"),
          importlib.import_module(f"{_BEFORE}.decoding.loading"))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--before", required=True, help="git revision of the old beam search")
  parser.add_argument("--input_file", required=True)
  parser.add_argument("--lines", type=int, default=500)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--decode_batch_tokens", type=int, default=4096)
  parser.add_argument("--batching", choices=decode_throughput.BATCHINGS, default="sorted")
  parser.add_argument("--unsorted_rows", type=int, default=64)
  parser.add_argument("--inference_dtype", choices=("float32", "bfloat16"), default="float32")
  parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: default)")
  parser.add_argument("--inter_op", type=int, default=0, help="inter-op threads (0: default)")
  args = parser.parse_args(argv)

  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  from t2t_repro.decoding import beam_search as after  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  model, hp, tokenizer = load_for_inference(args.model_dir, inference_dtype=args.inference_dtype)
  with open(args.input_file, encoding="utf-8") as f:
    lines = [line.strip() for line, _ in zip(f, range(args.lines))]
  batches = [inputs for _, inputs in decode_throughput.make_batches(
      model, tokenizer, lines, args.decode_batch_tokens, args.batching, args.unsorted_rows)]

  with tempfile.TemporaryDirectory() as tmp:
    before, loading = load_revision(args.before, tmp)
    old_model = loading.load_for_inference(args.model_dir, inference_dtype=args.inference_dtype)[0]
    kinds = {"before": (before, old_model), "after": (after, model)}

    def run(kind):
      module, decoder_model = kind
      return [tuple(t.numpy() for t in module.beam_search(
          decoder_model, x, beam_size=hp.beam_size, alpha=hp.alpha, n_best=1,
          decode_extra_length=hp.decode_extra_length)) for x in batches]

    outputs = {name: run(kind) for name, kind in kinds.items()}  # first calls: tracing
    tokens = sum(int((ids[:, 0] > 0).sum()) for ids, _ in outputs["after"])
    print(f"{len(lines)} lines, {len(batches)} {args.batching} batches, beam {hp.beam_size}, "
          f"alpha {hp.alpha}, {tokens} output tokens per pass")
    print("| round | kind | wall [s] | CPU [s] | tokens/CPU-s | load |\n|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
      for name, kind in kinds.items():
        cpu, start = time.process_time(), time.perf_counter()
        outputs[name] = run(kind)
        cpu = time.process_time() - cpu
        print(f"| {round_} | {name} | {time.perf_counter() - start:.2f} | {cpu:.2f} "
              f"| {tokens / cpu:.0f} | {os.getloadavg()[0]:.1f} |", flush=True)
  same = all(a[0].shape == b[0].shape and (a[0] == b[0]).all()
             for a, b in zip(outputs["before"], outputs["after"]))
  diff = max(float(np.abs(a[1] - b[1]).max()) for a, b in zip(outputs["before"], outputs["after"]))
  print(f"same ids: {same}; largest score difference: {diff:.2g}")


if __name__ == "__main__":
  main()
