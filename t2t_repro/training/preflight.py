"""Everything a training run checks and prepares before its first write to the model dir
(docs/RELIABILITY.md): the model dir, hparams, data files, a resume's hparams and update
settings, the vocabulary; then the staged write of the model dir's files (`ModelDir`).
`TrainConfig` checks its own fields and their combinations.

The messages name the `TrainConfig` fields between backticks (`errors.SETTING_MARK`): the
train command writes them as its flags.
"""

import dataclasses
import os
import time

from absl import logging

from t2t_repro import errors, staging
from t2t_repro.config import data as data_config
from t2t_repro.config import hparams as hparams_lib
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.model_dir import ModelDir

# Settings that define one optimizer update; a resume that changes them is refused.
UPDATE_SETTINGS = ("accum_steps", "batch_tokens", "replicas", "mixed_precision", "ema_decay")


def validate(config):
  """Checks what `TrainConfig` cannot check itself (its fields and their combinations it
  checks on construction): the model dir, the hparams and the problem; reads and writes
  nothing.

  Returns:
    (HParams, data.problems.Problem).

  Raises:
    errors.UsageError: the message names the settings.
  """
  from t2t_repro.data import problems  # pylint: disable=import-outside-toplevel
  if not config.model_dir:
    raise errors.UsageError("`model_dir` is required")
  if os.path.exists(config.model_dir) and not os.path.isdir(config.model_dir):
    raise errors.UsageError(f"`model_dir`={config.model_dir} is a file, not a folder")
  try:
    hp = hparams_lib.get_hparams(config.hparams, config.hparams_override,
                                 train_steps=config.train_steps, batch_tokens=config.batch_tokens,
                                 average_last=config.average_last)
  except ValueError as e:
    message = errors.marked(e)
    raise errors.UsageError(message if message.startswith("`hparams") else
                            f"`hparams`={config.hparams} `hparams_override`="
                            f"{config.hparams_override}: {message}") from None
  if hp.batch_tokens < hp.max_length:
    raise errors.UsageError(f"`batch_tokens`={hp.batch_tokens} is below max_length="
                            f"{hp.max_length}: one example of the longest bucket must fit a batch")
  try:
    problem = problems.get_problem(config.problem, config.data_dir, **config.split_files())
  except ValueError as e:
    raise errors.UsageError(f"`problem`={config.problem}: {errors.marked(e)}") from None
  return hp, problem


def check_data_files(config, problem):
  """The files of the splits this run reads exist, are files, and are not all empty.

  Raises:
    errors.DataError: the message names the files.
  """
  splits = (["train"] + ["dev"] * bool(config.eval_every_steps)
            + ["test"] * bool(config.test_bleu_lines))
  for split in splits:
    paths = [p for pair in problem.file_pairs(split) for p in pair]
    for path in paths:
      if os.path.isdir(path):
        raise errors.DataError(f"{path} is a directory, not a text file ({split} split of "
                            f"problem {problem.name})")
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
      if split == "train" and problem.tfds_name and "train" not in problem.overridden:
        continue  # read from TFDS
      problem.text_pairs(split)  # raises MissingDataError with how to get the files
    if all(os.path.getsize(p) == 0 for p in paths):
      raise errors.DataError(f"the {split} files are empty: {', '.join(paths)}")


def check_model_dir(model_dir, hp):
  """On resume the hparams must equal the saved hparams.json of `model_dir` (a `ModelDir`;
  train_steps and average_last may change; batch_tokens is an update setting, see `check_update_settings`).

  Raises:
    errors.UsageError: naming the differing hparams.
  """
  files = ModelDir(model_dir)
  if not files.has_hparams():
    return
  saved = files.read_hparams().to_dict()
  changed = sorted(k for k, v in hp.to_dict().items()
                   if saved[k] != v and k not in ("train_steps", "description", "batch_tokens",
                                                  "average_last"))
  if changed:
    diffs = ", ".join(f"{k}: saved {saved[k]!r} vs flags {hp.to_dict()[k]!r}" for k in changed)
    raise errors.UsageError(f"`model_dir`={model_dir} holds a run with other hparams ({diffs}); "
                            "use a new `model_dir` or the same `hparams`/`hparams_override`")


def saved_update_settings(model_dir):
  """The `UPDATE_SETTINGS` a `ModelDir` was trained with, each read where it is written
  once: batch_tokens from hparams.json, the others from flags.json (of runs written
  before that, its "update" block); {} without flags.json (a new dir, an averaged one)."""
  files = ModelDir(model_dir)
  flags = files.read_flags()
  if not flags:
    return {}
  saved = {k: flags[k] for k in UPDATE_SETTINGS if k in flags and k != "batch_tokens"}
  if files.has_hparams():
    saved["batch_tokens"] = files.read_hparams().batch_tokens
  return saved | (flags.get("update") or {})


def check_update_settings(config, update):
  """Refuses (or, with --allow_update_change, logs) a resume that changes how an update
  is formed (`UPDATE_SETTINGS`, `saved_update_settings`).

  Returns:
    the names of the settings that differ (empty for a new run or an unchanged resume).

  Raises:
    errors.UsageError: a setting differs and --allow_update_change is not given.
  """
  model_dir = config.model_dir
  saved = saved_update_settings(model_dir)
  changed = [k for k in UPDATE_SETTINGS if k in saved and saved[k] != update[k]]
  if not changed:
    return []
  diffs = ", ".join(f"{k}: saved {saved[k]!r} vs now {update[k]!r}" for k in changed)
  if not config.allow_update_change:
    raise errors.UsageError(f"`model_dir`={model_dir} was trained with other update settings "
                            f"({diffs}); resuming would change the optimizer update. Use the "
                            "same settings, or `allow_update_change` to resume anyway")
  logging.warning("allow_update_change: resuming %s with changed update settings: %s",
                  model_dir, diffs)
  return changed


def restore_checked(trainer, model_dir):
  """Restores the latest checkpoint of `model_dir` (a `ModelDir`) into `trainer`, checked.

  Returns:
    the checkpoint path, or None (a new run).

  Raises:
    errors.UsageError: the checkpoint holds another model (even when hparams.json is
      missing), or a model's weights without optimizer state (a copy of best/, averaged/ or
      ema/: `init_from` starts a run from those).
    errors.DataError: the checkpoint's files cannot be read (`model.weights.
      unreadable_checkpoint`: corrupt, incomplete, unreadable); the message says how to
      resume from the checkpoint before it (`_resume_before`).
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from t2t_repro.model.weights import quiet_restore, shape_difference, unreadable_checkpoint
  from t2t_repro.training.trainer import checkpoint_children  # pylint: disable=import-outside-toplevel
  model_dir = ModelDir(model_dir)
  latest = model_dir.latest_checkpoint()
  failure = None
  with quiet_restore():
    try:
      if latest and "optimizer" not in checkpoint_children(latest):
        failure = errors.UsageError(
            f"`model_dir`={model_dir} holds a model's weights without optimizer state ({latest}, "
            "as best/, averaged/ and ema/ are written), which training cannot resume; to start "
            f"a run from them, give `init_from`={model_dir} and a new `model_dir`")
      else:
        return trainer.restore()
    except (ValueError, AssertionError, tf.errors.OpError, IndexError) as e:
      if isinstance(e, (tf.errors.OpError, IndexError)) \
          and not isinstance(e, tf.errors.InvalidArgumentError):
        failure = unreadable_checkpoint(latest, e)
        failure = type(failure)(f"{errors.marked(failure)}; {_resume_before(model_dir, latest)}")
      else:
        failure = errors.UsageError(
            f"`model_dir`={model_dir} holds checkpoints of another model ({shape_difference(e)}); "
            "use a new `model_dir` or the hparams it was trained with")
  raise failure


def _resume_before(model_dir, path):
  """How to resume from the checkpoint listed before `path` in the `checkpoint` state file of
  `model_dir` (or that there is none)."""
  state_file = model_dir.file(model_dir_lib.CHECKPOINT_STATE_FILE)
  names = [os.path.basename(p) for p in model_dir.checkpoint_paths() or []]
  name = os.path.basename(path)
  if name not in names or names.index(name) == 0:
    return f"no checkpoint is listed before it in {state_file}: train in a new `model_dir`"
  before = names[names.index(name) - 1]
  return (f"to resume from {before}, the one before it, move {path}.index and {path}.data-* away "
          f'and, in {state_file}, set model_checkpoint_path: "{before}" and remove the line of '
          f'"{name}"')


# HParams that decide the shapes of a model's weights: an --init_from source must match them.
SHAPE_HPARAMS = ("vocab_size", "num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v",
                 "norm_type", "position_encoding", "max_positions", "max_relative_position",
                 "lowercase")


def check_init_from(config, hp, problem):
  """The checkpoint and vocabulary an --init_from run starts from, checked before anything
  is written; the source is only read.

  Args:
    config: the `TrainConfig` (init_from: a model dir or a checkpoint prefix).
    hp: this run's `HParams`.
    problem: this run's problem (for the --vocab_dir check).

  Returns:
    (checkpoint prefix, the source's vocab.model path), or None without --init_from.

  Raises:
    errors.UsageError: no such model dir or checkpoint, another model shape, or a --vocab_dir
      whose vocabulary differs from the source's (each message names both).
  """
  if not config.init_from:
    return None
  from t2t_repro.data import vocab as vocab_lib  # pylint: disable=import-outside-toplevel
  source = config.init_from.rstrip("/")
  if ModelDir(source).exists():
    source_dir, checkpoint = source, None
  elif model_dir_lib.checkpoint_exists(source):
    source_dir, checkpoint = os.path.dirname(source), source
  else:
    raise errors.UsageError(f"`init_from`={config.init_from}: {source} is neither a model dir "
                            f"nor a checkpoint ({source}.index does not exist)")
  try:
    source_files = ModelDir(source_dir)
    source_files.check_files()
    checkpoint = source_files.resolve_checkpoint(checkpoint)
    saved = source_files.read_hparams()
  except (FileNotFoundError, ValueError) as e:
    raise errors.UsageError(f"`init_from`={config.init_from}: {e}") from None
  if model_dir_lib.absolute(source_dir) == model_dir_lib.absolute(config.model_dir):
    raise errors.UsageError(f"`init_from`={config.init_from} is `model_dir` itself: to "
                            "continue a run, rerun it without `init_from`")
  diffs = [f"{k}: {getattr(saved, k)!r} there vs {getattr(hp, k)!r} here" for k in SHAPE_HPARAMS
           if getattr(saved, k) != getattr(hp, k)]
  if diffs:
    raise errors.UsageError(f"`init_from`={config.init_from} is a model of another shape than "
                            f"`hparams`={config.hparams} `hparams_override`="
                            f"{config.hparams_override} ({'; '.join(diffs)}); give "
                            f"`hparams`={source_files.hparams_path}")
  vocab = source_files.vocab_path
  if config.vocab_dir:
    cached = vocab_lib.vocab_path(problem, hp.vocab_size, config.vocab_dir, lowercase=hp.lowercase)
    if os.path.exists(cached) and (_bytes(cached)
                                   != source_files.read_bytes(model_dir_lib.VOCAB_FILE)):
      raise errors.UsageError(f"`vocab_dir`={config.vocab_dir} holds another vocabulary "
                              f"({cached}) than `init_from`={config.init_from} ({vocab}); a "
                              "fine-tuned model keeps its source's: drop `vocab_dir` or point it "
                              "elsewhere")
  return checkpoint, vocab


def initialize_weights(trainer, checkpoint):
  """Loads the model weights of `checkpoint` into the trainer's model (not the optimizer:
  the run starts at step 0 with fresh Adam moments and schedule), every weight checked.

  Raises:
    errors.UsageError: the checkpoint does not hold every weight of this model.
  """
  from t2t_repro.model.weights import restore_weights  # pylint: disable=import-outside-toplevel
  try:
    restore_weights(trainer.model, checkpoint)
  except ValueError as e:
    raise errors.UsageError(f"`init_from`: {e}") from None


def _bytes(path):
  with open(path, "rb") as f:
    return f.read()


def prepare_vocab(config, problem, hp, staging_dir, init_vocab=None):
  """The tokenizer and the path of its model: the model dir's vocab.model, else the
  --init_from source's (`init_vocab`), else the cached one of --vocab_dir, else one
  learned into `staging_dir` (nothing is written to the model dir here:
  `write_model_dir` copies it there).

  Raises:
    errors.UsageError: the vocab has another size than hparams.vocab_size.
    errors.DataError: the training text cannot give a vocabulary of that size.
  """
  from t2t_repro.data import vocab as vocab_lib  # pylint: disable=import-outside-toplevel
  files = ModelDir(config.model_dir)
  path = files.vocab_path if files.has(model_dir_lib.VOCAB_FILE) else init_vocab
  if path is None:
    try:
      path = vocab_lib.get_or_learn_vocab(problem, hp.vocab_size, config.vocab_dir or staging_dir,
                                          lowercase=hp.lowercase)
    except ValueError as e:  # sentencepiece: too little text for vocab_size
      raise errors.DataError(f"learning a {hp.vocab_size}-piece vocabulary from the train split of "
                          f"problem {problem.name} failed: {e}") from None
  tokenizer = vocab_lib.Tokenizer.from_file(path)
  if tokenizer.vocab_size != hp.vocab_size:
    raise errors.UsageError(f"{path} has {tokenizer.vocab_size} pieces but hparams say "
                         f"vocab_size={hp.vocab_size}")
  if tokenizer.lowercase != hp.lowercase:
    raise errors.UsageError(f"{path} {'lowercases' if tokenizer.lowercase else 'keeps the case of'} "
                         f"its text but hparams say lowercase={hp.lowercase}")
  return tokenizer, path


def staged_corpus_records(model_dir, staging_dir):
  """Copies the `ModelDir`'s validation records of the training text (`data.corpus`,
  `corpus.*.json`) into `staging_dir` and returns it: the data phase reads and writes
  records there, and `write_model_dir` copies them back, so a run that fails its
  checks leaves the model dir as it was while a restart still skips validation."""
  records = ModelDir(staging_dir)
  for path in ModelDir(model_dir).glob(data_config.CORPUS_RECORD.format(key="*")):
    records.copy_file(path, os.path.basename(path))
  return staging_dir


def write_model_dir(model_dir, config, hp, vocab_path, replicas, staging_dir):
  """Writes vocab.model, hparams.json, flags.json and the staged corpus records
  (`staged_corpus_records`) to `model_dir` (a `ModelDir`), once every check passed.
  flags.json holds the `TrainConfig`, "time" and "replicas" (the strategy's replica count).

  A new model dir is built in a temporary sibling folder and renamed (`ModelDir.write_dir`),
  so it appears complete or not at all; in an existing one each file is replaced by a
  rename (`ModelDir.write_bytes`), and the leftovers of interrupted checkpoint writes and of
  killed staged writes inside it (`staging.remove_leftovers`) are removed first.
  """
  from t2t_repro.training import checkpoints  # pylint: disable=import-outside-toplevel
  model_dir = ModelDir(model_dir)
  records = ModelDir(staging_dir).glob(data_config.CORPUS_RECORD.format(key="*"))

  def write(files):
    if model_dir_lib.absolute(vocab_path) != model_dir_lib.absolute(model_dir.vocab_path):
      files.copy_file(vocab_path, model_dir_lib.VOCAB_FILE)
    for path in records:
      files.copy_file(path, os.path.basename(path))
    files.write_json(model_dir_lib.HPARAMS_FILE, hp.to_dict())
    files.write_json(model_dir_lib.FLAGS_FILE,
                     dataclasses.asdict(config) | {"time": time.ctime(), "replicas": replicas})

  if not model_dir.exists():
    model_dir.write_dir(write)
    return
  removed, freed = checkpoints.remove_partial_checkpoints(model_dir.path)
  staged, staged_freed = model_dir.remove_leftovers()  # best/, ema/, averaged/, files, itself
  if removed or staged:
    staging.warn_removed(removed + staged, freed + staged_freed)
  write(model_dir)
