"""The commands: each module of this package parses its flags and calls the library.

`launch.COMMANDS` is the one registry. Every name in it is reachable three ways, with the same
flags, errors and exit statuses:

* the console script `t2t-<name>` (`-` for `_`; setup.cfg's `console_scripts`, checked
  against this registry by tests/test_launch.py), each `launch.main`, which runs the
  command its name gives;
* `python -m t2t_repro.<name>`, a one-line module at the package top, and
  `python -m t2t_repro <name>` (`t2t_repro/__main__.py`, `launch.package_main`);
* `python tools/average_checkpoints.py`, `tools/parse.py` and `tools/plot_attention.py`
  (commands `average`, `parse` and `plot_attention`; docs/USAGE.md shows them).

Each command module defines `define_flags()` and `main(argv)`. `launch` sets up logging
(`logs.setup`, which must come before TensorFlow is imported: its stderr filter has to be
in place when TensorFlow's C++ start-up lines are written), imports the command module,
defines its flags and runs `main` through `runner.run`, which turns a user error into one
line and an exit status. Nothing happens on import: the package and the library never set
anything up.
"""
