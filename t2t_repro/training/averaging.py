"""Checkpoint averaging (Vaswani et al. 2017, §6.1: the base models average the last 5
checkpoints, written at 10-minute intervals; the big models the last 20).

Object-based, as tensor2tensor's avg_checkpoints.py but through the model: the model
is built from hparams.json, each checkpoint is restored into it
(`model.weights.restore_weights`, every weight checked), the MODEL weights are
averaged element-wise (float64 sums; optimizer slots are not read), and the result
is written as a complete model dir (`ModelDir.write_weights`, staged: the output folder
appears complete or not at all) under the global step of the newest source checkpoint, with
an `averaged.json` naming the sources. Used by `tools/average_checkpoints.py` and by `train --average_last=N`.
"""

import os
import re
import sys

import numpy as np
import tensorflow as tf

from t2t_repro import model_dir as model_dir_lib
from t2t_repro.model.transformer import Transformer
from t2t_repro.model.weights import restore_weights
from t2t_repro.model_dir import ModelDir, checkpoint_exists


def last_checkpoints(model_dir, average_last):
  """The last `average_last` checkpoints of a `ModelDir`'s `checkpoint` state file, oldest first.

  Raises:
    FileNotFoundError: no state file, or a listed checkpoint is gone.
    ValueError: fewer than average_last checkpoints (the message lists them).
  """
  model_dir = ModelDir(model_dir)
  paths = model_dir.checkpoint_paths()
  if paths is None:
    raise FileNotFoundError(
        f"no '{model_dir_lib.CHECKPOINT_STATE_FILE}' state file in {model_dir.path}")
  if len(paths) < average_last:
    raise ValueError(f"{model_dir.path} lists {len(paths)} checkpoints, fewer than `average_last`="
                     f"{average_last}: {[os.path.basename(p) for p in paths]}; average those with "
                     f"`average_last`={len(paths)}, or train with a smaller `save_checkpoints_steps` "
                     "to keep more")
  paths = paths[-average_last:]
  for path in paths:
    if not checkpoint_exists(path):
      raise FileNotFoundError(f"checkpoint {path} is listed in "
                              f"{model_dir.file(model_dir_lib.CHECKPOINT_STATE_FILE)} but missing")
  return paths


def checkpoint_step(path):
  """Global step of a checkpoint: its `step` variable, else the optimizer's iterations (the
  largest: a LossScaleOptimizer's own stay 0, its inner optimizer's count the updates), else
  the number in `ckpt-N`. Returns an int (or raises ValueError)."""
  reader = tf.train.load_checkpoint(path)
  names = reader.get_variable_to_shape_map()
  if "step/.ATTRIBUTES/VARIABLE_VALUE" in names:
    return int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))
  iterations = [int(reader.get_tensor(n)) for n in names
                if n.endswith("iterations/.ATTRIBUTES/VARIABLE_VALUE")]
  if iterations:
    return max(iterations)
  match = re.search(r"-(\d+)$", path)
  if match:
    return int(match.group(1))
  raise ValueError(f"cannot tell the global step of checkpoint {path}")


def _check_output_dir(output_dir, source_dirs, replace):
  real = os.path.realpath(output_dir.path)
  for source in source_dirs:
    if real == os.path.realpath(source):
      raise ValueError(f"`output_dir` {output_dir.path} is a source folder; choose a new folder")
  if not replace and output_dir.exists() and tf.io.gfile.listdir(output_dir.path):
    raise ValueError(f"`output_dir` {output_dir.path} exists and is not empty")


def average_weights(checkpoints, hparams):
  """A `Transformer` of `hparams` holding the element-wise mean of the checkpoints' weights.

  Args:
    checkpoints: list of checkpoint prefixes (at least one).
    hparams: the `HParams` they were trained with.

  Returns:
    The model; each weight keeps its dtype (the sum is float64).

  Raises:
    ValueError: a checkpoint does not fit the model (`restore_weights`).
  """
  model = Transformer.from_hparams(hparams)
  sums = dtypes = None
  for number, path in enumerate(checkpoints, 1):
    restore_weights(model, path)
    values = [w.numpy() for w in model.weights]
    dtypes = [v.dtype for v in values]
    values = [v.astype(np.float64) for v in values]
    sums = values if sums is None else [s + v for s, v in zip(sums, values)]
    print(f"read {path} ({number} of {len(checkpoints)})", file=sys.stderr)
  for weight, total, dtype in zip(model.weights, sums, dtypes):
    weight.assign((total / len(checkpoints)).astype(dtype))
  return model


def average_checkpoints(checkpoints, output_dir, model_dir=None, replace=False):
  """Averages the model weights of `checkpoints` into a new model dir.

  Args:
    checkpoints: list of checkpoint prefixes (at least one).
    output_dir: a `ModelDir`, new or empty, not a source folder; written staged
      (`ModelDir.write_dir`), so it is complete or untouched.
    model_dir: the `ModelDir` whose hparams.json / vocab.model / flags.json are taken
      (default: the folder of the first checkpoint).
    replace: an existing `output_dir` is replaced (train's `averaged/`) instead of refused.

  Returns:
    (path of the written checkpoint `{output_dir}/ckpt-{step of the newest}`,
     the averaged `Transformer`).

  Raises:
    ValueError: no checkpoints, a bad output_dir, a checkpoint that does not
      fit the model of hparams.json.
    FileNotFoundError: a checkpoint (or one not listed in its folder's `checkpoint` state
      file yet: `model_dir.check_listed`) or hparams.json is missing.
  """
  if not checkpoints:
    raise ValueError("no checkpoints to average")
  model_dir = ModelDir(model_dir or os.path.dirname(checkpoints[0]))
  output_dir = ModelDir(output_dir)
  _check_output_dir(output_dir, {model_dir.path} | {os.path.dirname(p) for p in checkpoints},
                    replace)
  for path in checkpoints:
    model_dir_lib.check_listed(path)  # complete: not one still being written
  hparams = model_dir.read_hparams()
  model = average_weights(checkpoints, hparams)
  step = max(checkpoint_step(p) for p in checkpoints)
  info = {"checkpoints": [model_dir_lib.absolute(p) for p in checkpoints], "step": step}
  output_dir.write_dir(lambda staging: staging.write_weights(
      model, step, model_dir, model_dir_lib.AVERAGED_INFO_FILE, info))
  return output_dir.latest_checkpoint(), model
