"""The errors a user can fix, and their exit statuses: the project's bottom layer.

Library code raises these; only the command runner (`t2t_repro.commands.runner`) turns
them into one stderr line and an exit status:

* `USAGE_EXIT` (2): a bad flag value or combination: `UsageError` (and its subclasses,
  `hparams.HParamsError`, `decoding.loading.EnsembleError`), absl's flag errors;
* `DATA_EXIT` (1): a missing, unreadable, empty or malformed file, a write that failed:
  `DataError` (and `MissingDataError`, `EncodingError`, `text_files.LineCountError`,
  `WriteError`, `DiskFullError`), `FileNotFoundError`, `IsADirectoryError`,
  `NotADirectoryError`, `PermissionError`, `UnicodeDecodeError` and a full disk or refused
  write (`write_failure`: ENOSPC, EROFS, ..., or TensorFlow's error saying so); and
  `WorkerLostError`, another worker of a training job gone;
* `INTERRUPT_EXIT` (130): Ctrl-C.

A message names a setting (a field of `HParams`, `TrainConfig` or `DecodeConfig`, which
is also the commands' flag of that name) between backticks, `beam_size`: `str(error)` gives
the plain name, and the runner the flag, --beam_size (`message(error, setting_name)`).
The library itself never writes a flag.

This module imports nothing of the project, so every layer may import it.
"""

import contextlib
import difflib
import errno
import os
import re
import sys

USAGE_EXIT = 2
DATA_EXIT = 1
INTERRUPT_EXIT = 130


# A setting named in a message: `name`.
SETTING_MARK = re.compile(r"`(\w+)`")


def message(error, setting_name=lambda name: name):
  """The message of `error` with each setting written by `setting_name(name)` (default:
  the plain name, as `str(error)`)."""
  return SETTING_MARK.sub(lambda match: setting_name(match[1]), ValueError.__str__(error))


def marked(error):
  """The message of `error` with its settings still marked (to wrap it in another error)."""
  return ValueError.__str__(error)


class UsageError(ValueError):
  """A bad setting or combination of settings (exit status 2); the message names the
  settings between backticks (`message`)."""

  def __str__(self):
    return message(self)


class DataError(ValueError):
  """Invalid or missing data (exit status 1); the message names the files involved (and
  settings as `UsageError` does)."""

  def __str__(self):
    return message(self)


class MissingDataError(DataError, FileNotFoundError):
  """A file or a split that is needed does not exist (also a FileNotFoundError)."""


class EncodingError(DataError):
  """A file is not valid UTF-8."""


class WriteError(DataError):
  """A file or folder could not be written: the device is full or the write was refused
  (permission, read-only filesystem). The message names it and says which; what was there
  before is intact (every write is staged).

  Attributes:
    path: what could not be written; reason: `write_failure`'s words.
  """

  def __init__(self, message, path=None, reason=None):
    super().__init__(message)
    self.path, self.reason = path, reason


class DiskFullError(WriteError):
  """A write failed because the device is full."""


class WorkerLostError(RuntimeError):
  """Another worker of a multi-worker training job is gone (killed, crashed, its machine
  lost): exit status 1. The message names it and the checkpoint a restart resumes from."""


NO_SPACE = "no space left on device"
# What a refused or failed write says: errno, and the words of TensorFlow's file system
# errors (which carry no errno: "...; No space left on device").
_WRITE_FAILURES = ((errno.ENOSPC, "No space left on device", NO_SPACE),
                   (errno.EDQUOT, "Disk quota exceeded", NO_SPACE),
                   (errno.EROFS, "Read-only file system", "read-only file system"),
                   (errno.EACCES, "Permission denied", "permission denied"),
                   (errno.EPERM, "Operation not permitted", "permission denied"))


def write_failure(error):
  """Why a write failed, when it is the device or a refusal: NO_SPACE, "read-only file system"
  or "permission denied"; None for any other error.

  Args:
    error: an `OSError` (its errno), or a TensorFlow error (its text; TensorFlow is not
      imported here: no TensorFlow error can exist before it is).
  """
  if isinstance(error, OSError):
    for number, _, reason in _WRITE_FAILURES:
      if error.errno == number:
        return reason
  tf = sys.modules.get("tensorflow")
  if isinstance(error, OSError) or (tf is not None and isinstance(error, tf.errors.OpError)):
    for _, words, reason in _WRITE_FAILURES:
      if words in str(error):
        return reason
    if tf is not None and isinstance(error, tf.errors.PermissionDeniedError):
      return "permission denied"
  return None


@contextlib.contextmanager
def writing(path):
  """Turns a full disk or a refused write inside the block into ONE line naming `path`: a
  `WriteError` (`DiskFullError` for a full disk), "{path}: cannot write it: {reason}; it is
  left as it was". A `WriteError` of something inside `path` (a file of a staged folder) is
  named by `path` instead. Other errors pass unchanged, and so does an `OSError` naming a file
  outside `path`'s folder (a read inside the block)."""
  try:
    yield
  except WriteError as e:
    if e.path == path:
      raise
    raise type(e)(_cannot_write(path, e.reason), path, e.reason) from None
  except Exception as e:  # pylint: disable=broad-except
    reason = write_failure(e)
    if reason is None or _elsewhere(e, path):
      raise
    kind = DiskFullError if reason == NO_SPACE else WriteError
    raise kind(_cannot_write(path, reason), path, reason) from None


def _elsewhere(error, path):
  """True for an OSError naming a local file outside `path`'s folder: a read inside the block
  (e.g. the input of the output being written), not this write."""
  name = getattr(error, "filename", None)
  if not isinstance(error, OSError) or name is None or "://" in str(path):
    return False
  name, folder = os.path.abspath(str(name)), os.path.dirname(os.path.abspath(path))
  return name != folder and not name.startswith(folder + os.sep)


def _cannot_write(path, reason):
  return f"{path}: cannot write it: {reason}; it is left as it was"


def exit_line(error, setting_name=lambda name: name):
  """(exit status, one-line message) of a user error, or None for anything else (a bug).

  Args:
    error: an exception. absl's flag errors are the runner's to describe.
    setting_name: how the message writes a setting (the runner: as its flag).
  """
  if isinstance(error, UsageError):
    return USAGE_EXIT, message(error, setting_name)
  if isinstance(error, DataError):
    return DATA_EXIT, message(error, setting_name)
  if isinstance(error, WorkerLostError):
    return DATA_EXIT, str(error)
  if isinstance(error, UnicodeDecodeError):
    return DATA_EXIT, f"invalid UTF-8 ({error.reason} at byte {error.start})"
  if isinstance(error, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
    name = error.filename if error.filename is not None else ""
    reason = error.strerror or str(error)
    return DATA_EXIT, f"{name}: {reason}" if name else reason
  reason = write_failure(error)
  if reason is not None:  # a write outside `writing` (a cache, TensorBoard events)
    name = getattr(error, "filename", None)
    detail = str(error).strip().splitlines()[0][:300] if str(error).strip() else reason
    return DATA_EXIT, f"{name}: {reason}" if name else f"{reason}: {detail}"
  return None


def unknown(what, name, known, listing):
  """The text of an unknown name: "unknown hparam set 'tinyy'; did you mean 'tiny'?" with
  difflib's closest `known` names (as absl does for a misspelt flag), or, with none close,
  every known name: "unknown hparam set 'x'; <listing>: a, b, c".

  Args:
    what: what the name is ("hparam set").
    name: the name given.
    known: the valid names, in the order to list them.
    listing: the words before the list ("registered sets are").
  """
  close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
  if close:
    return f"unknown {what} {name!r}; did you mean {' or '.join(map(repr, close))}?"
  return f"unknown {what} {name!r}; {listing}: {', '.join(known)}"


def error_line(command, message):
  """The one stderr line: '<command>: error: <message>' with newlines folded."""
  return f"{command}: error: {' '.join(str(message).split())}"
