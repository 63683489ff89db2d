"""R-Drop (Liang et al. 2021): the symmetric KL of two dropout passes, and the training loss."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.config.hparams import HParamsError, get_hparams
from t2t_repro.training.loss import symmetric_kl_sum
from t2t_repro.training.trainer import Trainer, make_strategy


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_symmetric_kl_is_both_directions_summed_over_real_tokens():
  rng = np.random.default_rng(0)
  hidden_a, hidden_b = rng.normal(size=(2, 5, 4)).astype(np.float32)
  matrix = rng.normal(size=(7, 4)).astype(np.float32)
  weights = np.array([1, 1, 1, 0, 1], np.float32)
  la, lb = _log_softmax(hidden_a @ matrix.T), _log_softmax(hidden_b @ matrix.T)
  kl_ab = (np.exp(la) * (la - lb)).sum(-1)
  kl_ba = (np.exp(lb) * (lb - la)).sum(-1)
  expected = ((kl_ab + kl_ba) * weights).sum()
  got = symmetric_kl_sum(tf.constant(hidden_a), tf.constant(hidden_b), tf.constant(matrix),
                         tf.constant(weights))
  assert float(got) == pytest.approx(expected, rel=1e-5)
  assert float(symmetric_kl_sum(tf.constant(hidden_a), tf.constant(hidden_a), tf.constant(matrix),
                                tf.constant(weights))) == pytest.approx(0.0, abs=1e-6)


def _batch():
  inputs = np.array([[5, 6, 7, 8, 1], [9, 10, 1, 0, 0]], np.int32)
  targets = np.array([[11, 12, 13, 1, 0, 0], [14, 15, 16, 17, 18, 1]], np.int32)
  return {"inputs": inputs, "targets": targets}


def _first_step(tmp_path, overrides):
  """(the first step's stats, the model's teacher-forced logits [batch, tgt_len, V] before it)."""
  hp = get_hparams("tiny", f"vocab_size=40,{overrides}")
  trainer = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  batch = _batch()
  logits = trainer.model((batch["inputs"], batch["targets"])).numpy()
  data = tf.data.Dataset.from_tensor_slices({k: v[None] for k, v in batch.items()})
  return trainer.train_step(iter(data)), logits


def test_without_dropout_the_two_passes_agree_and_the_loss_is_the_plain_one(tmp_path):
  """No dropout anywhere: both passes are the same, the KL is 0, and the step's loss is the
  label-smoothed cross-entropy (eps 0.1 over V = 40) of the model's own logits."""
  stats, logits = _first_step(tmp_path, "dropout=0,attention_dropout=0,relu_dropout=0,"
                              "rdrop_alpha=5")
  targets = _batch()["targets"]
  mask = targets != 0
  log_p = _log_softmax(logits[mask].astype(np.float64))
  labels = targets[mask]
  low = 0.1 / 39
  q = np.full(log_p.shape, low)
  q[np.arange(len(labels)), labels] = 0.9
  assert stats["target_tokens"] == 10 and stats["source_tokens"] == 8  # the batch's, not doubled
  assert stats["loss"] == pytest.approx(-(q * log_p).sum(-1).mean(), rel=1e-5)
  assert stats["nll"] == pytest.approx(-log_p[np.arange(len(labels)), labels].mean(), rel=1e-5)


def test_with_dropout_the_kl_term_adds_to_the_loss(tmp_path):
  """Same seed, same first batch: the two runs' cross-entropies differ only by the
  dropout masks, while R-Drop adds alpha / 4 x a positive KL; with alpha = 1000 it dominates."""
  plain, _ = _first_step(tmp_path / "a", "dropout=0.3,attention_dropout=0.3,relu_dropout=0.3")
  rdrop, _ = _first_step(tmp_path / "b", "dropout=0.3,attention_dropout=0.3,relu_dropout=0.3,"
                         "rdrop_alpha=1000")
  assert np.isfinite(rdrop["loss"]) and rdrop["applied"]
  assert rdrop["loss"] > plain["loss"] + 1.0
  assert abs(rdrop["nll"] - plain["nll"]) < 1.0  # the nll is the passes' mean, no KL in it


def test_a_negative_alpha_is_refused():
  with pytest.raises(HParamsError, match="rdrop_alpha"):
    get_hparams("tiny", "rdrop_alpha=-1")
