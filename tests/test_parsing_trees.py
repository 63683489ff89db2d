"""Tests for t2t_repro.parsing.trees: reading, cleaning, (de)linearizing."""

import functools

import nltk
import pytest

from t2t_repro.parsing import treebank, trees





@functools.lru_cache(maxsize=1)
def _real_trees(ptb_dir):
  raw = treebank.read_treebank(ptb_dir)
  return raw, [trees.clean(t) for t in raw]


def _t(text):
  return nltk.Tree.fromstring(text)


def _assert_over_words(tree, words):
  assert isinstance(tree, nltk.Tree)
  assert tree.label() == "TOP"
  assert tree.leaves() == words
  for sub in tree.subtrees():
    assert len(sub) > 0 or sub is tree  # no empty phrase
    for child in sub:
      if isinstance(child, str):
        assert trees.is_preterminal(sub)  # words only under POS nodes


# ---------------------------------------------------------------- reading


def test_parse_trees_names_empty_root_top():
  text = "( (S (NP (NNP John)) (VP (VBZ runs))) )\n( (NP (NN x)) )"
  parsed = treebank.parse_trees(text)
  assert [t.label() for t in parsed] == ["TOP", "TOP"]
  assert parsed[0][0].label() == "S"
  # A root with a label of its own is wrapped in TOP.
  assert treebank.parse_trees("(S (NN x))")[0] == _t("(TOP (S (NN x)))")


@pytest.mark.parametrize("text",
                         ["( (S (NN x))", "(S (NN x)))", "x (S (NN y))"])
def test_parse_trees_rejects_unbalanced(text):
  with pytest.raises(ValueError):
    treebank.parse_trees(text)


def test_split_file_ids():
  names = [f"wsj_{i:04d}.mrg" for i in range(1, 200)]
  split = treebank.split_file_ids(names)
  assert len(split["train"]) == 159 and split["train"][-1] == "wsj_0159.mrg"
  assert split["dev"][0] == "wsj_0160.mrg" and len(split["dev"]) == 20
  assert split["test"][-1] == "wsj_0199.mrg" and len(split["test"]) == 20
  with pytest.raises(ValueError):
    treebank.split_file_ids(["README.mrg"])


def test_read_treebank_counts(ptb_dir):
  raw, _ = _real_trees(ptb_dir)
  assert len(raw) == 3914
  assert all(t.label() == "TOP" and len(t) == 1 for t in raw)
  first = treebank.read_treebank(ptb_dir, ["wsj_0001.mrg"])
  assert len(first) == 2
  assert first[0].leaves()[:4] == ["Pierre", "Vinken", ",", "61"]


# ---------------------------------------------------------------- cleaning


@pytest.mark.parametrize("label,expected", [
    ("NP-SBJ-1", "NP"), ("PP-LOC=2", "PP"), ("NP=2", "NP"),
    ("NP-SBJ=1-3", "NP"), ("S-TPC-1", "S"), ("ADVP|PRT", "ADVP|PRT"),
    ("-NONE-", "-NONE-"), ("-LRB-", "-LRB-"), ("-RRB-", "-RRB-"),
    ("PRP$", "PRP$"), ("NP", "NP")])
def test_strip_function_tags(label, expected):
  assert trees.strip_function_tags(label) == expected


def test_clean_hand_example():
  # Null subject, trace inside SBAR, function tags and indices.
  raw = _t("(TOP (S (NP-SBJ-1 (-NONE- *)) (VP (VBD reported) "
           "(SBAR (-NONE- 0) (S (-NONE- *T*-1))) (PP-LOC=2 (IN in) "
           "(NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-)))) (. .)))")
  assert trees.clean(raw) == _t(
      "(TOP (S (VP (VBD reported) (PP (IN in) (NP (-LRB- -LRB-) (NN x) "
      "(-RRB- -RRB-)))) (. .)))")
  # The input is left alone.
  assert raw[0][0].label() == "NP-SBJ-1"


def test_clean_real_trees(ptb_dir):
  raw, cleaned = _real_trees(ptb_dir)
  # wsj_0003's first sentence has "(NP-SBJ-1 (-NONE- *))" style elements.
  n_none = sum(1 for t in raw for _, tag in t.pos() if tag == "-NONE-")
  assert n_none > 1000
  for r, c in zip(raw, cleaned):
    assert [w for w, tag in r.pos() if tag != "-NONE-"] == c.leaves()
    for sub in c.subtrees():
      assert sub.label() != "-NONE-" and len(sub) > 0
      if not trees.is_preterminal(sub):
        assert "=" not in sub.label()
        assert "-" not in sub.label()
  labels = {s.label() for t in cleaned for s in t.subtrees()
            if not trees.is_preterminal(s)}
  assert {"TOP", "S", "NP", "VP", "PP", "SBAR", "PRT", "ADVP"} <= labels
  assert "NP-SBJ" not in labels


# ---------------------------------------------------------------- linearizing

SIMPLE = _t("(TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) "
            "(. .)))")


def test_linearize_simple():
  source, target = trees.linearize(SIMPLE)
  assert source == "John has a dog ."
  assert target == "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S"
  # length = 2 * phrases + words
  assert len(target.split()) == 2 * 4 + 5


def test_linearize_word_leaves():
  source, target = trees.linearize(SIMPLE, leaves="word")
  assert target == "(S (NP John )NP (VP has (NP a dog )NP )VP . )S"
  assert trees.is_well_formed(target, source, leaves="word")
  assert not trees.is_well_formed(target, source)  # words are not XX
  assert not trees.is_well_formed(target.replace("dog", "cat"), source, leaves="word")
  with pytest.raises(ValueError, match="bracket-like"):
    trees.linearize(nltk.Tree("TOP", [nltk.Tree("S", [nltk.Tree("NN", ["(NP"])])]),
                    leaves="word")
  with pytest.raises(ValueError, match="leaves"):
    trees.linearize(SIMPLE, leaves="tags")


def test_linearize_requires_pos_nodes():
  with pytest.raises(ValueError):
    trees.linearize(_t("(TOP (S John (VP (VBZ runs))))"))


def test_target_symbols():
  assert trees.target_symbols([SIMPLE]) == ["(NP", "(S", "(VP", ")NP", ")S",
                                            ")VP"]
  assert "XX" in trees.target_symbols([SIMPLE], include_placeholder=True)


def test_round_trip_all_real_trees(ptb_dir):
  _, cleaned = _real_trees(ptb_dir)
  for tree in cleaned:
    source, target = trees.linearize(tree)
    assert len(target.split()) == len(source.split()) + 2 * sum(
        1 for s in tree.subtrees() if not trees.is_preterminal(s)) - 2
    # With the POS tags given back the tree is exactly the cleaned tree ...
    assert trees.sequence_to_tree(target, source,
                                  tags=trees.pos_tags(tree)) == tree
    # ... and without them it is the cleaned tree with every tag XX.
    assert trees.sequence_to_tree(target, source) == trees.placeholder_tree(
        tree)
    # Word leaves: the same tree, and the words in order.
    _, with_words = trees.linearize(tree, leaves="word")
    assert [t for t in with_words.split() if not trees.is_bracket(t)] == source.split()
    assert trees.sequence_to_tree(with_words, source) == trees.placeholder_tree(tree)


def test_real_target_symbols(ptb_dir):
  _, cleaned = _real_trees(ptb_dir)
  symbols = trees.target_symbols(cleaned)
  assert len(symbols) == 54  # 27 phrase labels, opening and closing
  assert all(s[0] in "()" and len(s) > 1 for s in symbols)


# ---------------------------------------------------------------- delinearizing

WORDS = ["John", "has", "a", "dog", "."]


def test_sequence_to_tree_well_formed():
  tree = trees.sequence_to_tree(
      "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S", " ".join(WORDS))
  assert tree == trees.placeholder_tree(SIMPLE)
  assert trees.is_well_formed("(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S",
                              WORDS)


@pytest.mark.parametrize("target,expected", [
    # Open brackets closed at the end.
    ("(S (NP XX )NP (VP XX (NP XX XX",
     "(TOP (S (NP (XX John)) (VP (XX has) (NP (XX a) (XX dog) (XX .)))))"),
    # Unmatched closers dropped.
    (")S )NP (S XX XX XX XX XX )S )S",
     "(TOP (S (XX John) (XX has) (XX a) (XX dog) (XX .)))"),
    # A mismatched closing label closes the innermost open phrase.
    ("(S (NP XX )VP (VP XX XX XX )NP XX )S",
     "(TOP (S (NP (XX John)) (VP (XX has) (XX a) (XX dog)) (XX .)))"),
    # Too many XX: the extras are dropped.
    ("(S XX XX (NP XX XX XX XX XX )NP XX )S",
     "(TOP (S (XX John) (XX has) (NP (XX a) (XX dog) (XX .))))"),
    # Too few XX: the missing words go to the last open phrase ...
    ("(S (NP XX )NP (VP XX",
     "(TOP (S (NP (XX John)) (VP (XX has) (XX a) (XX dog) (XX .))))"),
    # ... or to the root when every phrase was closed.
    ("(S (NP XX )NP )S",
     "(TOP (S (NP (XX John))) (XX has) (XX a) (XX dog) (XX .))"),
    # Empty phrases are removed (also nested ones).
    ("(S (NP )NP (VP (PP )PP )VP XX XX XX XX XX )S",
     "(TOP (S (XX John) (XX has) (XX a) (XX dog) (XX .)))"),
    # Every token that is not a bracket ((LABEL / )LABEL) is a leaf, whatever
    # it says (<unk>, a POS tag, a lone "(" or ")", a wrong word): it takes the
    # next source word; leaves beyond the last word are dropped.
    ("<unk> (S NN ( XX John XX ) )S dog XX",
     "(TOP (XX John) (S (XX has) (XX a) (XX dog) (XX .)))"),
    # Word leaves (leaves="word") decode the same way as XX.
    ("(S (NP John )NP (VP has (NP a dog",
     "(TOP (S (NP (XX John)) (VP (XX has) (NP (XX a) (XX dog) (XX .)))))"),
    # Empty target: all words under the root.
    ("", "(TOP (XX John) (XX has) (XX a) (XX dog) (XX .))"),
])
def test_sequence_to_tree_repairs(target, expected):
  tree = trees.sequence_to_tree(target, WORDS)
  _assert_over_words(tree, WORDS)
  assert tree == _t(expected)
  assert not trees.is_well_formed(target, WORDS)


def test_sequence_to_tree_random_garbage_is_always_well_formed():
  import random
  rng = random.Random(0)
  vocab = ["(S", "(NP", ")NP", ")S", "(VP", ")VP", "XX", "XX", "XX", ")",
           "(", "foo", ")PP"]
  for _ in range(300):
    words = [f"w{i}" for i in range(rng.randrange(0, 8))]
    target = [rng.choice(vocab) for _ in range(rng.randrange(0, 20))]
    tree = trees.sequence_to_tree(target, words)
    _assert_over_words(tree, words)
    # Its linearization is well formed and decodes to the same tree.
    _, again = trees.linearize(tree)
    assert trees.is_well_formed(again, words)
    assert trees.sequence_to_tree(again, words) == tree


def test_sequence_to_tree_tags():
  tree = trees.sequence_to_tree("(NP XX XX )NP", ["a", "dog"],
                                tags=["DT", "NN"])
  assert tree == _t("(TOP (NP (DT a) (NN dog)))")
  with pytest.raises(ValueError):
    trees.sequence_to_tree("(NP XX XX )NP", ["a", "dog"], tags=["DT"])


def test_restore_tags_only_placeholders():
  tree = _t("(TOP (NP (XX a) (JJ big) (XX dog)))")
  assert trees.restore_tags(tree, ["DT", "XX", "NN"], only="XX") == _t(
      "(TOP (NP (DT a) (JJ big) (NN dog)))")
  with pytest.raises(ValueError):
    trees.restore_tags(tree, ["DT"])


def test_tree_lines_round_trip(tmp_path):
  path = str(tmp_path / "t.txt")
  treebank.write_tree_lines(path, [SIMPLE, nltk.Tree("TOP", [])])
  lines = open(path, encoding="utf-8").read().split("\n")
  assert lines[0] == ("(TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) "
                      "(NN dog))) (. .)))")
  assert treebank.read_tree_lines(path) == [SIMPLE, nltk.Tree("TOP", [])]


def test_right_branching_hand_example():
  gold = _t("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (PRP it))))))")
  assert trees.right_branching(gold) == _t(
      "(TOP (S (DT The) (S (NN cat) (S (VBD sat) (S (IN on) (PRP it))))))")
  assert trees.right_branching(_t("(TOP (NN Yes))")) == _t("(TOP (S (NN Yes)))")
  assert trees.right_branching(_t("(TOP )")) == _t("(TOP )")


def test_right_branching_evalb_scores():
  """EVALB (COLLINS.prm, unlabeled) on the hand example: gold brackets S[0,5] NP[0,2]
  VP[2,5] PP[3,5] NP[4,5]; right-branching S[0,5] S[1,5] S[2,5] S[3,5]; S[0,5], S[2,5]
  and S[3,5] match."""
  import dataclasses  # pylint: disable=import-outside-toplevel
  from t2t_repro.parsing import evalb  # pylint: disable=import-outside-toplevel
  gold = _t("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (PRP it))))))")
  unlabeled = dataclasses.replace(evalb.COLLINS, labeled=False)
  result = evalb.evaluate([gold], [trees.right_branching(gold)], unlabeled)
  assert (result.all.matched, result.all.gold_brackets, result.all.test_brackets) == (3, 5, 4)
