"""Exports a model dir as a SavedModel that translates raw text, or as a CTranslate2 model.

`python -m t2t_repro.export --model_dir=DIR --export_dir=OUT/1`
`python -m t2t_repro.export --format=ctranslate2 [--quantization=int8] --model_dir=DIR --export_dir=OUT`

The SavedModel and its signatures: `t2t_repro.serving.saved_model`; the CTranslate2
conversion: `t2t_repro.serving.ctranslate2`.
"""

import os
import time

from absl import flags

from t2t_repro import errors, fileio, logs
from t2t_repro.commands import config_flags, shared_flags
from t2t_repro.config import decode as decode_config
from t2t_repro.serving import QUANTIZATIONS

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
                                      "t2t-serve replaces it with its --max_batch_tokens.",
                      "n_best": "Hypotheses per sentence of the translate_nbest signature "
                                "(default: the beam size)."})
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir (the export is built "
                    "in a staging folder beside it and renamed into place).")
  shared_flags.define_inference_dtype()
  flags.DEFINE_enum("format", "saved_model", ["saved_model", "ctranslate2"],
                    "saved_model: a TensorFlow SavedModel that translates text; ctranslate2: a "
                    "CTranslate2 model directory (needs the ctranslate2 extra).")
  flags.DEFINE_enum("quantization", None, list(QUANTIZATIONS),
                    "--format=ctranslate2 only: weight type of the CTranslate2 model "
                    "(default: float32).")


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.quantization and FLAGS.format != "ctranslate2":
    raise errors.UsageError("--quantization needs --format=ctranslate2")
  fileio.check_writable(FLAGS.export_dir)  # built in a staging folder beside it
  started = time.monotonic()
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
