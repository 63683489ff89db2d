"""Parameter count and training FLOPs of an hparam set (the command
`python -m t2t_repro.summary` prints them).

The closed-form parameter count of a set's layers must equal the built Keras model's;
Table 3's figures are `PAPER_PARAMS_M`. FLOPs count multiply-adds as 2 and training as 3x the forward pass
(forward + backward for activations and weights), the convention behind Table 2.
"""

import math

# Table 3 parameter counts (x1e6) of the sets that have one.
PAPER_PARAMS_M = {"base": 65, "big": 213, "base_b_dk16": 58, "base_b_dk32": 60,
                  "base_c_layers2": 36, "base_c_layers4": 50, "base_c_layers8": 80,
                  "base_c_dmodel256": 28, "base_c_dmodel1024": 168, "base_c_dff1024": 53,
                  "base_c_dff4096": 90}


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
  d_k, d_v = hp.d_k, hp.d_v
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
  d_k, d_v = hp.d_k, hp.d_v
  proj = 2 * (d * h * d_k * 2 + d * h * d_v + h * d_v * d)
  attend = 2 * h * length * (d_k + d_v)
  ffn = 2 * 2 * d * hp.d_ff
  encoder = hp.num_layers * (proj + attend + ffn)
  decoder = hp.num_layers * (2 * proj + 2 * attend + ffn) + 2 * d * hp.vocab_size
  return 3.0 * (encoder + decoder)
