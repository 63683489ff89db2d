"""How every command reports a user error: one line on stderr, an exit status, no traceback.

`t2t_repro.commands.launch` runs every command's `main` through `run` instead of
`absl.app.run`. An error the user can fix ends the command with ONE line on stderr,

    <command>: error: <message naming the flag, file and line>

and the exit status says what kind it was (`t2t_repro.errors`):

* 2, usage: `errors.UsageError` (`hparams.HParamsError`, `decoding.loading.EnsembleError`)
  and absl's own flag errors (an unknown flag, `--train_steps=abc`, a failed validator);
* 1, data: `errors.DataError` and the OS errors `errors.exit_line` lists;
* 130, interrupted: Ctrl-C outside a phase that handles it (no traceback).

`--debug` prints the Python traceback before that line. Any other exception is a bug and
keeps its traceback (exit 1).
"""

import os
import sys
import traceback

from absl import app
from absl import flags

from t2t_repro import errors
from t2t_repro.commands import config_flags

flags.DEFINE_bool("debug", False, "Print the Python traceback of a user error before its one-line message.")


def _exit_line(error):
  """(exit status, one-line message) of a user error, or None for a bug. A setting the
  message names (`errors.SETTING_MARK`) is written as the command's flag, --name."""
  if isinstance(error, (app.UsageError, flags.Error)):
    return errors.USAGE_EXIT, str(error)
  return errors.exit_line(error, setting_name=_flag_name)


def _flag_name(name):
  """--name for a flag of the command, else the plain name (a setting it has no flag of)."""
  return f"--{name}" if name in flags.FLAGS else name


def _command_name():
  name = os.path.basename(sys.argv[0] or "t2t_repro")
  return name[:-3] if name.endswith(".py") else name


# absl's flags that print help (the help asked for is a success: exit 0, not absl's 1).
_HELP_FLAGS = ("-h", "-?", "--help", "--helpshort", "--helpfull", "--helpxml")


class _Failed(Exception):
  """A user error, already described: (exit status, message)."""


def run(main, command=None):
  """`absl.app.run(main)` with the project's error reporting (see the module docstring).

  Args:
    main: the command's main(argv) -> None or an exit status.
    command: name in the error line (`launch` gives the command's name, "train" for
      `t2t-train` and `python -m t2t_repro.train` alike); default: the script's file name
      without ".py".

  Returns:
    The exit status (int): 0, `main`'s own, or that of the user error. `main`'s
    `finally` blocks have run.
  """
  command = command or _command_name()

  def parse_flags(argv):
    try:
      rest = flags.FLAGS(argv)
      config_flags.check_conflicts(argv)
      config_flags.warn_deprecated()
      return rest
    except flags.Error as e:
      raise _Failed(errors.USAGE_EXIT, e) from None
    except SystemExit as done:  # absl's help flags print the help, then exit 1
      if done.code == 1 and any(arg.split("=")[0] in _HELP_FLAGS for arg in argv[1:]):
        raise SystemExit(0) from None
      raise

  def checked_main(argv):
    try:
      return main(argv)
    except KeyboardInterrupt:
      if flags.FLAGS.debug:
        raise
      raise _Failed(errors.INTERRUPT_EXIT, "interrupted") from None
    except Exception as e:  # pylint: disable=broad-except
      described = _exit_line(e)
      if described is None:
        raise
      if flags.FLAGS.debug:
        traceback.print_exc()
      raise _Failed(*described) from None

  try:
    app.run(checked_main, flags_parser=parse_flags)
  except _Failed as failed:
    code, message = failed.args
    sys.stderr.write(errors.error_line(command, message) + "\n")
    sys.stderr.flush()
    return code
  except SystemExit as done:  # app.run's way out: main's return value, --help, ...
    return _exit_status(done.code)
  return 0


def _exit_status(code):
  """A SystemExit code as an int (a message is printed on stderr: exit 1)."""
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  print(code, file=sys.stderr)
  return 1
