"""Profiles training steps of ours or Model Garden: op time by op type and by op.

Runs `--warmup` steps, then `--steps` steps under `tf.profiler.experimental`
(trace written to `--logdir`, viewable in TensorBoard's profile plugin), and sums
the trace's `tf_Compute` op events (executor and iterator events excluded) by op
type and by op name, per step. With the default 2 inter-op threads independent
ops overlap, so op time exceeds the wall step; `--inter_op=1` runs one op at a
time, so the sums add up to the step.

  python benchmarks/profile_step.py --kind=ours --size=base
  python benchmarks/profile_step.py --kind=model_garden --size=small --inter_op=1
  python benchmarks/profile_step.py --kind=ours --size=small --inter_op=1 \
      --mixed_precision=mixed_bfloat16
"""

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchlib  # noqa: E402  pylint: disable=wrong-import-position
import traces  # noqa: E402  pylint: disable=wrong-import-position


def op_times(logdir):
  """(seconds by op type, seconds by op name) summed over the newest trace in logdir."""
  by_type, by_name = collections.Counter(), collections.Counter()
  for _, op_name, op_type, _, duration in traces.trace_events(logdir)[0]:
    by_type[op_type] += duration / 1e12
    by_name[f"{op_name}:{op_type}"] += duration / 1e12
  return by_type, by_name


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--kind", choices=("ours", "model_garden"), default="ours")
  parser.add_argument("--size", default="small", help="hparams set (peer config of the same shape)")
  parser.add_argument("--batch", type=int, default=170)
  parser.add_argument("--length", type=int, default=24)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--steps", type=int, default=1)
  parser.add_argument("--inter_op", type=int, default=0, help="inter-op threads (0: TF default)")
  parser.add_argument("--mixed_precision", choices=("none", "mixed_bfloat16"), default="none",
                      help="ours only: the trainer's --mixed_precision")
  parser.add_argument("--top", type=int, default=25)
  parser.add_argument("--logdir", default="/tmp/t2t_profile")
  args = parser.parse_args(argv)
  if args.mixed_precision != "none" and args.kind != "ours":
    parser.error("--mixed_precision: only with --kind=ours")
  skipped = benchlib.missing_peer(args.kind) if args.kind == "model_garden" else None
  if skipped:
    print(skipped, flush=True)
    return

  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if args.inter_op:
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  import peer_models  # pylint: disable=import-outside-toplevel
  import train_throughput  # pylint: disable=import-outside-toplevel
  config = train_throughput.peer_config(args.size, args.batch, args.length)
  step = (peer_models.model_garden_step_fn(config) if args.kind == "model_garden"
          else train_throughput.ours_step_fn(args.size, config,
                                             mixed_precision=args.mixed_precision))
  for _ in range(args.warmup):
    step()
  logdir = os.path.join(args.logdir, f"{args.kind}_{args.size}")
  tf.profiler.experimental.start(logdir)
  start = time.perf_counter()
  for _ in range(args.steps):
    step()
  wall = (time.perf_counter() - start) / args.steps
  tf.profiler.experimental.stop()
  by_type, by_name = op_times(logdir)
  total = sum(by_type.values()) / args.steps
  print(f"{args.kind} {args.size}: wall {wall:.3f} s/step (profiled), op time {total:.3f} s/step")
  print("| op type | s/step | share | ops |\n|---|---|---|---|")
  counts = collections.Counter()
  for name in by_name:
    counts[name.split(":")[-1]] += 1
  for op, seconds in by_type.most_common(args.top):
    print(f"| {op} | {seconds / args.steps:.3f} | {100 * seconds / args.steps / total:.1f} % "
          f"| {counts[op]} |")
  print("\n| op | s/step |\n|---|---|")
  for name, seconds in by_name.most_common(args.top):
    print(f"| {name[:120]} | {seconds / args.steps:.3f} |")


if __name__ == "__main__":
  main()
