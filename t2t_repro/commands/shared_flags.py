"""Flags that several commands take, defined here once: --model_dir (`TrainConfig`'s field),
--checkpoint_path and --inference_dtype.

The decoding flags (--beam_size, --alpha, ...) are generated from `DecodeConfig`'s fields
(`config_flags.define`), validated by their own range checks. Checks run when absl parses the command
line, so a bad value is a one-line usage error (exit 2, `t2t_repro.commands.runner`) before anything
is loaded.
"""

from absl import flags

from t2t_repro.commands import config_flags
from t2t_repro.config import decode as decode_config
from t2t_repro.config.train import TrainConfig
from t2t_repro.model_dir import ModelDir

MODEL_DIR_HELP = "Model directory (hparams.json, vocab.model, checkpoints)."


def define_model_dir(help_text=MODEL_DIR_HELP, required=True, several=False):
  """Defines --model_dir.

  Args:
    help_text: the flag's help.
    required: the flag must be given, and name an existing folder (local, or a URL such as
      gs://... that `tf.io.gfile` reads: `ModelDir.exists`).
    several: a comma-separated list of folders is accepted (an ensemble,
      `decoding.loading.split_names`); each must exist when `required`.
  """
  config_flags.define(TrainConfig, names=["model_dir"], help_overrides={"model_dir": help_text})
  if required:
    flags.mark_flag_as_required("model_dir")
    flags.register_validator(
        "model_dir", lambda value: value is None or all(
            ModelDir(path).exists() for path in (value.split(",") if several else [value])),
        "is not a folder (or a comma-separated list of folders)" if several else
        "is not a folder")


def define_checkpoint_path(help_text="Checkpoint prefix (default: latest of --model_dir)."):
  """Defines --checkpoint_path (None: the latest checkpoint of the model dir; several
  commands take a comma-separated list, an ensemble)."""
  flags.DEFINE_string("checkpoint_path", None, help_text)


def define_ensemble_flags(verb):
  """Defines --model_dir and --checkpoint_path for a command that takes an ensemble
  (`decoding.loading.load_models`): several comma-separated model dirs or checkpoints
  `verb` ("decode", "score") as one model over one vocabulary."""
  define_model_dir(f"{MODEL_DIR_HELP[:-1]}; several, comma-separated, {verb} as one ensemble "
                   "(one vocabulary).", several=True)
  define_checkpoint_path("Checkpoint prefix (default: latest of --model_dir); several, "
                         "comma-separated, form an ensemble (with one --model_dir, or one per "
                         "model dir).")


def define_inference_dtype():
  """Defines --inference_dtype (translate, export): `decoding.loading.load_for_inference`'s
  compute type."""
  flags.DEFINE_enum("inference_dtype", "float32", list(decode_config.INFERENCE_DTYPES),
                    "Compute type of the model's matmuls while decoding (bfloat16: float32 "
                    "weights, softmax, LayerNorm and logits; faster on CPUs with AVX512-BF16/AMX).")
