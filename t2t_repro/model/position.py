"""Positional encodings: sinusoids (Vaswani et al. 2017, §3.5) and learned (Table 3 row E)."""

import keras
import tensorflow as tf


def sinusoid_table(positions, d_model):
  """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

  Args:
    positions: float32 [length] positions (0-based).
    d_model: even model width.

  Returns:
    float32 [length, d_model], sines at even and cosines at odd channels (§3.5).
  """
  i = tf.range(d_model // 2, dtype=tf.float32)
  inv_timescale = tf.pow(10000.0, -2.0 * i / d_model)
  angles = tf.cast(positions, tf.float32)[:, None] * inv_timescale[None, :]
  return tf.reshape(tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1), [-1, d_model])


@keras.saving.register_keras_serializable(package="t2t_repro")
class SinusoidalPositionEncoding(keras.layers.Layer):
  """Adds the fixed sinusoidal encoding of §3.5 to embeddings.

  Call args:
    x: float [batch, length, d_model].
    start: int32 scalar, position of x[:, 0] (used by incremental decoding).

  Returns:
    float [batch, length, d_model], x + PE[start:start + length].

  Raises:
    ValueError: d_model is odd.
  """

  def __init__(self, d_model, **kwargs):
    super().__init__(**kwargs)
    if d_model % 2:
      raise ValueError(f"sinusoidal positions need an even d_model, got {d_model}")
    self.d_model = d_model

  def call(self, x, start=0):
    positions = tf.range(tf.shape(x)[1]) + start
    return x + tf.cast(sinusoid_table(positions, self.d_model), x.dtype)[None]

  def step_table(self, length, dtype):
    """The encodings of positions 0 .. length - 1, [length, d_model] in `dtype`, computed
    once per search by the decoder; `step_row` is the row of a position."""
    return tf.cast(sinusoid_table(tf.range(length), self.d_model), dtype)

  def step_row(self, step):
    """The row of `step_table` that holds position `step` (int32 scalar)."""
    return step

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model)
    return config


@keras.saving.register_keras_serializable(package="t2t_repro")
class LearnedPositionEmbedding(keras.layers.Layer):
  """Adds a learned position embedding (Table 3 row E) to embeddings.

  Args:
    max_positions: rows of the table; positions beyond it reuse the last row
      (decoding can run past the training max_length).
    d_model: width.

  Call args / returns: as `SinusoidalPositionEncoding`.
  """

  def __init__(self, max_positions, d_model, **kwargs):
    super().__init__(**kwargs)
    self.max_positions = max_positions
    self.d_model = d_model

  def build(self, input_shape=None):
    self.table = self.add_weight(name="table", shape=(self.max_positions, self.d_model),
                                 initializer=keras.initializers.RandomNormal(stddev=self.d_model ** -0.5))
    self.built = True

  def call(self, x, start=0):
    positions = tf.minimum(tf.range(tf.shape(x)[1]) + start, self.max_positions - 1)
    return x + tf.cast(tf.gather(self.table, positions), x.dtype)[None]

  def step_table(self, length, dtype):
    """The table in `dtype`, read once per search by the decoder (`length` is unused)."""
    del length
    return tf.cast(self.table, dtype)

  def step_row(self, step):
    """The row of `step_table` that holds position `step` (int32 scalar)."""
    return tf.minimum(step, self.max_positions - 1)

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    config = super().get_config()
    config.update(max_positions=self.max_positions, d_model=self.d_model)
    return config
