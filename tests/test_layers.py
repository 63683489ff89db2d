"""docs/DESIGN.md's layer line holds: every module of t2t_repro imports only its own folder (or
root module) and the layers below it, never one above or beside it."""

import ast
import os
import pathlib
import re

from t2t_repro.commands import launch

_REPO = pathlib.Path(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGE = _REPO / "t2t_repro"
_ENTRY_MODULES = {*launch.COMMANDS, "__main__"}  # `python -m t2t_repro.<command>`: commands


def layers(text):
  """The indented layer line of docs/DESIGN.md as [[part, ...], ...], top down."""
  block = re.search(r"^    (commands -> .*?)\n\n", text, re.M | re.S)[1]
  return [[part.strip() for part in layer.split(",")]
          for layer in " ".join(block.split()).split("->")]


def part_of(path):
  """The part of t2t_repro (a folder, or a module at the root) that the file at `path` is in;
  None for `t2t_repro/__init__.py`, which imports nothing at import time."""
  parts = path.relative_to(_PACKAGE).parts
  if len(parts) > 1:
    return parts[0]
  name = parts[0].removesuffix(".py")
  return "commands" if name in _ENTRY_MODULES else None if name == "__init__" else name


def imported_names(path):
  """The dotted names the file at `path` imports (at the top or in a function): `import a.b`
  gives a.b, `from a import b` a.b."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      names.update(f"{node.module}.{alias.name}" for alias in node.names)
  return names


def imported_parts(path):
  """The parts of t2t_repro that the file at `path` imports (at the top or in a function)."""
  parts = set()
  for name in imported_names(path):
    pieces = name.split(".")
    if pieces[0] == "t2t_repro" and len(pieces) > 1:
      parts.add(pieces[1] if (_PACKAGE / pieces[1]).is_dir() or pieces[1] in
                _ENTRY_MODULES or (_PACKAGE / f"{pieces[1]}.py").exists() else None)
  return {"commands" if part in _ENTRY_MODULES else part for part in parts} - {None}


def test_the_layer_line_is_read_whole():
  line = layers((_REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8"))
  assert line[0] == ["commands"] and line[-1] == ["errors"] and ["fileio", "config"] in line


def test_every_part_of_the_package_is_in_the_layer_line():
  line = layers((_REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8"))
  named = {part for layer in line for part in layer}
  parts = {part_of(path) for path in _PACKAGE.rglob("*.py")} - {None}
  assert parts == named, (sorted(parts - named), sorted(named - parts))


def test_no_module_imports_a_layer_above_or_beside_its_own():
  line = layers((_REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8"))
  floor = {part: len(line) - i for i, layer in enumerate(line) for part in layer}
  wrong = []
  for path in sorted(_PACKAGE.rglob("*.py")):
    own = part_of(path)
    if own is None:
      continue
    wrong += [f"{path.relative_to(_REPO)} ({own}, layer {floor[own]}) imports {part} "
              f"(layer {floor[part]})" for part in sorted(imported_parts(path))
              if part != own and floor[part] >= floor[own]]
  assert not wrong, "\n".join(wrong)


def imported_modules(path):
  """The modules of t2t_repro that the file at `path` imports (at the top or in a function),
  as paths of their files: `from t2t_repro.serving import servable` is serving/servable.py,
  `from t2t_repro.serving import QUANTIZATIONS` serving/__init__.py."""
  found = set()
  for name in imported_names(path):
    pieces = name.split(".")
    while pieces and pieces[0] == "t2t_repro":
      module = _REPO.joinpath(*pieces[:-1], pieces[-1] + ".py")
      package = _REPO.joinpath(*pieces, "__init__.py")
      if module.exists() or package.exists():
        found.add(module if module.exists() else package)
        break
      pieces = pieces[:-1]
  return found - {path}


def test_no_two_modules_import_each_other_through_any_chain():
  graph = {path: imported_modules(path) for path in sorted(_PACKAGE.rglob("*.py"))}
  circles, seen = [], set()
  for start in graph:  # a depth-first search from each module not yet reached
    stack, on_path = [(start, iter(sorted(graph[start])))], [start]
    seen.add(start)
    while stack:
      node, children = stack[-1]
      child = next(children, None)
      if child is None:
        stack.pop()
        on_path.pop()
      elif child in on_path:
        circles.append(" -> ".join(str(p.relative_to(_REPO)) for p in
                                   on_path[on_path.index(child):] + [child]))
      elif child not in seen and child in graph:
        seen.add(child)
        stack.append((child, iter(sorted(graph[child]))))
        on_path.append(child)
  assert not circles, "\n".join(circles)
