"""--ema_decay: the moving average of the weights, kept in checkpoints and written as ema/."""

import json
import os

import numpy as np
import pytest

from t2t_repro import errors
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.training.api import train_model
from t2t_repro.config.train import TrainConfig


def _config(data, model_dir, **changes):
  return TrainConfig(hparams="tiny", problem="parallel_text", model_dir=str(model_dir),
                     vocab_dir=str(data), log_every_steps=1, train_src=str(data / "train.en"),
                     train_tgt=str(data / "train.de"), dev_src=str(data / "dev.en"),
                     dev_tgt=str(data / "dev.de"), save_checkpoints_steps=1,
                     keep_checkpoint_max=10, dev_bleu_lines=0, dev_samples=0, **changes)


def test_ema_is_the_moving_average_of_the_updates_and_survives_a_resume(multi30k_slice, tmp_path):
  decay = 0.5
  model_dir = tmp_path / "m"
  train_model(_config(multi30k_slice, model_dir, ema_decay=decay, train_steps=2,
                      eval_every_steps=0))
  result = train_model(_config(multi30k_slice, model_dir, ema_decay=decay, train_steps=4,
                         eval_every_steps=4))  # resumed at 2: the average comes from the checkpoint
  assert result.step == 4
  weights = [load_for_inference(str(model_dir), str(model_dir / f"ckpt-{k}"))[0].get_weights()
             for k in range(1, 5)]
  expected = weights[0]  # the first update copies the weights
  for w in weights[1:]:
    expected = [decay * a + (1 - decay) * b for a, b in zip(expected, w)]
  ema, _, _ = load_for_inference(str(model_dir / "ema"))
  for got, want in zip(ema.get_weights(), expected):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert not np.allclose(ema.get_weights()[0], weights[-1][0])
  with open(model_dir / "ema" / "ema.json", encoding="utf-8") as f:
    assert json.load(f) == {"ema_decay": decay, "step": 4}
  assert result.ema["checkpoint"].endswith("ema/ckpt-4")
  assert result.ema["dev"]["nll"] > 0 and result.ema["dev"]["nll"] != result.dev["nll"]
  # the run's own last checkpoint keeps the trained (not the averaged) weights
  last, _, _ = load_for_inference(str(model_dir))
  np.testing.assert_array_equal(last.get_weights()[0], weights[-1][0])


def test_ema_decay_is_checked_and_cannot_change_on_resume(multi30k_slice, tmp_path):
  with pytest.raises(errors.UsageError, match=r"ema_decay must be in \[0, 1\), got 1.0"):
    train_model(_config(multi30k_slice, tmp_path / "a", ema_decay=1.0, train_steps=1))
  assert not os.path.exists(tmp_path / "a")
  train_model(_config(multi30k_slice, tmp_path / "b", ema_decay=0.9, train_steps=1,
                      eval_every_steps=0))
  with pytest.raises(errors.UsageError, match="ema_decay"):
    train_model(_config(multi30k_slice, tmp_path / "b", ema_decay=0.0, train_steps=2,
                  eval_every_steps=0))
