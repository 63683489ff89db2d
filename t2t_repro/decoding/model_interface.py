"""The model interface of beam search: start (encode once), step (one token), reorder.

Beam search (`t2t_repro.decoding.beam_search`) sees a model only through an object with

  `vocab_size`: int V;
  `start(inputs, beam_size, max_length)` -> state for batch * beam_size hypotheses (the
    beams of a sentence adjacent): the encoder output (per sentence) and the (empty)
    decoder state (per hypothesis);
  `step(prev_ids, i, state)` -> (log_probs float32 [rows, V] for position i, new state),
    prev_ids int32 [rows] the decoder input at position i (0 at i = 0, else the output i - 1);
  `reorder(state, rows, sentences=None)` -> the state of the rows `rows` (int32 [rows'],
    the hypothesis each new row continues); `sentences` (int32 [sentences']) is given
    only when sentences left the batch: the sentences whose per-sentence entries (the
    encoder output and its keys/values) to keep.

as fairseq's `FairseqIncrementalDecoder` (the model owns `reorder_incremental_state`), so
beam search does not know the cache layout. Adapters of a `model.transformer.Transformer`:
`CachedDecoder` (incremental decoding with the model's cache) and `FullDecoder` (the full
decoder on the whole prefix at every step, the reference for tests); an ensemble of models
(`t2t_repro.decoding.ensemble.EnsembleDecoder`) implements the same interface.
"""

import tensorflow as tf


def _repeat_beams(x, beam_size):
  """[batch, ...] -> [batch * beam_size, ...], each row repeated beam_size times."""
  return tf.repeat(x, beam_size, axis=0)


class CachedDecoder:
  """Incremental decoding with the model's cache (`init_cache` / `decode_step`).

  `fixed_size`: a cache of max_length positions written in place (static shapes, for
  XLA); otherwise a growing cache, one position appended per step, so that a step costs
  O(step) instead of O(max_length) (parsing decodes with input + 300 but writes ~2 x
  input tokens: 3x faster measured on 16 long test sentences).

  State: {"cache": the model's cache (self-attention keys/values per hypothesis, the
  encoder-decoder keys/values per sentence: projected once and read once per step for all
  the beams of a sentence), "src_bias": float32 [sentences, 1, 1, src_len], "weights": the
  step's weights (`Transformer.step_weights`), read and cast once per search, not per step;
  absent when the model's `step_weights_per_search` is False: each step reads them}.
  """

  def __init__(self, model, fixed_size=False):
    self.model, self.fixed_size = model, fixed_size
    self.vocab_size = model.vocab_size

  def start(self, inputs, beam_size, max_length):
    memory, src_bias = self.model.encode(inputs, training=False)
    cache = self.model.init_cache(memory, max_length if self.fixed_size else None, beam_size)
    state = {"cache": cache, "src_bias": src_bias}
    if self.model.step_weights_per_search:
      state["weights"] = self.model.step_weights(max_length)
    return state

  def step(self, prev_ids, i, state):
    logits, cache = self.model.decode_step(prev_ids, i, state["cache"], state["src_bias"],
                                           grow_cache=not self.fixed_size,
                                           weights=state.get("weights"))
    return tf.nn.log_softmax(logits), dict(state, cache=cache)

  def reorder(self, state, rows, sentences=None):
    cache = self.model.reorder_cache(state["cache"], rows, sentences)
    src_bias = state["src_bias"] if sentences is None else tf.gather(state["src_bias"], sentences)
    return dict(state, cache=cache, src_bias=src_bias)


class FullDecoder:
  """Recomputes the full (teacher-forced) decoder on the whole prefix at every step.

  O(T^2) decoder work; the reference for the cached decoder. State: {"memory" float
  [sentences, src_len, d_model], "src_bias" float32 [sentences, 1, 1, src_len], "prefix"
  int32 [rows, i]: the decoder inputs of the positions before i}; the memory is repeated
  for the hypotheses at every step.
  """

  def __init__(self, model, fixed_size=False):
    del fixed_size  # no cache
    self.model = model
    self.vocab_size = model.vocab_size

  def start(self, inputs, beam_size, max_length):
    del max_length
    memory, src_bias = self.model.encode(inputs, training=False)
    rows = tf.shape(inputs)[0] * beam_size
    return {"memory": memory, "src_bias": src_bias, "prefix": tf.zeros([rows, 0], tf.int32)}

  def step(self, prev_ids, i, state):
    del i  # the prefix length
    prefix = tf.concat([state["prefix"], prev_ids[:, None]], 1)
    # decode() shifts its targets right: targets [y_0 .. y_{i-1}, any] -> inputs prefix.
    targets = tf.concat([prefix[:, 1:], tf.zeros_like(prev_ids)[:, None]], 1)
    beams = tf.shape(prefix)[0] // tf.shape(state["memory"])[0]
    logits = self.model.decode(targets, _repeat_beams(state["memory"], beams),
                               _repeat_beams(state["src_bias"], beams))[:, -1]
    return tf.nn.log_softmax(tf.cast(logits, tf.float32)), dict(state, prefix=prefix)

  def reorder(self, state, rows, sentences=None):
    same = {"memory": state["memory"], "src_bias": state["src_bias"]}
    if sentences is not None:
      same = tf.nest.map_structure(lambda t: tf.gather(t, sentences, axis=0), same)
    return dict(same, prefix=tf.gather(state["prefix"], rows))


def decoder_for(model, cached=True, fixed_size=False):
  """The beam-search interface of `model`: a `Transformer` gets `CachedDecoder` (or
  `FullDecoder` with cached=False); an object with `decoder(cached, fixed_size)` (an
  ensemble) builds its own."""
  if hasattr(model, "decoder"):
    return model.decoder(cached, fixed_size)
  return (CachedDecoder if cached else FullDecoder)(model, fixed_size)
