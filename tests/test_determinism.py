"""The same command gives the same model, stopped or not (float32, CPU): a run stopped and
resumed ends on the weights of the run never stopped, which is run in another process, so
two runs of one command are also bit-identical. The checkpoints carry the input position
(chunk order, shuffle buffer, buckets, prefetched batches) and the dropout generators'
states (docs/RELIABILITY.md)."""

import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import train_command

STEPS = 12


def _train(data, model_dir, steps, *extra):
  proc = subprocess.run(train_command(data, model_dir, f"--train_steps={steps}",
                                      "--eval_every_steps=0", "--save_checkpoints_steps=5",
                                      *extra),
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  return proc.stderr


def _assert_same_weights(dir_a, dir_b):
  """Every variable of ckpt-STEPS (model, Adam's slots, step, dropout states, save_counter)
  bit-equal (not the input position, a variant tensor)."""
  readers = [tf.train.load_checkpoint(str(d / f"ckpt-{STEPS}")) for d in (dir_a, dir_b)]
  names = [n for n in readers[0].get_variable_to_shape_map() if "CHECKPOINTABLE" not in n
           and not n.startswith("input/")]
  assert len(names) > 100 and any(n.startswith("dropout_seeds/") for n in names)
  for name in names:
    assert np.array_equal(readers[0].get_tensor(name), readers[1].get_tensor(name)), name


@pytest.mark.integration
@pytest.mark.parametrize("extra", [(), ("--cache_examples_mb=0", "--num_cpu_replicas=2",
                                        "--accum_steps=2")], ids=["in_memory", "streamed_2x2"])
def test_5_then_7_updates_equal_12(multi30k_slice, tmp_path, extra):
  _train(multi30k_slice, tmp_path / "whole", STEPS, *extra)
  if not extra:  # a finished run extended (the streamed run resumes below, after SIGTERM)
    _train(multi30k_slice, tmp_path / "parts", 5, *extra)
    resumed = _train(multi30k_slice, tmp_path / "parts", STEPS, *extra)
    assert "resumed from" in resumed and "input position" not in resumed
    _assert_same_weights(tmp_path / "whole", tmp_path / "parts")
  # kill -9 between checkpoints (in memory) or SIGTERM, which saves the step it stops at
  # (streamed), after ckpt-5; then the same command again
  sig = signal.SIGTERM if extra else signal.SIGKILL
  stopped = tmp_path / "stopped"
  proc = subprocess.Popen(train_command(multi30k_slice, stopped, f"--train_steps={STEPS}",
                                        "--eval_every_steps=0", "--save_checkpoints_steps=5",
                                        *extra),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.monotonic() + 300
  while proc.poll() is None and not (tf.train.latest_checkpoint(str(stopped)) or "").endswith(
      "ckpt-5"):
    assert time.monotonic() < deadline
    time.sleep(0.02)
  proc.send_signal(sig)
  assert proc.wait() == (0 if sig == signal.SIGTERM else -sig)
  assert int(tf.train.latest_checkpoint(str(stopped)).rsplit("-", 1)[1]) < STEPS
  resumed = _train(multi30k_slice, stopped, STEPS, *extra)
  assert "resumed from" in resumed and "input position" not in resumed
  _assert_same_weights(tmp_path / "whole", stopped)
