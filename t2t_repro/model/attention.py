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
      its g beams (their queries attend as g x q_len positions of one sentence).
    step: int32 scalar, the position being decoded (self-attention cache only).
    grow_cache: append to the self-attention cache (concat) instead of writing into
      a fixed-size one: each step then costs O(step), not O(max length) (tested equal).
    training: bool, enables attention dropout.

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
    """Projects the memory once for encoder-decoder attention while decoding.

    Args:
      memory: float [batch, m_len, d_model] encoder output.

    Returns:
      dict with "k" [batch, h, m_len, d_k] and "v" [batch, h, m_len, d_v].
    """
    # Called outside __call__ (no Keras autocast): cast the float32 kernels explicitly.
    return {"k": self._split_heads(memory, tf.cast(self.k_kernel, memory.dtype), self.d_k),
            "v": self._split_heads(memory, tf.cast(self.v_kernel, memory.dtype), self.d_v)}

  def _keys_values(self, query, memory, cache, step, grow_cache):
    """(k, v, new cache, query offset) for `call`; see the class docstring. The offset is
    the position of the first query for self-attention (0, or `step` while decoding), None
    for encoder-decoder attention (no relative positions)."""
    if cache is not None and step is not None:
      # Self-attention while decoding: this position's key/value go into the cache.
      k_new = self._split_heads(query, self.k_kernel, self.d_k)
      v_new = self._split_heads(query, self.v_kernel, self.d_v)
      if grow_cache:
        k = tf.concat([cache["k"], k_new], axis=2)
        v = tf.concat([cache["v"], v_new], axis=2)
      else:
        k, v = _write_position(cache["k"], k_new, step), _write_position(cache["v"], v_new, step)
      return k, v, {"k": k, "v": v}, step
    if cache is not None:
      return cache["k"], cache["v"], cache, None
    source = query if memory is None else memory
    return (self._split_heads(source, self.k_kernel, self.d_k),
            self._split_heads(source, self.v_kernel, self.d_v), None,
            0 if memory is None else None)

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
    shape = tf.shape(out)
    out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [-1, self.num_heads * self.d_v])
    out = tf.reshape(tf.matmul(out, self.output_kernel), [shape[0], shape[2], self.d_model])
    return out, weights

  def call(self, query, memory=None, bias=None, cache=None, step=None, training=False,
           grow_cache=False):
    k, v, new_cache, q_offset = self._keys_values(query, memory, cache, step, grow_cache)
    if cache is not None and step is None:
      # Encoder-decoder attention while decoding: the keys/values are per sentence, the
      # queries per hypothesis; the beams' queries become query positions of their sentence
      # (exact: no mask between queries, no relative positions here).
      shape = tf.shape(query)
      query = tf.reshape(query, [tf.shape(k)[0], -1, self.d_model])
      out, _ = self._attend(query, k, v, bias, training)
      return tf.reshape(out, shape), new_cache
    out, _ = self._attend(query, k, v, bias, training, q_offset)
    return out, new_cache

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
    k, v, _, q_offset = self._keys_values(query, memory, None, None, False)
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
