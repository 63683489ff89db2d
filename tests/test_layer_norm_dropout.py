"""The residual blocks' LayerNormalization and Dropout (model/layer_norm.py, model/dropout.py) against
Keras's layers and the definitions they implement."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from t2t_repro.model.dropout import Dropout
from t2t_repro.model.layer_norm import LayerNormalization


def _pair(width):
  """Our LayerNormalization and Keras's with the same gamma, beta away from 1 and 0."""
  ours, theirs = LayerNormalization(epsilon=1e-6), keras.layers.LayerNormalization(epsilon=1e-6)
  for layer in (ours, theirs):
    layer.build([None, None, width])
    layer.gamma.assign(1.0 + 0.3 * np.sin(np.arange(width, dtype=np.float32)))
    layer.beta.assign(0.2 * np.cos(3.0 * np.arange(width, dtype=np.float32)))
  return ours, theirs


def _values_and_grads(layer, x, upstream):
  x = tf.constant(x)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = layer(x)
    loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
  return [y, *tape.gradient(loss, [x, layer.gamma, layer.beta])]


def test_layer_norm_forward_is_keras_bit_for_bit_and_gradients_agree():
  rng = np.random.default_rng(0)
  x = (3.0 * rng.normal(size=(4, 7, 32)) + 1.0).astype(np.float32)
  upstream = rng.normal(size=(4, 7, 32)).astype(np.float32)
  ours, theirs = _pair(32)
  y, dx, dg, db = _values_and_grads(ours, x, upstream)
  ky, kdx, kdg, kdb = _values_and_grads(theirs, x, upstream)
  np.testing.assert_array_equal(y.numpy(), ky.numpy())
  for a, b in ((dx, kdx), (dg, kdg), (db, kdb)):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
  # And the gradient against the closed form in float64 (Ba et al. 2016).
  x64, g = x.astype(np.float64), ours.gamma.numpy().astype(np.float64)
  xhat = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-6)
  dxhat = upstream * g
  expect = (dxhat - dxhat.mean(-1, keepdims=True)
            - xhat * (dxhat * xhat).mean(-1, keepdims=True)) / np.sqrt(
                x64.var(-1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(dx.numpy(), expect, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(dg.numpy(), (upstream * xhat).sum((0, 1)), rtol=1e-4, atol=1e-4)


def test_layer_norm_bfloat16_matches_keras_within_bfloat16_rounding():
  rng = np.random.default_rng(1)
  x = rng.normal(size=(3, 5, 64)).astype(np.float32)
  upstream = rng.normal(size=(3, 5, 64)).astype(np.float32)
  ours, theirs = _pair(64)
  for layer in (ours, theirs):
    layer.dtype_policy = keras.DTypePolicy("mixed_bfloat16")
  got = _values_and_grads(ours, tf.cast(x, tf.bfloat16), upstream)
  want = _values_and_grads(theirs, tf.cast(x, tf.bfloat16), upstream)
  assert got[0].dtype == tf.bfloat16 and got[1].dtype == tf.bfloat16
  assert got[2].dtype == tf.float32
  for a, b in zip(got, want):
    np.testing.assert_allclose(tf.cast(a, tf.float32).numpy(), tf.cast(b, tf.float32).numpy(),
                               rtol=2e-2, atol=2e-2)


def test_layer_norm_keeps_the_keras_weight_names():
  ours, theirs = _pair(8)
  assert [w.path for w in ours.weights] == [w.path.replace(theirs.name, ours.name)
                                            for w in theirs.weights]
  with pytest.raises(ValueError, match="axis=-1"):
    LayerNormalization(axis=1)


def test_dropout_drops_at_the_rate_and_keeps_the_expectation():
  layer = Dropout(0.1, seed=3)
  x = tf.fill([1000, 1001], 2.0)  # odd size: the last 16-bit draw is half of a word
  y = layer(x, training=True).numpy()
  threshold = round(0.1 * 65536)
  scale = 65536 / (65536 - threshold)
  kept = y != 0
  np.testing.assert_allclose(y[kept], 2.0 * scale, rtol=1e-7)
  # 1,001,000 Bernoulli draws: the kept fraction is within 5 standard deviations.
  keep_prob = 1 - threshold / 65536
  assert abs(kept.mean() - keep_prob) < 5 * np.sqrt(keep_prob * (1 - keep_prob) / kept.size)
  assert abs(y.mean() - 2.0) < 0.01
  # A fresh mask each call, no dropout when not training or at rate 0.
  assert not np.array_equal(layer(x, training=True).numpy() != 0, kept)
  np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
  np.testing.assert_array_equal(Dropout(0.0)(x, training=True).numpy(), x.numpy())
  assert not Dropout(1.0)(x, training=True).numpy().any()


def test_dropout_gradient_is_the_mask_times_the_scale():
  layer = Dropout(0.3, seed=5)
  x = tf.constant(np.random.default_rng(2).normal(size=(6, 50)).astype(np.float32))
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = layer(x, training=True)
  grad = tape.gradient(y, x).numpy()
  scale = 65536 / (65536 - round(0.3 * 65536))
  np.testing.assert_allclose(grad, np.where(y.numpy() != 0, scale, 0.0), rtol=1e-7)
  np.testing.assert_allclose(y.numpy(), x.numpy() * grad, rtol=1e-6)


def test_dropout_masks_are_reproducible_from_the_seed_state():
  a, b = Dropout(0.2, seed=11), Dropout(0.2, seed=11)
  x = tf.ones([64, 64])
  np.testing.assert_array_equal(a(x, training=True).numpy(), b(x, training=True).numpy())
  assert a.seed_generator.state.path.endswith("seed_generator_state")


def test_dropout_config_round_trip_and_unsupported_noise_shape():
  layer = Dropout(0.25, seed=4)
  again = Dropout.from_config(layer.get_config())
  assert (again.rate, again.seed) == (0.25, 4)
  with pytest.raises(ValueError, match="noise_shape"):
    Dropout(0.1, noise_shape=(1, None))


def test_both_compile_under_xla_as_the_trainers_jit_compile_step():
  ours, _ = _pair(16)
  dropout = Dropout(0.5, seed=9)
  x = tf.constant(np.random.default_rng(3).normal(size=(3, 5, 16)).astype(np.float32))

  def layer_norm_grads(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      loss = tf.reduce_sum(ours(x) * tf.range(16, dtype=tf.float32))
    return tape.gradient(loss, [x, ours.gamma, ours.beta])

  for a, b in zip(tf.function(layer_norm_grads, jit_compile=True)(x), layer_norm_grads(x)):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
  y = tf.function(lambda x: dropout(x, training=True), jit_compile=True)(x).numpy()
  kept = y != 0
  assert 0 < kept.sum() < kept.size
  np.testing.assert_allclose(y[kept], x.numpy()[kept] * 65536 / (65536 - 32768), rtol=1e-6)
