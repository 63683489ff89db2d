"""Random sampling of translations, for back-translation and diverse outputs.

fairseq's `--sampling --sampling-topk/--sampling-topp`, OpenNMT-tf's `sampling_topk` /
`sampling_temperature`, tensor2tensor's `sampling_method=random`: each of `n_samples`
hypotheses per sentence draws its next piece from the model's distribution,

  p'(y) ~ exp(log p(y) / temperature), restricted to the top-k pieces (top-k sampling,
  Fan et al. 2018) and/or to the smallest set whose probability reaches top_p (nucleus
  sampling, Holtzman et al. 2020), renormalized,

until EOS or the maximum length. temperature 0 or top_k 1 is greedy (argmax) decoding.
The same model interface and cache as beam search (`decoding.model_interface`, so an
ensemble samples from the mean of its members' probabilities) and the same optional
`constraint` (forbidden pieces are never drawn). The returned score of a sample is its
log-probability under the model itself (not p'), divided by the GNMT length penalty, as
beam search scores its hypotheses.

Randomness: the draws of a sample depend only on (seed, its line's index in the input, its
index among the n_samples, the step), not on its batch or its row in it: each row has a
key, folded from those, and a step draws one uniform per piece from the row's key and the
step with SplitMix64 (Steele, Lea and Flood 2014, a counter-based generator that passes
BigCrush), then picks the argmax of the logits plus Gumbel noise (the Gumbel-max trick:
piece y with probability softmax(logits)_y). The uniforms lie strictly inside (0, 1), so the
noise is finite (within [-2.8, 16.7]), and a piece outside top-k, the nucleus or the
constraint is never drawn, whatever the noise. TensorFlow's stateless ops take one seed per
call, not one per row, hence the generator here. The same seed and input give the same
samples whatever the batching (up to float rounding of the model's batch-shaped math),
and two lines with the same text get independent samples.

The scores are not bit-independent of the batching: the model's log-probabilities come from
matrix products whose shapes (rows, padded lengths) follow the batch, so their float32
rounding differs by about 1e-5 relative (up to 1e-4 on a score) between batchings. The
drawn pieces, and so the texts, are the same unless two noisy logits tie within that
rounding.
"""

import numpy as np
import tensorflow as tf

from t2t_repro.constants import EOS_ID, NEG_INF, PAD_ID
from t2t_repro.decoding import model_interface
from t2t_repro.decoding.beam_search import length_penalty

# SplitMix64's constants: the stream increment (2^64 / golden ratio) and the two multipliers
# of its output function (Steele, Lea and Flood 2014, "Fast splittable pseudorandom number
# generators", OOPSLA; Stafford's mix13).
_GAMMA = 0x9E3779B97F4A7C15
_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
# Bits of a uniform draw: with 23, (k + 0.5) * 2^-23 is exact in float32's 24-bit significand
# for every k, so no draw rounds to 0 or 1.
_UNIFORM_BITS = 23


def _mix(x):
  """SplitMix64's output function: a bijection of uint64 [...] in which every output bit
  depends on every input bit."""
  for shift, multiplier in zip((30, 27), _MIX):
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(shift, tf.uint64)))
    x *= tf.constant(multiplier, tf.uint64)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(31, tf.uint64)))


def fold_in(key, data):
  """The key of stream `data` of `key` (uint64 [...] key, int [...] data >= 0, broadcast)
  -> uint64 [...]: SplitMix64's output at position data + 1 of the key's stream."""
  return _mix(key + (tf.cast(data, tf.uint64) + 1) * tf.constant(_GAMMA, tf.uint64))


def sample_keys(seed, line_ids, n_samples):
  """The key of each sample: (seed, line, sample index) folded in.

  Args:
    seed: int scalar >= 0.
    line_ids: int [batch] >= 0, each sentence's index in the input.
    n_samples: static int.

  Returns:
    uint64 [batch * n_samples], row b * n_samples + s for sample s of sentence b.
  """
  key = fold_in(tf.constant(0, tf.uint64), seed)
  key = fold_in(key, tf.repeat(tf.cast(line_ids, tf.int64), n_samples))
  return fold_in(key, tf.tile(tf.range(n_samples, dtype=tf.int64), tf.shape(line_ids)[:1]))


def uniform(keys, step, size):
  """float32 [rows, size] uniforms strictly inside (0, 1): (k + 0.5) / 2^23 for the top 23
  bits k of SplitMix64's output v + 1 of the stream of fold_in(keys[r], step) (draw v of row
  r), so a draw depends on nothing else. The extremes, 2^-24 and 1 - 2^-24, are exact in
  float32 (a 24th bit would round the largest up to 1.0 and make its Gumbel noise +inf).

  Args:
    keys: uint64 [rows] (`sample_keys`).
    step: int scalar >= 0.
    size: int scalar, draws per row.
  """
  state = fold_in(keys, step)[:, None]
  counter = tf.cast(tf.range(1, size + 1), tf.uint64) * tf.constant(_GAMMA, tf.uint64)
  return _to_unit(_mix(state + counter[None, :]))


def _to_unit(words):
  """uint64 [...] -> float32 [...] in (0, 1): (top 23 bits + 0.5) * 2^-23."""
  bits = tf.bitwise.right_shift(words, tf.constant(64 - _UNIFORM_BITS, tf.uint64))
  return (tf.cast(bits, tf.float32) + 0.5) * 2.0 ** -_UNIFORM_BITS


def draw(logits, keys, step):
  """One piece per row from softmax(logits), by the Gumbel-max trick with `uniform` noise.

  Args:
    logits: float32 [rows, V] (`filter_log_probs`): -inf marks a piece that is never drawn;
      each row has at least one finite logit.
    keys: uint64 [rows] (`sample_keys`).
    step: int scalar.

  Returns:
    int32 [rows]: argmax(logits - log(-log(u))) over the finite logits.
  """
  return gumbel_argmax(logits, uniform(keys, step, tf.shape(logits)[1]))


def gumbel_argmax(logits, u):
  """argmax over the pieces of logits + Gumbel noise -log(-log(u)), where a -inf logit stays
  -inf whatever its noise.

  Args:
    logits: float32 [rows, V], -inf for pieces never drawn.
    u: float32 [rows, V] uniforms in (0, 1).

  Returns:
    int32 [rows].
  """
  noisy = tf.where(logits > -np.inf, logits - tf.math.log(-tf.math.log(u)), -np.inf)
  return tf.argmax(noisy, axis=-1, output_type=tf.int32)


def filter_log_probs(log_probs, top_k=0, top_p=1.0, temperature=1.0):
  """The logits to sample from: temperature-scaled, top-k / top-p restricted.

  Args:
    log_probs: float32 [rows, V], log p(y).
    top_k: keep only the k most likely pieces (0, or k >= V: all); static int. Pieces
      tied with the k-th (or, for top_p, the last kept) are kept too.
    top_p: keep the most likely pieces until their probability reaches top_p (1.0: all;
      the most likely piece is always kept); float in (0, 1].
    temperature: > 0 (sharper below 1, flatter above); static float.

  Returns:
    float32 [rows, V]: log p(y) / temperature on the kept pieces, -inf elsewhere and where
    log_probs is NEG_INF or below (a constraint's forbidden pieces): unnormalized logits for
    `draw`.
  """
  logits = tf.where(log_probs > NEG_INF, log_probs / temperature, -np.inf)
  if top_k:  # a k above V keeps every piece
    kth = tf.math.top_k(logits, k=tf.minimum(top_k, tf.shape(logits)[-1])).values[:, -1:]
    logits = tf.where(logits < kth, -np.inf, logits)
  if top_p < 1.0:
    sorted_logits = tf.sort(logits, axis=-1, direction="DESCENDING")
    before = tf.cumsum(tf.nn.softmax(sorted_logits), axis=-1, exclusive=True)
    # the smallest kept logit: the last piece whose better pieces have less than top_p
    last = tf.reduce_min(tf.where(before < top_p, sorted_logits, float("inf")), axis=-1)
    logits = tf.where(logits < last[:, None], -np.inf, logits)
  return logits


def sample(model, inputs, max_decode_length, alpha, n_samples=1, top_k=0, top_p=1.0,
           temperature=1.0, seed=0, eos_id=EOS_ID, constraint=None, line_ids=None):
  """Draws `n_samples` outputs per sentence (builds a graph; call in a tf.function or eagerly).

  Args:
    model: a `Transformer` or an object with the model interface (an ensemble).
    inputs: int32 [batch, src_len], 0-padded, rows ending with EOS.
    max_decode_length: int32 [batch] (or scalar) [tokens, EOS included].
    alpha: GNMT length-penalty exponent of the returned scores (>= 0).
    n_samples: outputs per sentence (static int >= 1).
    top_k, top_p, temperature: see `filter_log_probs`; temperature 0 means argmax.
    seed: int scalar >= 0, seed of the draws.
    eos_id: end-of-sequence id.
    constraint: None, or a constraint object (`beam_search.search`'s protocol).
    line_ids: int [batch] >= 0, each sentence's index in the whole input (None: 0, 1, ...);
      with the seed they fix its samples' draws (`sample_keys`).

  Returns:
    ids: int32 [batch, n_samples, T], 0-padded after EOS (no EOS when cut at the
      maximum length); T = max(max_decode_length).
    scores: float32 [batch, n_samples], log P(Y|X) / lp(|Y|) under the model.
  """
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  batch = tf.shape(inputs)[0]
  rows = batch * n_samples
  max_lengths = tf.repeat(tf.broadcast_to(tf.cast(max_decode_length, tf.int32), [batch]),
                          n_samples)
  max_len = tf.reduce_max(tf.concat([max_lengths, [1]], 0))
  decoder = model_interface.decoder_for(model)
  state = decoder.start(inputs, n_samples, max_len)
  cstate = () if constraint is None else constraint.start(inputs, n_samples, max_lengths)
  keys = sample_keys(seed, tf.range(batch) if line_ids is None else line_ids, n_samples)

  def body(i, prev, done, seqs, log_prob, lengths, state, cstate):
    log_probs, state = decoder.step(prev, i, state)
    if constraint is not None:
      log_probs = tf.where(constraint.allowed(cstate), log_probs, NEG_INF)
    if temperature == 0 or top_k == 1:
      token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    else:
      logits = filter_log_probs(log_probs, top_k, top_p, temperature)
      token = draw(logits, keys, i)
    token = tf.where(done, PAD_ID, token)
    picked = tf.gather(log_probs, token[:, None], batch_dims=1)[:, 0]
    log_prob += tf.where(done, 0.0, picked)
    lengths += tf.cast(tf.logical_not(done), tf.int32)
    seqs = tf.tensor_scatter_nd_update(seqs, tf.stack([tf.range(rows), tf.fill([rows], i)], 1),
                                       token)
    if constraint is not None:
      cstate = constraint.advance(cstate, token)
    done = done | tf.equal(token, eos_id) | (i + 1 >= max_lengths)
    return i + 1, token, done, seqs, log_prob, lengths, state, cstate

  loop = (tf.constant(0), tf.zeros([rows], tf.int32), max_lengths <= 0,
          tf.zeros(tf.stack([rows, max_len]), tf.int32), tf.zeros([rows]),
          tf.zeros([rows], tf.int32), state, cstate)
  invariants = tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), loop)
  _, _, _, seqs, log_prob, lengths, _, _ = tf.while_loop(
      lambda i, prev, done, *_: tf.logical_and(i < max_len, tf.logical_not(tf.reduce_all(done))),
      body, loop, shape_invariants=invariants, maximum_iterations=max_len)
  scores = log_prob / length_penalty(lengths, alpha)
  return (tf.reshape(seqs, [batch, n_samples, -1]), tf.reshape(scores, [batch, n_samples]))
