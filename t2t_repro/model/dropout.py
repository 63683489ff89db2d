"""Inverted dropout (Srivastava et al. 2014; P_drop of §5.4) with 16-bit random masks: half
the random numbers of keras.layers.Dropout (docs/BENCHMARKS.md section 2)."""

import keras
import tensorflow as tf

_MASK_LEVELS = 65536  # the masks' random numbers are uint16


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

  Raises:
    ValueError: (at construction) rate outside [0, 1] (Keras's check) or a noise_shape.
  """

  def __init__(self, rate, seed=None, **kwargs):
    super().__init__(rate, seed=seed, **kwargs)
    if self.noise_shape is not None:
      raise ValueError("Dropout: noise_shape is not supported")

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
