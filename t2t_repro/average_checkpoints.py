r"""Checkpoint averaging (Vaswani et al. 2017, §6.1: the base models average the
last 5 checkpoints, written at 10-minute intervals; the big models the last 20).

  python tools/average_checkpoints.py --model_dir=runs/base --output_dir=runs/base_avg5
  python tools/average_checkpoints.py --model_dir=runs/big --num_last=20 --output_dir=runs/big_avg
  python tools/average_checkpoints.py --checkpoints=runs/base/ckpt-99000,runs/base/ckpt-100000 \
      --output_dir=runs/base_avg2

--model_dir takes the last N checkpoints listed in its `checkpoint` state file (N
= --num_last, default hparams.checkpoint_average). --checkpoints gives them
explicitly (prefixes, or names relative to --model_dir; the model dir defaults to
the first checkpoint's folder).

Object-based, as tensor2tensor's avg_checkpoints.py but through the model: the
model is built from hparams.json, each checkpoint is restored into it
(`training.checkpoints.restore_weights`, every weight checked), the MODEL
weights are averaged element-wise (float64 sums; optimizer slots are not read),
and a new checkpoint is written with a CheckpointManager into --output_dir under
the global step of the newest source checkpoint, next to copies of hparams.json,
vocab.model and flags.json and an `averaged.json` naming the sources. So
--output_dir is a model dir for translate / export. It must be new or empty and
differ from the source folder.
"""

import json
import os
import re
import shutil
import sys

import numpy as np
import tensorflow as tf
from absl import app
from absl import flags

from t2t_repro import cli, command_flags, fileio
from t2t_repro.hparams import HParams
from t2t_repro.model.transformer import Transformer
from t2t_repro.training.checkpoints import restore_weights

FLAGS = flags.FLAGS
COPIED_FILES = ("hparams.json", "vocab.model", "flags.json")


def last_checkpoints(model_dir, num_last):
  """The last `num_last` checkpoints of the `checkpoint` state file, oldest first.

  Raises:
    FileNotFoundError: no state file, or a listed checkpoint is gone.
    ValueError: fewer than num_last checkpoints (the message lists them).
  """
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None:
    raise FileNotFoundError(f"no 'checkpoint' state file in {model_dir}")
  paths = list(state.all_model_checkpoint_paths)
  if len(paths) < num_last:
    raise ValueError(f"{model_dir} lists {len(paths)} checkpoints, fewer than --num_last="
                     f"{num_last}: {[os.path.basename(p) for p in paths]}; average those with "
                     f"--num_last={len(paths)}, or train with a smaller --save_checkpoints_steps "
                     "to keep more")
  paths = paths[-num_last:]
  for path in paths:
    if not tf.io.gfile.exists(f"{path}.index"):
      raise FileNotFoundError(f"checkpoint {path} is listed in {model_dir}/checkpoint but missing")
  return paths


def checkpoint_step(path):
  """Global step of a checkpoint: its `step` variable, else the optimizer's iterations,
  else the number in `ckpt-N`. Returns an int (or raises ValueError)."""
  reader = tf.train.load_checkpoint(path)
  names = reader.get_variable_to_shape_map()
  candidates = ["step/.ATTRIBUTES/VARIABLE_VALUE"] + sorted(
      (n for n in names if n.endswith("iterations/.ATTRIBUTES/VARIABLE_VALUE")), key=len)
  for name in candidates:
    if name in names:
      return int(reader.get_tensor(name))
  match = re.search(r"-(\d+)$", path)
  if match:
    return int(match.group(1))
  raise ValueError(f"cannot tell the global step of checkpoint {path}")


def _check_output_dir(output_dir, source_dirs):
  real = os.path.realpath(output_dir)
  for source in source_dirs:
    if real == os.path.realpath(source):
      raise ValueError(f"--output_dir {output_dir} is a source folder; choose a new folder")
  if os.path.exists(output_dir) and os.listdir(output_dir):
    raise ValueError(f"--output_dir {output_dir} exists and is not empty")


def average_checkpoints(checkpoints, output_dir, model_dir=None):
  """Averages the model weights of `checkpoints` into a new model dir.

  Args:
    checkpoints: list of checkpoint prefixes (at least one).
    output_dir: new or empty folder, not a source folder.
    model_dir: where hparams.json / vocab.model / flags.json are (default: the
      folder of the first checkpoint).

  Returns:
    Path of the written checkpoint (`{output_dir}/ckpt-{step of the newest}`).

  Raises:
    ValueError: no checkpoints, a bad output_dir, a checkpoint that does not
      fit the model of hparams.json.
    FileNotFoundError: a checkpoint or hparams.json is missing.
  """
  if not checkpoints:
    raise ValueError("no checkpoints to average")
  model_dir = model_dir or os.path.dirname(checkpoints[0])
  _check_output_dir(output_dir, {model_dir} | {os.path.dirname(p) for p in checkpoints})
  for path in checkpoints:
    if not tf.io.gfile.exists(f"{path}.index"):
      raise FileNotFoundError(f"checkpoint {path} does not exist (no .index file)")
  with open(os.path.join(model_dir, "hparams.json"), encoding="utf-8") as f:
    hparams = HParams.from_dict(json.load(f), origin=os.path.join(model_dir, "hparams.json"))
  model = Transformer.from_hparams(hparams)
  sums = None
  for path in checkpoints:
    restore_weights(model, path)
    values = [w.numpy() for w in model.weights]
    dtypes = [v.dtype for v in values]
    values = [v.astype(np.float64) for v in values]
    sums = values if sums is None else [s + v for s, v in zip(sums, values)]
    print(f"read {path}", file=sys.stderr)
  for weight, total, dtype in zip(model.weights, sums, dtypes):
    weight.assign((total / len(checkpoints)).astype(dtype))
  step = max(checkpoint_step(p) for p in checkpoints)
  os.makedirs(output_dir, exist_ok=True)
  checkpoint = tf.train.Checkpoint(model=model, step=tf.Variable(step, dtype=tf.int64))
  path = tf.train.CheckpointManager(checkpoint, output_dir, max_to_keep=1).save(
      checkpoint_number=step)
  for name in COPIED_FILES:
    if os.path.exists(os.path.join(model_dir, name)):
      shutil.copyfile(os.path.join(model_dir, name), os.path.join(output_dir, name))
  fileio.write_json(os.path.join(output_dir, "averaged.json"),
                    {"checkpoints": [os.path.abspath(p) for p in checkpoints], "step": step})
  return path


def _define_flags():
  command_flags.define_model_dir("Model directory whose last checkpoints are averaged.",
                                 required=False)
  flags.DEFINE_list("checkpoints", None, "Explicit checkpoint prefixes (or names relative to "
                    "--model_dir), comma separated.")
  flags.DEFINE_integer("num_last", None, "How many of the last checkpoints (default: "
                       "hparams.checkpoint_average; paper 5 base, 20 big).")
  flags.register_validator("num_last", lambda n: n is None or n >= 1, "must be >= 1")
  flags.DEFINE_string("output_dir", None, "New folder for the averaged model dir.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.output_dir or not (FLAGS.model_dir or FLAGS.checkpoints):
    raise app.UsageError("--output_dir and one of --model_dir / --checkpoints are required")
  model_dir = FLAGS.model_dir
  try:
    if FLAGS.checkpoints:
      checkpoints = [p if (model_dir is None or os.path.dirname(p)) else os.path.join(model_dir, p)
                     for p in FLAGS.checkpoints]
    else:
      with open(os.path.join(model_dir, "hparams.json"), encoding="utf-8") as f:
        default_n = HParams.from_dict(json.load(f)).checkpoint_average
      checkpoints = last_checkpoints(model_dir, FLAGS.num_last or default_n)
    path = average_checkpoints(checkpoints, FLAGS.output_dir, model_dir)
  except (ValueError, FileNotFoundError) as e:
    print(f"average_checkpoints: error: {e}", file=sys.stderr)
    return 1
  print(f"averaged {len(checkpoints)} checkpoints into {path}")
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main)
