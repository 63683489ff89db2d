"""docs/DESIGN.md names only what exists: every path, module, `module.symbol` and the symbols of
each "where things are" row resolve in the current tree."""

import glob
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys

import pytest

from t2t_repro.config import hparams

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DESIGN = os.path.join(_REPO, "docs", "DESIGN.md")
_PATH_RE = re.compile(r"\b(?:t2t_repro|tools|configs|docs|tests|benchmarks)/[\w/.*-]*")
_DOTTED_RE = re.compile(r"^([A-Za-z_]\w*)\.([A-Za-z_]\w*)")
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_]\w*$")
_FILE_SUFFIXES = ("json", "model", "py", "md", "txt", "tsv", "pbtxt")  # `hparams.json` is a file, not a symbol


def _text():
  with open(_DESIGN, encoding="utf-8") as f:
    return f.read()


def _module_name(path):
  """t2t_repro/config/decode.py -> t2t_repro.config.decode (None for other paths)."""
  if not (path.startswith("t2t_repro/") and path.endswith(".py")):
    return None
  return path[:-3].replace("/", ".").removesuffix(".__init__")


@pytest.fixture(scope="module")
def modules():
  """{dotted name: module} of every t2t_repro module file DESIGN.md names (imported)."""
  found = {}
  for path in sorted(set(_PATH_RE.findall(_text()))):
    for match in sorted(glob.glob(os.path.join(_REPO, path.rstrip("/")))):
      files = glob.glob(os.path.join(match, "*.py")) if os.path.isdir(match) else [match]
      for name in filter(None, (_module_name(os.path.relpath(f, _REPO)) for f in files)):
        found[name] = importlib.import_module(name)
  return found


def test_every_path_exists():
  for path in sorted(set(_PATH_RE.findall(_text()))):
    assert glob.glob(os.path.join(_REPO, path)), f"docs/DESIGN.md names {path}, which does not exist"


def test_every_command_module_exists():
  for name in re.findall(r"python -m ([\w.]+)", _text()):
    assert importlib.util.find_spec(name), f"docs/DESIGN.md runs `python -m {name}`: no such module"


def _classes(modules):
  return {name: value for module in modules for name, value in vars(module).items()
          if inspect.isclass(value) and value.__module__ == module.__name__}


def test_every_module_symbol_resolves(modules):
  """`module.symbol` (a t2t_repro module by its short name; of several modules of that name,
  one must have it) and `Class.member` (a class defined in a module DESIGN.md names) must
  exist; other dotted names (tf., keras., os.) are not this project's."""
  classes = _classes(modules.values())
  by_short_name = {}
  for name, module in modules.items():
    by_short_name.setdefault(name.rsplit(".", 1)[-1], []).append(module)
  checked = 0
  for token in re.findall(r"`([^`]+)`", _text()):
    if token.startswith("t2t_repro."):
      name = re.match(r"[\w.]+", token).group(0)
      assert importlib.util.find_spec(name), f"docs/DESIGN.md names {name}: no such module"
      continue
    match = _DOTTED_RE.match(token)
    if not match or match.group(2) in _FILE_SUFFIXES:
      continue
    owner, symbol = match.groups()
    targets = by_short_name.get(owner) or ([classes[owner]] if owner in classes else [])
    if not targets:
      continue
    checked += 1
    assert any(hasattr(t, symbol) for t in targets), (
        f"docs/DESIGN.md names `{owner}.{symbol}`; {targets} have no {symbol}")
  assert checked >= 10  # the doc's own references were found, so the parsing works


def _row_names(module, classes):
  """Names a row may mention for `module`: its attributes, its classes' members, the parameters
  of its functions and methods, and the module's own name."""
  names = set(vars(module)) | {module.__name__.rsplit(".", 1)[-1]}
  for value in list(vars(module).values()):
    if inspect.isclass(value) and value.__module__ == module.__name__:
      names |= set(dir(value))
      functions = [v for v in vars(value).values() if inspect.isfunction(v)]
    elif inspect.isfunction(value) and value.__module__ == module.__name__:
      functions = [value]
    else:
      continue
    for function in functions:
      names |= set(inspect.signature(function).parameters)
  return names | set(classes)


def test_every_table_row_names_what_its_files_hold(modules):
  """In the "what | where" table, a bare `name` of the "what" column is defined in one of the
  row's modules (or is a registered hparam set), and a bare `file.py` is in the row's folder."""
  sets = set(hparams.list_hparams())
  rows = [line for line in _text().splitlines() if line.startswith("| ") and "`t2t_repro/" in line]
  assert len(rows) > 20
  for row in rows:
    what, where = row.strip("| ").rsplit(" | ", 1)
    paths = _PATH_RE.findall(where)
    row_modules = [modules[name] for name in map(_module_name, paths) if name]
    folders = [p for p in paths if p.endswith("/")]
    names = set().union(*(_row_names(m, _classes([m])) for m in row_modules)) | sets
    for token in re.findall(r"`([^`]+)`", what):
      if token.endswith(".py") and "/" not in token:
        assert any(os.path.exists(os.path.join(_REPO, f, token)) for f in folders), (token, row)
      elif _IDENTIFIER_RE.match(token):
        assert token in names, f"docs/DESIGN.md: `{token}` is not in {paths} (row: {what[:60]}...)"


def test_readme_lines_fit_120_columns_outside_code():
  """README.md reads on a terminal and in a diff: no line over 120 characters outside
  code blocks (indented or fenced) and no table cell with a paragraph in it."""
  with open(os.path.join(_REPO, "README.md"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  fenced, long_lines = False, []
  for number, line in enumerate(lines, 1):
    if line.startswith("```"):
      fenced = not fenced
    elif not fenced and not line.startswith("    ") and len(line) > 120:
      long_lines.append(f"README.md:{number}: {len(line)} characters")
  assert not long_lines


def _read(name):
  with open(os.path.join(_REPO, name), encoding="utf-8") as f:
    return f.read()


def _readme_commands():
  """The `python -m t2t_repro.<name> ...` commands of README.md (code blocks, continuation lines
  joined, and inline code): [(name, [flag names])]."""
  text = _read("README.md").replace("\\\n", " ")
  lines = [line.strip() for line in text.splitlines() if line.startswith("    ")]
  lines += re.findall(r"`(python -m t2t_repro\.[^`]+)`", text)
  commands = []
  for line in lines:
    match = re.match(r"python -m (t2t_repro\.\w+)(.*)", line)
    if match:
      commands.append((match.group(1), re.findall(r"(?<!\S)--(\w+)", match.group(2))))
  return commands


def test_readme_is_the_newcomers_path():
  """At most 120 lines, every command a module with those flags, every link a file, and the
  test command what .ci/run runs."""
  readme = _read("README.md")
  assert len(readme.splitlines()) <= 120
  commands = _readme_commands()
  assert {name for name, _ in commands} >= {"t2t_repro.train", "t2t_repro.translate",
                                            "t2t_repro.evaluate", "t2t_repro.average",
                                            "t2t_repro.export", "t2t_repro.download"}
  defined = {}
  for name, used in commands:
    if name not in defined:
      assert importlib.util.find_spec(name), f"README.md runs `python -m {name}`: no such module"
      helpfull = subprocess.run([sys.executable, "-m", name, "--helpfull"], capture_output=True,
                                text=True, cwd=_REPO, timeout=300, check=False).stdout
      defined[name] = set(re.findall(r"^\s+(?:-\w,)?--(?:\[no\])?(\w+):", helpfull, re.M))
      assert "verbosity" in defined[name], helpfull[-2000:]  # the listing was parsed
    assert set(used) <= defined[name], f"README.md: {name} has no flag {set(used) - defined[name]}"
  tests = re.search(r"^## Tests\n\n    (.*)$", readme, re.M).group(1)
  assert tests == "python -m pytest -n 2" and tests in _read(".ci/run")
  assert "pip install" not in _read(".ci/run").split(tests)[1]  # installed once, before


@pytest.mark.parametrize("name", ["README.md", "docs/USAGE.md", "docs/TABLE3.md"])
def test_links_resolve(name):
  for target in re.findall(r"\]\(([^)#]+)\)", _read(name)):
    if not re.match(r"\w+://", target):
      path = os.path.join(_REPO, os.path.dirname(name), target)
      assert os.path.exists(path), f"{name} links {target}, which does not exist"


@pytest.mark.parametrize("name, limit", [("docs/RESULTS.md", 300), ("docs/BENCHMARKS.md", 350),
                                         ("docs/TABLE3.md", 300)])
def test_results_docs_stay_within_their_line_limits(name, limit):
  """The results docs say what holds now, each result a table with its command: bounded."""
  assert len(_read(name).splitlines()) <= limit, f"{name} is over {limit} lines"


# Built from parts so that this file does not match itself.
_HISTORY_RE = re.compile("sit" + r"tings?|\bissue [0-9]|the " + r"issue\b", re.IGNORECASE)


def test_no_account_of_how_the_work_went():
  """No history wording (work periods, issue numbers) in the repository's docs, examples,
  tests, configs, code and benchmarks: they say what holds now, and git keeps the history."""
  found = []
  for folder in ("docs", "examples", "studies", "tests", "configs", "t2t_repro", "benchmarks"):
    for root, _, files in os.walk(os.path.join(_REPO, folder)):
      for file_name in files:
        path = os.path.join(root, file_name)
        try:
          with open(path, encoding="utf-8") as f:
            text = f.read()
        except UnicodeDecodeError:  # images
          continue
        found += [f"{os.path.relpath(path, _REPO)}:{text.count(chr(10), 0, m.start()) + 1}: "
                  f"{m.group(0)}" for m in _HISTORY_RE.finditer(text)]
  assert not found, found


@pytest.mark.parametrize("name", ["multi30k", "wmt14_ende", "table3", "parsing", "library",
                                  "serving", "litert"])
def test_every_example_has_numbered_commands_and_an_expected_result_table(name):
  text = _read(f"examples/{name}/README.md")
  assert re.search(r"^1\. ", text, re.M) and re.search(r"^2\. ", text, re.M)
  assert re.search(r"^\s+python (-m t2t_repro\.\w+|examples/|studies/)", text, re.M)
  expected = text.split("## Expected result", 1)[1]
  assert re.search(r"^\|.*\|$", expected, re.M), f"examples/{name}: no result table"
  for target in re.findall(r"\]\(([^)#]+)\)", text):
    assert os.path.exists(os.path.join(_REPO, "examples", name, target)), target


def _usage_sets():
  """The hparam sets docs/USAGE.md's table names, `{a,b}` alternatives and `*` expanded
  against configs/."""
  table = _read("docs/USAGE.md").split("## Hyperparameter sets", 1)[1]
  names = set()
  for cell in re.findall(r"^\| (.*?) \|", table, re.M):
    for pattern in re.findall(r"`([\w{},*]+)`", cell):
      alternatives = re.match(r"(.*)\{(.*)\}(.*)", pattern)
      expanded = [alternatives.group(1) + a + alternatives.group(3)
                  for a in alternatives.group(2).split(",")] if alternatives else [pattern]
      for name in expanded:
        names.update(os.path.basename(p)[:-5] for p in glob.glob(
            os.path.join(_REPO, "configs", f"{name}.json")))
  return names


def test_usage_lists_every_hparam_set():
  sets = {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(_REPO, "configs", "*.json"))}
  assert sets - _usage_sets() == set(), "docs/USAGE.md's table of hparam sets lacks these"


def test_every_path_in_a_config_description_exists():
  """A set's description (`summary --hparams=NAME` prints it) names only files that exist."""
  missing = []
  for path in sorted(glob.glob(os.path.join(_REPO, "configs", "*.json"))):
    description = json.loads(_read(os.path.relpath(path, _REPO))).get("description", "")
    for named in re.findall(r"[\w.-]+(?:/[\w.-]+)+\.(?:py|md|json|sh|txt)\b", description):
      if not os.path.exists(os.path.join(_REPO, named)):
        missing.append(f"{os.path.basename(path)}: {named}")
  assert not missing
