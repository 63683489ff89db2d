"""Reading and writing Penn Treebank bracketed trees (``nltk.Tree``, root ``TOP``).

`read_treebank` reads the PTB's ``wsj_NNNN.mrg`` files; `split_file_ids` splits
them by file number (`PTB_SAMPLE_SPLITS` for the NLTK 10% sample); `read_tree_lines`
/ `write_tree_lines` read and write one tree a line (EVALB's input format). Cleaning,
linearizing and delinearizing: `t2t_repro.parsing.trees`.
"""

import os
import re

import nltk

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.parsing.trees import ROOT_LABEL

# File split of the NLTK PTB sample (inclusive wsj_NNNN ranges); there is no
# official split of this sample (shared/data/README.md, "Penn Treebank sample").
PTB_SAMPLE_SPLITS = {
    "train": (1, 159),
    "dev": (160, 179),
    "test": (180, 199),
}

_FILE_NUMBER_RE = re.compile(r"^wsj_(\d{4})\.mrg$")


def _split_bracketed(text, source="<string>"):
  """Splits text into its top-level balanced ``( ... )`` blocks.

  Args:
    text: str, zero or more bracketed trees separated by whitespace.
    source: str, name used in error messages.

  Returns:
    list[str], one string per top-level tree.

  Raises:
    ValueError: brackets are unbalanced or text lies outside any bracket.
  """
  blocks = []
  depth = 0
  start = 0
  for i, ch in enumerate(text):
    if ch == "(":
      if depth == 0:
        start = i
      depth += 1
    elif ch == ")":
      depth -= 1
      if depth < 0:
        raise ValueError(f"{source}: unmatched ')' at character {i}")
      if depth == 0:
        blocks.append(text[start:i + 1])
    elif depth == 0 and not ch.isspace():
      raise ValueError(f"{source}: text outside brackets at character {i}")
  if depth != 0:
    raise ValueError(f"{source}: {depth} bracket(s) left open at end of text")
  return blocks


def _with_root(tree):
  """Gives a tree the root label TOP (names an empty root, else wraps it)."""
  if isinstance(tree, nltk.Tree) and tree.label() in ("", ROOT_LABEL):
    tree.set_label(ROOT_LABEL)
    return tree
  return nltk.Tree(ROOT_LABEL, [tree])


def parse_trees(text, source="<string>"):
  """Parses every bracketed tree in a string.

  PTB files wrap each tree in an outer ``( ... )`` without a label; that root
  is labelled ``TOP``. A tree whose root has another label is wrapped in a new
  ``TOP`` node.

  Args:
    text: str, bracketed trees (PTB .mrg format or one tree per line).
    source: str, name used in error messages.

  Returns:
    list[nltk.Tree], root label ``TOP``.

  Raises:
    ValueError: unbalanced brackets, or text outside brackets.
  """
  return [_with_root(nltk.Tree.fromstring(block))
          for block in _split_bracketed(text, source)]


def treebank_file_ids(directory):
  """Lists the ``wsj_NNNN.mrg`` files of a directory, sorted by name.

  Args:
    directory: str, e.g. ``shared/data/ptb_sample/combined``.

  Returns:
    list[str], file names (not paths).

  Raises:
    FileNotFoundError: the directory does not exist.
  """
  return sorted(name for name in os.listdir(directory)
                if _FILE_NUMBER_RE.match(name))


def read_treebank(directory, file_ids=None):
  """Reads PTB bracketed trees (nltk ``Tree.fromstring`` over each file).

  nltk's ``BracketParseCorpusReader`` is not used because nltk >= 3.9 refuses
  paths outside ``nltk.data.path``; the trees are the same (raw, with
  ``-NONE-`` elements and function tags; call ``clean`` next).

  Args:
    directory: str, folder holding the .mrg files.
    file_ids: list[str] of file names inside ``directory``, in reading order;
      None reads every ``wsj_NNNN.mrg`` file in name order.

  Returns:
    list[nltk.Tree], one per sentence, root label ``TOP``.

  Raises:
    FileNotFoundError: a file is missing.
    ValueError: a file has unbalanced brackets.
  """
  if file_ids is None:
    file_ids = treebank_file_ids(directory)
  trees = []
  for file_id in file_ids:
    with open(os.path.join(directory, file_id), encoding="utf-8") as f:
      trees.extend(parse_trees(f.read(), source=file_id))
  return trees


def split_file_ids(file_ids, splits=None):
  """Assigns ``wsj_NNNN.mrg`` files to splits by file number.

  Args:
    file_ids: iterable of file names.
    splits: dict name -> (first, last) inclusive file-number range; default
      ``PTB_SAMPLE_SPLITS`` (train 1-159, dev 160-179, test 180-199).

  Returns:
    dict name -> sorted list[str]; files outside every range are left out.

  Raises:
    ValueError: a name is not of the form ``wsj_NNNN.mrg``.
  """
  splits = PTB_SAMPLE_SPLITS if splits is None else splits
  result = {name: [] for name in splits}
  for file_id in sorted(file_ids):
    match = _FILE_NUMBER_RE.match(file_id)
    if not match:
      raise ValueError(f"not a wsj_NNNN.mrg file name: {file_id!r}")
    number = int(match.group(1))
    for name, (first, last) in splits.items():
      if first <= number <= last:
        result[name].append(file_id)
  return result


def tree_to_line(tree):
  """One-line bracketed string of a tree (EVALB input format).

  Args:
    tree: nltk.Tree.

  Returns:
    str without newlines, e.g. ``(TOP (S (NP (NNP John)) ...))``.
  """
  return " ".join(tree.pformat(margin=10**9).split())


def read_tree_lines(path):
  """Reads a file with one bracketed tree per line (EVALB input format).

  Lines end at "\\n" only (`fileio.read_lines`). A line with several
  top-level brackets, e.g. ``(P this) (Q is)``, is ONE sentence, as evalb.c's
  ``read_line`` reads it: its blocks become the children of one ``TOP`` root.

  Args:
    path: str.

  Returns:
    list[nltk.Tree], one per line, root ``TOP`` (see ``parse_trees``); an
    empty line gives ``Tree("TOP", [])`` (EVALB skips or rejects it).

  Raises:
    errors.DataError: the file is missing or not UTF-8 text, or a line is not
      balanced brackets; the message is ``{path}:{line}: ...``.
  """
  result = []
  for number, line in enumerate(fileio.read_lines(path), 1):
    try:
      parsed = parse_trees(line, source=f"{path}:{number}")
    except ValueError as e:  # nltk's messages do not name the file
      message = str(e) if str(e).startswith(f"{path}:") else f"{path}:{number}: {e}"
      raise errors.DataError(" ".join(message.split())) from None
    if len(parsed) > 1:
      parsed = [nltk.Tree(ROOT_LABEL, [_without_root(tree) for tree in parsed])]
    result.append(parsed[0] if parsed else nltk.Tree(ROOT_LABEL, []))
  return result


def _without_root(tree):
  """Undoes `_with_root`'s wrapping of one block of a several-block line."""
  return tree[0] if len(tree) == 1 and not isinstance(tree[0], str) else tree


def write_tree_lines(path, trees):
  """Writes trees one per line (``tree_to_line``), ending with a newline, atomically.

  Args:
    path: str.
    trees: iterable of nltk.Tree.
  """
  fileio.write_lines(path, [tree_to_line(tree) for tree in trees])
