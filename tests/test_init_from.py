"""Fine-tuning: `train --init_from` starts from a trained model's weights at step 0."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import train_command
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.training.api import train_model
from t2t_repro.config.train import TrainConfig

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tree_digest(folder):
  digest = hashlib.sha256()
  for root, _, files in sorted(os.walk(folder)):
    for name in sorted(files):
      path = os.path.join(root, name)
      digest.update(path.encode())
      with open(path, "rb") as f:
        digest.update(f.read())
  return digest.hexdigest()


def test_init_from_loads_the_weights_only_and_never_writes_the_source(trained_run, multi30k_slice,
                                                                      tmp_path):
  source = str(trained_run.model_dir)
  before = _tree_digest(source)
  data = multi30k_slice
  model_dir = tmp_path / "ft"
  config = TrainConfig(hparams=f"{source}/hparams.json", hparams_override="warmup_steps=100000",
                       problem="parallel_text", model_dir=str(model_dir), train_steps=1,
                       eval_every_steps=0, train_src=str(data / "train.en"),
                       train_tgt=str(data / "train.de"), init_from=source)
  result = train_model(config)
  assert result.step == 1 and result.checkpoint.endswith("ckpt-1")
  assert _tree_digest(source) == before  # the source model dir is only read
  with open(model_dir / "vocab.model", "rb") as a, open(f"{source}/vocab.model", "rb") as b:
    assert a.read() == b.read()
  tuned, _, _ = load_for_inference(str(model_dir))
  trained, _, _ = load_for_inference(source)
  reader = tf.train.load_checkpoint(str(model_dir / "ckpt-1"))
  iterations = [k for k in reader.get_variable_to_shape_map() if "iterations" in k]
  assert int(reader.get_tensor(iterations[0])) == 1  # a new optimizer: 1 update, not 301
  # One update at a near-zero rate (warmup 100000): the weights are the source's.
  for a, b in zip(tuned.weights, trained.weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-3)
  assert any(not np.array_equal(a.numpy(), b.numpy()) for a, b in zip(tuned.weights, trained.weights))


def _run(data, model_dir, *extra):
  return subprocess.run(train_command(data, model_dir, "--train_steps=1", "--eval_every_steps=0",
                                      *extra),
                        capture_output=True, text=True, cwd=_REPO, check=False)


@pytest.mark.parametrize("extra,message", [
    (["--hparams_override=d_model=32"], "another shape"),
    (["--init_from=/nonexistent/model"], "--init_from=/nonexistent/model"),
])
def test_bad_init_from_is_a_usage_error_before_any_write(trained_run, multi30k_slice, tmp_path,
                                                         extra, message):
  args = [a for a in extra if a.startswith("--init_from")] or [f"--init_from={trained_run.model_dir}"]
  args += [a for a in extra if not a.startswith("--init_from")]
  proc = _run(multi30k_slice, tmp_path / "m", *args)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
  assert not (tmp_path / "m").exists()


def test_a_vocab_dir_with_another_vocabulary_is_refused(trained_run, multi30k_slice, tmp_path):
  # multi30k_slice holds the vocabulary the trained run learned: the same bytes are accepted.
  other = tmp_path / "vocab"
  other.mkdir()
  for name in os.listdir(multi30k_slice):
    if name.endswith(".model"):
      with open(os.path.join(multi30k_slice, name), "rb") as f:
        data = bytearray(f.read())
      data[-1] ^= 1  # another vocabulary file under the same key
      (other / name).write_bytes(bytes(data))
  cmd = train_command(multi30k_slice, tmp_path / "m", "--train_steps=1", "--eval_every_steps=0",
                      f"--init_from={trained_run.model_dir}")
  cmd = [a for a in cmd if not a.startswith("--vocab_dir")] + [f"--vocab_dir={other}"]
  proc = subprocess.run(cmd, capture_output=True, text=True, cwd=_REPO, check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "--vocab_dir" in proc.stderr and "--init_from" in proc.stderr
  assert not (tmp_path / "m").exists()
