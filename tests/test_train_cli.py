"""`python -m t2t_repro.train` end to end on real Multi30k text: it learns (the shared
`trained_run`), it survives SIGTERM and SIGKILL (even with a half-written checkpoint) and
resumes at the saved step."""

import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import train_command
from t2t_repro.config.hparams import get_hparams
from t2t_repro.training.trainer import Trainer, make_strategy


def _latest_step(model_dir):
  path = tf.train.latest_checkpoint(str(model_dir))
  return int(path.rsplit("-", 1)[1]) if path else -1


def _start(cmd):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for_checkpoint(proc, model_dir, above, timeout=300):
  deadline = time.time() + timeout
  while _latest_step(model_dir) <= above:
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    assert time.time() < deadline, "no checkpoint in time"
    time.sleep(0.5)


@pytest.mark.slow
def test_tiny_learns_on_real_multi30k(trained_run):
  """CI end to end (the shared `trained_run`): 200 steps of `tiny`; dev loss must fall far
  below its start (TensorBoard's summaries: tests/test_tensorboard.py)."""
  model_dir, output = trained_run.model_dir, trained_run.stdout + trained_run.stderr
  assert trained_run.returncode == 0, output[-3000:]
  losses = {int(s): float(v) for s, v in re.findall(r"dev step (\d+): loss ([\d.]+)", output)}
  assert set(losses) == {0, 200}, output[-2000:]
  assert losses[0] > 7.0  # about ln(2000) = 7.6 before training
  assert losses[200] < losses[0] - 2.0, losses
  assert _latest_step(model_dir) == 200
  # The periodic dev BLEU (beam search on 20 dev lines) and the final test BLEU ran.
  dev_bleu = re.search(r"dev step 200: .* BLEU ([\d.]+) \(sacreBLEU, first 20 dev lines\)", output)
  test_bleu = re.search(r"test \(parallel_text, first 20 lines, beam 4, alpha 0.6\):\n"
                        r"sacreBLEU \(primary[^)]*\): ([\d.]+)", output)
  assert dev_bleu and test_bleu, output[-2000:]
  assert 0.0 <= float(dev_bleu.group(1)) <= 100.0
  assert float(test_bleu.group(1)) == pytest.approx(float(dev_bleu.group(1)), abs=0.01)  # same lines
  for name in ("hparams.json", "flags.json", "vocab.model"):
    assert (model_dir / name).exists()
  assert sorted(os.path.basename(p) for p in tf.train.get_checkpoint_state(
      str(model_dir)).all_model_checkpoint_paths) == ["ckpt-100", "ckpt-200"]


@pytest.mark.slow
@pytest.mark.integration
def test_sigterm_and_kill_then_resume(multi30k_slice, tmp_path):
  model_dir = tmp_path / "model"
  base = train_command(multi30k_slice, model_dir, "--eval_every_steps=0", "--save_checkpoints_steps=4",
                  "--save_checkpoints_secs=0")

  # 1. SIGTERM: a checkpoint at the current step, then a clean exit.
  proc = _start(base + ["--train_steps=100000"])
  _wait_for_checkpoint(proc, model_dir, above=4)
  proc.send_signal(signal.SIGTERM)
  output = proc.communicate(timeout=120)[0]
  assert proc.returncode == 0, output[-3000:]
  stopped = int(re.search(r"SIGTERM received: checkpoint saved at step (\d+)", output).group(1))
  assert _latest_step(model_dir) == stopped

  # 2. Resume, then SIGKILL (no chance to save) and leave a half-written checkpoint behind.
  proc = _start(base + ["--train_steps=100000"])
  _wait_for_checkpoint(proc, model_dir, above=stopped)
  proc.kill()
  output = proc.communicate(timeout=60)[0]
  assert f"resumed from {model_dir}/ckpt-{stopped} at step {stopped}" in output
  killed_at = _latest_step(model_dir)
  (model_dir / f"ckpt-{killed_at + 1}.index").write_bytes(b"\0partial")
  (model_dir / f"ckpt-{killed_at + 1}.data-00000-of-00001").write_bytes(b"\0partial")

  # 3. Resume again: it starts at the last complete checkpoint, with identical weights.
  hp = get_hparams(str(model_dir / "hparams.json"))
  trainer = Trainer(hp, make_strategy("one_device"), str(model_dir))
  assert trainer.restore().endswith(f"ckpt-{killed_at}")
  assert trainer.step == killed_at
  # A model-only restore (what decoding and export do) finds every model variable too.
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel
  alone = Transformer.from_hparams(hp)
  fresh = [v.numpy().copy() for v in alone.trainable_variables]
  tf.train.Checkpoint(model=alone).restore(
      tf.train.latest_checkpoint(str(model_dir))).assert_existing_objects_matched()
  for a, b, f in zip(alone.trainable_variables, trainer.model.trainable_variables, fresh):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), f) or not f.any()
  assert trainer.learning_rate() == pytest.approx(
      hp.d_model ** -0.5 * min((killed_at + 1) ** -0.5, (killed_at + 1) * hp.warmup_steps ** -1.5))

  result = subprocess.run(base + [f"--train_steps={killed_at + 3}"], capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"ckpt-{killed_at} at step {killed_at}" in result.stdout + result.stderr
  assert _latest_step(model_dir) == killed_at + 3
