"""TensorFlow's inter-op thread pool at one sentence per call: the SavedModel's serving_default
called by 1 or 2 Python threads (the server's decoding threads), each call one sentence, with 1
intra-op thread (the server's share per decoding thread on 2 cores) and 1 or the default number
of inter-op threads. Each setting runs in its own process (TensorFlow reads the setting once):

  python studies/small_batches/inter_op.py --export_dir=runs/bench/tiny_sm/1

Prints sentences per wall second and per CPU-second of each setting (the first `--lines` lines
of test_2016_flickr, after 4 warm-up calls), `--rounds` rounds alternating the settings.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INPUT = os.path.join(os.path.dirname(_REPO), "shared", "data", "multi30k", "test_2016_flickr.en")


def measure(export_dir, input_file, lines, inter_op, threads):
  """Calls serving_default on one sentence at a time from `threads` Python threads:
  {"sent_per_s", "sent_per_cpu_s"}."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(inter_op)
  translate = tf.saved_model.load(export_dir).signatures["serving_default"]
  with open(input_file, encoding="utf-8") as f:
    sentences = [line.strip() for _, line in zip(range(lines), f)]
  for sentence in sentences[:4]:
    translate(sentences=tf.constant([sentence]))

  def work(part):
    for sentence in part:
      translate(sentences=tf.constant([sentence]))

  workers = [threading.Thread(target=work, args=(sentences[i::threads],)) for i in range(threads)]
  cpu, wall = time.process_time(), time.perf_counter()
  for worker in workers:
    worker.start()
  for worker in workers:
    worker.join()
  cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
  return {"sent_per_s": len(sentences) / wall, "sent_per_cpu_s": len(sentences) / cpu}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--export_dir", required=True, help="a SavedModel version folder")
  parser.add_argument("--input_file", default=_INPUT)
  parser.add_argument("--lines", type=int, default=128)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    inter_op, threads = map(int, args.child.split(","))
    print(json.dumps(measure(args.export_dir, args.input_file, args.lines, inter_op, threads)))
    return
  print("| round | inter-op threads | calling threads | sentences/s | sentences/CPU-s |")
  print("|---|---|---|---|---|")
  for round_ in range(1, args.rounds + 1):
    for inter_op, threads in ((1, 1), (0, 1), (1, 2), (0, 2)):
      out = subprocess.run([sys.executable, __file__, f"--export_dir={args.export_dir}",
                            f"--input_file={args.input_file}", f"--lines={args.lines}",
                            f"--child={inter_op},{threads}"],
                           capture_output=True, text=True, check=True,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
      result = json.loads(out.stdout.strip().splitlines()[-1])
      print(f"| {round_} | {inter_op or 'default'} | {threads} | {result['sent_per_s']:.1f} | "
            f"{result['sent_per_cpu_s']:.1f} |", flush=True)


if __name__ == "__main__":
  main()
