"""Exports a model dir as a SavedModel that translates raw text, a CTranslate2 model or a
LiteRT model.

`python -m t2t_repro.export --model_dir=DIR --export_dir=OUT/1`
`python -m t2t_repro.export --format=ctranslate2 [--quantization=int8] --model_dir=DIR --export_dir=OUT`
`python -m t2t_repro.export --format=tflite [--quantization=dynamic_range] --model_dir=DIR --export_dir=OUT`

The SavedModel and its signatures: `t2t_repro.serving.saved_model`; the CTranslate2
conversion: `t2t_repro.serving.ctranslate2`; the LiteRT export: `t2t_repro.serving.litert`.
"""

import os
import time

from absl import flags

from t2t_repro import errors, fileio, logs
from t2t_repro.commands import config_flags, shared_flags
from t2t_repro.config import decode as decode_config
from t2t_repro.serving import LITERT_QUANTIZATIONS, QUANTIZATIONS

FLAGS = flags.FLAGS


def define_flags():
  shared_flags.define_model_dir()
  shared_flags.define_checkpoint_path()
  flags.DEFINE_string("export_dir", None, "Output folder of the SavedModel, e.g. "
                      "/models/transformer/1 for TensorFlow Serving.")
  flags.mark_flag_as_required("export_dir")
  config_flags.define(
      decode_config.DecodeConfig,
      names=("beam_size", "alpha", "decode_extra_length", "decode_batch_tokens", "n_best"),
      none_defaults=True,
      help_overrides={"decode_batch_tokens": "SavedModel: source tokens (padding included) per chunk "
                                      "the serving graph decodes at once (default: 4096); "
                                      "t2t-serve replaces it with its --max_batch_tokens. "
                                      "tflite: the same budget of its translator (decoding.json).",
                      "n_best": "Hypotheses per sentence of the translate_nbest signature "
                                "(default: the beam size)."})
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir (the export is built "
                    "in a staging folder beside it and renamed into place).")
  shared_flags.define_inference_dtype()
  flags.DEFINE_enum("format", "saved_model", ["saved_model", "ctranslate2", "tflite"],
                    "saved_model: a TensorFlow SavedModel that translates text; ctranslate2: a "
                    "CTranslate2 model directory (needs the ctranslate2 extra); tflite: a LiteRT "
                    "model that translates without TensorFlow (needs the litert extra).")
  flags.DEFINE_enum("quantization", None, list(dict.fromkeys(QUANTIZATIONS + LITERT_QUANTIZATIONS)),
                    "Weight type (default: float32). --format=ctranslate2: "
                    f"{', '.join(QUANTIZATIONS)}; --format=tflite: {', '.join(LITERT_QUANTIZATIONS)} "
                    "(dynamic_range: int8 weights).")


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  allowed = {"ctranslate2": QUANTIZATIONS, "tflite": LITERT_QUANTIZATIONS}.get(FLAGS.format, ())
  if FLAGS.quantization and FLAGS.quantization not in allowed:
    raise errors.UsageError(
        f"--quantization={FLAGS.quantization} is not a weight type of --format={FLAGS.format}"
        + (f" (one of {', '.join(allowed)})" if allowed else
           "; it needs --format=ctranslate2 or --format=tflite"))
  if FLAGS.format == "tflite" and FLAGS.inference_dtype != "float32":
    raise errors.UsageError("--inference_dtype is the SavedModel's; --format=tflite takes "
                            "--quantization (none, float16, dynamic_range)")
  fileio.check_writable(FLAGS.export_dir)  # built in a staging folder beside it
  started = time.monotonic()
  if FLAGS.format == "tflite":
    _export_litert(started)
    return
  if FLAGS.format == "ctranslate2":
    from t2t_repro.serving import ctranslate2  # pylint: disable=import-outside-toplevel
    try:
      path = ctranslate2.export_ctranslate2(
          FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint_path,
          quantization=FLAGS.quantization, overwrite=FLAGS.overwrite, beam_size=FLAGS.beam_size,
          alpha=FLAGS.alpha, decode_extra_length=FLAGS.decode_extra_length, n_best=FLAGS.n_best)
    except (errors.UsageError, errors.DataError):  # a corrupt checkpoint is data: exit 1
      raise
    except ValueError as e:
      raise errors.UsageError(f"--format=ctranslate2: {e}") from None
    print(f"CTranslate2 model written to {os.path.abspath(path)} in "
          f"{logs.hms(time.monotonic() - started)} (see README.md there)")
    return
  from t2t_repro.serving import saved_model  # pylint: disable=import-outside-toplevel
  path = saved_model.export_model(FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint_path,
                      beam_size=FLAGS.beam_size, alpha=FLAGS.alpha,
                      decode_extra_length=FLAGS.decode_extra_length, overwrite=FLAGS.overwrite,
                      decode_batch_tokens=FLAGS.decode_batch_tokens, inference_dtype=FLAGS.inference_dtype,
                      n_best=FLAGS.n_best)
  print(f"SavedModel written to {os.path.abspath(path)} in {logs.hms(time.monotonic() - started)} "
        f"(signatures: {', '.join(saved_model.SIGNATURES)})")


def _export_litert(started):
  """`--format=tflite`: `serving.litert.export_litert` (the checks and errors of the others)."""
  from t2t_repro.serving import litert  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving.litert_translator import require_litert  # pylint: disable=import-outside-toplevel
  try:
    require_litert()
  except ImportError as e:
    raise errors.UsageError(f"--format=tflite: {e}") from None
  path = litert.export_litert(
      FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint_path, quantization=FLAGS.quantization,
      overwrite=FLAGS.overwrite, beam_size=FLAGS.beam_size, alpha=FLAGS.alpha,
      decode_extra_length=FLAGS.decode_extra_length, n_best=FLAGS.n_best,
      decode_batch_tokens=FLAGS.decode_batch_tokens)
  print(f"LiteRT model written to {os.path.abspath(path)} in "
        f"{logs.hms(time.monotonic() - started)} (signatures: {', '.join(litert.SIGNATURES)}; "
        "see README.md there)")
