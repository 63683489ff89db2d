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

A message names a setting (a field of `HParams`, `TrainConfig` or `DecodeConfig`, which
is also the commands' flag of that name) between backticks, `beam_size`: `str(error)` gives
the plain name, and the runner the flag, --beam_size (`message(error, setting_name)`).
The library itself never writes a flag.

This module imports nothing of the project, so every layer may import it.
"""

import difflib
import errno
import re

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


def describe(error, setting_name=lambda name: name):
  """(exit status, one-line message) of a user error, or None for anything else (a bug).

  Args:
    error: an exception. absl's flag errors are the runner's to describe.
    setting_name: how the message writes a setting (the runner: as its flag).
  """
  if isinstance(error, UsageError):
    return USAGE_EXIT, message(error, setting_name)
  if isinstance(error, DataError):
    return DATA_EXIT, message(error, setting_name)
  if isinstance(error, UnicodeDecodeError):
    return DATA_EXIT, f"invalid UTF-8 ({error.reason} at byte {error.start})"
  if isinstance(error, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
    name = error.filename if error.filename is not None else ""
    reason = error.strerror or str(error)
    return DATA_EXIT, f"{name}: {reason}" if name else reason
  if isinstance(error, OSError) and error.errno == errno.ENOSPC:
    return DATA_EXIT, f"no space left on device: {error}"
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
