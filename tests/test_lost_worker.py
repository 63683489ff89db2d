"""`training.workers.lost_worker` on the messages TensorFlow gave a surviving worker when the
other of two was killed (recorded from tests/test_workers_cli.py's runs)."""

import pytest
import tensorflow as tf

from t2t_repro import errors
from t2t_repro.training.workers import lost_worker

HEARTBEATS = ("Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
              "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
              "The tasks have crashed.")
RESET = ("recvmsg:Connection reset by peer\nAdditional GRPC error information from remote target "
         "/job:worker/replica:0/task:0 while calling /tensorflow.WorkerService/CompleteInstance:")
REFUSED = ("Collective ops is aborted by: failed to connect to all addresses; last error: UNKNOWN: "
           "ipv4:127.0.0.1:23471: Failed to connect to remote host: Connection refused\n"
           "Additional GRPC error information from remote target /job:worker/replica:0/task:0")


@pytest.mark.parametrize("text, expected", [
    (HEARTBEATS, "lost worker /job:worker/task:1 of the training job (it stopped sending heartbeats)"),
    (RESET, "lost worker /job:worker/task:0 of the training job (its connection closed)"),
    (REFUSED, "lost worker /job:worker/task:0 of the training job (it refuses connections)"),
    ("Socket closed", "lost a worker of the training job (its connection closed)")])
def test_a_lost_worker_is_one_line_naming_it_and_the_checkpoint(tmp_path, text, expected):
  model_dir = tmp_path / "model"
  tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(model_dir / "ckpt-6"))
  (model_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-6"\n', encoding="utf-8")
  error = lost_worker(tf.errors.UnavailableError(None, None, text), str(model_dir), 7)
  assert isinstance(error, errors.WorkerLostError)
  assert str(error) == (f"{expected} at step 7: restart every worker with the same command to "
                        f"resume from {model_dir}/ckpt-6")
  assert errors.exit_line(error) == (errors.DATA_EXIT, str(error))


def test_other_errors_are_not_a_lost_worker(tmp_path):
  mismatch = tf.errors.InternalError(None, None, "Collective ops is aborted by: Shape mismatch")
  assert lost_worker(mismatch, str(tmp_path), 1) is None
  assert lost_worker(ValueError("Socket closed"), str(tmp_path), 1) is None
