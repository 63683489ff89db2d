"""Attention heatmaps of one sentence (the paper's Figures 3-5):
`python tools/plot_attention.py --model_dir=DIR --source=TEXT` (`t2t-plot-attention`,
`python -m t2t_repro.plot_attention`). What is drawn: `t2t_repro.decoding.attention_plot`."""

from absl import flags

from t2t_repro import errors, fileio
from t2t_repro.commands import config_flags, shared_flags
from t2t_repro.decoding import attention_plot
from t2t_repro.config import decode as decode_config

FLAGS = flags.FLAGS


def define_flags():
  shared_flags.define_model_dir()
  shared_flags.define_checkpoint_path()
  flags.DEFINE_string("source", None, "Source sentence.")
  flags.mark_flag_as_required("source")
  flags.DEFINE_string("target", None, "Target sentence (default: the model's translation).")
  flags.DEFINE_integer("layer", None, "Layer, from 1 (default: the last; -1: every layer, a "
                       "set of PNGs each).")
  flags.DEFINE_integer("head", 1, "Head, from 1 (-1: every head side by side).")
  flags.DEFINE_string("output_dir", ".", "Folder for the PNGs.")
  config_flags.define(decode_config.DecodeConfig,
                      names=("beam_size", "alpha", "decode_extra_length"), none_defaults=True)


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  fileio.check_writable(FLAGS.output_dir, inside=True)  # before loading
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  model, hparams, tokenizer = load_for_inference(FLAGS.model_dir, FLAGS.checkpoint_path)
  try:
    target, paths = attention_plot.plot_attention(
        model, tokenizer, FLAGS.source, FLAGS.output_dir, target=FLAGS.target, layer=FLAGS.layer,
        head=FLAGS.head, config=decode_config.DecodeConfig.resolve(
            hparams, **config_flags.values(decode_config.DecodeConfig)))
  except errors.UsageError:
    raise
  except ValueError as e:
    raise errors.UsageError(str(e)) from None
  print(f"{'target' if FLAGS.target else 'translation'}: {target}")
  for path in paths:
    print(path)
