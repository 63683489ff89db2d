"""A model directory: the one place that knows its layout.

    {path}/hparams.json        the run's `HParams` (`HParams.to_dict`)
    {path}/flags.json          the training settings (`TrainConfig` as a dict), "time", "replicas"
    {path}/vocab.model         the sentencepiece model (shared source/target vocabulary)
    {path}/corpus.*.json       validation records of the training text (`data.corpus`)
    {path}/checkpoint, ckpt-N.index, ckpt-N.data-*   TensorFlow checkpoints (CheckpointManager)
    {path}/best/, averaged/, ema/                     complete model dirs of their own
                                                      (`BEST_DIR`, `AVERAGED_DIR`, `EMA_DIR`)

`FILES` (hparams.json, vocab.model, flags.json) and a checkpoint make a folder a model dir
for translate, export, validate, score and averaging. Paths may be local or any filesystem
TensorFlow's `tf.io.gfile` reads (gs://...). Writing a model dir's files is the training's
(`training.preflight.write_model_dir`, `model.weights.write_weights_model_dir`); they take
the names from here.
"""

import json
import os

from t2t_repro import errors
from t2t_repro.hparams import HParams

HPARAMS_FILE = "hparams.json"
FLAGS_FILE = "flags.json"
VOCAB_FILE = "vocab.model"
FILES = (HPARAMS_FILE, VOCAB_FILE, FLAGS_FILE)  # besides the checkpoints
BEST_DIR = "best"
AVERAGED_DIR = "averaged"
EMA_DIR = "ema"


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


class ModelDir:
  """The files of one model directory.

  Attributes:
    path: the folder (str), as given.
  """

  def __init__(self, path):
    self.path = str(path)

  def __repr__(self):
    return f"ModelDir({self.path!r})"

  def file(self, name):
    """The path of `name` inside the folder."""
    return os.path.join(self.path, name)

  @property
  def hparams_path(self):
    return self.file(HPARAMS_FILE)

  @property
  def flags_path(self):
    return self.file(FLAGS_FILE)

  @property
  def vocab_path(self):
    return self.file(VOCAB_FILE)

  def subdir(self, name):
    """The model dir `name` inside this one (`BEST_DIR`, `AVERAGED_DIR`, `EMA_DIR`)."""
    return ModelDir(self.file(name))

  def has_hparams(self):
    return _gfile().exists(self.hparams_path)

  def check_files(self):
    """Raises errors.MissingDataError naming the first of hparams.json, vocab.model that is
    missing ("is {path} a model dir?")."""
    for path in (self.hparams_path, self.vocab_path):
      if not _gfile().exists(path):
        raise errors.MissingDataError(f"{path} does not exist (is {self.path} a model dir?)")

  def read_hparams(self):
    """The `HParams` of hparams.json.

    Raises:
      errors.MissingDataError: hparams.json is missing ("is {path} a model dir?").
      errors.DataError: hparams.json is not a JSON object.
      hparams.HParamsError: an unknown key or a bad value (names the file).
    """
    return HParams.from_dict(self._read_json(self.hparams_path), origin=self.hparams_path)

  def read_flags(self):
    """The training settings of flags.json as a dict; {} when there is none (a model dir
    written by averaging a checkpoint list, or by another tool)."""
    if not _gfile().exists(self.flags_path):
      return {}
    return self._read_json(self.flags_path)

  def _read_json(self, path):
    """The JSON object in `path` (errors.MissingDataError, errors.DataError)."""
    if not _gfile().exists(path):
      raise errors.MissingDataError(f"{path} does not exist (is {self.path} a model dir?)")
    with _gfile().GFile(path) as f:
      text = f.read()
    try:
      values = json.loads(text)
    except json.JSONDecodeError as e:
      raise errors.DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(values, dict):
      raise errors.DataError(f"{path}: expected a JSON object")
    return values

  def latest_checkpoint(self):
    """The prefix of the latest checkpoint its `checkpoint` state file lists, or None."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf.train.latest_checkpoint(self.path)

  def resolve_checkpoint(self, checkpoint_path=None):
    """The checkpoint prefix to load: `checkpoint_path` if it exists, else (None) the latest.

    Raises:
      errors.MissingDataError: no such checkpoint, or no checkpoint in the folder.
    """
    if checkpoint_path is None:
      checkpoint_path = self.latest_checkpoint()
      if checkpoint_path is None:
        raise errors.MissingDataError(f"no checkpoint in {self.path} (no 'checkpoint' state file)")
    elif not _gfile().exists(f"{checkpoint_path}.index"):
      raise errors.MissingDataError(f"checkpoint {checkpoint_path} does not exist (no .index file)")
    return checkpoint_path
