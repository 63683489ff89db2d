"""block_top_k equals tf.math.top_k: values, indices and the order of ties."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.decoding.top_k import block_size, block_top_k


def test_block_size_prefers_a_divisor_near_128():
  assert block_size(6000) == 125
  assert block_size(37000) == 125
  assert block_size(32768) == 128
  assert block_size(6007) == 128  # prime: no divisor in [64, 256], the last block is padded


@pytest.mark.parametrize("vocab,block", [(6000, None), (6007, None), (1000, 16), (1000, 7)])
@pytest.mark.parametrize("k", [1, 8, 10])
def test_equals_top_k_with_ties(vocab, block, k):
  rng = np.random.RandomState(vocab + k)
  logits = rng.normal(size=[13, vocab]).astype(np.float32) * 3
  cases = [logits, np.round(logits),                     # random; many ties
           np.zeros_like(logits),                         # all tied: the first k indices
           np.where(logits > 2.5, logits, -1e9).astype(np.float32)]  # masked, as constraints do
  for x in cases:
    want_values, want_ids = tf.math.top_k(x, k)
    values, ids = block_top_k(tf.constant(x), k, block)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(ids.numpy(), want_ids.numpy())


def test_best_values_in_one_block():
  """All k best in one block (and the row's tail padded): the k best blocks still hold them."""
  x = np.zeros([2, 1000], np.float32)
  x[0, 300:308] = np.arange(8, 0, -1)
  x[1, 995:1000] = 5.0
  values, ids = block_top_k(tf.constant(x), 8, 16)
  np.testing.assert_array_equal(ids.numpy()[0], np.arange(300, 308))
  np.testing.assert_array_equal(ids.numpy()[1], [995, 996, 997, 998, 999, 0, 1, 2])
  np.testing.assert_array_equal(values.numpy()[1], [5, 5, 5, 5, 5, 0, 0, 0])


def test_needs_a_static_width():
  fn = tf.function(lambda x: block_top_k(x, 2), input_signature=[tf.TensorSpec([None, None])])
  with pytest.raises(ValueError, match="static"):
    fn.get_concrete_function()
