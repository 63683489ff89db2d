"""Scaled dot-product multi-head attention (Vaswani et al. 2017, §3.2.1 eq. 1, §3.2.2).

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed for h heads in parallel on
learned projections W_i^Q, W_i^K, W_i^V and recombined by W^O. As in tensor2tensor the
projections have no bias. Masks are additive biases (0 = attend, `constants.NEG_INF`
= never attend), which serve padding masks, the causal mask and the incremental-decoding
mask alike.

Relative position representations (Shaw et al. 2018, eqs. 3-5; tensor2tensor's
`dot_product_attention_relative`, OpenNMT-tf's `maximum_relative_position`): with
`max_relative_position` k > 0, self-attention adds learned vectors a^K_ij, a^V_ij in R^d_k,
R^d_v, shared by the heads of a layer, chosen by the clipped distance clip(j - i, -k, k):
  e_ij = q_i (k_j + a^K_ij)^T / sqrt(d_k),   z_i = sum_j softmax(e)_ij (v_j + a^V_ij).

The layer's call always returns `(outputs, cache)` (keras-hub's cached attention
convention); the attention weights, for analysis and plots, come from a separate
method, `call_with_weights`.
"""


import keras
import tensorflow as tf

from t2t_repro.constants import NEG_INF, PAD_ID
from t2t_repro.model.dropout import Dropout
from t2t_repro.model.initializers import glorot_uniform


def padding_bias(ids):
  """Additive attention bias that hides padding (id 0).

  Args:
    ids: int32 [batch, length] token ids, 0 = pad.

  Returns:
    float32 [batch, 1, 1, length]: 0 at real tokens, -1e9 at pads.
  """
  return tf.cast(tf.equal(ids, PAD_ID), tf.float32)[:, None, None, :] * NEG_INF


def non_pad_lengths(ids):
  """Number of non-pad tokens per row: int32 [batch, length] -> int32 [batch]."""
  return tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=1)


def causal_bias(length):
  """Additive bias that hides future positions (decoder self-attention, §3.2.3).

  Args:
    length: int scalar, target length.

  Returns:
    float32 [1, 1, length, length]: entry (i, j) is 0 for j <= i, -1e9 for j > i.
  """
  allowed = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
  return ((1.0 - allowed) * NEG_INF)[None, None]


@keras.saving.register_keras_serializable(package="t2t_repro")
class MultiHeadAttention(keras.layers.Layer):
  """Multi-head scaled dot-product attention with an incremental-decoding cache.

  Args:
    d_model: input and output width.
    num_heads: h.
    d_k: per-head query/key width (default d_model // num_heads).
    d_v: per-head value width (default d_model // num_heads).
    attention_dropout: dropout rate on the attention weights (0 in the paper).
    attention_init: "glorot": Glorot (Xavier) uniform on the projection matrices
      [d_model, h * d_k] and [h * d_v, d_model] (tensor2tensor's dense layers), std
      sqrt(2 / (d_model + h * d_k)); "glorot_per_head": Glorot uniform computed on the
      per-head kernel shapes [d_model, h, d_k] and [h, d_v, d_model], as Keras 2's
      (tf.keras, tf_keras) `MultiHeadAttention` initializes its EinsumDense kernels with
      glorot_uniform: fan_in h * d_model and fan_out d_k * d_model for Q, K and V, fan_in
      h * d_v and fan_out h * d_model for the output (std 0.0107 and 0.0395 at d_model
      256, 4 heads, against 0.0625 for both with "glorot"; Keras 3 counts 2-D fans).
    max_relative_position: k of the relative position representations (0: none); for
      self-attention only (the module docstring). Adds the weights relative_keys
      [2k + 1, d_k] and relative_values [2k + 1, d_v].

  Call args:
    query: float [batch, q_len, d_model].
    memory: float [batch, m_len, d_model] to attend to; None for self-attention.
    bias: float32 additive bias broadcastable to [batch, num_heads, q_len, m_len]
      (see `padding_bias`, `causal_bias`); None for no mask.
    cache: optional dict for incremental decoding. With `step` (self-attention)
      it holds "k" [batch, h, T, d_k] and "v" [batch, h, T, d_v]; the keys and
      values of `query` (q_len must be 1) are written at position `step` of the
      fixed-size cache (T = max length: static shapes for XLA) with
      `tf.tensor_scatter_nd_update`, or appended to a growing cache (T = step, with
      `grow_cache`). Without `step` (encoder-decoder attention) it holds the memory's
      precomputed "k" and "v" (see `memory_kv`) and `memory` is ignored; its first axis
      may be the sentences while `query`'s is the hypotheses (batch = sentences x g, the
      g beams of a sentence adjacent): each sentence's keys/values are then read once for
      its g beams (their queries attend as g queries of one sentence). With a cache q_len
      must be 1 and there is no dropout: the call runs `step_self` / `step_memory`, which
      the decoder's step calls directly with kernels read once per search.
    step: int32 scalar, the position being decoded (self-attention cache only).
    grow_cache: append to the self-attention cache (concat) instead of writing into
      a fixed-size one: each step then costs O(step), not O(max length) (tested equal).
    training: bool, enables attention dropout (not with a cache).

  Returns:
    (outputs float [batch, q_len, d_model], cache): the updated self-attention cache
    when a cache and `step` were given, the given memory cache unchanged when only a
    cache was given, else None.
  """

  def __init__(self, d_model, num_heads, d_k=None, d_v=None, attention_dropout=0.0,
               attention_init="glorot", max_relative_position=0, **kwargs):
    super().__init__(**kwargs)
    self.max_relative_position = max_relative_position
    self.d_model = d_model
    self.num_heads = num_heads
    self.d_k = d_k or d_model // num_heads
    self.d_v = d_v or d_model // num_heads
    self.attention_dropout = attention_dropout
    self.attention_init = attention_init
    self._dropout = Dropout(attention_dropout)

  def build(self, input_shape=None):
    h, dk, dv, d = self.num_heads, self.d_k, self.d_v, self.d_model
    # VarianceScaling(scale, fan_avg) on the 2-D matrix has variance 2 * scale / (fan_in + fan_out)
    # of that matrix; per head, Keras's fans are those of the 3-D kernel (see the docstring).
    per_head = self.attention_init == "glorot_per_head"
    in_scale = (d + h * dk) / (h * d + dk * d) if per_head else 1.0
    out_scale = (h * dv + d) / (h * dv + h * d) if per_head else 1.0
    self.q_kernel = self.add_weight(name="q_kernel", shape=(d, h * dk),
                                    initializer=glorot_uniform(in_scale))
    self.k_kernel = self.add_weight(name="k_kernel", shape=(d, h * dk),
                                    initializer=glorot_uniform(in_scale))
    self.v_kernel = self.add_weight(name="v_kernel", shape=(d, h * dv),
                                    initializer=glorot_uniform(in_scale))
    self.output_kernel = self.add_weight(name="output_kernel", shape=(h * dv, d),
                                         initializer=glorot_uniform(out_scale))
    if self.max_relative_position:
      rows = 2 * self.max_relative_position + 1
      self.relative_keys = self.add_weight(name="relative_keys", shape=(rows, dk),
                                           initializer=glorot_uniform())
      self.relative_values = self.add_weight(name="relative_values", shape=(rows, dv),
                                             initializer=glorot_uniform())
    self.built = True

  def _split_heads(self, x, kernel, depth):
    """[batch, len, d_model] x kernel -> [batch, h, len, depth]."""
    shape = tf.shape(x)
    y = tf.matmul(tf.reshape(x, [-1, self.d_model]), kernel)
    y = tf.reshape(y, [shape[0], shape[1], self.num_heads, depth])
    return tf.transpose(y, [0, 2, 1, 3])

  def memory_kv(self, memory):
    """Projects the memory once for encoder-decoder attention while decoding: K and V in
    one matmul (kernels [d_model, h * (d_k + d_v)]), stored in the layout of the step's
    batched matmuls.

    Args:
      memory: float [batch, m_len, d_model] encoder output.

    Returns:
      dict with "k" [batch, h, m_len, d_k] and "v" [batch, h, m_len, d_v].
    """
    h, dk, dv = self.num_heads, self.d_k, self.d_v
    # Called outside __call__ (no Keras autocast): cast the float32 kernels explicitly.
    kernel = tf.concat([tf.cast(self.k_kernel, memory.dtype),
                        tf.cast(self.v_kernel, memory.dtype)], 1)
    shape = tf.shape(memory)
    kv = tf.matmul(tf.reshape(memory, [-1, self.d_model]), kernel)
    if dk == dv:
      kv = tf.transpose(tf.reshape(kv, [shape[0], shape[1], 2 * h, dk]), [0, 2, 1, 3])
      k, v = tf.split(kv, 2, axis=1)
      return {"k": k, "v": v}
    k, v = tf.split(kv, [h * dk, h * dv], axis=1)
    heads = lambda y, depth: tf.transpose(tf.reshape(y, [shape[0], shape[1], h, depth]),
                                          [0, 2, 1, 3])
    return {"k": heads(k, dk), "v": heads(v, dv)}

  def step_weights(self, dtype, self_attention):
    """The kernels of one decoding step, read once per search (outside its loop) and cast to
    the compute `dtype`: for self-attention Q, K and V as one kernel "qkv" [d_model,
    h * (2 d_k + d_v)], for encoder-decoder attention (K and V are in the cache) "q"
    [d_model, h * d_k]; and "output" [h * d_v, d_model]."""
    cast = lambda w: tf.cast(w, dtype)
    if self_attention:
      qkv = tf.concat([cast(self.q_kernel), cast(self.k_kernel), cast(self.v_kernel)], 1)
      return {"qkv": qkv, "output": cast(self.output_kernel)}
    return {"q": cast(self.q_kernel), "output": cast(self.output_kernel)}

  def step_self(self, x, cache, weights, bias, step, grow_cache):
    """One position of decoder self-attention with the cache (the incremental decoding of
    `call(query, cache=..., step=...)`, without dropout).

    Args:
      x: float [rows, d_model], the queries of position `step`.
      cache: {"k" [rows, h, T, d_k], "v" [rows, h, T, d_v]}, see the class docstring.
      weights: `step_weights(..., self_attention=True)`.
      bias: float32 broadcastable to [rows, h, 1, T], or None.
      step: int32 scalar position; grow_cache: as `call`.

    Returns:
      (float [rows, d_model], the updated cache).
    """
    h, dk, dv = self.num_heads, self.d_k, self.d_v
    qkv = tf.matmul(x, weights["qkv"])
    # Heads of one position: [rows, h * depth] -> [rows, h, 1, depth] is a reshape (no
    # transpose), the layout of the cache and of the batched matmuls.
    if dk == dv:
      q, k_new, v_new = tf.split(tf.reshape(qkv, [-1, 3 * h, 1, dk]), 3, axis=1)
    else:
      q, k_new, v_new = (tf.reshape(y, [-1, h, 1, depth]) for y, depth in zip(
          tf.split(qkv, [h * dk, h * dk, h * dv], axis=1), (dk, dk, dv)))
    if grow_cache:
      k = tf.concat([cache["k"], k_new], axis=2)
      v = tf.concat([cache["v"], v_new], axis=2)
    else:
      k, v = _write_position(cache["k"], k_new, step), _write_position(cache["v"], v_new, step)
    out, _ = self._attend_heads(q * (dk ** -0.5), k, v, bias, False, step)
    return tf.matmul(tf.reshape(out, [-1, h * dv]), weights["output"]), {"k": k, "v": v}

  def step_memory(self, x, cache, weights, bias):
    """One position of encoder-decoder attention with the memory's cached keys/values (the
    incremental decoding of `call(query, cache=...)`, without dropout).

    Args:
      x: float [rows, d_model], rows = sentences x g (the g beams of a sentence adjacent).
      cache: {"k" [sentences, h, m_len, d_k], "v" [sentences, h, m_len, d_v]} (`memory_kv`).
      weights: `step_weights(..., self_attention=False)`.
      bias: float32 [sentences, 1, 1, m_len] source padding bias.

    Returns:
      float [rows, d_model].
    """
    h, dk, dv = self.num_heads, self.d_k, self.d_v
    # The g beams' queries of a sentence are g query positions of it (see `call`).
    sentences = tf.shape(cache["k"])[0]
    q = tf.reshape(tf.matmul(x, weights["q"]), [sentences, -1, h, dk])
    q = tf.transpose(q, [0, 2, 1, 3]) * (dk ** -0.5)
    out, _ = self._attend_heads(q, cache["k"], cache["v"], bias, False)
    out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [-1, h * dv])
    return tf.matmul(out, weights["output"])

  def _keys_values(self, query, memory):
    """(k, v, query offset) of a full (uncached) pass; the offset is 0 for self-attention,
    None for encoder-decoder attention (no relative positions)."""
    source = query if memory is None else memory
    return (self._split_heads(source, self.k_kernel, self.d_k),
            self._split_heads(source, self.v_kernel, self.d_v), 0 if memory is None else None)

  def relative_indices(self, q_len, k_len, q_offset):
    """Rows of the relative tables for each (query, key): int32 [q_len, k_len],
    clip(j - i, -k, k) + k for query position i = q_offset + row and key position j."""
    k = self.max_relative_position
    distance = tf.range(k_len)[None, :] - (tf.range(q_len) + tf.cast(q_offset, tf.int32))[:, None]
    return tf.clip_by_value(distance, -k, k) + k

  def _attend(self, query, k, v, bias, training, q_offset=None):
    """softmax(Q K^T / sqrt(d_k) + bias) V W^O (with relative positions when this layer has
    them and `q_offset` is given) -> (outputs [b, q_len, d_model], weights float32
    [b, h, q_len, m_len])."""
    q = self._split_heads(query, self.q_kernel, self.d_k) * (self.d_k ** -0.5)
    out, weights = self._attend_heads(q, k, v, bias, training, q_offset)
    shape = tf.shape(out)
    out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [-1, self.num_heads * self.d_v])
    out = tf.reshape(tf.matmul(out, self.output_kernel), [shape[0], shape[2], self.d_model])
    return out, weights

  def _attend_heads(self, q, k, v, bias, training, q_offset=None):
    """softmax(q k^T + bias) v per head, q already scaled: q [b, h, q_len, d_k], k
    [b, h, m_len, d_k], v [b, h, m_len, d_v] -> (outputs [b, h, q_len, d_v], weights float32
    [b, h, q_len, m_len])."""
    logits = tf.matmul(q, k, transpose_b=True)
    relative = self.max_relative_position and q_offset is not None
    if relative:
      rows = self.relative_indices(tf.shape(q)[2], tf.shape(k)[2], q_offset)
      logits += tf.einsum("bhqd,qkd->bhqk", q, tf.gather(tf.cast(self.relative_keys, q.dtype), rows))
    logits = tf.cast(logits, tf.float32)
    if bias is not None:  # Keras autocasts call args to the compute dtype; add in float32
      logits += tf.cast(bias, tf.float32)
    weights = tf.nn.softmax(logits)
    dropped = self._dropout(tf.cast(weights, q.dtype), training=training)
    out = tf.matmul(dropped, v)  # [batch, h, q_len, d_v]
    if relative:
      out += tf.einsum("bhqk,qkd->bhqd", dropped,
                       tf.gather(tf.cast(self.relative_values, q.dtype), rows))
    return out, weights

  def call(self, query, memory=None, bias=None, cache=None, step=None, training=False,
           grow_cache=False):
    if cache is not None:  # one position (q_len 1) of incremental decoding, no dropout
      weights = self.step_weights(query.dtype, self_attention=step is not None)
      x = tf.reshape(query, [-1, self.d_model])
      if step is None:
        out = self.step_memory(x, cache, weights, bias)
      else:
        out, cache = self.step_self(x, cache, weights, bias, step, grow_cache)
      return tf.reshape(out, tf.shape(query)), cache
    k, v, q_offset = self._keys_values(query, memory)
    out, _ = self._attend(query, k, v, bias, training, q_offset)
    return out, None

  def call_with_weights(self, query, memory=None, bias=None):
    """The attention outputs and weights of one full (uncached) pass, no dropout.

    Args:
      query, memory, bias: as `call`.

    Returns:
      (outputs float [batch, q_len, d_model], weights float32 [batch, h, q_len, m_len]),
      each weight row summing to 1 over the keys.
    """
    if not self.built:
      self.build()
    k, v, q_offset = self._keys_values(query, memory)
    return self._attend(query, k, v, bias, False, q_offset)

  def compute_output_shape(self, query_shape, *args, **kwargs):
    return tuple(query_shape[:-1]) + (self.d_model,)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, num_heads=self.num_heads, d_k=self.d_k, d_v=self.d_v,
                  attention_dropout=self.attention_dropout, attention_init=self.attention_init,
                  max_relative_position=self.max_relative_position)
    return config


def _write_position(cache, new, step):
  """cache [b, h, T, d] with new [b, h, 1, d] written at position `step` of axis 2."""
  shape = tf.shape(cache)
  b, h = tf.meshgrid(tf.range(shape[0]), tf.range(shape[1]), indexing="ij")
  index = tf.stack([b, h, tf.fill(tf.shape(b), tf.cast(step, tf.int32))], axis=-1)  # [b, h, 3]
  return tf.tensor_scatter_nd_update(cache, index, new[:, :, 0, :])
