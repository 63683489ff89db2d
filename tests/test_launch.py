"""t2t_repro.launch: console scripts and `python -m` start every command the same way."""

import configparser
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from t2t_repro import launch

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENV = dict(os.environ, PYTHONPATH=_REPO)


def _console_scripts():
  config = configparser.ConfigParser()
  config.read(os.path.join(_REPO, "setup.cfg"))
  rows = config["options.entry_points"]["console_scripts"].strip().splitlines()
  return dict(tuple(part.strip() for part in row.split("=")) for row in rows)


def test_every_console_script_resolves():
  scripts = _console_scripts()
  assert sorted(scripts) == sorted(launch.COMMANDS)
  for script, target in scripts.items():
    module, attr = target.split(":")
    entry = getattr(importlib.import_module(module), attr)
    assert entry.args == (launch.COMMANDS[script],), script  # the script runs its command
    assert importlib.util.find_spec(launch.COMMANDS[script]) is not None, script


def _script(name, *args):
  """Runs console script `name` as its entry point does (without an installed wrapper)."""
  code = (f"import sys; sys.argv = [{name!r}, *sys.argv[1:]]; "
          f"from t2t_repro import launch; launch.{launch.COMMANDS[name].rsplit('.')[-1]}()")
  return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                        env=_ENV, timeout=120, check=False)


def _module(module, *args):
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                        env=_ENV, timeout=120, check=False)


def test_console_script_equals_python_m():
  """Same help, same one-line usage error and exit status as `python -m t2t_repro.evaluate`."""
  for args in (["--help"], ["--hyp=h.txt"], ["--nosuchflag"]):
    script, module = _script("t2t-evaluate", *args), _module("t2t_repro.evaluate", *args)
    assert (script.returncode, script.stdout, script.stderr) == (
        module.returncode, module.stdout, module.stderr), args
  usage = _script("t2t-evaluate", "--hyp=h.txt")
  assert usage.returncode == 2
  assert usage.stderr == "evaluate: error: --hyp and at least one --ref are required\n"
  assert "--ref" in _script("t2t-evaluate", "--help").stdout


def test_installed_console_script():
  path = shutil.which("t2t-evaluate")
  if path is None:
    pytest.skip("t2t-evaluate is not on PATH (pip install -e . installs the console scripts)")
  result = subprocess.run([path, "--hyp=h.txt"], capture_output=True, text=True, timeout=120,
                          check=False)
  assert result.returncode == 2 and result.stderr.startswith("evaluate: error: --hyp"), result
  assert "--ref" in subprocess.run([path, "--help"], capture_output=True, text=True, timeout=120,
                                   check=False).stdout


def test_dash_m_module():
  # pylint: disable=protected-access
  assert launch._module_after_dash_m(["python", "-m", "t2t_repro.train", "--x"]) == "t2t_repro.train"
  assert launch._module_after_dash_m(["python3", "-X", "utf8", "-u", "-mt2t_repro.export"]) == (
      "t2t_repro.export")
  assert launch._module_after_dash_m(["python", "-c", "x", "-m", "t2t_repro.train"]) is None
  assert launch._module_after_dash_m(["python", "tools/parse.py", "-m", "x"]) is None


def test_python_m_sets_up_before_the_command_imports():
  """`python -m t2t_repro.<command>`: the package's import sets logging up, other modules not."""
  code = ("import sys; sys.argv[0] = '-m'; sys.orig_argv = ['python', '-m', {module!r}]; "
          "import t2t_repro, t2t_repro.logs; print(t2t_repro.logs._state['level'] is not None, "
          "'tensorflow' in sys.modules)")
  for module, expected in (("t2t_repro.translate", "True False"), ("pytest", "False False")):
    result = subprocess.run([sys.executable, "-c", code.format(module=module)], capture_output=True,
                            text=True, env=_ENV, timeout=60, check=False)
    assert result.stdout.strip() == expected, (module, result.stderr)
