"""A forced target prefix per sentence, as a decoding constraint (CTranslate2's
`target_prefix`, fairseq's `--prefix-size`, Sockeye's `target_prefix`).

`TargetPrefix` implements the constraint protocol of `decoding.beam_search.search`
(`start` / `allowed` / `advance`, one row per hypothesis): while a hypothesis is inside its
sentence's prefix only the next prefix piece is allowed, then every piece is. The search
keeps the model's own log-probabilities (no renormalization), so a hypothesis's score is
log P(prefix + continuation | X) / lp, and the prefix's pieces count in |Y|. Sampling
(`decoding.sampling`) takes the same constraint.

A prefix is never cut: a sentence's maximum output length is max(source length, prefix
length) + decode_extra_length (`max_output_lengths`), so its output holds the whole prefix
and up to decode_extra_length pieces after it, as OpenNMT-py adds the prefix length to its
max_length; `Translator.nbest` warns, naming the line, when this exceeds source length +
decode_extra_length.
"""

import tensorflow as tf

from t2t_repro.constants import PAD_ID
from t2t_repro.model.attention import non_pad_lengths


def max_output_lengths(inputs, prefixes, decode_extra_length):
  """Per-sentence maximum output length with forced prefixes [tokens, EOS included].

  Args:
    inputs: int32 [batch, src_len] source ids, 0-padded, EOS included.
    prefixes: None, or int32 [batch, P] prefix ids, 0-padded, no EOS.
    decode_extra_length: int [tokens].

  Returns:
    int32 [batch]: max(source length, prefix length) + decode_extra_length (without
    prefixes: source length + decode_extra_length, `beam_search.default_max_decode_length`).
  """
  lengths = non_pad_lengths(inputs)
  if prefixes is not None:
    lengths = tf.maximum(lengths, non_pad_lengths(prefixes))
  return lengths + decode_extra_length


class TargetPrefix:
  """Forces each sentence's output to start with its prefix.

  Args:
    prefixes: int32 [batch, P] prefix piece ids, 0-padded on the right (a row of zeros:
      no prefix); no EOS.
    vocab_size: V of the model.
  """

  def __init__(self, prefixes, vocab_size):
    self.prefixes = tf.convert_to_tensor(prefixes, tf.int32)
    self.vocab_size = vocab_size

  def start(self, inputs, beam_size, max_lengths):
    """Initial state: {"prefix" int32 [rows, P], "length" int32 [rows], "pos" int32 [rows]}."""
    del inputs, max_lengths
    prefix = tf.repeat(self.prefixes, beam_size, axis=0)
    length = tf.reduce_sum(tf.cast(tf.not_equal(prefix, PAD_ID), tf.int32), axis=1)
    return {"prefix": prefix, "length": length, "pos": tf.zeros_like(length)}

  def allowed(self, state):
    """bool [rows, V]: only the next prefix piece inside the prefix, everything after it."""
    width = tf.shape(state["prefix"])[1]
    inside = state["pos"] < state["length"]
    forced = tf.gather(state["prefix"], tf.minimum(state["pos"], tf.maximum(width - 1, 0)),
                       batch_dims=1)
    only = tf.one_hot(forced, self.vocab_size, on_value=True, off_value=False)
    return tf.logical_or(only, tf.logical_not(inside)[:, None])

  def advance(self, state, tokens):
    """The state after each hypothesis wrote `tokens` (int32 [rows])."""
    del tokens
    return dict(state, pos=state["pos"] + 1)
