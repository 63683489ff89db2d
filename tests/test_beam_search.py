"""Tests for t2t_repro.decoding.beam_search on tiny random models (seconds on a CPU)."""

import gc
import itertools
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.decoding import beam_search as bs
from t2t_repro.decoding import model_interface
from t2t_repro.config.hparams import get_hparams
from t2t_repro.model.transformer import Transformer

EOS = 1


class EosBiasedTransformer(Transformer):
  """A random Transformer whose EOS logit gets +eos_bias, so hypotheses end at varied lengths
  (a random model with tied embeddings mostly repeats tokens and never stops)."""

  eos_bias = 0.0

  def logits(self, hidden, kernel=None):
    return super().logits(hidden, kernel) + tf.one_hot(EOS, self.vocab_size) * self.eos_bias


def tiny_model(vocab_size=12, eos_bias=3.0, seed=3):
  keras.utils.set_random_seed(seed)
  hp = get_hparams("tiny", f"vocab_size={vocab_size},d_model=16,d_ff=32,num_heads=2,num_layers=2,"
                           "dropout=0.0,max_length=32,decode_extra_length=8")
  model = EosBiasedTransformer.from_hparams(hp)
  model.eos_bias = eos_bias
  return model


def random_sources(vocab_size, batch=6, width=7, seed=0):
  """int32 [batch, width]: random lengths 1..width-1 of tokens >= 2, then EOS, then 0s."""
  rng = np.random.RandomState(seed)
  x = np.zeros([batch, width], np.int32)
  for row in range(batch):
    n = rng.randint(1, width)
    x[row, :n] = rng.randint(2, vocab_size, n)
    x[row, n] = EOS
  return x


@pytest.fixture(scope="module")
def model():
  return tiny_model()


@pytest.fixture(scope="module")
def sources():
  return random_sources(12)


def as_numpy(fn):
  return lambda *args, **kwargs: tuple(t.numpy() for t in fn(*args, **kwargs))


beam_search = as_numpy(bs.beam_search)


def greedy_decode(model, inputs, **options):
  """Greedy decoding is beam size 1 (alpha 0: the scores are log P): (ids [batch, T], scores [batch])."""
  ids, scores = beam_search(model, inputs, beam_size=1, alpha=0.0, **options)
  return ids[:, 0], scores[:, 0]


def hyp_tokens(row):
  """Token list of one hypothesis: up to and including EOS (else all, trailing 0s cut)."""
  row = list(np.asarray(row))
  if EOS in row:
    return row[:row.index(EOS) + 1]
  while row and row[-1] == 0:
    row.pop()
  return row


def log_prob(model, source, tokens):
  """log P(tokens | source) with the teacher-forced full decoder."""
  memory, bias = model.encode(tf.constant([source]))
  logits = model.decode(tf.constant([tokens], tf.int32), memory, bias)[0]
  lp = tf.nn.log_softmax(logits).numpy()
  return float(sum(lp[t, y] for t, y in enumerate(tokens)))


def test_length_penalty_hand_computed():
  # ((5 + |Y|) / 6) ** alpha
  assert bs.length_penalty(1, 0.6) == pytest.approx(1.0)
  assert bs.length_penalty(7, 0.6) == pytest.approx(2 ** 0.6)  # 12/6 = 2 -> 1.5157165665
  assert bs.length_penalty(7, 0.6) == pytest.approx(1.5157165665)
  assert bs.length_penalty(25, 0.6) == pytest.approx(2.6265278044)  # 5 ** 0.6
  assert bs.length_penalty(4, 1.0) == pytest.approx(1.5)
  assert bs.length_penalty(30, 0.0) == pytest.approx(1.0)
  tensor = bs.length_penalty(tf.constant([1, 7, 25]), tf.constant(0.6)).numpy()
  np.testing.assert_allclose(tensor, [1.0, 1.5157165665, 2.6265278044], rtol=1e-6)


def test_cached_logits_equal_full_decoder(model, sources):
  ids, _ = greedy_decode(model, sources, max_decode_length=10)
  targets = tf.constant(ids)
  memory, src_bias = model.encode(tf.constant(sources))
  full = model.decode(targets, memory, src_bias).numpy()
  cache = model.init_cache(memory, targets.shape[1])
  prev = tf.zeros([len(sources)], tf.int32)
  for step in range(targets.shape[1]):
    logits, cache = model.decode_step(prev, tf.constant(step), cache, src_bias)
    np.testing.assert_allclose(logits.numpy(), full[:, step], atol=1e-5)
    prev = targets[:, step]


def python_greedy(model, source, max_len):
  """Argmax decoding with a plain Python loop over the full decoder."""
  memory, bias = model.encode(tf.constant([source]))
  tokens, total = [], 0.0
  while len(tokens) < max_len:
    logits = model.decode(tf.constant([tokens + [0]], tf.int32), memory, bias)[0, -1]
    lp = tf.nn.log_softmax(logits).numpy()
    token = int(np.argmax(lp))
    tokens.append(token)
    total += lp[token]
    if token == EOS:
      break
  return tokens, total


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam1_is_greedy_argmax(model, sources, alpha):
  ids, scores = beam_search(model, sources, beam_size=1, alpha=alpha, max_decode_length=10)
  greedy_ids, greedy_scores = greedy_decode(model, sources, max_decode_length=10)
  lengths = []
  for row, source in enumerate(sources):
    expected, total = python_greedy(model, source, 10)
    lengths.append(len(expected) if expected[-1] == EOS else None)
    assert hyp_tokens(ids[row, 0]) == expected
    assert hyp_tokens(greedy_ids[row]) == expected
    assert greedy_scores[row] == pytest.approx(total, abs=1e-4)
    assert scores[row, 0] == pytest.approx(total / bs.length_penalty(len(expected), alpha),
                                           abs=1e-4)
  # The fixture model stops at several lengths and also runs into the maximum.
  assert None in lengths and len(set(lengths)) >= 3, lengths


def test_scores_are_rescored_log_probs(model, sources):
  alpha = 0.6
  ids, scores = beam_search(model, sources, beam_size=4, alpha=alpha, max_decode_length=10)
  assert ids.shape[:2] == (len(sources), 4) and scores.shape == (len(sources), 4)
  for row, source in enumerate(sources):
    assert np.all(np.diff(scores[row]) <= 1e-6), scores[row]
    for j in range(4):
      tokens = hyp_tokens(ids[row, j])
      length = len(tokens) if tokens[-1] == EOS else 10
      expected = log_prob(model, source, tokens) / bs.length_penalty(length, alpha)
      assert scores[row, j] == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_finds_exhaustive_best(alpha):
  # Vocab 6, outputs of at most 4 tokens: 1 + 5 + 25 + 125 = 156 sequences end in EOS.
  vocab, max_len = 6, 4
  model = tiny_model(vocab_size=vocab, eos_bias=0.0, seed=5)
  sources = random_sources(vocab, batch=2, width=5, seed=1)
  # With 5^3 * 6 = 750 beams every candidate of every step is kept: exhaustive search.
  ids, scores = beam_search(model, sources, beam_size=750, alpha=alpha, n_best=5,
                               max_decode_length=max_len)
  non_eos = [t for t in range(vocab) if t != EOS]
  sequences = [list(p) + [EOS] for n in range(max_len) for p in itertools.product(non_eos, repeat=n)]
  assert len(sequences) == 156
  padded = tf.constant([s + [0] * (max_len - len(s)) for s in sequences], tf.int32)
  for row, source in enumerate(sources):
    memory, bias = model.encode(tf.constant([source] * len(sequences)))
    lp = tf.nn.log_softmax(model.decode(padded, memory, bias)).numpy()
    exhaustive = sorted(
        ((sum(lp[i, t, y] for t, y in enumerate(s)) / bs.length_penalty(len(s), alpha), s)
         for i, s in enumerate(sequences)), key=lambda pair: -pair[0])
    for j in range(5):
      assert hyp_tokens(ids[row, j]) == exhaustive[j][1]
      assert scores[row, j] == pytest.approx(exhaustive[j][0], abs=1e-4)


@pytest.mark.parametrize("n_best", [1, 2])
def test_early_stop_does_not_change_results(model, sources, n_best):
  stopped_early = False
  for alpha in (0.0, 0.6, 1.5):
    kwargs = dict(beam_size=4, alpha=alpha, n_best=n_best, max_decode_length=12)
    ids, scores = beam_search(model, sources, early_stop=True, **kwargs)
    ids_full, scores_full = beam_search(model, sources, early_stop=False, **kwargs)
    np.testing.assert_array_equal(ids, ids_full)
    # Finished sentences leave the batch at different steps, so the matmuls see other
    # batch sizes: float32 rounding only.
    np.testing.assert_allclose(scores, scores_full, atol=1e-5)
    if n_best == 1:
      steps = [bs.search(model, sources, 12, alpha, beam_size=4, n_best=1, early_stop=early,
                         return_steps=True)[2].numpy() for early in (True, False)]
      assert np.all(steps[0] <= steps[1])
      stopped_early |= bool(np.any(steps[0] < steps[1]))
  assert stopped_early or n_best > 1  # the bound really ended some searches sooner


def test_batch_equals_per_sentence(model, sources):
  ids, scores = beam_search(model, sources, beam_size=4, alpha=0.6)  # src_len + 50 each
  # More padding columns change nothing either.
  wider = np.pad(sources, [[0, 0], [0, 5]])
  ids_wide, scores_wide = beam_search(model, wider, beam_size=4, alpha=0.6)
  np.testing.assert_array_equal(ids, ids_wide)
  np.testing.assert_allclose(scores, scores_wide, atol=1e-5)
  for row, source in enumerate(sources):
    alone = source[:list(source).index(EOS) + 1][None]
    ids_1, scores_1 = beam_search(model, alone, beam_size=4, alpha=0.6)
    np.testing.assert_allclose(scores_1[0], scores[row], atol=1e-5)
    for j in range(4):
      assert hyp_tokens(ids_1[0, j]) == hyp_tokens(ids[row, j])


def test_per_sentence_max_length(model, sources):
  lengths = np.array([1, 2, 3, 4, 5, 6], np.int32)
  ids, scores = beam_search(model, sources, beam_size=3, alpha=0.6, max_decode_length=lengths)
  assert ids.shape == (6, 3, 6)
  for row in range(6):
    for j in range(3):
      assert len(hyp_tokens(ids[row, j])) <= lengths[row]
  assert np.all(np.isfinite(scores))


def test_uncached_equals_cached(model, sources):
  ids, scores = beam_search(model, sources, beam_size=3, alpha=0.6, max_decode_length=9)
  ids_u, scores_u = beam_search(model, sources, beam_size=3, alpha=0.6, max_decode_length=9,
                                cached=False)
  np.testing.assert_array_equal(ids, ids_u)
  np.testing.assert_allclose(scores, scores_u, atol=1e-5)


class RowCounting:
  """A model whose cached decoders record the hypothesis rows of every step (eager search)."""

  def __init__(self, model):
    self.model, self.rows = model, []

  def decoder(self, cached, fixed_size):
    del cached
    counting = self

    class Decoder(model_interface.CachedDecoder):
      def step(self, prev_ids, i, state):
        counting.rows.append(int(prev_ids.shape[0]))
        return super().step(prev_ids, i, state)

    return Decoder(self.model, fixed_size)


def test_first_position_decoded_once_per_sentence(model, sources):
  """Position 0 runs one row per sentence (its k beams would compute the same step), then k
  rows per sentence; with static shapes (XLA) every step has batch x k rows. Same results."""
  growing, static = RowCounting(model), RowCounting(model)
  ids, scores = (t.numpy() for t in bs.search(growing, sources, 9, 0.6, beam_size=3))
  ids_s, scores_s = (t.numpy() for t in bs.search(static, sources, 9, 0.6, beam_size=3,
                                                   static_max_length=9))
  assert growing.rows[:2] == [6, 18]
  assert static.rows == [18] * len(static.rows)
  np.testing.assert_array_equal(ids_s, ids)
  np.testing.assert_allclose(scores_s, scores, atol=1e-5)


def test_one_trace_for_all_batch_shapes(model, sources):
  decoder = bs.BeamSearchDecoder(model, beam_size=2)
  for batch, width in [(6, 7), (2, 7), (3, 5)]:
    decoder(sources[:batch, :width], 6, 0.6)
  assert decoder._run.experimental_get_tracing_count() == 1


def test_padded_xla_equals_dynamic(model, sources):
  ids, scores = beam_search(model, sources[:3], beam_size=2, alpha=0.6, max_decode_length=7)
  decoder = bs.BeamSearchDecoder(model, beam_size=2, static_max_length=8, jit_compile=True)
  ids_x, scores_x = (t.numpy() for t in decoder(sources[:3], 7, 0.6))
  assert ids_x.shape == (3, 2, 8)
  np.testing.assert_array_equal(ids_x[:, :, :ids.shape[2]], ids)
  np.testing.assert_array_equal(ids_x[:, :, ids.shape[2]:], 0)
  np.testing.assert_allclose(scores_x, scores, atol=1e-5)


def test_cached_decoders_do_not_keep_models_alive(sources):
  def decode_with_a_new_model():  # (a frame of its own: traces keep their callers' frames)
    model = tiny_model(vocab_size=8)
    beam_search(model, sources[:2, :4], beam_size=2, max_decode_length=3)
    return weakref.ref(model)

  ref = decode_with_a_new_model()
  gc.collect()
  assert ref() is None


def test_errors(model, sources):
  # Settings' ranges (beam_size, alpha, n_best) are checked by DecodeConfig only.
  with pytest.raises(ValueError, match="static_max_length"):
    bs.BeamSearchDecoder(model, jit_compile=True)
