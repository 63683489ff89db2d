"""Penn Treebank trees <-> token sequences for seq2seq constituency parsing.

The Transformer paper's §6.3 parser is a sequence-to-sequence model: the
source is the sentence, the target a linearized parse tree. This module takes
``nltk.Tree`` objects (read by ``t2t_repro.parsing.treebank``), cleans them
(empty elements and function tags removed), linearizes them as in Vinyals et
al. 2015, "Grammar as a Foreign Language" (§2, Figure 2), and turns a model's
(possibly ill-formed) output back into a tree over the input words.

Linearization (exact token definitions)
---------------------------------------
Every token is separated from the next by one ASCII space; no token contains
whitespace.

* source: the words (the tree's leaves) in order, e.g. ``Pierre Vinken , 61``.
* target: a depth-first (pre-order) walk of the cleaned tree without its
  ``TOP`` root, made of three kinds of token:

  - ``(LABEL`` opens a phrase labelled LABEL (e.g. ``(NP``);
  - ``)LABEL`` closes it, repeating the label (e.g. ``)NP``);
  - a leaf token per word: with ``leaves="xx"`` (Vinyals et al. 2015) the
    placeholder ``XX``, with ``leaves="word"`` the word itself. Either way the
    part-of-speech (POS) preterminal is not kept.

  ``(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))`` gives
  source ``John has a dog .`` and target
  ``(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S`` (leaves="xx") or
  ``(S (NP John )NP (VP has (NP a dog )NP )VP . )S`` (leaves="word").

Why the words as leaves (tools/parse.py's default): a decoder writing ``XX``
must count the leaves it wrote to know which source word comes next, and
attention learns counting slowly; an unconstrained model wrote 10.9 ``XX`` for
24.3 words after 19 passes over the data (docs/PARSING.md). Writing the word
makes that alignment a copy the loss trains directly, and the next word is
found by content. The leaves are still fixed by the input (constrained
decoding, ``t2t_repro.parsing.constraint``, copies them), never chosen.

Why POS tags are not predicted (the choice of Vinyals et al. 2015):

* the target vocabulary stays tiny: one leaf token plus two tokens per phrase
  label (55 tokens on the PTB sample), instead of 45 POS tags more;
* the number of ``XX`` tokens equals the number of words, so the target length
  is exactly ``2 * phrases + words`` and the i-th ``XX`` is the slot of the i-th
  source word: leaves are aligned by position, never generated;
* labeled-bracket F1 does not score POS tags: EVALB (evalb.c) reads a
  preterminal ``(TAG word)`` as a *terminal*, not as a bracket, so only phrase
  brackets enter recall / precision / F1; POS accuracy is a separate figure
  ("Tagging accuracy", see ``t2t_repro.parsing.evalb``).
  Caveat: EVALB still *reads* the test tree's POS tags to drop punctuation
  (``DELETE_LABEL , : `` '' .``), so a tree whose preterminals are all ``XX``
  keeps its punctuation and EVALB reports a length mismatch against the gold
  tree. Restore tags before scoring (``restore_tags`` here, or
  ``tools/parse.py --mode=evaluate``, which copies the gold tags into ``XX``
  slots; see docs/PARSING.md).

For a sentencepiece BPE model, ``target_symbols`` lists the bracket tokens so
that they can be declared ``user_defined_symbols`` and never split.

All trees produced here have the root label ``TOP`` (EVALB's COLLINS.prm
deletes the TOP bracket: ``DELETE_LABEL TOP``).
"""

import re

import nltk

ROOT_LABEL = "TOP"
PLACEHOLDER_TAG = "XX"
NONE_TAG = "-NONE-"
LEAVES = ("xx", "word")

# A label is its first run of characters without '-' or '=' (NP-SBJ-1 -> NP,
# PP-LOC=2 -> PP), except labels that start with '-' (-NONE-, -LRB-, -RRB-),
# which are kept whole.
_BASE_LABEL_RE = re.compile(r"^[^-=]+")


# ---------------------------------------------------------------- cleaning


def is_preterminal(node):
  """True for a POS node: an ``nltk.Tree`` whose only child is a word."""
  return (isinstance(node, nltk.Tree) and len(node) == 1
          and isinstance(node[0], str))


def strip_function_tags(label):
  """Removes function tags and indices from a PTB label.

  ``NP-SBJ-1`` -> ``NP``, ``PP-LOC=2`` -> ``PP``, ``NP=2`` -> ``NP``; labels
  that start with ``-`` (``-NONE-``, ``-LRB-``, ``-RRB-``) and labels without
  ``-``/``=`` (``ADVP|PRT``, ``PRP$``) are returned unchanged.

  Args:
    label: str.

  Returns:
    str.
  """
  if label.startswith("-"):
    return label
  match = _BASE_LABEL_RE.match(label)
  return match.group(0) if match else label


def _clean_node(node):
  """Cleaned copy of a subtree, or None when nothing but empty elements."""
  if isinstance(node, str):
    return node
  if is_preterminal(node):
    if node.label() == NONE_TAG:
      return None
    return nltk.Tree(strip_function_tags(node.label()), [node[0]])
  children = [c for c in (_clean_node(child) for child in node)
              if c is not None]
  if not children:
    return None
  return nltk.Tree(strip_function_tags(node.label()), children)


def clean(tree):
  """Removes empty elements and function tags; collapses nothing else.

  * every ``-NONE-`` preterminal (traces, null complementizers, ...) is
    removed, then every node left without children (recursively);
  * function tags and indices are stripped from every label
    (``strip_function_tags``); ``-LRB-``/``-RRB-`` stay as they are;
  * unary chains, ``ADVP|PRT`` style labels and punctuation are kept.

  Args:
    tree: nltk.Tree, a raw PTB tree (as from ``read_treebank``).

  Returns:
    nltk.Tree, a new tree; the input is not modified. A tree made only of
    empty elements becomes ``Tree(root_label, [])``.
  """
  cleaned = _clean_node(tree)
  if cleaned is None:
    return nltk.Tree(strip_function_tags(tree.label()), [])
  return cleaned


# ---------------------------------------------------------------- linearizing


def is_bracket(token):
  """True for ``(LABEL`` / ``)LABEL`` target tokens (not for leaves)."""
  return len(token) > 1 and token[0] in "()"


def _target_tokens(node, out, leaves):
  """Appends the target tokens of a subtree to ``out``."""
  if is_preterminal(node):
    word = node[0]
    if leaves == "word" and (is_bracket(word) or not word or
                             any(ch.isspace() for ch in word)):
      raise ValueError(f"word {word!r} cannot be a leaf token (empty, spaces or "
                       "bracket-like)")
    out.append(PLACEHOLDER_TAG if leaves == "xx" else word)
    return
  if not isinstance(node, nltk.Tree) or any(isinstance(c, str) for c in node):
    raise ValueError(f"word without a POS node under {node!r}")
  label = node.label()
  if not label or any(ch.isspace() for ch in label):
    raise ValueError(f"bad label {label!r} in {node!r}")
  out.append("(" + label)
  for child in node:
    _target_tokens(child, out, leaves)
  out.append(")" + label)


def linearize(tree, leaves="xx"):
  """Source and target sequences of a tree (Vinyals et al. 2015 §2, Fig. 2).

  Args:
    tree: nltk.Tree, normally cleaned (``clean``), root ``TOP``. The root is
      not written; its children are linearized one after the other.
    leaves: "xx" (one ``XX`` per word) or "word" (the word itself).

  Returns:
    (source, target): two str of space-separated tokens; ``source`` has one
    token per word, ``target`` has ``(L``/``)L`` per phrase and one leaf
    token per word.

  Raises:
    ValueError: ``leaves`` unknown, a word hangs directly under a phrase node
      (no POS node), a label is empty or contains whitespace, or (leaves=
      "word") a word is empty, contains whitespace or looks like a bracket
      token (``is_bracket``).
  """
  if leaves not in LEAVES:
    raise ValueError(f"leaves must be one of {LEAVES}, got {leaves!r}")
  tokens = []
  children = [tree] if is_preterminal(tree) else list(tree)
  for child in children:
    _target_tokens(child, tokens, leaves)
  return " ".join(tree.leaves()), " ".join(tokens)


def target_symbols(trees, include_placeholder=False):
  """The bracket tokens of the linearized trees, for BPE user symbols.

  Args:
    trees: iterable of nltk.Tree (cleaned).
    include_placeholder: also list ``XX``.

  Returns:
    sorted list[str], e.g. ``[")ADJP", ")ADVP", ..., "(ADJP", ...]``.
  """
  symbols = set()
  for tree in trees:
    symbols.update(t for t in linearize(tree)[1].split() if is_bracket(t))
  if include_placeholder:
    symbols.add(PLACEHOLDER_TAG)
  return sorted(symbols)


def pos_tags(tree):
  """POS tags of a tree's words, in order (``[tag for word, tag in pos()]``)."""
  return [tag for _, tag in tree.pos()]


# ---------------------------------------------------------------- delinearizing


def _prune_empty(node):
  """Copy of a subtree without phrase nodes that dominate no word."""
  if isinstance(node, str) or is_preterminal(node):
    return node
  children = [c for c in (_prune_empty(child) for child in node)
              if c is not None]
  if not children:
    return None
  return nltk.Tree(node.label(), children)


def sequence_to_tree(target, words, tags=None):
  """Builds a well-formed tree over exactly ``words`` from a target sequence.

  The inverse of ``linearize`` for well-formed input; any token sequence is
  repaired, so a model's raw output always gives a tree that EVALB can read:

  * ``(LABEL`` opens a phrase under the innermost open one;
  * ``)LABEL`` closes the innermost open phrase, whatever its label (a
    mismatched label is accepted); a closer with no open phrase is dropped;
  * every other token is a leaf (``XX``, or a word: with leaves="word" the
    target holds the words; whatever the token, it takes the next source word
    as a preterminal, so the tree's leaves are always the source words); a
    leaf beyond the last word is dropped;
  * phrases still open at the end are closed;
  * words left over (too few ``XX``) are attached, as preterminals, to the
    innermost phrase still open at the end, or to the root;
  * phrases that dominate no word are removed;
  * the root is ``TOP``.

  Args:
    target: str (space separated) or list[str] of target tokens.
    words: str (space separated) or list[str], the source words.
    tags: optional list[str], one POS tag per word, used instead of ``XX`` as
      preterminal labels (e.g. gold tags for an exact round trip).

  Returns:
    nltk.Tree with root ``TOP`` and ``leaves() == words``; preterminals
    labelled ``XX`` (or ``tags``).

  Raises:
    ValueError: ``tags`` is given with a length other than ``len(words)``.
  """
  tokens = target.split() if isinstance(target, str) else list(target)
  words = words.split() if isinstance(words, str) else list(words)
  if tags is not None and len(tags) != len(words):
    raise ValueError(f"{len(tags)} tags for {len(words)} words")

  def leaf(i):
    return nltk.Tree(PLACEHOLDER_TAG if tags is None else tags[i], [words[i]])

  root = nltk.Tree(ROOT_LABEL, [])
  stack = [root]
  used = 0
  for token in tokens:
    if is_bracket(token) and token[0] == "(":
      node = nltk.Tree(token[1:], [])
      stack[-1].append(node)
      stack.append(node)
    elif is_bracket(token):
      if len(stack) > 1:
        stack.pop()
    elif used < len(words):
      stack[-1].append(leaf(used))
      used += 1
  for i in range(used, len(words)):
    stack[-1].append(leaf(i))
  pruned = _prune_empty(root)
  return nltk.Tree(ROOT_LABEL, []) if pruned is None else pruned


def is_well_formed(target, words, leaves="xx"):
  """True if ``sequence_to_tree`` needs no repair for this target.

  That is: brackets balanced with matching labels, one leaf per word (``XX``,
  or with leaves="word" the word itself), no phrase without a word.
  Equivalent to the target being the linearization of the tree it decodes to.

  Args:
    target: str or list[str], target tokens.
    words: str or list[str], the source words.
    leaves: "xx" or "word", as in ``linearize``.

  Returns:
    bool.
  """
  tokens = target.split() if isinstance(target, str) else list(target)
  return linearize(sequence_to_tree(tokens, words), leaves)[1].split() == tokens


def restore_tags(tree, tags, only=None):
  """Copy of a tree with new preterminal labels.

  Args:
    tree: nltk.Tree whose preterminals (``is_preterminal``) are the words.
    tags: list[str], one tag per word (e.g. gold POS tags).
    only: optional str; when given, only preterminals labelled ``only`` (e.g.
      ``"XX"``) are relabelled.

  Returns:
    nltk.Tree, a new tree with the same shape and words.

  Raises:
    ValueError: ``len(tags)`` differs from the number of words.
  """
  if len(tags) != len(tree.leaves()):
    raise ValueError(f"{len(tags)} tags for {len(tree.leaves())} words")
  position = iter(range(len(tags)))

  def copy(node):
    if isinstance(node, str):
      return node
    if is_preterminal(node):
      i = next(position)
      label = node.label()
      if only is None or label == only:
        label = tags[i]
      return nltk.Tree(label, [node[0]])
    return nltk.Tree(node.label(), [copy(child) for child in node])

  return copy(tree)


def placeholder_tree(tree):
  """Copy of a tree with every POS tag replaced by ``XX``.

  Args:
    tree: nltk.Tree.

  Returns:
    nltk.Tree, what ``sequence_to_tree(*reversed(linearize(tree)))`` returns
    for a cleaned tree.
  """
  return restore_tags(tree, [PLACEHOLDER_TAG] * len(tree.leaves()))


def right_branching(tree, label="S"):
  """The right-branching baseline over a tree's words and POS tags.

  Every bracket spans from one word to the end of the sentence,
  ``(TOP (S w1 (S w2 ... (S w_n-1 w_n))))`` with the POS nodes kept: the
  baseline of Klein and Manning 2001 ("Natural language grammar induction
  using a constituent-context model"), scored unlabeled there. English is
  mostly right-branching, so it is the usual floor for a parser's F1.

  Args:
    tree: nltk.Tree, a cleaned tree (``clean``) whose POS nodes are kept.
    label: str, the label of every bracket.

  Returns:
    nltk.Tree with root ``tree.label()``; a tree without words gives an empty
    root.
  """
  tags = [nltk.Tree(tag, [word]) for word, tag in tree.pos()]
  if not tags:
    return nltk.Tree(tree.label(), [])
  node = nltk.Tree(label, tags[-2:])
  for tag in reversed(tags[:-2]):
    node = nltk.Tree(label, [tag, node])
  return nltk.Tree(tree.label(), [node])
