"""Components of one beam-search step timed alone at that step's shapes, and the levers
(alternative formulations of the same result) beside them; `profile_decode.py --ablation=1`."""

import statistics
import time


def ablations(model, rows, cache_len, src_len, beam, calls):
  """Seconds per call of each component alone at one step's shapes (tf.function each)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  rows -= rows % beam
  rng = np.random.default_rng(0)
  vocab = model.vocab_size
  inputs = tf.constant(rng.integers(3, min(vocab, 6000), [rows // beam, src_len]), tf.int32)
  memory, src_bias = model.encode(inputs)
  cache = model.init_cache(memory, beam_size=beam)
  # A cache of cache_len positions: decode cache_len steps of fixed tokens (eagerly, once).
  ids = tf.constant(rng.integers(3, min(vocab, 6000), [rows]), tf.int32)
  for i in range(cache_len):
    _, cache = model.decode_step(ids, tf.constant(i), cache, src_bias, grow_cache=True)
  step = tf.constant(cache_len)
  d = model.d_model
  x = tf.constant(rng.standard_normal([rows, 1, d]), tf.float32)
  hidden = tf.constant(rng.standard_normal([rows, d]), tf.float32)
  logits = model.logits(hidden)
  log_probs = tf.nn.log_softmax(logits)
  alive = tf.zeros([rows // beam, beam])
  reorder_rows = tf.constant(rng.permutation(rows), tf.int32)
  layer = model.decoder_layers[0]
  lc = cache[layer.name]

  def full_step():
    lg, new = model.decode_step(ids, step, cache, src_bias, grow_cache=True)
    return tf.nn.log_softmax(lg), new

  def step_top_k():
    lp, new = full_step()
    c = alive[:, :, None] + tf.reshape(lp, [rows // beam, beam, vocab])
    return tf.math.top_k(tf.reshape(c, [rows // beam, beam * vocab]), 2 * beam), new

  def candidates_top_k():
    c = alive[:, :, None] + tf.reshape(log_probs, [rows // beam, beam, vocab])
    return tf.math.top_k(tf.reshape(c, [rows // beam, beam * vocab]), 2 * beam)

  wq, wk, wv = (layer.self_attention.q_kernel, layer.self_attention.k_kernel,
                layer.self_attention.v_kernel)
  w_qkv = tf.Variable(tf.concat([wq, wk, wv], 1))
  emb = model.embedding.embeddings
  emb_t = tf.Variable(tf.transpose(emb))
  b, two_k = rows // beam, 2 * beam

  def per_row_top_k():
    # The same ranking: the best 2k of a sentence are among the best 2k of each beam row.
    c = alive[:, :, None] + tf.reshape(tf.math.top_k(log_probs, two_k)[0], [b, beam, two_k])
    return tf.math.top_k(tf.reshape(c, [b, beam * two_k]), two_k)

  def top_k_before_log_softmax():
    # log_softmax = logits - logsumexp: rank the raw logits per row, normalize 2k per row.
    lse = tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
    best, index = tf.math.top_k(logits, two_k)
    c = alive[:, :, None] + tf.reshape(best - lse, [b, beam, two_k])
    return tf.math.top_k(tf.reshape(c, [b, beam * two_k]), two_k), index

  h2 = tf.reshape(x, [rows, d])
  parts = {
      "empty tf.function call (dispatch)": lambda: tf.constant(0),
      "full step: decode_step + log_softmax": full_step,
      "decoder layers only (all layers, no logits)": lambda: [
          lyr(x, memory_bias=src_bias, cache=cache[lyr.name], step=step, grow_cache=True)
          for lyr in model.decoder_layers],
      "one layer: self-attention incl. cache concat": lambda: layer.self_attention(
          x, cache=lc["self"], step=step, grow_cache=True),
      "one layer: cross-attention": lambda: layer.memory_attention(
          x, bias=src_bias, cache=lc["memory"]),
      "one layer: FFN": lambda: layer.ffn(x),
      "output projection (logits matmul)": lambda: model.logits(hidden),
      "log_softmax [rows, V]": lambda: tf.nn.log_softmax(logits),
      "candidate scores + top_k(2k) of k x V (the search before the two-stage top-k)":
          candidates_top_k,
      "cache reorder: gather self K/V, all layers": lambda: model.reorder_cache(cache,
                                                                                reorder_rows),
      "lever: Q, K, V projections as 3 matmuls (now)": lambda: (
          tf.matmul(h2, wq), tf.matmul(h2, wk), tf.matmul(h2, wv)),
      "lever: Q, K, V as one fused matmul [d, 3d]": lambda: tf.matmul(h2, w_qkv),
      "lever: logits x E^T with transpose_b (now)": lambda: tf.matmul(hidden, emb,
                                                                      transpose_b=True),
      "lever: logits x E^T with E^T stored": lambda: tf.matmul(hidden, emb_t),
      "top_k(2k) per beam row, then of k x 2k (the search now)": per_row_top_k,
      "lever: logsumexp + top_k(2k) of raw logits per row, then of k x 2k (no log_softmax, "
      "no k x V add)": top_k_before_log_softmax,
      "lever: full step, XLA (jit_compile=True)": full_step,
      "full step + candidate scores + top_k (now)": step_top_k,
      "lever: full step + candidate scores + top_k, XLA": step_top_k,
  }
  results = {}
  for name, fn in parts.items():
    f = tf.function(fn, jit_compile=True if "XLA" in name else None)
    tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, f())  # trace
    per_call = []
    for _ in range(5):
      start = time.perf_counter()
      for _ in range(calls):
        out = f()
      tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
      per_call.append((time.perf_counter() - start) / calls)
    results[name] = statistics.median(per_call)
  return results
