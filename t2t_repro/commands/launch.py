"""Starts a command: the registry `COMMANDS`, the console scripts' entry point `main` and
`launch`.

See `t2t_repro.commands` for the three ways in.
"""

import importlib
import os
import sys

# The commands, by name (module t2t_repro.commands.<name>).
COMMANDS = ("train", "translate", "evaluate", "validate", "score", "tune", "export", "serve",
            "summary", "average", "parse", "plot_attention", "download", "stats")


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
  logs.mark_imported()
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
_SHARED_FLAG_MODULES = ("t2t_repro.commands.shared_flags", "t2t_repro.commands.config_flags")


def launch(name):
  """Entry point of `python -m t2t_repro.<name>`, `tools/<name>.py` and (through `main`) the
  console scripts:
  `run_command(name)`, then ends the process with its exit status (`logs.finish`: flushes
  the output and skips TensorFlow's slow teardown)."""
  code = run_command(name)
  from t2t_repro import logs  # pylint: disable=import-outside-toplevel
  logs.finish(code)


def main():
  """Entry point of every console script (setup.cfg): `t2t-<name>` runs command <name>."""
  script = os.path.basename(sys.argv[0])
  name = command_of_script(script)
  if name is None:
    sys.exit(f"{script}: not a t2t_repro command; commands: "
             f"{', '.join(console_script(n) for n in COMMANDS)}")
  launch(name)


def package_main(argv=None):
  """Entry point of `python -m t2t_repro <command> [flags]` (`t2t_repro/__main__.py`):
  launches the command the first argument names ("plot_attention" or "plot-attention").
  Without one, or with an unknown one, prints the commands on stderr and exits 2;
  `--help` prints them on stdout (exit 0)."""
  argv = sys.argv if argv is None else argv
  name = argv[1].replace("-", "_") if len(argv) > 1 else None
  if name in COMMANDS:
    sys.argv = [name, *argv[2:]]
    launch(name)
  usage = (f"usage: python -m t2t_repro <command> [flags]  (<command> --help: its flags)\n"
           f"commands: {', '.join(COMMANDS)}")
  if len(argv) > 1 and argv[1] in ("-h", "--help", "help"):
    print(usage)
    sys.exit(0)
  problem = f"unknown command {argv[1]!r}" if len(argv) > 1 else "no command given"
  sys.stderr.write(f"t2t_repro: error: {problem}\n{usage}\n")
  sys.exit(2)


def command_of_script(script):
  """The command a console script runs ("t2t-plot-attention" -> "plot_attention"), or None."""
  name = script.removeprefix("t2t-").replace("-", "_")
  return name if script.startswith("t2t-") and name in COMMANDS else None
