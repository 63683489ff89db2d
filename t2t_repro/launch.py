"""Starts a command: `logs.setup` first, then the command's module runs as `__main__`.

`logs.setup` must run before TensorFlow is imported (its stderr filter has to be in
place when TensorFlow's C++ start-up lines are written), so no command module sets
itself up. Three ways in, one order:

* `python -m t2t_repro.translate ...`: Python imports the package first;
  `t2t_repro/__init__.py` calls `setup_if_command`, which sets up when the `-m`
  module is one of `COMMANDS`, before the command module's imports run.
* console scripts (`t2t-translate ...`, setup.cfg's `console_scripts`): each is
  one of this module's callables below, `run` of its module.
* `python tools/parse.py ...`: the tool is a wrapper calling `run`.

The command module then runs as `__main__` (`runpy.run_module`, `sys.argv[0]` set to
its file, so `cli.run` names it in error lines as `python -m` does): the same flags,
errors and exit codes whichever way it was started.
"""

import functools
import runpy
import sys

from t2t_repro import logs

# Console script -> the command module it runs.
COMMANDS = {
    "t2t-train": "t2t_repro.train",
    "t2t-translate": "t2t_repro.translate",
    "t2t-evaluate": "t2t_repro.evaluate",
    "t2t-validate": "t2t_repro.validate",
    "t2t-score": "t2t_repro.score",
    "t2t-export": "t2t_repro.export",
    "t2t-summary": "t2t_repro.summary",
    "t2t-average": "t2t_repro.average_checkpoints",
    "t2t-parse": "t2t_repro.parsing.cli",
    "t2t-plot-attention": "t2t_repro.plot_attention",
    "t2t-download": "t2t_repro.data.download",
    "t2t-stats": "t2t_repro.data.stats",
}


def run(module):
  """Sets up logging, then runs the command `module` (a dotted name) as `__main__`.

  Raises:
    SystemExit: the command's exit (`cli.run` ends the process itself).
  """
  logs.setup()
  runpy.run_module(module, run_name="__main__", alter_sys=True)


def _module_after_dash_m(argv):
  """The module of `python [options] -m MODULE ...` in the interpreter's own `argv`, else None."""
  args = iter(argv[1:])
  for arg in args:
    if arg == "-m":
      return next(args, None)
    if arg.startswith("-m"):
      return arg[2:]
    if arg in ("-X", "-W"):  # options that take a value
      next(args, None)
    elif arg == "-c" or not arg.startswith("-"):
      return None
  return None


def setup_if_command():
  """`logs.setup` if this process is `python -m <one of COMMANDS>`; called by the package's
  `__init__`, which Python imports before it runs the `-m` module. Otherwise nothing (the
  package imported as a library, by tests, by a console script)."""
  if sys.argv[:1] == ["-m"] and _module_after_dash_m(getattr(sys, "orig_argv", [])) in (
      COMMANDS.values()):
    logs.setup()


def _entry_point(script):
  command = functools.partial(run, COMMANDS[script])
  command.__doc__ = f"`{script}`: runs `python -m {COMMANDS[script]}`."
  return command


train = _entry_point("t2t-train")
translate = _entry_point("t2t-translate")
evaluate = _entry_point("t2t-evaluate")
validate = _entry_point("t2t-validate")
score = _entry_point("t2t-score")
export = _entry_point("t2t-export")
summary = _entry_point("t2t-summary")
average = _entry_point("t2t-average")
parse = _entry_point("t2t-parse")
plot_attention = _entry_point("t2t-plot-attention")
download = _entry_point("t2t-download")
stats = _entry_point("t2t-stats")
