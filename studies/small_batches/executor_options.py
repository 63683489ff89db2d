"""Grappler options of the decoding function: op events per loop iteration and CPU time, each
option set against TensorFlow's defaults, alternated in one process.

  python studies/small_batches/executor_options.py --model_dir=runs/small300 \
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=64 --rounds=3

Grappler rewrites a function when it is first called, under the options set then
(`tf.config.optimizer.set_experimental_options`): each variant's search function
(`Translator.decode_batch`'s, one per variant) is called first under its options, then the
variants are timed alternately, one sentence per call (the batching of a server at low load),
`--threads` intra-op and `--inter_op` inter-op threads (inter-op threads are a process-wide
setting: compare them with two runs). Prints one table row per variant and round, and the op
events per iteration of one profiled sentence (`benchmarks/decode_ops.py`'s count).
"""

import argparse
import collections
import os
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_REPO, "benchmarks"))

from traces import trace_events  # noqa: E402  pylint: disable=wrong-import-position

VARIANTS = {
    "default": {},
    "no remapper": {"remapping": False},
    "no arithmetic optimizer": {"arithmetic_optimization": False},
    "no loop optimizer": {"loop_optimization": False},
    "no function optimizer (no inlining)": {"function_optimization": False},
    "no grappler at all": {"disable_meta_optimizer": True},
}
# TensorFlow's defaults of the options above (a set option stays set until set again).
DEFAULTS = {"remapping": True, "arithmetic_optimization": True, "loop_optimization": True,
            "function_optimization": True, "disable_meta_optimizer": False}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--input_file", required=True)
  parser.add_argument("--lines", type=int, default=64)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--inter_op", type=int, default=0, help="0: TensorFlow's default")
  args = parser.parse_args(argv)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  from t2t_repro.decoding import translator  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  model, hp, tokenizer = load_for_inference(args.model_dir)
  with open(args.input_file, encoding="utf-8") as f:
    lines = [line.strip() for line, _ in zip(f, range(args.lines))]
  config = translator.DecodeConfig.resolve(hp, n_best=1)
  t = translator.Translator(model, tokenizer, config)
  sources = [ids[None] for ids in t.encode(lines)]
  searches, events = {}, {}
  for name, options in VARIANTS.items():
    tf.config.optimizer.set_experimental_options({**DEFAULTS, **options})
    search = translator._compiled_search(model, config, None, False)  # pylint: disable=protected-access
    run = lambda x, s=search: s(tf.constant(x), tf.range(len(x), dtype=tf.int64))[0].numpy()
    run(sources[0])  # grappler runs here, under this variant's options
    searches[name] = run
    with tempfile.TemporaryDirectory() as logdir:
      tf.profiler.experimental.start(logdir)
      run(sources[0])
      tf.profiler.experimental.stop()
      body = [e for e in trace_events(logdir)[0] if "while/body" in e[1]]
    types = collections.Counter(op_type for _, _, op_type, _, _ in body)
    events[name] = len(body) / types["LogSoftmax"]
  tf.config.optimizer.set_experimental_options(DEFAULTS)
  outputs = {name: [run(x).tolist() for x in sources] for name, run in searches.items()}  # warm-up
  print(f"{len(lines)} lines one at a time, beam {config.beam_size}, {args.threads} intra-op, "
        f"inter-op {args.inter_op or 'default'}")
  print("| round | variant | op events per iteration | CPU [s] | CPU / default's | load |\n"
        "|---|---|---|---|---|---|")
  for round_ in range(1, args.rounds + 1):
    cpu = {}
    for name, run in searches.items():
      start = time.process_time()
      outputs[name] = [run(x).tolist() for x in sources]
      cpu[name] = time.process_time() - start
      print(f"| {round_} | {name} | {events[name]:.1f} | {cpu[name]:.2f} "
            f"| {cpu[name] / cpu['default']:.3f} | {os.getloadavg()[0]:.1f} |", flush=True)
  same = {name: out == outputs["default"] for name, out in outputs.items()}
  print("same ids as default: " + ", ".join(f"{k}: {v}" for k, v in same.items()))


if __name__ == "__main__":
  main()
