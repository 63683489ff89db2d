"""training.averaging and tools/average_checkpoints.py: element-wise mean of model weights,
usable output model dir."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model_dir_util import make_model_dir
from conftest import tool_path
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.training import averaging

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TOOL = tool_path("average_checkpoints")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data_dir):
  return make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)


def test_average_of_two_is_elementwise_mean(tmp_path, model_dir):
  assert averaging.last_checkpoints(model_dir, 2) == [os.path.join(model_dir, "ckpt-5"),
                                                  os.path.join(model_dir, "ckpt-7")]
  assert averaging.checkpoint_step(os.path.join(model_dir, "ckpt-5")) == 5
  output_dir = str(tmp_path / "avg")
  # The command line: --model_dir, N from hparams.average_last (2 in this model dir).
  result = subprocess.run([sys.executable, _TOOL, f"--model_dir={model_dir}",
                           f"--output_dir={output_dir}"],
                          cwd=_REPO, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(os.listdir(output_dir)) == sorted(
      ["averaged.json", "checkpoint", "flags.json", "hparams.json", "vocab.model", "ckpt-7.index",
       "ckpt-7.data-00000-of-00001"])
  assert tf.train.latest_checkpoint(output_dir) == os.path.join(output_dir, "ckpt-7")
  assert averaging.checkpoint_step(os.path.join(output_dir, "ckpt-7")) == 7
  assert json.load(open(os.path.join(output_dir, "averaged.json")))["step"] == 7

  averaged, hparams, tokenizer = load_for_inference(output_dir)
  first, _, _ = load_for_inference(model_dir, os.path.join(model_dir, "ckpt-5"))
  second, _, _ = load_for_inference(model_dir, os.path.join(model_dir, "ckpt-7"))
  assert len(averaged.weights) == 61
  for a, x, y in zip(averaged.weights, first.weights, second.weights):
    assert not np.array_equal(x.numpy(), y.numpy())
    np.testing.assert_allclose(a.numpy(), (x.numpy() + y.numpy()) / 2, rtol=1e-6, atol=1e-7)
  # No optimizer slots were copied.
  names = [n for n, _ in tf.train.list_variables(os.path.join(output_dir, "ckpt-7"))]
  assert names and not any(n.startswith("optimizer") for n in names)
  # The averaged model decodes.
  out = Translator(averaged, tokenizer, DecodeConfig(beam_size=2, decode_extra_length=3)).translate(
      ["A man is riding a bike.", ""])
  assert out[0] and out[1] == ""


def test_refuses_to_overwrite(tmp_path, model_dir):
  checkpoints = [os.path.join(model_dir, "ckpt-5"), os.path.join(model_dir, "ckpt-7")]
  with pytest.raises(ValueError, match="source folder"):
    averaging.average_checkpoints(checkpoints, model_dir)
  busy = tmp_path / "busy"
  busy.mkdir()
  (busy / "file").write_text("x")
  with pytest.raises(ValueError, match="not empty"):
    averaging.average_checkpoints(checkpoints, str(busy))
  with pytest.raises(ValueError, match="fewer than"):
    averaging.last_checkpoints(model_dir, 3)
  with pytest.raises(FileNotFoundError):
    averaging.average_checkpoints([os.path.join(model_dir, "ckpt-6")], str(tmp_path / "new"))
  # One checkpoint: the output is a copy of it.
  path, _ = averaging.average_checkpoints([checkpoints[0]], str(tmp_path / "one"), model_dir)
  copy, _, _ = load_for_inference(str(tmp_path / "one"))
  original, _, _ = load_for_inference(model_dir, checkpoints[0])
  assert path.endswith("ckpt-5")
  for a, b in zip(copy.weights, original.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_step_of_a_loss_scaled_checkpoint_is_its_inner_optimizers(tmp_path):
  """mixed_float16: the LossScaleOptimizer's own iterations stay 0, its inner optimizer's count."""
  import keras  # pylint: disable=import-outside-toplevel
  weight = tf.Variable([1.0])
  optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
  for _ in range(3):
    optimizer.apply_gradients([(tf.constant([1.0]), weight)])
  path = tf.train.Checkpoint(optimizer=optimizer, weight=weight).write(str(tmp_path / "ckpt-9"))
  assert averaging.checkpoint_step(path) == 3
