"""Layer normalization (Ba et al. 2016) with a hand-written gradient, and inverted dropout
with 16-bit random masks (Srivastava et al. 2014): the two element-wise layers of every
residual block (§3.1, §5.4), written so that a training step spends less time outside
the matmuls (docs/BENCHMARKS.md section 0)."""

import keras
import tensorflow as tf

_MASK_LEVELS = 65536  # the dropout masks' random numbers are uint16


@keras.saving.register_keras_serializable(package="t2t_repro")
class LayerNormalization(keras.layers.LayerNormalization):
  """keras.layers.LayerNormalization over the last axis with the same forward ops and a
  gradient written out (Ba et al. 2016, eq. 4 and its derivative).

  Forward, as Keras 3 computes it in float32 (so outputs are bit-identical to it):
  mean and variance over the last axis (`tf.nn.moments`), inv = gamma / sqrt(var + eps),
  y = x * inv + (beta - mean * inv). Backward, with xhat = (x - mean) / sqrt(var + eps):
      d gamma = sum_rows(dy * xhat),  d beta = sum_rows(dy),
      dx = (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / sqrt(var + eps),
  dxhat = dy * gamma: 7 element-wise passes, where autodiff of the forward ops takes about
  twice as many (a `small` step: 15 of these layers).

  Same weights (`gamma`, `beta`), config and checkpoint names as the Keras layer; only
  `axis=-1` with center and scale is supported.

  Call args:
    x: float32, bfloat16 or float16 [..., d_model]; computed in float32.

  Returns:
    [..., d_model] in the layer's compute dtype.

  Raises:
    ValueError: (at construction) another axis, center=False or scale=False.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    if self.axis not in (-1, [-1]) or not (self.center and self.scale):
      raise ValueError("LayerNormalization supports axis=-1 with center and scale only")

  def call(self, inputs):
    epsilon = self.epsilon

    @tf.custom_gradient
    def normalize(x, gamma, beta):
      x = tf.cast(x, tf.float32)
      mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
      rstd = tf.math.rsqrt(variance + epsilon)
      inv = rstd * gamma
      y = x * inv + (-mean * inv + beta)

      def grad(dy):
        dy = tf.cast(dy, tf.float32)
        xhat = (x - mean) * rstd
        dxhat = dy * gamma
        width = tf.shape(x)[-1]
        d_gamma = tf.reduce_sum(tf.reshape(dy * xhat, [-1, width]), axis=0)
        d_beta = tf.reduce_sum(tf.reshape(dy, [-1, width]), axis=0)
        dx = rstd * (dxhat - tf.reduce_mean(dxhat, axis=-1, keepdims=True)
                     - xhat * tf.reduce_mean(dxhat * xhat, axis=-1, keepdims=True))
        return tf.cast(dx, inputs.dtype), d_gamma, d_beta

      return y, grad

    return tf.cast(normalize(inputs, tf.convert_to_tensor(self.gamma),
                             tf.convert_to_tensor(self.beta)), self.compute_dtype)


@keras.saving.register_keras_serializable(package="t2t_repro")
class Dropout(keras.layers.Dropout):
  """Inverted dropout (Srivastava et al. 2014; P_drop of §5.4) drawing 16 random bits per
  element instead of a float: two elements per Philox output word, half the random
  numbers of `keras.layers.Dropout` (whose draws are about 5 % of a `small` step).

  An element is kept when its uint16 draw u satisfies u >= round(rate * 65536), so the
  drop probability is that threshold / 65536 (0.1 -> 0.100006), and kept elements are
  scaled by 65536 / (65536 - threshold), the exact inverse of the keep probability: the
  expectation of the output is the input. Seeds come from the layer's Keras
  `SeedGenerator` (same checkpoint layout as keras.layers.Dropout); the masks differ from
  Keras's for the same seed.

  Call args:
    x: float [any shape]; training: bool, identity when False or rate == 0.

  Returns:
    x's shape and dtype.
  """

  def __init__(self, rate, seed=None, **kwargs):
    super().__init__(rate, seed=seed, **kwargs)

  def call(self, inputs, training=False):
    if not training or self.rate == 0:
      return inputs
    threshold = round(self.rate * _MASK_LEVELS)
    if threshold >= _MASK_LEVELS:
      return tf.zeros_like(inputs)
    seed = self.seed_generator.next()
    size = tf.size(inputs)
    words = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, minval=None,
                                        maxval=None, dtype=tf.uint32)
    draws = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
    keep = tf.reshape(draws >= threshold, tf.shape(inputs))
    scale = tf.constant(_MASK_LEVELS / (_MASK_LEVELS - threshold), inputs.dtype)
    return tf.where(keep, inputs * scale, tf.zeros([], inputs.dtype))
