"""Loading trained model directories for inference: one model or an ensemble.

The model directory's layout is `t2t_repro.model_dir.ModelDir`'s; its checkpoints are
`tf.train.Checkpoint(model=..., optimizer=..., ...)`, of which only the model is read. A
model dir's `best/` and `averaged/` subfolders are model dirs of their own and load the
same way.

Ensembles (`load_models`): several model dirs and/or checkpoints, given as
comma-separated lists (translate's `--model_dir=runs/a,runs/b`,
`--checkpoint_path=p1,p2`), become one `decoding.ensemble.Ensemble`. They must share
one vocabulary: the same `vocab.model` bytes (hence the same vocab_size). Everything
else may differ (sizes, layers, position encoding); the ensemble accepts the smallest
max_positions, and the decode settings' defaults (beam_size, alpha,
decode_extra_length) come from the first model's hparams.
"""

import typing

import keras
import tensorflow as tf
from absl import logging

from t2t_repro.data.vocab import Tokenizer
from t2t_repro import errors
from t2t_repro.config.decode import INFERENCE_DTYPES
from t2t_repro.decoding.ensemble import Ensemble
from t2t_repro.config.hparams import HParams
from t2t_repro.model_dir import DECODING_FILE, ModelDir
from t2t_repro.model.transformer import Transformer
from t2t_repro.model.weights import restore_weights


def load_for_inference(model_dir, checkpoint_path=None, inference_dtype="float32",
                       tuned=("beam_size", "alpha")):
  """Builds the model of `model_dir` and restores its weights (no optimizer).

  Args:
    model_dir: a model directory (see the module docstring).
    checkpoint_path: a checkpoint prefix such as `{model_dir}/ckpt-1000`; None
      means the latest one of `model_dir`.
    inference_dtype: "float32", or "bfloat16": the model computes its matmuls in
      bfloat16 (Keras "mixed_bfloat16" policy: float32 weights, softmax, LayerNorm and
      logits, as in mixed-precision training); BLEU change and speed: docs/BENCHMARKS.md.
    tuned: the settings of `tune`'s choice the caller uses (`tuned_hparams`).

  Returns:
    (model: `Transformer` with restored weights, hparams: `HParams` (with the `tuned` values
     of `{model_dir}/decoding.json` where `tune` wrote one, `tuned_hparams`),
     tokenizer: `data.vocab.Tokenizer` of `{model_dir}/vocab.model`).

  Raises:
    FileNotFoundError: hparams.json, vocab.model or the checkpoint is missing.
    ValueError: hparams.json is invalid, or the checkpoint does not hold every
      weight of this model (wrong model dir or hparams), see
      `model.weights.restore_weights`; an unknown inference_dtype.
  """
  if inference_dtype not in INFERENCE_DTYPES:
    raise ValueError(f"inference_dtype must be one of {INFERENCE_DTYPES}, got {inference_dtype!r}")
  files = ModelDir(model_dir)
  files.check_files()
  hparams = tuned_hparams(files, tuned)
  tokenizer = Tokenizer.from_file(files.vocab_path)
  checkpoint_path = files.resolve_checkpoint(checkpoint_path)
  policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if inference_dtype == "bfloat16" else "float32")
  try:  # layers take the policy when they are built
    model = Transformer.from_hparams(hparams)
  finally:
    keras.mixed_precision.set_global_policy(policy)
  restore_weights(model, checkpoint_path)
  return model, hparams, tokenizer


def tuned_hparams(files, tuned=("beam_size", "alpha")):
  """The hparams of the model dir `files` (a `ModelDir`), with the values of `tuned` (of
  beam_size and alpha, the settings the caller uses: `score` has no beam) that `tune` chose on
  a dev set (`decoding.json`, `decoding.tuning`) in place of the set's: the defaults of every
  decoding command, a flag still overriding them. Logs one line naming them.

  Raises:
    errors.DataError: decoding.json is not JSON, or lacks a valid beam_size or alpha.
  """
  hparams = files.read_hparams()
  choice = files.read_json(DECODING_FILE, required=False)
  if choice is None:
    return hparams
  try:
    hparams.replace(beam_size=choice["beam_size"], alpha=choice["alpha"])  # both valid
    result = hparams.replace(**{name: choice[name] for name in tuned})
  except (KeyError, TypeError, ValueError) as e:
    raise errors.DataError(f"{files.file(DECODING_FILE)}: not a choice of `tune` ({e}); "
                           "rerun tune or remove the file") from None
  values = ", ".join(f"{name} {choice[name]:g}" for name in tuned)
  defaults = " and ".join(f"--{name}" for name in tuned)
  logging.info("%s: tune chose %s (on %s by %s %.2f), the default%s of %s",
               files.file(DECODING_FILE), values, choice.get("dev", "dev"),
               choice.get("metric", ""), choice.get("value", 0), "s" * (len(tuned) > 1), defaults)
  return result


class EnsembleError(errors.UsageError):
  """Model dirs / checkpoints that cannot form one ensemble (a usage error; names them)."""


class Loaded(typing.NamedTuple):
  """What `load_models` returns."""
  model: object            # a `Transformer` (one member) or an `Ensemble`
  hparams: HParams         # of the first member
  tokenizer: Tokenizer     # the shared vocabulary
  checkpoint_paths: list   # the checkpoint prefix of each member


def split_names(value):
  """A comma-separated flag value -> list of non-empty names ([] for None or "")."""
  return [name.strip() for name in (value or "").split(",") if name.strip()]


def members(model_dirs, checkpoint_paths=()):
  """Pairs (model_dir, checkpoint prefix or None) of an ensemble.

  Args:
    model_dirs: list of model dirs (at least one).
    checkpoint_paths: empty (the latest checkpoint of every model dir), one per model
      dir, or several with one model dir (checkpoints of one run).

  Raises:
    EnsembleError: the counts do not pair up (names both flags).
  """
  model_dirs, checkpoint_paths = list(model_dirs), list(checkpoint_paths)
  if not model_dirs:
    raise EnsembleError("`model_dir` is required")
  if not checkpoint_paths:
    return [(d, None) for d in model_dirs]
  if len(model_dirs) == 1:
    return [(model_dirs[0], c) for c in checkpoint_paths]
  if len(model_dirs) != len(checkpoint_paths):
    raise EnsembleError(f"`model_dir` has {len(model_dirs)} names and `checkpoint_path` "
                     f"{len(checkpoint_paths)}: give one model dir, or one per checkpoint")
  return list(zip(model_dirs, checkpoint_paths))


def check_same_vocabulary(model_dirs):
  """Raises EnsembleError naming the model dirs whose vocab.model differs from the first's."""
  reference = None
  for model_dir in model_dirs:
    files = ModelDir(model_dir)
    files.check_files()
    with tf.io.gfile.GFile(files.vocab_path, "rb") as f:
      data = f.read()
    if reference is None:
      reference = data
    elif data != reference:
      raise EnsembleError(f"an ensemble needs one vocabulary: {files.vocab_path} differs "
                       f"from {ModelDir(model_dirs[0]).vocab_path}")


def load_models(model_dirs, checkpoint_paths=(), inference_dtype="float32",
                tuned=("beam_size", "alpha")):
  """Loads one model, or an ensemble of several sharing one vocabulary.

  Args:
    model_dirs: list of model dirs (`split_names` of a comma-separated flag).
    checkpoint_paths: list of checkpoint prefixes, paired with model_dirs by `members`.
    inference_dtype, tuned: see `load_for_inference`.

  Returns:
    `Loaded`; its model is the `Transformer` itself for a single member, else an
    `Ensemble` of the members in the order given.

  Raises:
    EnsembleError: counts that do not pair (`members`), different vocabularies
      (vocab.model bytes or hparams vocab_size; names the model dirs).
    ValueError: the errors of `load_for_inference`.
    FileNotFoundError: as `load_for_inference`.
  """
  pairs = members(model_dirs, checkpoint_paths)
  model_dirs = list(dict.fromkeys(d for d, _ in pairs))
  check_same_vocabulary(model_dirs)
  sizes = {d: ModelDir(d).read_hparams().vocab_size for d in model_dirs}
  for model_dir in model_dirs:
    if sizes[model_dir] != sizes[model_dirs[0]]:
      raise EnsembleError(f"an ensemble needs one vocabulary: {model_dir} has vocab_size "
                          f"{sizes[model_dir]}, {model_dirs[0]} {sizes[model_dirs[0]]}")
  paths = [ModelDir(d).resolve_checkpoint(c) for d, c in pairs]
  for path in paths:
    logging.info("loading %s", path)
  loaded = [load_for_inference(d, path, inference_dtype, tuned)
            for (d, _), path in zip(pairs, paths)]
  models = [model for model, _, _ in loaded]
  model = models[0] if len(models) == 1 else Ensemble(models)
  return Loaded(model, loaded[0][1], loaded[0][2], paths)
