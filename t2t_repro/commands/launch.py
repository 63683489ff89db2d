"""Starts a command: the registry `COMMANDS`, the console scripts' functions and `launch`.

See `t2t_repro.commands` for the three ways in.
"""

import functools
import importlib
import sys

# The commands, by name (module t2t_repro.commands.<name>).
COMMANDS = ("train", "translate", "evaluate", "validate", "score", "export", "summary",
            "average", "parse", "plot_attention", "download", "stats")


def console_script(name):
  """The console script of command `name`: "t2t-" + name with "-" for "_"."""
  return "t2t-" + name.replace("_", "-")


def run_command(name):
  """Runs command `name` in this process and returns its exit status.

  Sets up logging first (`logs.setup`), then imports `t2t_repro.commands.<name>`,
  defines its flags and runs its `main` on sys.argv (`runner.run`). Every `finally`
  block of the command has run when it returns.

  Raises:
    KeyError: `name` is not in `COMMANDS`.
  """
  if name not in COMMANDS:
    raise KeyError(f"unknown command {name!r}; commands: {', '.join(COMMANDS)}")
  from t2t_repro import logs  # pylint: disable=import-outside-toplevel
  logs.setup()
  from t2t_repro.commands import runner  # pylint: disable=import-outside-toplevel
  module = importlib.import_module(f"t2t_repro.commands.{name}")
  # absl's --help prints __main__'s docstring and the flags of the module sys.argv[0] names:
  # the same help whichever way the command was started.
  sys.modules["__main__"].__doc__ = module.__doc__
  sys.argv[0] = name
  module.define_flags()
  _list_in_help(module.__name__)
  return runner.run(module.main, name)


def _list_in_help(command_module):
  """absl's --help lists the flags of the program's main module (sys.argv[0]): make the
  command's flags, and the shared and decoding flags it defined, that module's."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  for module_name, defined in flags.FLAGS.flags_by_module_dict().items():
    if module_name == command_module or module_name in _SHARED_FLAG_MODULES:
      for flag in defined:
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


# Modules whose define functions the commands call (their flags are the command's own).
_SHARED_FLAG_MODULES = ("t2t_repro.commands.shared_flags", "t2t_repro.decoding.config")


def launch(name):
  """Entry point of a console script, `python -m t2t_repro.<name>` and `tools/<name>.py`:
  `run_command(name)`, then ends the process with its exit status (`logs.finish`: flushes
  the output and skips TensorFlow's slow teardown)."""
  code = run_command(name)
  from t2t_repro import logs  # pylint: disable=import-outside-toplevel
  logs.finish(code)


def _entry_point(name):
  entry = functools.partial(launch, name)
  entry.__doc__ = f"`{console_script(name)}`: the command `t2t_repro.commands.{name}`."
  return entry


train = _entry_point("train")
translate = _entry_point("translate")
evaluate = _entry_point("evaluate")
validate = _entry_point("validate")
score = _entry_point("score")
export = _entry_point("export")
summary = _entry_point("summary")
average = _entry_point("average")
parse = _entry_point("parse")
plot_attention = _entry_point("plot_attention")
download = _entry_point("download")
stats = _entry_point("stats")
