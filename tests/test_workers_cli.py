"""Two workers of one `train` job on 127.0.0.1 (--distribution=multi_worker, TF_CONFIG) on real
Multi30k text, with faults (docs/RELIABILITY.md):

* SIGTERM to both: they agree on the update to stop at (the stop flag rides on the update's
  all-reduce), the chief saves it, both exit 0; restarted, the job resumes at that step,
  evaluates on dev twice and writes best/, ema/ and averaged/;
* SIGTERM to both during a dev evaluation: the same clean stop, at the update after it;
* kill -9 of one worker: the other ends within 60 s with exit 1 and one line naming the lost
  worker (TensorFlow's coordination service notices the missing heartbeats, or the chief's
  closed address), without TensorFlow's lines before it; restarted, the job resumes from the
  last checkpoint.
"""

import os
import re
import signal
import sys
import time

import pytest
import tensorflow as tf

from conftest import train_command

sys.path.insert(0, os.path.dirname(__file__))
from workers_util import log, start_workers  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _command(data, model_dir, steps, *extra):
  return train_command(data, model_dir, "--distribution=multi_worker", f"--train_steps={steps}",
                       "--save_checkpoints_steps=3", "--dev_bleu_lines=0", "--ema_decay=0.9",
                       "--average_last=2",
                       "--hparams_override=max_length=64,batch_tokens=512", "--log_every_steps=1",
                       *extra)


def _latest_step(model_dir):
  path = tf.train.latest_checkpoint(str(model_dir))
  return int(path.rsplit("-", 1)[1]) if path else -1


def _wait_for_step(procs, model_dir, step, timeout=300):
  deadline = time.monotonic() + timeout
  while _latest_step(model_dir) < step:
    assert all(p.poll() is None for p in procs), "a worker ended before the checkpoint"
    assert time.monotonic() < deadline, "no checkpoint in time"
    time.sleep(0.05)


def _finish(procs, timeout=300):
  try:
    return [p.wait(timeout=timeout) for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()


def _resume(data, model_dir, tmp_path, name, steps):
  """Both workers again up to `steps` with dev evaluations, EMA and averaging; returns the
  chief's output."""
  procs = start_workers(_command(data, model_dir, steps, "--eval_every_steps=3"), tmp_path, name)
  codes = _finish(procs)
  chief = log(tmp_path, name, 0)
  assert codes == [0, 0], chief[-3000:] + log(tmp_path, name, 1)[-3000:]
  assert _latest_step(model_dir) == steps
  assert len(re.findall(r"^dev step \d+: loss ", chief, re.M)) >= 2
  assert re.search(rf"^ema dev step {steps}: loss ", chief, re.M)
  for sub in ("best", "ema", "averaged"):
    assert tf.train.latest_checkpoint(str(model_dir / sub)), sub
  return chief


def test_sigterm_to_both_workers_stops_them_at_one_update_and_the_job_resumes(
    multi30k_slice, tmp_path):
  model_dir = tmp_path / "model"
  procs = start_workers(_command(multi30k_slice, model_dir, 1000, "--eval_every_steps=0"),
                        tmp_path, "stopped")
  try:
    _wait_for_step(procs, model_dir, 3)
    procs[1].send_signal(signal.SIGTERM)  # not at the same time: they still agree
    time.sleep(0.3)
    procs[0].send_signal(signal.SIGTERM)
  finally:
    codes = _finish(procs)
  chief, worker = log(tmp_path, "stopped", 0), log(tmp_path, "stopped", 1)
  assert codes == [0, 0], chief[-3000:] + worker[-3000:]
  step = int(re.search(r"received: checkpoint saved at step (\d+), exiting", chief).group(1))
  assert re.search(rf"received: stopping at step {step}\b", worker), worker[-3000:]
  assert _latest_step(model_dir) == step

  chief = _resume(multi30k_slice, model_dir, tmp_path, "resumed", step + 4)
  assert f"resumed from {model_dir}/ckpt-{step} at step {step}" in chief


@pytest.mark.parametrize("killed", [1, 0], ids=["worker", "chief"])
def test_kill_9_of_one_worker_ends_the_other_with_one_line_and_the_job_resumes(
    multi30k_slice, tmp_path, killed):
  model_dir = tmp_path / "model"
  procs = start_workers(_command(multi30k_slice, model_dir, 1000, "--eval_every_steps=0"),
                        tmp_path, "killed")
  survivor = 1 - killed
  try:
    _wait_for_step(procs, model_dir, 3)
    procs[killed].kill()
    killed_at = time.monotonic()
    code = procs[survivor].wait(timeout=60)  # raises TimeoutExpired after 60 s
    assert time.monotonic() - killed_at < 60
  finally:
    _finish(procs)
  output = log(tmp_path, "killed", survivor)
  assert code == 1, output[-3000:]
  assert "Traceback" not in output, output[-3000:]
  # Not TensorFlow's lines of the aborted collectives (ring_alg.cc, ...) before it.
  assert not re.search(r"^[IWEF]\d{4} |^The tasks have crashed|Additional GRPC error", output,
                       re.M), output[-3000:]
  lines = [line for line in output.splitlines() if line.startswith("train: error: ")]
  assert len(lines) == 1, output[-3000:]
  assert f"lost worker /job:worker/task:{killed} " in lines[0]
  last = _latest_step(model_dir)
  assert last >= 3 and f"resume from {model_dir}/ckpt-{last}" in lines[0]

  chief = _resume(multi30k_slice, model_dir, tmp_path, "restarted", last + 4)
  assert f"resumed from {model_dir}/ckpt-{last} at step {last}" in chief


def test_sigterm_to_both_workers_during_a_dev_evaluation_stops_them_cleanly(
    multi30k_slice, tmp_path):
  """A signal during a dev evaluation of a job of several workers is a flag, as during the
  steps: the evaluation ends, the workers stop together at the next update, the chief saves
  it and removes its lock, both exit 0 (before, both died at once: exit 143, no message,
  `.model.lock` left)."""
  model_dir = tmp_path / "model"
  procs = start_workers(_command(multi30k_slice, model_dir, 1000, "--eval_every_steps=3",
                                 "--dev_bleu_lines=40"), tmp_path, "evaluating")
  try:
    deadline = time.monotonic() + 300
    while "dev evaluation at step 3" not in log(tmp_path, "evaluating", 0):
      assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
      time.sleep(0.05)
    for p in procs:
      p.send_signal(signal.SIGTERM)
  finally:
    codes = _finish(procs)
  chief, worker = log(tmp_path, "evaluating", 0), log(tmp_path, "evaluating", 1)
  assert codes == [0, 0], chief[-3000:] + worker[-3000:]
  assert re.search(r"^dev step 3: loss ", chief, re.M), chief[-3000:]
  assert "SIGTERM received: checkpoint saved at step 4, exiting" in chief, chief[-3000:]
  assert re.search(r"SIGTERM received: stopping at step 4\b", worker), worker[-3000:]
  assert _latest_step(model_dir) == 4
  assert not (tmp_path / ".model.lock").exists()
