"""Parameter count and training FLOPs of an hparam set.

    python -m t2t_repro.summary --hparams=base --vocab_size=37000

Prints the parameter count of the built Keras model next to the closed-form count
of its layers (they must agree) and Table 3's figure, and the training FLOPs per
token. FLOPs count multiply-adds as 2 and training as 3x the forward pass
(forward + backward for activations and weights), the convention behind Table 2.
"""

import math

from absl import flags

from t2t_repro import cli
from t2t_repro import hparams as hparams_lib
from t2t_repro.model.config import ModelConfig

# Table 3 parameter counts (x1e6) of the sets that have one.
PAPER_PARAMS_M = {"base": 65, "big": 213, "base_b_dk16": 58, "base_b_dk32": 60,
                  "base_c_layers2": 36, "base_c_layers4": 50, "base_c_layers8": 80,
                  "base_c_dmodel256": 28, "base_c_dmodel1024": 168, "base_c_dff1024": 53,
                  "base_c_dff4096": 90}


def _head_widths(hp):
  """(d_k, d_v) per head, resolved as the model resolves them (`ModelConfig`)."""
  config = ModelConfig.from_hparams(hp)
  return config.d_k, config.d_v


def closed_form_params(hp):
  """Parameters of the model built from `hp`, counted from the architecture (§3).

  Shared embedding V*d (§3.4; counted once); per attention block the projections
  W^Q, W^K (d x h*d_k), W^V (d x h*d_v) and W^O (h*d_v x d), no biases (as t2t);
  per FFN d*d_ff + d_ff + d_ff*d + d (eq. 2); LayerNorm 2*d each; an encoder layer has
  1 attention, 1 FFN, 2 norms; a decoder layer 2, 1, 3; pre-norm adds a final norm per
  stack; learned positions add max_positions*d; relative positions add
  (2k + 1) * (d_k + d_v) per self-attention layer.
  """
  d, h = hp.d_model, hp.num_heads
  d_k, d_v = _head_widths(hp)
  attention = d * h * d_k * 2 + d * h * d_v + h * d_v * d
  ffn = 2 * d * hp.d_ff + hp.d_ff + d
  norm = 2 * d
  total = hp.vocab_size * d
  total += hp.num_layers * (attention + ffn + 2 * norm)
  total += hp.num_layers * (2 * attention + ffn + 3 * norm)
  if hp.norm_type == "pre":
    total += 2 * norm
  if hp.position_encoding == "learned":
    total += hp.max_positions * d
  if hp.position_encoding == "relative":  # a^K and a^V per self-attention (Shaw et al. 2018)
    total += 2 * hp.num_layers * (2 * hp.max_relative_position + 1) * (d_k + d_v)
  return total


def count_parameters(model):
  """Trainable parameters of a built Keras model [int] (what `train` prints at startup)."""
  return int(sum(math.prod(v.shape) for v in model.trainable_variables))


def train_flops_per_token(hp, length):
  """Training FLOPs per (source token + target token) pair at sequence length `length`.

  Forward FLOPs: 2 per multiply-add of every projection a token goes through, plus
  attention scores and weighted sums (2 * length * (d_k + d_v) per head per attended
  token set), plus the pre-softmax projection 2 * d * V for the target token.
  Training = 3 x forward. Returns a float [FLOP].
  """
  d, h = hp.d_model, hp.num_heads
  d_k, d_v = _head_widths(hp)
  proj = 2 * (d * h * d_k * 2 + d * h * d_v + h * d_v * d)
  attend = 2 * h * length * (d_k + d_v)
  ffn = 2 * 2 * d * hp.d_ff
  encoder = hp.num_layers * (proj + attend + ffn)
  decoder = hp.num_layers * (2 * proj + 2 * attend + ffn) + 2 * d * hp.vocab_size
  return 3.0 * (encoder + decoder)


def main(argv):
  del argv
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel

  overrides = FLAGS.hparams_override
  if FLAGS.vocab_size:
    overrides = ",".join(filter(None, [overrides, f"vocab_size={FLAGS.vocab_size}"]))
  hp = hparams_lib.get_hparams(FLAGS.hparams, overrides)
  model = Transformer.from_hparams(hp)
  built = count_parameters(model)
  closed = closed_form_params(hp)
  print(f"hparams: {FLAGS.hparams}  ({hp.description})")
  print(f"layers N={hp.num_layers} d_model={hp.d_model} d_ff={hp.d_ff} heads={hp.num_heads} "
        f"d_k={_head_widths(hp)[0]} d_v={_head_widths(hp)[1]} vocab={hp.vocab_size} norm={hp.norm_type}")
  print(f"parameters (built model):  {built:,}")
  print(f"parameters (closed form):  {closed:,}  {'OK' if built == closed else 'MISMATCH'}")
  print(f"  of which shared embedding: {hp.vocab_size * hp.d_model:,}")
  paper = PAPER_PARAMS_M.get(FLAGS.hparams)
  if paper:
    print(f"Table 3: {paper}M  (ours {built / 1e6:.1f}M, {100 * (built / 1e6 - paper) / paper:+.1f}%)")
  per_token = train_flops_per_token(hp, FLAGS.length)
  print(f"training FLOPs per source+target token pair (length {FLAGS.length}): {per_token:.3e}")
  tokens = hp.train_steps * 25000  # §5.1: ~25000 target tokens per step
  print(f"training FLOPs for {hp.train_steps:,} steps x 25000 token pairs: {per_token * tokens:.2e}"
        "  (Table 2 estimates by GPU time: base 3.3e18, big 2.3e19)")
  if built != closed:
    raise SystemExit(1)


FLAGS = flags.FLAGS


def _define_flags():
  flags.DEFINE_string("hparams", "base", "Hparam set name or path to a .json file.")
  flags.DEFINE_string("hparams_override", "", "Comma-separated key=value overrides.")
  flags.DEFINE_integer("vocab_size", 0, "Vocabulary size; 0 keeps the set's value.")
  flags.DEFINE_integer("length", 25, "Sequence length used for the attention FLOPs [tokens].")


if __name__ == "__main__":
  _define_flags()
  cli.run(main)
