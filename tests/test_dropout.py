"""t2t_repro.model.dropout.Dropout: rate, scaling, seeding, checkpoint layout."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.model.dropout import Dropout


def test_identity_outside_training_and_at_rate_zero():
  x = tf.random.normal([3, 5, 7])
  np.testing.assert_array_equal(Dropout(0.3)(x, training=False).numpy(), x.numpy())
  np.testing.assert_array_equal(Dropout(0.0)(x, training=True).numpy(), x.numpy())


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_drop_rate_and_exact_inverse_scaling(rate):
  x = tf.ones([257, 1001])  # odd size: the last 32-bit word is half used
  y = Dropout(rate, seed=1)(x, training=True).numpy()
  threshold = round((1 - rate) * 65536)
  kept = y != 0
  # 257,257 Bernoulli draws: 5 standard deviations of the drop share is < 0.003.
  assert abs(1 - kept.mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / x.shape.num_elements())
  np.testing.assert_array_equal(y[kept], np.float32(65536 / threshold))
  assert y.shape == (257, 1001) and y.dtype == np.float32


def test_masks_are_seeded_and_change_every_call():
  x = tf.ones([64, 64])
  a, b = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
  first_a, first_b = a(x, training=True).numpy(), b(x, training=True).numpy()
  np.testing.assert_array_equal(first_a, first_b)
  assert not np.array_equal(first_a, a(x, training=True).numpy())


def test_gradient_is_the_mask_times_scale():
  x = tf.random.normal([8, 9])
  layer = Dropout(0.25, seed=2)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = layer(x, training=True)
  grad = tape.gradient(y, x).numpy()
  scale = np.float32(65536 / round(0.75 * 65536))
  np.testing.assert_array_equal(grad, np.where(y.numpy() != 0, scale, 0).astype(np.float32))


def test_works_under_xla():
  layer = Dropout(0.1, seed=4)
  y = tf.function(lambda x: layer(x, training=True), jit_compile=True)(tf.ones([16, 33]))
  assert y.shape == (16, 33) and 0 < np.count_nonzero(y.numpy()) < 16 * 33


@pytest.mark.parametrize("rate", [0.0, 0.1])
def test_checkpoint_layout_equals_keras_dropout(tmp_path, rate):
  # Checkpoints of models built with keras.layers.Dropout restore into ours (strict
  # assert_existing_objects_matched) and hold the same entries: neither saves a seed state.
  def build(dropout):
    return keras.Sequential([keras.Input([4]), keras.layers.Dense(3), dropout])

  keras_model = build(keras.layers.Dropout(rate, seed=3))
  keras_model(tf.ones([2, 4]), training=True)
  path = tf.train.Checkpoint(model=keras_model).save(str(tmp_path / "keras"))
  ours = build(Dropout(rate, seed=9))
  tf.train.Checkpoint(model=ours).restore(path).assert_existing_objects_matched()
  np.testing.assert_array_equal(ours.layers[0].kernel.numpy(), keras_model.layers[0].kernel.numpy())
  ours_path = tf.train.Checkpoint(model=ours).save(str(tmp_path / "ours"))
  assert ([name for name, _ in tf.train.list_variables(ours_path)]
          == [name for name, _ in tf.train.list_variables(path)])


def test_config_round_trip_and_bad_rate():
  layer = Dropout(0.2, seed=5, name="d")
  clone = Dropout.from_config(layer.get_config())
  assert (clone.rate, clone.seed, clone.name) == (0.2, 5, "d")
  assert layer.compute_output_shape((None, 4, 8)) == (None, 4, 8)
  with pytest.raises(ValueError, match="dropout rate"):
    Dropout(1.0)
  with pytest.raises(ValueError, match="keeps nothing"):
    Dropout(1 - 2 ** -18)


def test_rates_at_the_ends_of_16_bit_resolution():
  x = tf.random.normal([4, 7])
  # Below 2^-17 the rate rounds to 0: the identity (no uint16 overflow of the threshold).
  np.testing.assert_array_equal(Dropout(1e-6)(x, training=True).numpy(), x.numpy())
  # Just above 1 - 2^-17: threshold 1, one kept element in 65536, scaled by 65536.
  y = Dropout(1 - 2 ** -16, seed=1)(tf.ones([8, 65536]), training=True).numpy()
  assert set(np.unique(y)) <= {0.0, 65536.0} and 0 < np.count_nonzero(y) < 40
