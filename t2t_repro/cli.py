"""How every command reports a user error: one line on stderr, an exit status, no traceback.

Every command (`t2t_repro.launch.COMMANDS`) starts with `cli.run(main)` instead of
`app.run(main)`.
An error the user can fix ends the command with ONE line on stderr,

    <command>: error: <message naming the flag, file and line>

and the exit status says what kind it was:

* 2, usage: a bad flag value or combination (`UsageError`, absl's own flag
  parsing errors such as an unknown flag or `--train_steps=abc`, and
  `hparams.HParamsError`: an unknown set, key or out-of-range value);
* 1, data: a missing, unreadable, empty or malformed file (`DataError`, which
  is `data.text_files.DataError` and so covers `MissingDataError`,
  `LineCountError`, `EncodingError`, `training.checkpoints.DiskFullError`; also
  `FileNotFoundError`, `IsADirectoryError`, `NotADirectoryError`,
  `PermissionError`, `UnicodeDecodeError` and any other full-disk `OSError`);
* 130, interrupted: Ctrl-C outside a phase that handles it (no traceback).

`--debug` prints the Python traceback before that line. Any other exception is
a bug and keeps its traceback.
"""

import errno
import os
import sys
import traceback

from absl import app
from absl import flags

from t2t_repro import logs
from t2t_repro.data.text_files import DataError
from t2t_repro.hparams import HParamsError

__all__ = ["DataError", "UsageError", "run", "error_line"]

USAGE_EXIT = 2
DATA_EXIT = 1
INTERRUPT_EXIT = 130

flags.DEFINE_bool("debug", False, "Print the Python traceback of a user error before its one-line message.")


class UsageError(app.UsageError):
  """A bad flag value or flag combination (exit status 2); the message names the flag."""

  def __init__(self, message):
    super().__init__(message, exitcode=USAGE_EXIT)


def _describe(error):
  """(exit status, one-line message) of a user error, or None for a bug."""
  if isinstance(error, app.UsageError):
    return USAGE_EXIT, str(error)
  if isinstance(error, (flags.Error, HParamsError)):
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


def _command_name():
  name = os.path.basename(sys.argv[0] or "t2t_repro")
  return name[:-3] if name.endswith(".py") else name


def _fail(command, code, message):
  sys.stderr.write(error_line(command, message) + "\n")
  sys.stderr.flush()
  sys.exit(code)


def run(main, command=None):
  """`absl.app.run(main)` with the project's error reporting (see the module docstring).

  Args:
    main: the command's main(argv).
    command: name in the error line; default: the script's file name without
      ".py" (`python -m t2t_repro.train` -> "train").
  """
  command = command or _command_name()

  def parse_flags(argv):
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      _fail(command, USAGE_EXIT, e)

  def checked_main(argv):
    try:
      return main(argv)
    except KeyboardInterrupt:
      if flags.FLAGS.debug:
        raise
      _fail(command, INTERRUPT_EXIT, "interrupted")
    except Exception as e:  # pylint: disable=broad-except
      described = _describe(e)
      if described is None:
        raise
      if flags.FLAGS.debug:
        traceback.print_exc()
      _fail(command, *described)

  try:
    app.run(checked_main, flags_parser=parse_flags)
  except SystemExit as done:  # every way out of app.run: end promptly (`logs.finish`)
    logs.finish(done.code)
