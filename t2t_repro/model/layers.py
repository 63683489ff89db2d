"""Encoder and decoder layers with residual dropout and LayerNorm (§3.1, §5.4).

Post-norm (the paper): x = LayerNorm(x + Dropout(Sublayer(x))).
Pre-norm (tensor2tensor v3): x = x + Dropout(Sublayer(LayerNorm(x))); the stack then
ends with one more LayerNorm (`Transformer` adds it).
"""

import keras
import tensorflow as tf

from t2t_repro.model.attention import MultiHeadAttention
from t2t_repro.config.model import ModelConfig
from t2t_repro.model.dropout import Dropout
from t2t_repro.model.feed_forward import FeedForward
from t2t_repro.model.layer_norm import LayerNormalization

# A decoder layer's incremental-decoding cache is {"self": {"k", "v"}, MEMORY_KEY: {"k", "v"}}.
# The MEMORY_KEY entry holds the encoder-decoder keys/values, projected once from the
# encoder output: one row per sentence (not per beam), gathered only when sentences leave.
MEMORY_KEY = "memory"


class _ResidualBlock(keras.layers.Layer):
  """Shared plumbing of the encoder and decoder layers: norms, residual dropout, config.

  Sub-layer i of a block runs as
    y = Sublayer(residual_in(i, x)); x = residual_out(i, x, y)
  which is LayerNorm(x + Dropout(Sublayer(x))) for post-norm (paper §3.1, §5.4)
  and x + Dropout(Sublayer(LayerNorm(x))) for pre-norm (tensor2tensor v3).
  """

  def __init__(self, attention_names, config, **kwargs):
    super().__init__(**kwargs)
    self.config = ModelConfig.of(config)
    num_sublayers = len(attention_names) + 1  # the attentions, then the FFN
    self.pre_norm = self.config.norm_type == "pre"
    # Attributes, not only a list: tf.train.Checkpoint does not look inside Keras's lists.
    for i in range(num_sublayers):
      setattr(self, f"layer_norm_{i}", LayerNormalization(epsilon=1e-6, name=f"layer_norm_{i}"))
    self.norms = [getattr(self, f"layer_norm_{i}") for i in range(num_sublayers)]
    self._dropout = Dropout(self.config.dropout)
    self.ffn = FeedForward(self.config.d_model, self.config.d_ff, self.config.relu_dropout,
                           name="ffn")
    c = self.config
    self._attention_names = tuple(attention_names)
    relative = c.max_relative_position if c.position_encoding == "relative" else 0
    for name in attention_names:  # relative positions in self-attention only (Shaw et al.)
      setattr(self, name, MultiHeadAttention(
          c.d_model, c.num_heads, c.d_k, c.d_v, c.attention_dropout, c.attention_init,
          max_relative_position=relative if name == "self_attention" else 0, name=name))

  def build(self, input_shape):
    attentions = [getattr(self, name) for name in self._attention_names]
    for layer in (*self.norms, self.ffn, *attentions):
      if not layer.built:
        layer.build(input_shape)
    self.built = True

  def residual_in(self, i, x):
    return self.norms[i](x) if self.pre_norm else x

  def residual_out(self, i, x, y, training):
    out = x + self._dropout(y, training=training)
    return out if self.pre_norm else self.norms[i](out)

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict()}


@keras.saving.register_keras_serializable(package="t2t_repro")
class EncoderLayer(_ResidualBlock):
  """Self-attention then FFN, each with residual dropout and LayerNorm (§3.1, Figure 1 left).

  Args:
    config: a `config.model.ModelConfig` (or its `to_dict()`): d_model, d_ff, num_heads,
      d_k, d_v (§3.2.2, §3.3); dropout, attention_dropout, relu_dropout (§5.4);
      norm_type "post" (paper) or "pre" (tensor2tensor v3).

  Call args:
    x: float [batch, src_len, d_model].
    bias: float32 [batch, 1, 1, src_len] padding bias (see `padding_bias`).
    training: bool.
    return_attention_scores: also return float32 [batch, h, src_len, src_len].

  Returns:
    float [batch, src_len, d_model] (and the weights if asked for).
  """

  def __init__(self, config, **kwargs):
    super().__init__(("self_attention",), config, **kwargs)

  def call(self, x, bias=None, training=False, return_attention_scores=False):
    if return_attention_scores:
      y, weights = self.self_attention.call_with_weights(self.residual_in(0, x), bias=bias)
    else:
      y, _ = self.self_attention(self.residual_in(0, x), bias=bias, training=training)
    x = self.residual_out(0, x, y, training)
    x = self.residual_out(1, x, self.ffn(self.residual_in(1, x), training=training), training)
    return (x, weights) if return_attention_scores else x


@keras.saving.register_keras_serializable(package="t2t_repro")
class DecoderLayer(_ResidualBlock):
  """Masked self-attention, encoder-decoder attention, FFN (§3.1, Figure 1 right).

  Args: as `EncoderLayer`.

  Call args:
    x: float [batch, tgt_len, d_model].
    memory: float [batch, src_len, d_model] encoder output (unused with a cache:
      the cache holds its projected keys and values).
    self_bias: float32 bias broadcastable to [batch, h, tgt_len, tgt_len]
      (`causal_bias` in training; the step mask while decoding).
    memory_bias: float32 [batch, 1, 1, src_len] source padding bias.
    cache: incremental decoding (tgt_len = 1): {"self": {"k", "v"}, "memory": {"k", "v"}},
      see `MultiHeadAttention`.
    step: int32 scalar decoding position (with a cache).
    grow_cache: the self-attention cache grows by one position a step (see
      `MultiHeadAttention`).
    training: bool.
    return_attention_scores: also return the self and encoder-decoder weights,
      float32 [batch, h, tgt_len, tgt_len] and [batch, h, tgt_len, src_len] (a full
      pass without cache and dropout).

  Returns:
    (x float [batch, tgt_len, d_model], new cache or None); with
    return_attention_scores, (x, None, (self_weights, memory_weights)).
  """

  def __init__(self, config, **kwargs):
    super().__init__(("self_attention", "memory_attention"), config, **kwargs)

  def call(self, x, memory=None, self_bias=None, memory_bias=None, cache=None, step=None,
           training=False, return_attention_scores=False, grow_cache=False):
    if return_attention_scores:
      return self._call_with_weights(x, memory, self_bias, memory_bias)
    if cache is not None:  # one position of incremental decoding (tgt_len 1), no dropout
      y, cache = self.step(tf.reshape(x, [-1, self.config.d_model]), cache, self.step_weights(),
                           self_bias, memory_bias, step, grow_cache)
      return tf.reshape(y, tf.shape(x)), cache
    y, _ = self.self_attention(self.residual_in(0, x), bias=self_bias, training=training)
    x = self.residual_out(0, x, y, training)
    y, _ = self.memory_attention(self.residual_in(1, x), memory, bias=memory_bias,
                                 training=training)
    x = self.residual_out(1, x, y, training)
    x = self.residual_out(2, x, self.ffn(self.residual_in(2, x), training=training), training)
    return x, None

  def step_weights(self):
    """The weights of `step`, read once per search (outside its loop) and cast to the compute
    dtype (the LayerNorms' stay float32): {"self_attention", "memory_attention": see
    `MultiHeadAttention.step_weights`, "ffn": `FeedForward.step_weights`, "norms": a
    (gamma, beta) per LayerNorm}."""
    dtype = self.compute_dtype
    return {"self_attention": self.self_attention.step_weights(dtype, self_attention=True),
            "memory_attention": self.memory_attention.step_weights(dtype, self_attention=False),
            "ffn": self.ffn.step_weights(dtype),
            "norms": [norm.step_weights() for norm in self.norms]}

  def step(self, x, cache, weights, self_bias, memory_bias, step, grow_cache):
    """One position of incremental decoding for every row (the layer's call with a cache).

    Args:
      x: float [rows, d_model], position `step` of each hypothesis.
      cache: {"self": {"k", "v"}, MEMORY_KEY: {"k", "v"}} (see `MultiHeadAttention`).
      weights: `step_weights()`.
      self_bias: None (growing cache) or float32 [1, 1, 1, T] (fixed-size cache).
      memory_bias: float32 [sentences, 1, 1, src_len].
      step: int32 scalar; grow_cache: see `MultiHeadAttention.step_self`.

    Returns:
      (float [rows, d_model], the updated cache).
    """
    norms = weights["norms"]

    def sublayer(i, x, name, fn):
      with tf.name_scope(name):
        y = fn(self.norms[i].normalize(x, norms[i]) if self.pre_norm else x)
      out = x + y
      return out if self.pre_norm else self.norms[i].normalize(out, norms[i])

    with tf.name_scope(self.name):
      self_cache = {}

      def self_attention(y):
        y, self_cache["kv"] = self.self_attention.step_self(
            y, cache["self"], weights["self_attention"], self_bias, step, grow_cache)
        return y

      x = sublayer(0, x, "self_attention", self_attention)
      x = sublayer(1, x, "memory_attention", lambda y: self.memory_attention.step_memory(
          y, cache[MEMORY_KEY], weights["memory_attention"], memory_bias))
      x = sublayer(2, x, "ffn", lambda y: self.ffn.step(y, weights["ffn"]))
    return x, {"self": self_cache["kv"], MEMORY_KEY: cache[MEMORY_KEY]}

  def _call_with_weights(self, x, memory, self_bias, memory_bias):
    y, self_weights = self.self_attention.call_with_weights(self.residual_in(0, x), bias=self_bias)
    x = self.residual_out(0, x, y, False)
    y, memory_weights = self.memory_attention.call_with_weights(self.residual_in(1, x), memory,
                                                                bias=memory_bias)
    x = self.residual_out(1, x, y, False)
    x = self.residual_out(2, x, self.ffn(self.residual_in(2, x), training=False), False)
    return x, None, (self_weights, memory_weights)
