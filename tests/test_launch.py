"""t2t_repro.commands: one registry, three ways in, the same result; the layers import downwards."""

import ast
import configparser
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from t2t_repro.commands import launch

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = pathlib.Path(_REPO) / "t2t_repro"
_ENV = dict(os.environ, PYTHONPATH=_REPO)


def _console_scripts():
  config = configparser.ConfigParser()
  config.read(os.path.join(_REPO, "setup.cfg"))
  rows = config["options.entry_points"]["console_scripts"].strip().splitlines()
  return dict(tuple(part.strip() for part in row.split("=")) for row in rows)


def test_every_command_has_its_console_script_module_and_python_m_name():
  scripts = _console_scripts()
  assert sorted(scripts) == sorted(launch.console_script(name) for name in launch.COMMANDS)
  for name in launch.COMMANDS:
    assert scripts[launch.console_script(name)] == "t2t_repro.commands.launch:main", name
    assert launch.command_of_script(launch.console_script(name)) == name  # the script runs it
    command = (_PACKAGE / "commands" / f"{name}.py").read_text(encoding="utf-8")
    assert "def define_flags(" in command and "def main(argv)" in command, name
    shim = (_PACKAGE / f"{name}.py").read_text(encoding="utf-8")  # python -m t2t_repro.<name>
    assert f'launch.launch("{name}")' in shim, name


def _imports(path):
  """The t2t_repro modules that the file at `path` imports (absolute names)."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      names.add(node.module)
      names.update(f"{node.module}.{alias.name}" for alias in node.names)
  return {name for name in names if name.startswith("t2t_repro")}


def test_no_library_module_imports_the_commands():
  """Only commands/ and the `python -m` entry modules (one line each, and `__main__.py`) may
  import commands/."""
  shims = {_PACKAGE / f"{name}.py" for name in (*launch.COMMANDS, "__main__")}
  offenders = []
  for path in _PACKAGE.rglob("*.py"):
    if "commands" in path.relative_to(_PACKAGE).parts or path in shims:
      continue
    offenders += [f"{path.relative_to(_REPO)}: {name}" for name in _imports(path)
                  if name == "t2t_repro.commands" or name.startswith("t2t_repro.commands.")]
  assert not offenders


def test_errors_is_the_bottom_layer():
  assert not _imports(_PACKAGE / "errors.py")


def _script(name, *args):
  """Runs console script `name` as its entry point does (without an installed wrapper)."""
  code = (f"import sys; sys.argv = [{launch.console_script(name)!r}, *sys.argv[1:]]; "
          "from t2t_repro.commands import launch; launch.main()")
  return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                        env=_ENV, timeout=120, check=False)


def _module(module, *args):
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                        env=_ENV, timeout=120, check=False)


def test_console_script_equals_python_m():
  """Same help, same one-line usage error and exit status as `python -m t2t_repro.evaluate`."""
  for args in (["--help"], ["--hyp=h.txt"], ["--nosuchflag"]):
    script, module = _script("evaluate", *args), _module("t2t_repro.evaluate", *args)
    assert (script.returncode, script.stdout, script.stderr) == (
        module.returncode, module.stdout, module.stderr), args
  usage = _module("t2t_repro.evaluate", "--hyp=h.txt")
  assert usage.returncode == 2
  assert usage.stderr == "evaluate: error: --hyp and at least one --ref are required\n"
  assert "--ref" in _script("evaluate", "--help").stdout


def test_installed_console_script():
  path = shutil.which("t2t-evaluate")
  if path is None:
    pytest.skip("t2t-evaluate is not on PATH (pip install -e . installs the console scripts)")
  result = subprocess.run([path, "--hyp=h.txt"], capture_output=True, text=True, timeout=120,
                          check=False)
  assert result.returncode == 2 and result.stderr.startswith("evaluate: error: --hyp"), result
  assert "--ref" in subprocess.run([path, "--help"], capture_output=True, text=True, timeout=120,
                                   check=False).stdout


def test_importing_the_package_sets_nothing_up():
  """No work at import: not the package, not a `python -m` entry module, not a command."""
  code = ("import os; before = os.fstat(2).st_ino; "
          "import t2t_repro, t2t_repro.translate, t2t_repro.commands.translate, t2t_repro.logs; "
          "print(t2t_repro.logs._state['level'] is not None, os.fstat(2).st_ino == before)")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_ENV,
                          timeout=120, check=False)
  assert result.stdout.split() == ["False", "True"], result.stderr[-2000:]  # fd 2 not replaced


def test_flags_and_usage_errors_need_no_tensorflow():
  """Every command defines (and checks) its flags without importing TensorFlow, so --help and
  a usage error answer at once instead of after TensorFlow's import (seconds)."""
  code = ("import importlib, sys\n"
          "from absl import flags\n"
          "from t2t_repro.commands import launch\n"
          "for name in launch.COMMANDS:\n"
          "  for flag in list(flags.FLAGS):\n"
          "    delattr(flags.FLAGS, flag)\n"
          "  importlib.import_module(f't2t_repro.commands.{name}').define_flags()\n"
          "  assert 'tensorflow' not in sys.modules, name\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_ENV,
                          timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  usage = _module("t2t_repro.translate", "--beam_size=0")
  assert usage.returncode == 2 and "--beam_size=0" in usage.stderr, usage.stderr[-2000:]


def test_a_command_returns_its_status_after_its_finally_blocks(tmp_path):
  """`runner.run` returns the exit status; the command's `finally` blocks have run, for a
  success, a user error (one line, exit 2) and a data error (exit 1)."""
  marker = tmp_path / "finally"
  code = (
      "import sys\n"
      "from t2t_repro import errors\n"
      "from t2t_repro.commands import runner\n"
      "def main(argv):\n"
      "  try:\n"
      "    if argv[1:] == ['usage']: raise errors.UsageError('--x is bad')\n"
      "    if argv[1:] == ['data']: raise errors.DataError('f.txt:3: bad line')\n"
      "  finally:\n"
      f"    open({str(marker)!r}, 'a').write(argv[-1] + '\\n')\n"
      "code = runner.run(main, 'cmd')\n"
      f"open({str(marker)!r}, 'a').write(f'returned {{code}}\\n')\n"
      "sys.exit(code)\n")
  outcomes = [subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                             env=_ENV, timeout=120, check=False) for args in ([], ["usage"], ["data"])]
  assert [p.returncode for p in outcomes] == [0, 2, 1]
  assert [p.stderr for p in outcomes] == ["", "cmd: error: --x is bad\n",
                                          "cmd: error: f.txt:3: bad line\n"]
  assert marker.read_text().split("\n")[:-1] == ["-c", "returned 0", "usage", "returned 2", "data",
                                                 "returned 1"]
