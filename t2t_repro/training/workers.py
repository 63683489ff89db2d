"""A multi-worker training job that loses a worker ends on every other worker with one line
naming it, instead of a hang or a traceback.

MultiWorkerMirroredStrategy starts TensorFlow's coordination service, which takes a
heartbeat from every worker. When a worker stops sending them (killed, crashed, its machine
gone), the service aborts the collectives of the others with an error naming the task
("The following tasks are unhealthy (stopped sending heartbeats): /job:worker/replica:0/
task:1"); when the lost worker is the service's leader (the chief), the others' next
collective fails to connect to it ("failed to connect to all addresses ... remote target
/job:worker/replica:0/task:0", or "Connection reset by peer" from that remote target).
`lost_worker` turns these into an `errors.WorkerLostError`.
"""

import re

import tensorflow as tf

from t2t_repro import errors

_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# (words of TensorFlow's message, the reason printed, the words after which it names the task)
_REASONS = (("stopped sending heartbeats", "it stopped sending heartbeats", "unhealthy"),
            ("failed to connect", "it refuses connections", "remote target"),
            ("Socket closed", "its connection closed", "remote target"),
            ("Connection reset", "its connection closed", "remote target"))


def lost_worker(error, model_dir, step):
  """The `errors.WorkerLostError` of `error` when it says a worker of the job is gone, else None.

  Args:
    error: an exception raised by the training loop.
    model_dir: the job's model dir (its latest checkpoint is where a restart resumes).
    step: the update this worker had reached.

  Returns:
    errors.WorkerLostError whose message names the lost task (when the coordination
    service's message names it, else "a worker"), the reason and the checkpoint to resume
    from; None for any other error.
  """
  if not isinstance(error, tf.errors.OpError):
    return None
  text = str(error)
  found = next(((reason, anchor) for key, reason, anchor in _REASONS if key in text), None)
  if found is None:
    return None
  reason, anchor = found
  match = _TASK.search(text[text.find(anchor):]) if anchor and anchor in text else None
  lost = f"worker /job:{match.group(1)}/task:{match.group(2)}" if match else "a worker"
  checkpoint = tf.train.latest_checkpoint(model_dir)
  resume = f"resume from {checkpoint}" if checkpoint else "start again"
  return errors.WorkerLostError(
      f"lost {lost} of the training job ({reason}) at step {step}: restart every "
      f"worker with the same command to {resume}")
