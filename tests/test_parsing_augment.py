"""SUB2 augmentation (t2t_repro.parsing.augment) and prepare's train_aug files."""

import collections
import os
import random

import nltk
import pytest

from t2t_repro.parsing import augment, prepare, treebank, trees

A = nltk.Tree.fromstring("(TOP (S (NP (DT the) (NN dog)) (VP (VBD ran))))")
B = nltk.Tree.fromstring("(TOP (S (NP (PRP it)) (VP (VBD fell) (ADVP (RB down)))))")
NP_A, NP_B = str(A[0][0]), str(B[0][0])
VP_A, VP_B = str(A[0][1]), str(B[0][1])


def _nodes(tree):
  return collections.Counter(node.label() for node in tree.subtrees())


def test_pool_holds_every_node_below_the_sentence_by_label():
  pool = augment.subtree_pool([A, B])
  assert {label: [str(n) for n in nodes] for label, nodes in pool.items()} == {
      "NP": [NP_A, NP_B], "VP": [VP_A, VP_B], "DT": ["(DT the)"], "NN": ["(NN dog)"],
      "VBD": ["(VBD ran)", "(VBD fell)"], "PRP": ["(PRP it)"], "ADVP": ["(ADVP (RB down))"],
      "RB": ["(RB down)"]}
  assert pool["NP"][0] is A[0][0]  # references, not copies


def test_rate_one_replaces_each_child_of_the_sentence_by_a_same_label_subtree():
  pool = augment.subtree_pool([A, B])
  seen = collections.Counter()
  rng = random.Random(0)
  for _ in range(200):
    new = augment.substitute(A, pool, rng, rate=1.0)
    assert (new.label(), new[0].label()) == ("TOP", "S")
    seen[(str(new[0][0]), str(new[0][1]))] += 1
  # NP from {A's, B's} x VP from {A's, B's}: all four, nothing else.
  assert set(seen) == {(np, vp) for np in (NP_A, NP_B) for vp in (VP_A, VP_B)}
  assert str(A) == "(TOP (S (NP (DT the) (NN dog)) (VP (VBD ran))))"  # not modified


def test_new_trees_are_treebank_trees_that_linearize_and_round_trip(ptb_dir):
  gold = [trees.clean(t) for t in treebank.read_treebank(ptb_dir, [f"wsj_000{i}.mrg" for i in range(1, 5)])]
  labels = set().union(*(_nodes(t) for t in gold))
  new = list(augment.augment(gold, copies=3, rate=0.2, seed=7))
  assert len(new) == 3 * len(gold)
  changed = 0
  for k, tree in enumerate(new):
    seed_tree = gold[k // 3]
    assert [s.label() for s in tree] == [s.label() for s in seed_tree]
    assert set(_nodes(tree)) <= labels
    source, target = trees.linearize(tree, "word")
    assert trees.is_well_formed(target, source.split(), "word")
    assert trees.sequence_to_tree(target, source.split(), trees.pos_tags(tree)) == tree
    changed += tree != seed_tree
  assert changed > 0.9 * len(new)
  # A function of (trees, copies, rate, seed): same seed, same trees; another, others.
  assert [str(t) for t in augment.augment(gold, 3, 0.2, 7)] == [str(t) for t in new]
  assert [str(t) for t in augment.augment(gold, 3, 0.2, 8)] != [str(t) for t in new]


def test_bad_settings_raise():
  for copies, rate in ((-1, 0.1), (1, 0.0), (1, 1.5)):
    with pytest.raises(ValueError, match="augment_"):
      list(augment.augment([A], copies, rate, 1))


def test_prepare_writes_gold_then_sub2_pairs_and_removes_stale_files(ptb_dir, tmp_path):
  splits = {"train": (1, 4), "dev": (160, 160)}
  stats = prepare.prepare(ptb_dir, str(tmp_path), splits, augment_copies=2, augment_rate=0.1)
  read = lambda name: (tmp_path / name).read_text(encoding="utf-8").splitlines()
  gold_src, gold_tgt = read("train.src"), read("train.tgt")
  aug_src, aug_tgt = read("train_aug.src"), read("train_aug.tgt")
  n = len(gold_src)
  assert len(aug_src) == len(aug_tgt) == 3 * n
  assert (aug_src[:n], aug_tgt[:n]) == (gold_src, gold_tgt)
  for source, target in zip(aug_src, aug_tgt):
    assert trees.is_well_formed(target, source.split(), "word")
  assert stats["augment"]["gold_pairs"] == n and stats["augment"]["new_pairs"] == 2 * n
  assert stats["augment"]["changed_pairs"] == sum(
      (aug_src[n + k], aug_tgt[n + k]) != (gold_src[k // 2], gold_tgt[k // 2])
      for k in range(2 * n))
  # Without augmentation the stale files go, so they cannot be trained on by mistake.
  assert prepare.prepare(ptb_dir, str(tmp_path), splits)["augment"] is None
  assert not os.path.exists(tmp_path / "train_aug.src")
  with pytest.raises(ValueError, match="augment_rate"):
    prepare.prepare(ptb_dir, str(tmp_path / "new"), splits, augment_copies=1, augment_rate=0)
  assert not os.path.exists(tmp_path / "new")
