"""The errors a user can fix, and their exit statuses: the project's bottom layer.

Library code raises these; only the command runner (`t2t_repro.commands.runner`) turns
them into one stderr line and an exit status:

* `USAGE_EXIT` (2): a bad flag value or combination: `UsageError` (and its subclasses,
  `hparams.HParamsError`, `decoding.loading.EnsembleError`), absl's flag errors;
* `DATA_EXIT` (1): a missing, unreadable, empty or malformed file: `DataError` (and
  `MissingDataError`, `EncodingError`, `text_files.LineCountError`,
  `training.checkpoints.DiskFullError`), `FileNotFoundError`, `IsADirectoryError`,
  `NotADirectoryError`, `PermissionError`, `UnicodeDecodeError` and a full disk (`ENOSPC`);
* `INTERRUPT_EXIT` (130): Ctrl-C.

This module imports nothing of the project, so every layer may import it.
"""

import errno

USAGE_EXIT = 2
DATA_EXIT = 1
INTERRUPT_EXIT = 130


class UsageError(ValueError):
  """A bad flag value or flag combination (exit status 2); the message names the flag."""


class DataError(ValueError):
  """Invalid or missing data (exit status 1); the message names the files involved."""


class MissingDataError(DataError, FileNotFoundError):
  """A file or a split that is needed does not exist (also a FileNotFoundError)."""


class EncodingError(DataError):
  """A file is not valid UTF-8."""


def describe(error):
  """(exit status, one-line message) of a user error, or None for anything else (a bug).

  Args:
    error: an exception. absl's flag errors are the runner's to describe.
  """
  if isinstance(error, UsageError):
    return USAGE_EXIT, str(error)
  if isinstance(error, DataError):
    return DATA_EXIT, str(error)
  if isinstance(error, UnicodeDecodeError):
    return DATA_EXIT, f"invalid UTF-8 ({error.reason} at byte {error.start})"
  if isinstance(error, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
    name = error.filename if error.filename is not None else ""
    reason = error.strerror or str(error)
    return DATA_EXIT, f"{name}: {reason}" if name else reason
  if isinstance(error, OSError) and error.errno == errno.ENOSPC:
    return DATA_EXIT, f"no space left on device: {error}"
  return None


def error_line(command, message):
  """The one stderr line: '<command>: error: <message>' with newlines folded."""
  return f"{command}: error: {' '.join(str(message).split())}"
