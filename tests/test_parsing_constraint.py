"""Tests for t2t_repro.parsing.constraint.TreeConstraint and constrained beam search."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.decoding import beam_search as bs
from t2t_repro.config.hparams import get_hparams
from t2t_repro.model.transformer import Transformer
from t2t_repro.parsing import treebank, trees
from t2t_repro.parsing.constraint import TreeConstraint

PIECES = ["<pad>", "</s>", "<unk>", "\u2581(S", "\u2581)S", "\u2581(NP", "\u2581)NP", "\u2581(VP",
          "\u2581)VP", "\u2581XX", "\u2581the", "\u2581dog", "\u2581bark", "s", "\u2581."]
ID = {p: i for i, p in enumerate(PIECES)}
EOS = 1
WORDS = "the dog barks ."
SOURCE = [ID["\u2581the"], ID["\u2581dog"], ID["\u2581bark"], ID["s"], ID["\u2581."], EOS]
TREE = treebank.parse_trees("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .)))")[0]


def encode(text):
  """Space-separated target tokens -> piece ids (words as in SOURCE)."""
  out = []
  for token in text.split():
    out += [ID["\u2581bark"], ID["s"]] if token == "barks" else [ID["\u2581" + token]]
  return out + [EOS]


def decode(ids):
  """Piece ids (EOS ends) -> target tokens."""
  text = ""
  for i in ids:
    if i == EOS:
      break
    text += PIECES[i]
  return text.replace("\u2581", " ").split()


def walk(constraint, source, target):
  """Feeds target ids one by one; returns the allowed mask before each."""
  state = constraint.start(tf.constant([source]), 1, tf.constant([100]))
  masks = []
  for token in target:
    masks.append(constraint.allowed(state).numpy()[0])
    state = constraint.advance(state, tf.constant([token]))
  return masks


@pytest.mark.parametrize("leaves", ["word", "xx"])
def test_gold_linearization_is_allowed_at_every_step(leaves):
  target = encode(trees.linearize(TREE, leaves)[1])
  masks = walk(TreeConstraint(PIECES, leaves=leaves), SOURCE, target)
  for step, (mask, token) in enumerate(zip(masks, target)):
    assert mask[token], (step, PIECES[token])


def test_exact_masks_word_leaves():
  target = encode(trees.linearize(TREE, "word")[1])
  masks = walk(TreeConstraint(PIECES, leaves="word"), SOURCE, target)
  allowed = [{PIECES[i] for i in np.flatnonzero(m)} for m in masks]
  opens = {"\u2581(S", "\u2581(NP", "\u2581(VP"}
  assert allowed[0] == opens                                   # no leaf, EOS or closer at depth 0
  assert allowed[1] == opens | {"\u2581the"}                   # after (S: no empty phrase
  assert allowed[2] == opens | {"\u2581the"}                   # after (NP
  assert allowed[3] == opens | {"\u2581dog", "\u2581)NP"}      # only the innermost label closes
  assert allowed[6] == opens | {"\u2581bark"}                 # after (VP
  assert allowed[7] == {"s"}                                   # inside "barks": its next piece only
  assert allowed[8] == opens | {"\u2581.", "\u2581)VP"}
  assert allowed[9] == opens | {"\u2581."}                     # the root stays open: a word is left
  assert allowed[10] == {"\u2581)S"}                           # all words written: close only
  assert allowed[11] == {"</s>"}


def test_length_budget_leaves_room_to_finish():
  constraint = TreeConstraint(PIECES, leaves="word")
  # 5 leaf pieces + one phrase (2) + EOS = 8 tokens: exactly one phrase fits.
  state = constraint.start(tf.constant([SOURCE]), 1, tf.constant([8]))
  written = []
  for _ in range(8):
    choices = np.flatnonzero(constraint.allowed(state).numpy()[0])
    token = choices[0] if len(choices) == 1 else max(choices, key=lambda i: PIECES[i] == "\u2581(NP")
    written.append(int(token))
    state = constraint.advance(state, tf.constant([token]))
  assert decode(written) == ["(NP", "the", "dog", "barks", ".", ")NP"]
  assert written[-1] == EOS


def test_xx_leaves_count_words_not_pieces():
  constraint = TreeConstraint(PIECES, leaves="xx")
  leaves, n = constraint.leaf_sequences(tf.constant([SOURCE, SOURCE[2:] + [0, 0]]))
  assert n.numpy().tolist() == [4, 2]  # "bark" + "s" is one word
  assert leaves.numpy()[1].tolist() == [ID["\u2581XX"]] * 2 + [0] * 4


def test_random_walks_give_well_formed_trees():
  constraint = TreeConstraint(PIECES, leaves="word", max_depth=5)
  rng = np.random.RandomState(0)
  rows = 64
  state = constraint.start(tf.constant([SOURCE]), rows, tf.constant([30]))
  seqs = [[] for _ in range(rows)]
  done = np.zeros(rows, bool)
  for _ in range(30):
    mask = constraint.allowed(state).numpy()
    assert mask.any(axis=1).all()  # never a dead end
    tokens = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
    for r in range(rows):
      if not done[r]:
        seqs[r].append(int(tokens[r]))
        done[r] = tokens[r] == EOS
    state = constraint.advance(state, tf.constant(tokens))
  assert done.all()
  for ids in seqs:
    tokens = decode(ids)
    assert trees.is_well_formed(tokens, WORDS, leaves="word"), tokens
  assert len({tuple(s) for s in seqs}) > 10  # the walks differ: the test explores


def test_bad_vocabularies():
  with pytest.raises(ValueError, match="no bracket pieces"):
    TreeConstraint(["<pad>", "</s>", "<unk>", "\u2581a"])
  with pytest.raises(ValueError, match="no closing piece"):
    TreeConstraint(["<pad>", "</s>", "<unk>", "\u2581(S"])
  with pytest.raises(ValueError, match="XX"):
    TreeConstraint([p for p in PIECES if p != "\u2581XX"], leaves="xx")
  with pytest.raises(ValueError, match="leaves"):
    TreeConstraint(PIECES, leaves="tags")


def test_constrained_beam_search_outputs_trees_scored_by_the_model():
  keras.utils.set_random_seed(5)
  hp = get_hparams("tiny", f"vocab_size={len(PIECES)},d_model=16,d_ff=32,num_heads=2,"
                           "num_layers=2,dropout=0.0,max_length=64")
  model = Transformer.from_hparams(hp)
  constraint = TreeConstraint(PIECES, leaves="word", max_depth=8)
  inputs = tf.constant([SOURCE, SOURCE[2:] + [0, 0]])
  words = [WORDS, "barks ."]
  alpha = 0.3
  ids, scores = bs.beam_search(model, inputs, beam_size=3, alpha=alpha, max_decode_length=40,
                               constraint=constraint)
  plain, _ = bs.beam_search(model, inputs, beam_size=3, alpha=alpha, max_decode_length=40)
  assert not all(trees.is_well_formed(decode(h), w, leaves="word")
                 for h, w in zip(plain.numpy()[:, 0], words))  # a random model alone fails
  for row in range(2):
    for hyp, score in zip(ids.numpy()[row], scores.numpy()[row]):
      assert trees.is_well_formed(decode(hyp), words[row], leaves="word"), decode(hyp)
      length = int(np.flatnonzero(hyp == EOS)[0]) + 1
      target = tf.constant(hyp[None, :length])
      memory, bias = model.encode(inputs[row:row + 1])
      log_probs = tf.nn.log_softmax(model.decode(target, memory, bias))
      log_p = tf.reduce_sum(tf.gather(log_probs[0], target[0], batch_dims=1)).numpy()
      np.testing.assert_allclose(score, log_p / bs.length_penalty(length, alpha), rtol=1e-4)
