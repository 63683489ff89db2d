"""Position-wise feed-forward network (Vaswani et al. 2017, §3.3, eq. 2)."""

import keras
import tensorflow as tf

from t2t_repro.model.dropout import Dropout
from t2t_repro.model.initializers import glorot_uniform


@keras.saving.register_keras_serializable(package="t2t_repro")
class FeedForward(keras.layers.Layer):
  """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to each position separately.

  Args:
    d_model: input and output width.
    d_ff: inner width (2048 base, 4096 big).
    relu_dropout: dropout after the ReLU (0 in the paper, 0.1 in tensor2tensor v3).

  Call args:
    x: float [batch, length, d_model].
    training: bool, enables dropout.

  Returns:
    float [batch, length, d_model].
  """

  def __init__(self, d_model, d_ff, relu_dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.d_ff = d_ff
    self.relu_dropout = relu_dropout
    self._dropout = Dropout(relu_dropout)

  def build(self, input_shape=None):
    self.w1 = self.add_weight(name="w1", shape=(self.d_model, self.d_ff),
                              initializer=glorot_uniform())
    self.b1 = self.add_weight(name="b1", shape=(self.d_ff,), initializer="zeros")
    self.w2 = self.add_weight(name="w2", shape=(self.d_ff, self.d_model),
                              initializer=glorot_uniform())
    self.b2 = self.add_weight(name="b2", shape=(self.d_model,), initializer="zeros")
    self.built = True

  def call(self, x, training=False):
    shape = tf.shape(x)
    y = self.step(tf.reshape(x, [-1, self.d_model]), (self.w1, self.b1, self.w2, self.b2),
                  training)
    return tf.reshape(y, shape)

  def step_weights(self, dtype):
    """(w1, b1, w2, b2) cast to the compute `dtype`, read once per search by the decoder."""
    return tuple(tf.cast(w, dtype) for w in (self.w1, self.b1, self.w2, self.b2))

  def step(self, x, weights, training=False):
    """FFN of rows x [rows, d_model] with the weights (w1, b1, w2, b2) -> [rows, d_model]:
    MatMul + BiasAdd (+ Relu), the shapes grappler's remapper fuses into one matmul."""
    w1, b1, w2, b2 = weights
    h = self._dropout(tf.nn.relu(_add_bias(tf.matmul(x, w1), b1)), training=training)
    return _add_bias(tf.matmul(h, w2), b2)

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, d_ff=self.d_ff, relu_dropout=self.relu_dropout)
    return config


def _add_bias(x, bias):
  """x [rows, n] + bias [n]. In half precision with `+`: the CPU gradient kernel of
  tf.nn.bias_add sums the rows in bfloat16 and loses 5% of a 2,048-row bias gradient, the
  gradient of `+` does not. In float32 with tf.nn.bias_add (the pinned decodes' numerics)."""
  if x.dtype == tf.float32:
    return tf.nn.bias_add(x, bias)
  return x + tf.cast(bias, x.dtype)
