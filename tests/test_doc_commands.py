"""The docs name every command, and every command line they show uses flags that command has:
a renamed command or flag cannot leave README, docs/ or examples/ behind."""

import glob
import json
import os
import re
import subprocess
import sys

import pytest

from t2t_repro.commands import launch

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_COMMAND_RE = re.compile(r"python -m t2t_repro[. ](\w+)")
_FLAG_RE = re.compile(r"(?<![\w=,-])--(\w+)")  # not --train_flags=--x's inner flags
_END_RE = re.compile(r"`|\||&&|;|\s#")  # the end of one command in a line

# Prints {command: [its flags]}: each command's define_flags() in one process, its flags
# removed before the next (absl's FlagValues is global), absl's own flags included.
_LIST_FLAGS = """
import importlib, json
from absl import flags
from t2t_repro.commands import launch, runner
own = set(flags.FLAGS) | {"help", "helpfull", "helpshort", "helpxml"}
result = {}
for name in launch.COMMANDS:
  importlib.import_module("t2t_repro.commands." + name).define_flags()
  result[name] = sorted(set(flags.FLAGS) | own)
  for flag in set(flags.FLAGS) - own:
    delattr(flags.FLAGS, flag)
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def command_flags():
  out = subprocess.run([sys.executable, "-c", _LIST_FLAGS], capture_output=True, text=True,
                       timeout=300, check=True).stdout
  return {name: set(names) for name, names in json.loads(out).items()}


def _documents():
  return ([os.path.join(_REPO, "README.md")]
          + sorted(glob.glob(os.path.join(_REPO, "docs", "*.md")))
          + sorted(glob.glob(os.path.join(_REPO, "examples", "**", "*.md"), recursive=True))
          + sorted(glob.glob(os.path.join(_REPO, "examples", "**", "*.py"), recursive=True)))


def command_lines(text):
  """(line number, command, [flags]) of each `python -m t2t_repro.<command> ...` in `text`
  (a line ending with a backslash continues on the next)."""
  lines = text.splitlines()
  found = []
  for number, line in enumerate(lines, 1):
    for match in _COMMAND_RE.finditer(line):
      rest, following = line[match.end():], number
      while rest.rstrip().endswith("\\") and following < len(lines) and not _END_RE.search(rest):
        rest, following = rest.rstrip()[:-1] + " " + lines[following], following + 1
      rest = _END_RE.split(rest, maxsplit=1)[0]
      found.append((number, match[1], _FLAG_RE.findall(rest)))
  return found


def test_command_lines_are_found_with_their_flags():
  text = ("run `python -m t2t_repro.train --hparams=tiny --seed=1` then\n"
          "    python -m t2t_repro.translate --model_dir=m \\\n"
          "        --beam_size=4 | python -m t2t_repro.evaluate --ref=r  # --not_a_flag\n"
          "python -m t2t_repro.parse --train_flags=--seed=2,--x=1 [--notfds]\n")
  assert command_lines(text) == [(1, "train", ["hparams", "seed"]),
                                 (2, "translate", ["model_dir", "beam_size"]),
                                 (3, "evaluate", ["ref"]), (4, "parse", ["train_flags", "notfds"])]


def test_usage_names_every_command():
  text = open(os.path.join(_REPO, "docs", "USAGE.md"), encoding="utf-8").read()
  missing = [name for name in launch.COMMANDS if f"`{name}`" not in text]
  assert not missing, f"docs/USAGE.md does not name the commands {missing}"


def test_every_documented_command_line_uses_flags_its_command_has(command_flags):
  wrong = []
  for path in _documents():
    with open(path, encoding="utf-8") as f:
      text = f.read()
    for number, command, names in command_lines(text):
      where = f"{os.path.relpath(path, _REPO)}:{number}"
      if command not in command_flags:
        wrong.append(f"{where}: no command {command!r}")
      known = command_flags.get(command, set())
      wrong += [f"{where}: {command} has no --{name}" for name in names if command in
                command_flags and name not in known and name.removeprefix("no") not in known]
  assert not wrong, "\n".join(wrong)
