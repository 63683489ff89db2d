"""Replicas, accumulation and mixed precision give the update of one big batch.

The global-token normalization makes one update independent of how its batch is split:
2 MirroredStrategy replicas with batches (a, b) == one replica with a and b stacked ==
one replica accumulating a then b.

Adam's first update is lr * g / (|g| + epsilon): with the paper's epsilon (1e-9) it is lr times
the sign of nearly every gradient element, so weights compared after one step would say little
about the gradients (a gradient scaled by 2 gives the same update) and, for the few elements whose
gradient is near epsilon, would differ by float rounding in the order of the sums (one element of
16,384 by 0.3 lr on an AVX2 CPU). Epsilon 1 makes the update nearly linear in the gradient, so
equal updates mean equal gradients, and a one-update warmup makes the first rate 0.125 (eq. 3 at
d_model 64), so the updates are far above float32's resolution of the weights.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.config.hparams import get_hparams
from t2t_repro.training.trainer import Trainer, make_strategy

HP = get_hparams("tiny", "vocab_size=50,dropout=0,label_smoothing=0.1,adam_epsilon=1,warmup_steps=1")


@pytest.fixture(autouse=True)
def _float32_policy():
  yield
  keras.mixed_precision.set_global_policy("float32")


def _batches():
  """Two micro-batches of different shapes and token counts (random but fixed)."""
  rng = np.random.default_rng(3)

  def batch(rows, src_len, tgt_len):
    inputs = rng.integers(3, 50, size=(rows, src_len)).astype(np.int32)
    targets = rng.integers(3, 50, size=(rows, tgt_len)).astype(np.int32)
    inputs[:, -1], targets[:, -1] = 1, 1
    inputs[0, src_len // 2:] = 0  # some padding
    targets[-1, tgt_len // 2:] = 0
    return {"inputs": inputs, "targets": targets}

  return batch(3, 7, 9), batch(5, 4, 6)


def _stacked(a, b):
  """One batch holding the rows of a and b, padded to a common length."""
  def pad(x, n):
    return np.pad(x, [[0, 0], [0, n - x.shape[1]]])
  out = {}
  for key in a:
    n = max(a[key].shape[1], b[key].shape[1])
    out[key] = np.concatenate([pad(a[key], n), pad(b[key], n)])
  return out


def _dataset(batches):
  ds = tf.data.Dataset.from_tensors(batches[0])
  for b in batches[1:]:
    ds = ds.concatenate(tf.data.Dataset.from_tensors(b))
  return ds


def _trainer(tmp_path, strategy, weights=None, **kwargs):
  trainer = Trainer(HP, strategy, str(tmp_path), **kwargs)
  if weights is not None:
    for v, w in zip(trainer.model.trainable_variables, weights):
      v.assign(w)
  return trainer


def _step(trainer, batches):
  """One update on `batches` in order: replica r (micro-batch k) gets batches[k * replicas + r]."""
  return trainer.train_step(iter(_dataset(batches)))


def _weights(trainer):
  return [v.numpy() for v in trainer.model.trainable_variables]


def _assert_same_update(got, expected):
  """One variable's update equals the reference's to 0.1 % of the largest element's."""
  np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())


def test_two_replicas_equal_one_replica(tmp_path):
  a, b = _batches()
  single = _trainer(tmp_path / "one", make_strategy("one_device"))
  init = _weights(single)
  one = _step(single, [_stacked(a, b)])
  mirrored_strategy = make_strategy("mirrored")
  assert mirrored_strategy.num_replicas_in_sync == 2
  mirrored = _trainer(tmp_path / "two", mirrored_strategy, init)
  two = _step(mirrored, [a, b])  # replica 0 gets a, replica 1 gets b
  assert two["target_tokens"] == one["target_tokens"]
  assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
  assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)
  for x, y, w in zip(_weights(single), _weights(mirrored), init):
    _assert_same_update(y - w, x - w)
    assert np.any(x != w) or not np.any(x)  # the step really moved the weights


def test_accumulation_equals_one_big_batch(tmp_path):
  a, b = _batches()
  big = _trainer(tmp_path / "big", make_strategy("one_device"))
  init = _weights(big)
  one = _step(big, [_stacked(a, b)])
  accum = _trainer(tmp_path / "accum", make_strategy("one_device"), init, accum_steps=2)
  two = _step(accum, [a, b])
  assert accum.step == 1
  assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
  for x, y, w in zip(_weights(big), _weights(accum), init):
    _assert_same_update(y - w, x - w)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_step_is_finite_and_close(tmp_path, policy):
  a, _ = _batches()
  reference = _trainer(tmp_path / "fp32", make_strategy("one_device"))
  init = _weights(reference)
  expected = _step(reference, [a])
  mixed = _trainer(tmp_path / policy, make_strategy("one_device"), init, mixed_precision=policy)
  assert mixed.model.embedding.compute_dtype == policy.split("_")[1]
  assert mixed.model.trainable_variables[0].dtype == "float32"  # master weights stay float32
  got = _step(mixed, [a])
  assert got["applied"] and np.isfinite(got["loss"])
  assert got["loss"] == pytest.approx(expected["loss"], rel=2e-2)
  # Logits and the loss are float32 whatever the policy.
  logits = mixed.model((a["inputs"], a["targets"]))
  assert logits.dtype == tf.float32
