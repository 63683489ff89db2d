"""A model's weights restored from a checkpoint, every weight checked.

Checkpoints are `tf.train.Checkpoint(model=..., optimizer=..., [step=...])` in a model dir
(layout and writing: `t2t_repro.model_dir.ModelDir`, e.g. `write_weights`). Used by decoding
(`decoding.loading`), averaging and --init_from (`training`); the training-side checkpoint
files (disk full, leftovers of interrupted writes) are `training.checkpoints`.
"""

import contextlib
import gc
import re

import tensorflow as tf

from t2t_repro import errors

# TensorFlow's text of a restored value whose shape differs from the variable's.
_SHAPES = re.compile(r"incompatible tensor with shape (?P<there>\(.*?\)) when attempting to "
                     r"restore variable with shape (?P<here>\(.*?\)) and name (?P<name>[^\s:]+)")


def unreadable_checkpoint(path, error):
  """The one-line `errors.DataError` of a checkpoint TensorFlow could not read.

  Args:
    path: the checkpoint prefix.
    error: the `tf.errors.OpError` of the read, not a shape mismatch (InvalidArgumentError:
      a checkpoint of another model, `mismatch`), or the IndexError ("Read less bytes than
      requested") of a .data file shorter than its .index says.

  Returns:
    "checkpoint P is unreadable (...)" for a refused read, "checkpoint P is incomplete (...)"
    (a `MissingDataError`) for a missing file, "checkpoint P is corrupt (...)" otherwise: a
    truncated or damaged .index ("not an sstable (bad magic number)") or .data file (a
    short one: "Read less bytes than requested"; a garbled one: a checksum that does not
    match).
  """
  reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
  if isinstance(error, tf.errors.PermissionDeniedError):
    return errors.DataError(f"checkpoint {path} is unreadable ({reason})")
  if isinstance(error, tf.errors.NotFoundError):
    return errors.MissingDataError(f"checkpoint {path} is incomplete ({reason})")
  return errors.DataError(f"checkpoint {path} is corrupt ({reason})")


def check_readable(path):
  """Reads every tensor of the checkpoint `path` (e.g. a SavedModel's `variables/variables`);
  nothing when it has no .index file.

  Raises:
    errors.DataError: a tensor cannot be read (`unreadable_checkpoint`: corrupt, incomplete,
      unreadable).
  """
  if not tf.io.gfile.exists(f"{path}.index"):
    return
  try:
    reader = tf.train.load_checkpoint(path)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, IndexError) as e:
    raise unreadable_checkpoint(path, e) from None


class CheckpointMismatch(errors.DataError):
  """A checkpoint of another model: a tensor's shape differs from the model's (hparams.json of
  another model beside the checkpoint). A data error; `--init_from` reports it as a usage
  error."""


def mismatch(path, error):
  """The one-line `CheckpointMismatch` of a restore that met a tensor of another shape:
  "checkpoint P does not fit this model: NAME has shape (1000, 32) there, (1000, 64) here".

  Args:
    path: the checkpoint prefix.
    error: the ValueError or `tf.errors.InvalidArgumentError` of the restore; the first tensor
      whose shape differs is the one it names.
  """
  return CheckpointMismatch(f"checkpoint {path} does not fit this model: {shape_difference(error)}")


def shape_difference(error):
  """The first tensor whose shape differs, from TensorFlow's error of a restore: "NAME has
  shape (1000, 32) there, (1000, 64) here" (else the error's first line)."""
  found = _SHAPES.search(str(error))
  return (f"{found['name']} has shape {found['there']} there, {found['here']} here" if found
          else str(error).strip().splitlines()[0][:300])


@contextlib.contextmanager
def quiet_restore():
  """TensorFlow's logger at ERROR inside the block, and the objects of a failed or partial
  restore collected before it ends: they otherwise log one warning per value not restored
  ("Value in checkpoint could not be found in the restored object", 130 lines for a model's
  optimizer slots) when they are garbage-collected. Raise the block's error after it ends."""
  logger = tf.get_logger()
  level = logger.level
  logger.setLevel("ERROR")
  try:
    yield
  finally:
    gc.collect()
    logger.setLevel(level)


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
    CheckpointMismatch (a ValueError): a tensor's shape differs from the model's (other
      hparams); names the first (`mismatch`).
    ValueError: some weights are not in the checkpoint (or are NaN there).
    errors.DataError: the checkpoint's files are corrupt (truncated, short or garbled),
      incomplete or unreadable (`unreadable_checkpoint`).
  """
  for weight in model.weights:
    weight.assign(tf.fill(weight.shape, float("nan")))
  failure = None
  with quiet_restore():
    try:
      tf.train.Checkpoint(model=model).restore(checkpoint_path).expect_partial()
    except (ValueError, tf.errors.InvalidArgumentError) as e:
      failure = mismatch(checkpoint_path, e)
    except (tf.errors.OpError, IndexError) as e:
      failure = unreadable_checkpoint(checkpoint_path, e)
  if failure is not None:
    raise failure
  missing = _unrestored(model)
  if missing:
    raise ValueError(f"checkpoint {checkpoint_path} lacks {len(missing)} of the model's "
                     f"{len(model.weights)} weights (or holds NaN), e.g. {missing[0]}")

