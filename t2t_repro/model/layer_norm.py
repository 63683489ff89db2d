"""Layer normalization (Ba et al. 2016) of the residual blocks (§3.1) with a hand-written
gradient: fewer element-wise passes per training step than autodiff of Keras's forward
(docs/BENCHMARKS.md section 2)."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="t2t_repro")
class LayerNormalization(keras.layers.LayerNormalization):
  """keras.layers.LayerNormalization over the last axis with the same forward ops and a
  gradient written out (Ba et al. 2016, eq. 4 and its derivative).

  Forward, as Keras 3 computes it in float32 (so outputs are bit-identical to it):
  mean and variance over the last axis (`tf.nn.moments`), inv = gamma / sqrt(var + eps),
  y = x * inv + (beta - mean * inv). Backward, with xhat = (x - mean) / sqrt(var + eps):
      d gamma = sum_rows(dy * xhat),  d beta = sum_rows(dy),
      dx = (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / sqrt(var + eps),
  dxhat = dy * gamma. Forward and backward trace to 25 numeric ops, against 42 for autodiff
  of Keras's forward (no broadcasts, casts or divisions in the gradient); about 20 % less
  time per layer, docs/BENCHMARKS.md section 2 (a `small` step has 15 of these layers).

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
    return self.normalize(inputs, self.step_weights())

  def step_weights(self):
    """(gamma, beta) float32, read once per search by the decoder."""
    return tf.convert_to_tensor(self.gamma), tf.convert_to_tensor(self.beta)

  def normalize(self, inputs, weights):
    """The layer's output for `inputs` with the weights (gamma, beta) float32 [d_model]."""
    epsilon = self.epsilon

    @tf.custom_gradient
    def normalize(x, gamma, beta):
      x = tf.cast(x, tf.float32)
      mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
      rstd = tf.math.rsqrt(variance + epsilon)
      inv = rstd * gamma
      y = x * inv + (beta - mean * inv)  # bit for bit Keras's -mean * inv + beta, one op less

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

    return tf.cast(normalize(inputs, *weights), self.compute_dtype)
