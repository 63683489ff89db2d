"""A model directory: the one place that knows its layout, and its one writer.

    {path}/hparams.json        the run's `HParams` (`HParams.to_dict`)
    {path}/flags.json          the training settings (`TrainConfig` as a dict), "time", "replicas"
    {path}/vocab.model         the sentencepiece model (shared source/target vocabulary)
    {path}/corpus.*.json       validation records of the training text (`data.corpus`)
    {path}/checkpoint, ckpt-N.index, ckpt-N.data-*   TensorFlow checkpoints (CheckpointManager)
    {parent}/.{name}.lock      the lock its one writer holds (`writer_lock`), beside it
    {path}/train/, dev/        TensorBoard events of training and of dev evaluation
    {path}/vocab.tsv, projector_config.pbtxt  the Projector's metadata, also in train/ and dev/
                                              (`training.summaries`)
    {path}/early_stopping.json the patience counter (`training.best`)
    {path}/best/, averaged/, ema/                     complete model dirs of their own
                                                      (`BEST_DIR`, `AVERAGED_DIR`, `EMA_DIR`)
                                                      with best.json / averaged.json / ema.json
    {path}/data/, decode/, parse_scores.json          the parsing command's data, outputs, scores

Each name is one constant here; no other module spells it. `FILES` (hparams.json, vocab.model,
flags.json) and a checkpoint make a folder a model dir for translate, export, validate, score
and averaging.

Writes are staged: a file goes to a temporary sibling and is renamed over its name
(`write_bytes`, `write_json`, `update_json`, `copy_file`); a whole folder (a new model dir,
best/, averaged/, ema/) is built in a temporary sibling folder and renamed into place
(`write_dir`). So a failed write leaves the folder as it was, and a reader never sees half a
file. Paths may be local or any filesystem TensorFlow's `tf.io.gfile` knows (gs://...):
every read and write goes through it. On a local disk each rename is atomic; on an object
store (gs://) a rename is a copy, so a failure during the rename itself may leave part of a
folder behind (nothing before it does).
"""

import json
import os
import posixpath

from t2t_repro import errors, staging
from t2t_repro.config.hparams import HParams

HPARAMS_FILE = "hparams.json"
FLAGS_FILE = "flags.json"
VOCAB_FILE = "vocab.model"
FILES = (HPARAMS_FILE, VOCAB_FILE, FLAGS_FILE)  # besides the checkpoints
CHECKPOINT_STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's list of checkpoints
CHECKPOINT_PREFIX = "ckpt"  # checkpoints are {CHECKPOINT_PREFIX}-{step}.index / .data-*
TRAIN_EVENTS_DIR = "train"
DEV_EVENTS_DIR = "dev"
PROJECTOR_VOCAB_FILE = "vocab.tsv"  # TensorBoard Projector's metadata: one piece per embedding row
PROJECTOR_FILE = "projector_config.pbtxt"  # the Projector's config, the name TensorBoard reads
EARLY_STOPPING_FILE = "early_stopping.json"
BEST_DIR = "best"
AVERAGED_DIR = "averaged"
EMA_DIR = "ema"
BEST_INFO_FILE = "best.json"
AVERAGED_INFO_FILE = "averaged.json"
EMA_INFO_FILE = "ema.json"
DECODING_FILE = "decoding.json"  # beam_size and alpha chosen on dev (`decoding.tuning`)
PARSE_DATA_DIR = "data"
PARSE_DECODE_DIR = "decode"
PARSE_SCORES_FILE = "parse_scores.json"
PARSE_PREDICTIONS_FILE = "{split}.pred.tgt"  # in PARSE_DECODE_DIR: model outputs
PARSE_TREES_FILE = "{split}.pred.tree"  # in PARSE_DECODE_DIR: delinearized trees
PARSE_ALPHA_DIR = "alpha_{alpha:g}"  # in PARSE_DECODE_DIR: the dev outputs of one alpha


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


def _is_url(path):
  return "://" in path


def _join(folder, name):
  """`folder/name`; a URL (gs://...) always with "/"."""
  return posixpath.join(folder, name) if _is_url(folder) else os.path.join(folder, name)


def absolute(path):
  """`path` made absolute; a URL (gs://...) is one already."""
  return path if _is_url(path) else os.path.abspath(path)


def checkpoint_exists(prefix):
  """True when the checkpoint `prefix` (e.g. `{model_dir}/ckpt-1000`) has its .index file."""
  return _gfile().exists(f"{prefix}.index")


def check_listed(prefix):
  """Raises errors.MissingDataError unless the checkpoint `prefix` is complete for a reader:
  it has its .index file and its folder's `checkpoint` state file lists it (a writer lists a
  checkpoint once all its files are written; a folder without a state file, checkpoints
  copied by hand, lists every checkpoint). Readers take no lock (`writer_lock`): this is
  what keeps them from a checkpoint still being written."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if not checkpoint_exists(prefix):
    raise errors.MissingDataError(f"checkpoint {prefix} does not exist (no .index file)")
  paths = posixpath if _is_url(prefix) else os.path
  folder, name = paths.split(prefix)
  state = tf.train.get_checkpoint_state(folder or ".")
  if state is None:
    return
  listed = (state.model_checkpoint_path, *state.all_model_checkpoint_paths)
  if name not in {paths.basename(p) for p in listed}:
    raise errors.MissingDataError(
        f"checkpoint {prefix} is not listed in {_join(folder or '.', CHECKPOINT_STATE_FILE)} "
        "(still being written, or dropped from the list); give a listed one")


class ModelDir:
  """The files of one model directory: reading them, and writing them staged.

  Args:
    path: the folder: a str (local, or a URL such as gs://bucket/run), a path object, or a
      `ModelDir` (the same folder).

  Attributes:
    path: the folder (str), as given.
  """

  def __init__(self, path):
    self.path = path.path if isinstance(path, ModelDir) else str(path)

  def __repr__(self):
    return f"ModelDir({self.path!r})"

  def __str__(self):
    """The path, so that messages name the folder as the user gave it."""
    return self.path

  def __eq__(self, other):
    return isinstance(other, ModelDir) and self.path == other.path

  def __hash__(self):
    return hash(self.path)

  def file(self, name):
    """The path of `name` inside the folder."""
    return _join(self.path, name)

  @property
  def hparams_path(self):
    return self.file(HPARAMS_FILE)

  @property
  def vocab_path(self):
    return self.file(VOCAB_FILE)

  def subdir(self, name):
    """The model dir `name` inside this one (`BEST_DIR`, `AVERAGED_DIR`, `EMA_DIR`)."""
    return ModelDir(self.file(name))

  # Reading.

  def exists(self):
    """True when the folder exists. A local path is checked with `os.path` (no TensorFlow
    import: the commands' flag checks use this), a URL with `tf.io.gfile`."""
    return _gfile().isdir(self.path) if _is_url(self.path) else os.path.isdir(self.path)

  def check_readable(self):
    """Raises errors.DataError "{path}: the folder is unreadable (permission denied)" when the
    folder exists but its files cannot be listed or read (a local folder without the read or
    search permission; a file missing from it would otherwise look absent)."""
    if not _is_url(self.path) and os.path.isdir(self.path) \
        and not os.access(self.path, os.R_OK | os.X_OK):
      raise errors.DataError(f"{self.path}: the folder is unreadable (permission denied)")

  def has(self, name):
    """True when `name` exists inside the folder (errors.DataError: the folder is unreadable,
    `check_readable`)."""
    self.check_readable()
    return _gfile().exists(self.file(name))

  def has_hparams(self):
    return self.has(HPARAMS_FILE)

  def glob(self, pattern):
    """The paths inside the folder matching `pattern` (e.g.
    `config.data.CORPUS_RECORD.format(key="*")`)."""
    return sorted(_gfile().glob(self.file(pattern)))

  def read_bytes(self, name):
    """The bytes of `name` (errors.MissingDataError when it is missing, errors.DataError when
    the folder is unreadable)."""
    path = self.file(name)
    if not self.has(name):
      raise errors.MissingDataError(f"{path} does not exist (is {self.path} a model dir?)")
    with _gfile().GFile(path, "rb") as f:
      return f.read()

  def check_files(self):
    """Raises errors.MissingDataError naming the first of hparams.json, vocab.model that is
    missing ("is {path} a model dir?")."""
    self.check_readable()
    for path in (self.hparams_path, self.vocab_path):
      if not _gfile().exists(path):
        raise errors.MissingDataError(f"{path} does not exist (is {self.path} a model dir?)")

  def read_hparams(self):
    """The `HParams` of hparams.json.

    Raises:
      errors.MissingDataError: hparams.json is missing ("is {path} a model dir?").
      errors.DataError: hparams.json is not a JSON object, or holds an unknown key or a bad
        value (names the file): the file is wrong, not a flag.
    """
    try:
      return HParams.from_dict(self.read_json(HPARAMS_FILE), origin=self.hparams_path)
    except errors.UsageError as e:  # hparams.HParamsError
      raise errors.DataError(errors.marked(e)) from None

  def read_flags(self):
    """The training settings of flags.json as a dict; {} when there is none (a model dir
    written by averaging a checkpoint list, or by another tool)."""
    return self.read_json(FLAGS_FILE, required=False) or {}

  def read_json(self, name, required=True):
    """The JSON object in the file `name`.

    Returns:
      a dict; None when the file is missing and not `required`.

    Raises:
      errors.MissingDataError: the file is missing and `required`.
      errors.DataError: not JSON, or not a JSON object (names the file and line).
    """
    if not required and not self.has(name):
      return None
    path, text = self.file(name), self.read_bytes(name).decode("utf-8")
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

  def checkpoint_paths(self):
    """The checkpoint prefixes the `checkpoint` state file lists, oldest first; None without
    a state file."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    state = tf.train.get_checkpoint_state(self.path)
    return None if state is None else list(state.all_model_checkpoint_paths)

  def resolve_checkpoint(self, checkpoint_path=None):
    """The checkpoint prefix to load: `checkpoint_path` if it exists and is complete
    (`check_listed`), else (None) the latest the `checkpoint` state file lists.

    Raises:
      errors.MissingDataError: no such checkpoint, one not listed yet, or no checkpoint in
        the folder.
    """
    if checkpoint_path is None:
      checkpoint_path = self.latest_checkpoint()
      if checkpoint_path is None:
        raise errors.MissingDataError(
            f"no checkpoint in {self.path} (no '{CHECKPOINT_STATE_FILE}' state file)")
    else:
      check_listed(checkpoint_path)
    return checkpoint_path

  # Writing: each file through a temporary sibling and a rename, each folder the same.

  def write_bytes(self, name, data):
    """Writes `data` (bytes, or str as UTF-8) to the file `name`, staged: into a temporary
    sibling (`staging.file_name`), then renamed over `name`. After an error the old file (or
    none) is left and the temporary one removed. Creates the folder; removes the leftovers of
    killed earlier writes of `name` (`staging.remove_leftovers`).

    Raises:
      errors.WriteError (errors.DiskFullError): the device is full or the write is refused
        (`errors.writing`: one line naming the file)."""
    gfile, path = _gfile(), self.file(name)
    folder, base = (posixpath if _is_url(path) else os.path).split(path)
    with errors.writing(path):
      gfile.makedirs(folder)
      staging.remove_leftovers(folder, base)
      tmp = _join(folder, staging.file_name(base))
      try:
        with gfile.GFile(tmp, "wb") as f:
          f.write(data.encode("utf-8") if isinstance(data, str) else data)
        gfile.rename(tmp, path, overwrite=True)
      finally:
        if gfile.exists(tmp):
          gfile.remove(tmp)

  def write_json(self, name, values):
    """Writes `values` as indented, key-sorted JSON to `name` (`write_bytes`); a value that
    is not JSON fails before anything is written."""
    self.write_bytes(name, json.dumps(values, indent=2, sort_keys=True) + "\n")

  def update_json(self, name, values):
    """Merges the dict `values` into the JSON object of `name` (created if absent), staged.
    Returns the merged dict."""
    merged = (self.read_json(name, required=False) or {}) | values
    self.write_json(name, merged)
    return merged

  def copy_file(self, source_path, name):
    """Copies the file `source_path` (any gfile path) to `name` (`write_bytes`)."""
    with _gfile().GFile(source_path, "rb") as f:
      self.write_bytes(name, f.read())

  def write_dir(self, write):
    """Builds this folder anew: calls `write(staging)` with a `ModelDir` on a new temporary
    sibling folder, then puts that folder in this one's place by renames (an existing folder
    is moved aside, then deleted). So the folder holds its old content, complete, until the
    new one is. After an error in `write` the staging folder is deleted and the folder is
    untouched. Leftovers of earlier writes of this folder that were killed are removed first
    (`staging.remove_leftovers`).

    Raises:
      errors.WriteError (errors.DiskFullError): the device is full or the write is refused
        (`errors.writing`: one line naming this folder).

    Returns:
      what `write` returned.
    """
    gfile = _gfile()
    path = self.path.rstrip("/")
    parent, base = self._parent_and_name()
    with errors.writing(self.path):
      staging.remove_leftovers(parent or ".", base)
      new, old = (_join(parent, name) for name in staging.folder_names(base))
      try:
        gfile.makedirs(new)
        written = write(ModelDir(new))
      except BaseException:
        if gfile.exists(new):
          gfile.rmtree(new)
        raise
      if gfile.isdir(path):
        gfile.rename(path, old)
        gfile.rename(new, path)
        gfile.rmtree(old)
      else:
        gfile.rename(new, path)
    return written

  def _parent_and_name(self):
    path = self.path.rstrip("/")
    return (posixpath if _is_url(path) else os.path).split(path)

  def remove_leftovers(self):
    """Removes the leftovers of killed staged writes (`staging.remove_leftovers`) inside this
    folder (best/, ema/, averaged/ and files) and beside it (of this folder itself): what
    `train` does on resume. Logs nothing; returns (paths, bytes freed)."""
    parent, base = self._parent_and_name()
    inside, freed_inside = staging.remove_leftovers(self.path, warn=False)
    beside, freed_beside = staging.remove_leftovers(parent or ".", base, warn=False)
    return inside + beside, freed_inside + freed_beside

  def write_weights(self, model, step, source, info_name, info):
    """Writes this folder as a complete model dir of `model`'s weights (no optimizer): the
    checkpoint `ckpt-{step}` (a `tf.train.CheckpointManager`, max 1 kept; its `checkpoint`
    state file is written after the checkpoint is complete), `FILES` copied from `source`,
    and `info` as the JSON file `info_name` (e.g. `BEST_INFO_FILE`). Averaged models, best/
    and ema/ are written this way, each inside `write_dir`.

    Args:
      model: a built `Transformer` (its variables may be distributed).
      step: int, the global step recorded in the checkpoint (`step` variable).
      source: the `ModelDir` the files are copied from.
      info_name, info: the JSON file describing the weights and its dict.

    Returns:
      The checkpoint prefix written, `{path}/ckpt-{step}`.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    _gfile().makedirs(self.path)
    checkpoint = tf.train.Checkpoint(model=model, step=tf.Variable(step, dtype=tf.int64))
    path = tf.train.CheckpointManager(checkpoint, self.path, max_to_keep=1,
                                      checkpoint_name=CHECKPOINT_PREFIX).save(
                                          checkpoint_number=step)
    for name in FILES:
      if source.has(name):
        self.copy_file(source.file(name), name)
    self.write_json(info_name, info)
    return path
