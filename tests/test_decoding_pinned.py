"""Pins exact translations, n-best lists and scores of a fixed model, and the parser's
constrained decoding: the one decoding path must not change any output. The values
depend on the seeded initial weights too; they were last regenerated when each weight got
an initializer of its own (`model.initializers`), not for a decoding change.

The translation model is tests/model_dir_util.py's random model dir (seeded weights,
a BPE vocabulary learned on real Multi30k lines) with one deterministic change that
a trained model would also have, +6.5 on the EOS logit (`model_dir_util.add_eos_reward`),
so hypotheses end with EOS at different lengths, some sentences end before their maximum
length and others are cut there. The parser is a seeded random 1-layer model over a bracket-aware
vocabulary learned on wsj_0001-0004, decoded with the well-formed-tree constraint.
Scores are compared to 1e-3 (float rounding may differ between CPUs), texts exactly.
"""

import os

import keras
import numpy as np
import pytest

from model_dir_util import add_eos_reward, make_model_dir
from t2t_repro.data.vocab import Tokenizer
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.fileio import read_lines
from t2t_repro.config.hparams import get_hparams
from t2t_repro.model.transformer import Transformer
from t2t_repro.parsing.bracket_vocab import learn_bracket_vocab, tree_constraint
from t2t_repro.parsing.prepare import prepare
from t2t_repro.decoding.loading import load_for_inference

LINES = ["A man is riding a bike.", "", "Two dogs play in the snow.", "Ja.",
         "The weather is nice today, isn't it?"]

NBEST = [[(-24.866, 'chchchchchchchchithithith'),
  (-25.9839, 'chchchchchchchchithithithith'),
  (-30.3849, 'chchchchchchchchithithithleeleeleeleeleeleelee')],
 [(0.0, '')],
 [(-28.6952, 'ultultultultultultultultultultultultultultultultultult'),
  (-28.9455, 'ultultultultultultultultultultultultultultultultultch'),
  (-28.9566, 'ultultultultultultultultultultultultultultultultulters')],
 [(-3.7961, ''), (-6.6516, 'Haar'), (-6.7798, 'ch')],
 [(-15.6748, 'uchuchuchithithith'),
  (-16.93, 'uchuchuchithithithith'),
  (-18.1427, 'uchuchuchithithithithith')]]
GREEDY = ['chchchchchchchchchchchchchch',
 '',
 'chchchithithithithithithithithithithith',
 '',
 'ithithithithithithithithithithithith ih ih ih ih ih ih ih ih ih ih ih ih ih']
PARSES = [[(-258.695,
   '(SBAR (SBAR (SBAR (SBAR (SBAR Genetics (QP (QP (QP (QP (QP Institute (QP (QP (QP (QP (QP Inc. '
   '(QP (QP (QP (QP , )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP (NAC Cambridge , '
   ')NAC )SBAR )SBAR )SBAR )SBAR Mass. , said it was awarded U.S. patents for Interleukin-3 and '
   'bone morphogenetic protein . )SBAR'),
  (-258.909,
   '(SBAR (SBAR (SBAR (SBAR (SBAR Genetics (QP (QP (QP (QP (QP Institute (QP (QP (QP (QP (QP Inc. '
   '(QP (QP (QP (QP , )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP )QP (NAC Cambridge )NAC '
   ', )SBAR )SBAR )SBAR )SBAR Mass. , said it was awarded U.S. patents for Interleukin-3 and bone '
   'morphogenetic protein . )SBAR')],
 [(-255.242,
   '(SBAR (SBAR (SBAR (SBAR (SBAR The (PP (PP (PP (PP (PP patent )PP )PP )PP )PP )PP (VP (VP (VP '
   '(VP (VP for (SBAR (SBAR (SBAR (SBAR (SBAR Interleukin-3 )SBAR )SBAR )SBAR )SBAR )SBAR )VP )VP '
   ')VP )VP )VP )SBAR )SBAR )SBAR )SBAR covers materials and methods used to make the human blood '
   'cell growth factor via recombinant DNA technology . )SBAR'),
  (-255.416,
   '(SBAR (SBAR (SBAR (SBAR (SBAR The (PP (PP (PP (PP (PP patent )PP )PP )PP )PP )PP (VP (VP (VP '
   '(VP (VP for (SBAR (SBAR (SBAR (SBAR (SBAR Interleukin-3 )SBAR )SBAR )SBAR )SBAR )SBAR )VP )VP '
   ')VP )VP )VP )SBAR )SBAR )SBAR covers materials and )SBAR methods used to make the human blood '
   'cell growth factor via recombinant DNA technology . )SBAR')]]


def _decode(model, tokenizer, lines, constraint=None, **settings):
  return Translator(model, tokenizer, DecodeConfig(**settings), constraint).nbest(lines)


def _assert_nbest(actual, expected, atol=1e-3):
  assert [[text for _, text in hyps] for hyps in actual] == \
         [[text for _, text in hyps] for hyps in expected]
  np.testing.assert_allclose([s for hyps in actual for s, _ in hyps],
                             [s for hyps in expected for s, _ in hyps], atol=atol)


@pytest.fixture(scope="module")
def eos_model(tmp_path_factory, shared_data_dir):
  model, _, tokenizer = load_for_inference(
      make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir))
  add_eos_reward(model)
  return model, tokenizer


def test_pinned_nbest_translations_and_scores(eos_model):
  model, tokenizer = eos_model
  nbest = _decode(model, tokenizer, LINES, beam_size=3, alpha=0.6, n_best=3,
                  decode_extra_length=10, decode_batch_tokens=20)
  _assert_nbest(nbest, NBEST)


def test_pinned_greedy_translations(eos_model):
  model, tokenizer = eos_model
  best = _decode(model, tokenizer, LINES, beam_size=1, alpha=0.0, decode_extra_length=6)
  assert [hyps[0][1] for hyps in best] == GREEDY


def test_pinned_constrained_parses(tmp_path, ptb_dir):
  out = str(tmp_path)
  stats = prepare(ptb_dir, out, {"train": (1, 4), "dev": (160, 160), "test": (180, 180)})
  src, tgt = (read_lines(os.path.join(out, f"train.{s}")) for s in ("src", "tgt"))
  learn_bracket_vocab((t for pair in zip(src, tgt) for t in pair),
                      read_lines(os.path.join(out, "symbols.txt")), 300,
                      os.path.join(out, "vocab.model"), num_threads=1)
  keras.utils.set_random_seed(5)  # before the Tokenizer: set_seed drops its TF resource
  tokenizer = Tokenizer.from_file(os.path.join(out, "vocab.model"))
  model = Transformer.from_hparams(get_hparams(
      "tiny", "vocab_size=300,num_layers=1,d_model=32,d_ff=64,num_heads=2,dropout=0.0"))
  words = read_lines(os.path.join(out, "test.src"))[:2]
  parses = _decode(model, tokenizer, words, beam_size=2, alpha=0.3, n_best=2,
                   decode_extra_length=40, constraint=tree_constraint(tokenizer, stats))
  _assert_nbest(parses, PARSES)
