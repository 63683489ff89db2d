"""One embedding matrix for source, target and the pre-softmax projection (§3.4)."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="t2t_repro")
class SharedEmbedding(keras.layers.Layer):
  """Shared source/target embedding, scaled by sqrt(d_model), tied to the output layer.

  Vaswani et al. 2017 §3.4 (weight sharing after Press & Wolf 2016). The matrix
  is initialized N(0, d_model^-0.5) as in tensor2tensor, so that the scaled
  embeddings have unit variance.

  Args:
    vocab_size: V, shared BPE vocabulary size [tokens].
    d_model: width.

  Call args:
    ids: int32 [batch, length], 0 = pad.

  Returns:
    float [batch, length, d_model] = E[ids] * sqrt(d_model).
  """

  def __init__(self, vocab_size, d_model, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.d_model = d_model

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="embeddings", shape=(self.vocab_size, self.d_model),
        initializer=keras.initializers.RandomNormal(stddev=self.d_model ** -0.5))
    self.built = True

  def call(self, ids):
    return tf.gather(self.embeddings, ids) * tf.cast(self.d_model ** 0.5, self.compute_dtype)

  def logits(self, x, kernel=None):
    """Pre-softmax projection with the same matrix.

    Args:
      x: float [..., d_model] decoder output.
      kernel: None (E is read and cast here), or E^T already read in x's dtype
        [d_model, vocab_size]: a decoding step's, transposed once per search. oneDNN's
        matmul of a few rows reads a stored [d_model, vocab_size] matrix faster than E
        with transpose_b (`small`, one sentence, beam 4: this matmul 1.05 -> 0.65 ms per
        step in benchmarks/profile_decode.py's trace; studies/small_batches/step_cost.md).

    Returns:
      float [..., vocab_size] = x E^T.
    """
    if kernel is not None:
      return tf.matmul(x, kernel)
    # Called outside __call__ (no Keras autocast scope): cast the float32 matrix explicitly.
    weights = tf.cast(self.embeddings, x.dtype)
    if x.shape.rank == 2:
      return tf.matmul(x, weights, transpose_b=True)
    shape = tf.shape(x)
    flat = tf.matmul(tf.reshape(x, [-1, self.d_model]), weights, transpose_b=True)
    return tf.reshape(flat, tf.concat([shape[:-1], [self.vocab_size]], 0))

  def compute_output_shape(self, input_shape):
    return tuple(input_shape) + (self.d_model,)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, d_model=self.d_model)
    return config
