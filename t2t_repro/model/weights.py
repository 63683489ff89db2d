"""A model's weights restored from a checkpoint, every weight checked.

Checkpoints are `tf.train.Checkpoint(model=..., optimizer=..., [step=...])` in a model dir
(layout and writing: `t2t_repro.model_dir.ModelDir`, e.g. `write_weights`). Used by decoding
(`decoding.loading`), averaging and --init_from (`training`); the training-side checkpoint
files (disk full, leftovers of interrupted writes) are `training.checkpoints`.
"""

import tensorflow as tf

from t2t_repro import errors


def unreadable_checkpoint(path, error):
  """The one-line `errors.DataError` of a checkpoint TensorFlow could not read.

  Args:
    path: the checkpoint prefix.
    error: the `tf.errors.OpError` of the read, not a shape mismatch (InvalidArgumentError:
      a checkpoint of another model, which callers report themselves).

  Returns:
    "checkpoint P is unreadable (...)" for a refused read, "checkpoint P is incomplete (...)"
    (a `MissingDataError`) for a missing file, "checkpoint P is corrupt (...)" otherwise: a
    truncated or damaged .index ("not an sstable (bad magic number)") or .data file.
  """
  reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
  if isinstance(error, tf.errors.PermissionDeniedError):
    return errors.DataError(f"checkpoint {path} is unreadable ({reason})")
  if isinstance(error, tf.errors.NotFoundError):
    return errors.MissingDataError(f"checkpoint {path} is incomplete ({reason})")
  return errors.DataError(f"checkpoint {path} is corrupt ({reason})")


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
    errors.DataError: the checkpoint's files are corrupt, incomplete or unreadable
      (`unreadable_checkpoint`).
  """
  for weight in model.weights:
    weight.assign(tf.fill(weight.shape, float("nan")))
  try:
    tf.train.Checkpoint(model=model).restore(checkpoint_path).expect_partial()
  except (ValueError, tf.errors.InvalidArgumentError) as e:
    raise ValueError(f"checkpoint {checkpoint_path} does not fit this model: {e}") from None
  except tf.errors.OpError as e:
    raise unreadable_checkpoint(checkpoint_path, e) from None
  missing = _unrestored(model)
  if missing:
    raise ValueError(f"checkpoint {checkpoint_path} lacks {len(missing)} of the model's "
                     f"{len(model.weights)} weights (or holds NaN), e.g. {missing[0]}")

