"""A regular (non-editable) install runs every command: the package is built from a copy of
the sources and installed into a temporary folder, and each console script, each
`python -m t2t_repro.<command>` and `python -m t2t_repro <command>` answers --help from there,
with the hparam sets of configs/ and the server's page shipped inside it."""

import concurrent.futures
import os
import shutil
import subprocess
import sys

import pytest

from t2t_repro.config import hparams
from t2t_repro.commands import launch

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SOURCES = ("t2t_repro", "configs", "setup.cfg", "pyproject.toml", "README.md")

# Run first in every process of the test (site imports `sitecustomize` from PYTHONPATH):
# a `pip install -e` of the project adds an import hook that finds any t2t_repro module
# in its source tree, and would hide a module the install left out.
_NO_EDITABLE_HOOK = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
  """(target folder, environment): the project installed non-editable into the folder."""
  root = tmp_path_factory.mktemp("install")
  source = root / "source"  # a copy: no build/ or egg-info of earlier builds in the repo
  for name in _SOURCES:
    path = os.path.join(_REPO, name)
    if not os.path.exists(path):
      continue
    if os.path.isdir(path):
      shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    else:
      source.mkdir(exist_ok=True)
      shutil.copyfile(path, source / name)
  target = root / "site"
  result = subprocess.run(
      [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
       "--no-index", "--disable-pip-version-check", "--target", str(target), str(source)],
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  (target / "sitecustomize.py").write_text(_NO_EDITABLE_HOOK, encoding="utf-8")
  env = dict(os.environ, PYTHONPATH=str(target), TF_CPP_MIN_LOG_LEVEL="2")
  return target, env


def _run(args, installed):
  target, env = installed
  return subprocess.run(args, capture_output=True, text=True, env=env, cwd=target.parent,
                        timeout=300, check=False)


def test_the_installed_package_is_imported_with_its_hparam_sets(installed):
  target, _ = installed
  code = ("import t2t_repro.commands, t2t_repro.serving, t2t_repro.configs\n"
          "from t2t_repro.config import hparams\n"
          "print(t2t_repro.commands.__file__)\n"
          "print(t2t_repro.configs.__file__)\n"
          "print(','.join(hparams.list_hparams()))\n"
          "print(hparams.get_hparams('big').d_model)\n"
          "import importlib.resources\n"
          "print(importlib.resources.files('t2t_repro.serving').joinpath('page.html').is_file())\n")
  result = _run([sys.executable, "-c", code], installed)
  assert result.returncode == 0, result.stderr[-3000:]
  commands, configs, sets, d_model, page = result.stdout.split()
  assert page == "True"  # the server's page (package data) is installed
  assert commands.startswith(str(target)) and configs.startswith(str(target))
  assert sets.split(",") == hparams.list_hparams() and len(sets.split(",")) > 20
  assert d_model == "1024"  # Table 3 "big", read from the installed configs/big.json


def test_every_command_answers_help_from_the_install(installed):
  """Each console script and `python -m t2t_repro.<name>` (the console scripts' wrappers are
  pip's, in <target>/bin), two processes per command, run two at a time."""
  target, _ = installed
  runs = {}
  for name in launch.COMMANDS:
    runs[launch.console_script(name)] = [str(target / "bin" / launch.console_script(name)),
                                         "--help"]
    runs[f"-m t2t_repro.{name}"] = [sys.executable, "-m", f"t2t_repro.{name}", "--help"]
  runs["-m t2t_repro train"] = [sys.executable, "-m", "t2t_repro", "train", "--help"]
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = dict(zip(runs, pool.map(lambda args: _run(args, installed), runs.values())))
  for what, result in results.items():
    assert result.returncode == 0, (what, result.stderr[-3000:])
    assert "Try --helpfull" in result.stdout, what  # the end of absl's help
  assert "--hparams" in results["-m t2t_repro train"].stdout
  assert "--beam_size" in results["t2t-translate"].stdout


def test_python_m_t2t_repro_without_a_command_lists_them(installed):
  result = _run([sys.executable, "-m", "t2t_repro"], installed)
  assert result.returncode == 2
  assert result.stderr.splitlines()[0] == "t2t_repro: error: no command given"
  assert ", ".join(launch.COMMANDS) in result.stderr
  unknown = _run([sys.executable, "-m", "t2t_repro", "trian"], installed)
  assert unknown.returncode == 2 and "unknown command 'trian'" in unknown.stderr


def test_setup_cfg_lists_every_package_folder():
  """setup.cfg's explicit package list (configs/ is mapped into it, so `find:` cannot make
  it) names every folder of t2t_repro/ with an __init__.py: a new subpackage cannot be left
  out of a regular install, as t2t_repro.commands and t2t_repro.serving once were."""
  import configparser  # pylint: disable=import-outside-toplevel
  config = configparser.ConfigParser()
  config.read(os.path.join(_REPO, "setup.cfg"))
  listed = set(config["options"]["packages"].split())
  folders = {os.path.relpath(root, _REPO).replace(os.sep, ".")
             for root, _, files in os.walk(os.path.join(_REPO, "t2t_repro"))
             if "__init__.py" in files and "__pycache__" not in root}
  assert folders | {"t2t_repro.configs"} == listed
