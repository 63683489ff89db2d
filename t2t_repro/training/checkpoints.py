"""Checkpoint files written by training: leftovers of interrupted writes, sizes.

Restoring a model's weights: `t2t_repro.model.weights`; writing a model dir's files:
`t2t_repro.model_dir.ModelDir`; loading a model dir for inference: `t2t_repro.decoding.loading`.
The checkpoints themselves are written by TensorFlow's `tf.train.CheckpointManager`
(`training.trainer`); the leftovers removed here are local files.
"""

import glob
import os
import shutil

from t2t_repro import model_dir as model_dir_lib


def partial_checkpoints(model_dir):
  """Leftovers of interrupted checkpoint writes: `ckpt-N_temp*` files and folders
  (TensorFlow writes `{prefix}_temp/part-*` and renames them when done)."""
  return sorted(glob.glob(os.path.join(glob.escape(model_dir),
                                       f"{model_dir_lib.CHECKPOINT_PREFIX}-*_temp*")))


def remove_partial_checkpoints(model_dir):
  """Deletes `partial_checkpoints(model_dir)`. Returns (paths removed, bytes freed)."""
  paths, freed = partial_checkpoints(model_dir), 0
  for path in paths:
    if os.path.isdir(path):
      freed += sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
      shutil.rmtree(path, ignore_errors=True)
    else:
      freed += os.path.getsize(path)
      os.remove(path)
  return paths, freed


def checkpoint_bytes(checkpoint_path):
  """Bytes on disk of one checkpoint (`{prefix}.index` + `{prefix}.data-*`), 0 if absent."""
  return sum(os.path.getsize(p) for p in glob.glob(glob.escape(checkpoint_path) + ".*"))
