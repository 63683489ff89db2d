"""A model's weights on disk: restoring them checked, writing them as a complete model dir.

Model directory layout (docs/DESIGN.md): `hparams.json` (HParams.to_json()),
`vocab.model` (sentencepiece), checkpoints `ckpt-N.index` / `ckpt-N.data-*` and the
`checkpoint` state file of a `tf.train.CheckpointManager` over
`tf.train.Checkpoint(model=..., optimizer=..., [step=...])`. Used by decoding
(`decoding.loading`), averaging and the best checkpoint (`training`); the training-side
checkpoint files (disk full, leftovers of interrupted writes) are `training.checkpoints`.
"""

import os

import tensorflow as tf

from t2t_repro import fileio
from t2t_repro import model_dir as model_dir_lib


def _unrestored(model):
  return [w.path for w in model.weights if bool(tf.reduce_any(tf.math.is_nan(w)))]


def restore_weights(model, checkpoint_path):
  """Restores a model's weights (not the optimizer) and checks that every one was.

  Every weight is first set to NaN, then `tf.train.Checkpoint(model=model)` reads
  the checkpoint; a weight still NaN was not in it (e.g. a layer unreachable by the
  checkpoint graph) and raises instead of silently keeping a random value.

  Args:
    model: a built `Transformer`.
    checkpoint_path: checkpoint prefix, e.g. `{model_dir}/ckpt-1000`.

  Raises:
    ValueError: shapes differ from the checkpoint's (other hparams), or some
      weights are not in the checkpoint (or are NaN there).
  """
  for weight in model.weights:
    weight.assign(tf.fill(weight.shape, float("nan")))
  try:
    tf.train.Checkpoint(model=model).restore(checkpoint_path).expect_partial()
  except (ValueError, tf.errors.InvalidArgumentError) as e:
    raise ValueError(f"checkpoint {checkpoint_path} does not fit this model: {e}") from None
  missing = _unrestored(model)
  if missing:
    raise ValueError(f"checkpoint {checkpoint_path} lacks {len(missing)} of the model's "
                     f"{len(model.weights)} weights (or holds NaN), e.g. {missing[0]}")




def write_weights_model_dir(model, step, source_dir, output_dir, info_name, info):
  """Writes `output_dir` as a complete model dir holding `model`'s weights (no optimizer).

  The checkpoint `ckpt-{step}` is written by a `tf.train.CheckpointManager` (max 1
  kept), whose `checkpoint` index is replaced atomically after the files are
  complete; then `model_dir.FILES` are copied from `source_dir` and `info` is
  written to `{output_dir}/{info_name}` (atomically). Used for averaged models and
  the best checkpoint (`model_dir/best/`).

  Args:
    model: a built `Transformer` (its variables may be distributed).
    step: int, the global step recorded in the checkpoint (`step` variable).
    source_dir: the model dir the files are copied from.
    output_dir: the folder written (created).
    info_name, info: a JSON file describing the weights, e.g. "best.json".

  Returns:
    The checkpoint prefix written, `{output_dir}/ckpt-{step}`.
  """
  os.makedirs(output_dir, exist_ok=True)
  checkpoint = tf.train.Checkpoint(model=model, step=tf.Variable(step, dtype=tf.int64))
  path = tf.train.CheckpointManager(checkpoint, output_dir, max_to_keep=1).save(
      checkpoint_number=step)
  for name in model_dir_lib.FILES:
    if os.path.exists(os.path.join(source_dir, name)):
      with open(os.path.join(source_dir, name), "rb") as f:
        fileio.write_atomic(os.path.join(output_dir, name), f.read())
  fileio.write_json(os.path.join(output_dir, info_name), info)
  return path
