"""SIGINT/SIGTERM handling of a training run: every phase can be interrupted.

Two modes, chosen by the phase:

* `StopSignal` (the training steps and the writing of the model dir): a signal
  only sets a flag; the loop checks it after each step, saves a checkpoint and
  exits; the writer finishes its files first.
* `exit_at_once` (setup: flag and data checks, vocabulary learning, model
  building; and dev evaluation of one worker, which runs after the current step was
  saved; `at_once_alone`: in a job of several workers it stays a flag): the
  default action (SIG_DFL), so the process ends at once even inside a long
  TensorFlow or sentencepiece call, where a Python handler would only run when
  the call returns (a SIGINT during `big`'s first dev evaluation used to wait
  over 45 s). This is safe because those phases write nothing to the model dir.
"""

import contextlib
import signal

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignal:
  """Turns SIGINT/SIGTERM into a flag (`received`: the signal's name or None) inside `with`."""

  def __init__(self):
    self.received = None
    self._previous = {}

  def __enter__(self):
    for sig in SIGNALS:
      self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def _handle(self, signum, frame):
    del frame
    self.received = signal.Signals(signum).name

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)


@contextlib.contextmanager
def exit_at_once():
  """Within the block SIGINT/SIGTERM end the process immediately (their default action)."""
  previous = {sig: signal.signal(sig, signal.SIG_DFL) for sig in SIGNALS}
  try:
    yield
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)


def at_once_alone(one_worker):
  """The signals of a phase that writes nothing (a dev evaluation): `exit_at_once` for a job
  of one worker; in a job of several the run's `StopSignal` stays, so a signal is a flag and
  the workers stop together at the update after the phase, its checkpoint saved (ended at
  once, each worker would exit 143 without a word and leave the chief's lock file)."""
  return exit_at_once() if one_worker else contextlib.nullcontext()
