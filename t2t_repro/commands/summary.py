"""`python -m t2t_repro.summary --hparams=base --vocab_size=37000`: the parameter count of
the built Keras model next to the closed-form count of its layers (they must agree; exit 1
if not) and Table 3's figure, and the training FLOPs per token (`t2t_repro.model.summary`)."""

from absl import flags

from t2t_repro.commands import config_flags
from t2t_repro.config import hparams as hparams_lib
from t2t_repro.config.hparams import HParams
from t2t_repro.config.train import TrainConfig
from t2t_repro.model import summary

FLAGS = flags.FLAGS


def define_flags():
  config_flags.define(TrainConfig, names=["hparams", "hparams_override"])
  config_flags.define(HParams, names=["vocab_size"], none_defaults=True,
                      extra_help={"vocab_size": " Default: the set's."})
  flags.DEFINE_integer("length", 25, "Sequence length used for the attention FLOPs [tokens].")


def main(argv):
  del argv
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel

  hp = hparams_lib.get_hparams(FLAGS.hparams, FLAGS.hparams_override, vocab_size=FLAGS.vocab_size)
  model = Transformer.from_hparams(hp)
  built = summary.count_parameters(model)
  closed = summary.closed_form_params(hp)
  print(f"hparams: {FLAGS.hparams}  ({hp.description})")
  print(f"layers N={hp.num_layers} d_model={hp.d_model} d_ff={hp.d_ff} heads={hp.num_heads} "
        f"d_k={hp.d_k} d_v={hp.d_v} vocab={hp.vocab_size} norm={hp.norm_type}")
  print(f"parameters (built model):  {built:,}")
  print(f"parameters (closed form):  {closed:,}  {'OK' if built == closed else 'MISMATCH'}")
  print(f"  of which shared embedding: {hp.vocab_size * hp.d_model:,}")
  paper = summary.PAPER_PARAMS_M.get(FLAGS.hparams)
  if paper:
    print(f"Table 3: {paper}M  (ours {built / 1e6:.1f}M, {100 * (built / 1e6 - paper) / paper:+.1f}%)")
  per_token = summary.train_flops_per_token(hp, FLAGS.length)
  print(f"training FLOPs per source+target token pair (length {FLAGS.length}): {per_token:.3e}")
  tokens = hp.train_steps * 25000  # §5.1: ~25000 target tokens per step
  print(f"training FLOPs for {hp.train_steps:,} steps x 25000 token pairs: {per_token * tokens:.2e}"
        "  (Table 2 estimates by GPU time: base 3.3e18, big 2.3e19)")
  return 0 if built == closed else 1
