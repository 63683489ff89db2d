"""Random sampling (`decoding.sampling`) on a hand-made distribution and on a tiny model."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.constants import NEG_INF
from t2t_repro.decoding import beam_search as bs
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.decoding.prefix import TargetPrefix
from t2t_repro.decoding.sampling import (_to_unit, draw, filter_log_probs, gumbel_argmax, sample,
                                         sample_keys, uniform)
from test_beam_search import random_sources, tiny_model

EOS = 1
# Pieces 2..5 with probabilities 0.4, 0.3, 0.2, 0.1 at steps 0-2, EOS for sure from step 3.
FIRST = np.log(np.array([1e-30, 1e-30, 0.4, 0.3, 0.2, 0.1]))
LAST = np.log(np.array([1e-30, 1.0, 1e-30, 1e-30, 1e-30, 1e-30]))


class HandMade:
  """A model interface whose log-probabilities do not depend on the prefix or the source."""
  vocab_size = 6

  def decoder(self, cached=True, fixed_size=False):
    del cached, fixed_size
    return self

  def start(self, inputs, beam_size, max_length):
    del max_length
    return {"rows": tf.zeros([tf.shape(inputs)[0] * beam_size])}

  def step(self, prev_ids, i, state):
    del prev_ids
    log_probs = tf.where(i < 3, tf.constant(FIRST, tf.float32), tf.constant(LAST, tf.float32))
    rows = tf.shape(state["rows"])[0]
    return tf.tile(log_probs[None], [rows, 1]), state

  def reorder(self, state, rows, sentences=None):
    del sentences
    return {"rows": tf.gather(state["rows"], rows)}


def _draw(n=4000, seed=1, **options):
  ids, scores = sample(HandMade(), tf.constant([[3, EOS]]), 10, 0.0, n_samples=n, seed=seed,
                       **options)
  return ids.numpy()[0], scores.numpy()[0]


def test_plain_sampling_follows_the_distribution_and_scores_under_the_model():
  ids, scores = _draw()
  assert ids.shape == (4000, 10)
  assert np.all(ids[:, 3] == EOS) and np.all(ids[:, 4:] == 0)
  freq = np.bincount(ids[:, 0], minlength=6)[2:] / len(ids)
  np.testing.assert_allclose(freq, [0.4, 0.3, 0.2, 0.1], atol=0.03)  # > 4 sd at n = 4000
  expected = np.log([0.4, 0.3, 0.2, 0.1])[ids[:, :3] - 2].sum(1)  # EOS adds log 1 = 0
  np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_top_k_never_leaves_the_k_best_pieces():
  ids, _ = _draw(top_k=2)
  assert set(np.unique(ids[:, :3])) == {2, 3}
  freq = np.bincount(ids[:, 0], minlength=6)[2:4] / len(ids)
  np.testing.assert_allclose(freq, [4 / 7, 3 / 7], atol=0.03)  # renormalized


def test_top_p_keeps_the_smallest_set_reaching_p():
  ids, _ = _draw(top_p=0.6)  # 0.4 < 0.6, 0.4 + 0.3 >= 0.6: pieces 2 and 3
  assert set(np.unique(ids[:, :3])) == {2, 3}
  ids, _ = _draw(top_p=0.3)  # the best piece alone
  assert set(np.unique(ids[:, :3])) == {2}


def test_temperature_sharpens_and_flattens():
  sharp = np.bincount(_draw(temperature=0.5)[0][:, 0], minlength=6)[2:] / 4000
  flat = np.bincount(_draw(temperature=4.0)[0][:, 0], minlength=6)[2:] / 4000
  p = np.array([0.4, 0.3, 0.2, 0.1])
  np.testing.assert_allclose(sharp, p ** 2 / np.sum(p ** 2), atol=0.03)
  np.testing.assert_allclose(flat, p ** 0.25 / np.sum(p ** 0.25), atol=0.03)


def test_filter_log_probs_by_hand():
  logits = filter_log_probs(tf.constant([FIRST], tf.float32), top_k=3, top_p=0.8).numpy()[0]
  kept = logits > -1e8
  assert kept.tolist() == [False, False, True, True, True, False]
  everything = filter_log_probs(tf.constant([FIRST], tf.float32), top_k=100).numpy()[0]
  assert np.all(everything > -1e8)  # k above the vocabulary size keeps every piece


def test_same_seed_same_samples_other_seed_other_samples():
  a, _ = _draw(n=50, seed=7)
  b, _ = _draw(n=50, seed=7)
  c, _ = _draw(n=50, seed=8)
  assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize("options", [{"temperature": 0.0}, {"top_k": 1}])
def test_temperature_zero_or_top_k_one_is_greedy(options):
  model = tiny_model()
  sources = random_sources(12)
  greedy_ids, greedy_scores = bs.beam_search(model, sources, beam_size=1, alpha=0.0,
                                             decode_extra_length=8)
  greedy_ids, greedy_scores = greedy_ids[:, 0], greedy_scores[:, 0]
  lengths = bs.default_max_decode_length(tf.constant(sources), 8)
  ids, scores = sample(model, sources, lengths, 0.0, n_samples=3, seed=5, **options)
  for k in range(3):
    assert np.array_equal(ids.numpy()[:, k], greedy_ids.numpy())
    np.testing.assert_allclose(scores.numpy()[:, k], greedy_scores.numpy(), rtol=1e-5)


def test_sampling_settings_are_checked():
  assert DecodeConfig(sampling_topk=5).sampling and not DecodeConfig().sampling
  assert DecodeConfig(sampling_temperature=1.0, n_samples=3).outputs_per_sentence == 3
  for bad in ({"n_samples": 2}, {"sampling_topp": 0.0}, {"sampling_topp": 1.5},
              {"sampling_topk": -1}, {"sampling_temperature": -0.5}):
    with pytest.raises(ValueError):
      DecodeConfig(**bad)


def test_draws_depend_on_the_line_and_sample_index_not_on_the_row():
  """Four equal sentences: four different sample sets; each line's samples are the same
  alone, in any order in a batch, and as a stream's later line (line_ids)."""
  inputs = tf.constant([[3, EOS]] * 4)
  ids, _ = sample(HandMade(), inputs, 10, 0.0, n_samples=3, seed=2, line_ids=[5, 6, 7, 8])
  ids = ids.numpy()
  assert len({ids[b].tobytes() for b in range(4)}) == 4
  reordered, _ = sample(HandMade(), inputs, 10, 0.0, n_samples=3, seed=2, line_ids=[8, 6, 5, 7])
  assert np.array_equal(reordered.numpy(), ids[[3, 1, 0, 2]])
  alone, _ = sample(HandMade(), inputs[:1], 10, 0.0, n_samples=3, seed=2, line_ids=[7])
  assert np.array_equal(alone.numpy()[0], ids[2])
  default, _ = sample(HandMade(), inputs, 10, 0.0, n_samples=3, seed=2)  # lines 0, 1, 2, 3
  first, _ = sample(HandMade(), inputs[:1], 10, 0.0, n_samples=3, seed=2, line_ids=[0])
  assert np.array_equal(default.numpy()[0], first.numpy()[0])


def test_draws_over_many_lines_follow_the_distribution():
  """One sample of each of 4000 lines (one row each): the first piece's frequencies."""
  ids, _ = sample(HandMade(), tf.constant([[3, EOS]] * 4000), 10, 0.0, seed=4)
  freq = np.bincount(ids.numpy()[:, 0, 0], minlength=6)[2:] / 4000
  np.testing.assert_allclose(freq, [0.4, 0.3, 0.2, 0.1], atol=0.03)  # > 4 sd at n = 4000


# Seed 1 draws, for line 2436 (sample 0) at step 0, a uniform whose top 24 bits are all ones
# for piece 160, and for line 5978 for piece 360: with 24-bit draws both rounded to u = 1.0
# (Gumbel noise +inf), so that piece won whatever its logit.
EXTREME_SEED, EXTREME_LINES, EXTREME_PIECES = 1, (2436, 5978), (160, 360)


class Wide(HandMade):
  """HandMade over 400 pieces: 2, 3 and 4 with probabilities 0.5, 0.3 and 0.2 at steps 0-2
  (the rest 1e-30), EOS for sure from step 3."""
  vocab_size = 400

  def step(self, prev_ids, i, state):
    del prev_ids
    first = np.full(self.vocab_size, 1e-30)
    first[2:5] = [0.5, 0.3, 0.2]
    last = np.full(self.vocab_size, 1e-30)
    last[EOS] = 1.0
    log_probs = tf.where(i < 3, tf.constant(np.log(first), tf.float32),
                         tf.constant(np.log(last), tf.float32))
    return tf.tile(log_probs[None], [tf.shape(state["rows"])[0], 1]), state


def test_uniform_draws_lie_strictly_inside_zero_one():
  extremes = _to_unit(tf.constant([0, 2 ** 64 - 1], tf.uint64)).numpy()
  assert extremes.tolist() == [2.0 ** -24, 1.0 - 2.0 ** -24]
  keys = sample_keys(EXTREME_SEED, tf.constant(EXTREME_LINES), 1)
  u = uniform(keys, 0, max(EXTREME_PIECES) + 1).numpy()
  assert 0.0 < u.min() and u.max() < 1.0
  assert u[0, EXTREME_PIECES[0]] == u[1, EXTREME_PIECES[1]] == 1.0 - 2.0 ** -24


def test_a_masked_piece_never_wins_even_at_the_extreme_draw():
  """Pieces masked by top-k or by a constraint (NEG_INF) lose to the kept ones whatever
  their draw, the largest possible one and even u = 1.0 (Gumbel noise +inf)."""
  top_k = filter_log_probs(tf.constant(np.log([[0.6, 0.3, 0.1]]), tf.float32), top_k=2)
  forbidden = filter_log_probs(tf.constant([[-0.5, -1.0, NEG_INF]]))
  for logits in (top_k, forbidden):
    for u_masked in (1.0 - 2.0 ** -24, 1.0):
      assert gumbel_argmax(logits, tf.constant([[0.5, 0.5, u_masked]])).numpy()[0] in (0, 1)
  keys = sample_keys(EXTREME_SEED, tf.constant(EXTREME_LINES[:1]), 1)
  wide = np.full([1, EXTREME_PIECES[0] + 1], NEG_INF, np.float32)
  wide[0, :2] = [0.0, -1.0]
  assert draw(filter_log_probs(tf.constant(wide)), keys, 0).numpy()[0] in (0, 1)


@pytest.mark.parametrize("options", [{"top_k": 2}, {"top_p": 0.7}, {"temperature": 1.0}])
def test_samples_never_leave_top_k_the_nucleus_or_the_prefix(options):
  """Lines around the two extreme draws, in two batches: every first piece is inside the
  kept set (top-k 2 and nucleus 0.7: pieces 2 and 3; plain: 2, 3 or 4), and with a target
  prefix every sample starts with it."""
  kept = {2, 3} if "temperature" not in options else {2, 3, 4}
  for lines in (range(2400, 2500), range(5950, 6000)):
    inputs = tf.constant([[3, EOS]] * len(lines))
    ids, _ = sample(Wide(), inputs, 10, 0.0, n_samples=2, seed=EXTREME_SEED,
                    line_ids=list(lines), **options)
    assert set(np.unique(ids.numpy()[:, :, :3])) <= kept
    prefix = TargetPrefix(tf.constant([[4, 4]] * len(lines)), Wide.vocab_size)
    ids, _ = sample(Wide(), inputs, 10, 0.0, n_samples=2, seed=EXTREME_SEED,
                    line_ids=list(lines), constraint=prefix, **options)
    assert np.all(ids.numpy()[:, :, :2] == 4)
    assert set(np.unique(ids.numpy()[:, :, 2])) <= kept
