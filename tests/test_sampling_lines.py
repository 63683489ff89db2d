"""Sampling draws that depend on (seed, line, sample, step), not on the batch: a trained
model's samples of many copies of one sentence against its own distribution, and the same
samples whatever --decode_batch_tokens, from a file or from stdin."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from t2t_repro.decoding import model_interface
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.decoding.translator import Translator

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCE = "A dog runs on the grass."
COPIES = 2000


@pytest.fixture(name="loaded", scope="module")
def fixture_loaded(trained_run):
  return load_for_inference(str(trained_run.model_dir))


def _samples(loaded, lines, **settings):
  """(ids tuples, scores) of every sample of `lines` at temperature 1, alpha 0, seed 3."""
  model, _, tokenizer = loaded
  config = DecodeConfig(sampling_temperature=1.0, alpha=0.0, sampling_seed=3, **settings)
  nbest = Translator(model, tokenizer, config).nbest(lines, return_ids=True)
  hyps = [hyp for line in nbest for hyp in line]
  return [tuple(h.ids) for h in hyps], np.array([h.score for h in hyps])


def _collisions(outputs):
  """Pairs (i < j) of equal outputs."""
  _, counts = np.unique(np.array([hash(o) for o in outputs]), return_counts=True)
  return int(np.sum(counts * (counts - 1) // 2))


@pytest.fixture(name="draws", scope="module")
def fixture_draws(loaded):
  """COPIES copies of SENTENCE in batches of ~7 rows and in one batch, and
  --n_samples=COPIES of it (each: (ids tuples, scores = log P(y|x)))."""
  return {"across batches": _samples(loaded, [SENTENCE] * COPIES, decode_batch_tokens=64),
          "one batch": _samples(loaded, [SENTENCE] * COPIES, decode_batch_tokens=COPIES * 64),
          "n_samples": _samples(loaded, [SENTENCE], n_samples=COPIES)}


def test_copies_collide_as_often_as_n_samples_and_as_the_model_predicts(draws):
  """Collisions (pairs of equal outputs) C among N iid draws from p: E[C] = C(N,2) s2,
  Var[C] = C(N,2)(s2 - s2^2) + 6 C(N,3)(s3 - s2^2), s_k = sum_y p(y)^k = E_y[p(y)^(k-1)],
  estimated from the draws' own log-probabilities (alpha 0: the score is log p(y))."""
  copies, _ = draws["across batches"]
  samples, _ = draws["n_samples"]
  p = np.exp(np.concatenate([draws["across batches"][1], draws["n_samples"][1]]))
  n = COPIES
  pairs, triples = math.comb(n, 2), math.comb(n, 3)
  s2, s3 = p.mean(), (p ** 2).mean()
  mean = pairs * s2
  var = pairs * (s2 - s2 ** 2) + 6 * triples * max(s3 - s2 ** 2, 0.0)
  estimate_var = (pairs * p.std()) ** 2 / len(p)  # of `mean`, from the estimate of s2
  tolerance = 5 * math.sqrt(var + estimate_var) + 1
  for outputs in (copies, samples):
    assert abs(_collisions(outputs) - mean) <= tolerance, (_collisions(outputs), mean, tolerance)
  # n - distinct <= collisions: as many distinct outputs, within the same tolerance
  distinct = [len(set(copies)), len(set(samples))]
  assert abs(distinct[0] - distinct[1]) <= mean + tolerance, (distinct, mean, tolerance)


def test_the_batching_does_not_change_any_sample(draws):
  assert draws["across batches"][0] == draws["one batch"][0]


def _first_piece_log_probs(loaded):
  """log p(first piece | SENTENCE) under the model, float64 [V]."""
  model, _, tokenizer = loaded
  inputs = tokenizer.encode(tf.constant([SENTENCE])).to_tensor()
  decoder = model_interface.decoder_for(model)
  state = decoder.start(inputs, 1, 1)
  log_probs, _ = decoder.step(tf.zeros([1], tf.int32), tf.constant(0), state)
  return tf.nn.log_softmax(tf.cast(log_probs[0], tf.float64)).numpy()


@pytest.mark.parametrize("run", ["across batches", "one batch", "n_samples"])
def test_first_piece_follows_the_softmax(loaded, draws, run):
  """Pearson's chi-square of the first sampled piece over COPIES draws, the pieces of
  expected count >= 5 as cells and the rest as one."""
  expected = np.exp(_first_piece_log_probs(loaded)) * COPIES
  first = np.array([ids[0] for ids in draws[run][0]])
  counts = np.bincount(first, minlength=len(expected))
  cells = expected >= 5
  observed = np.append(counts[cells], counts[~cells].sum())
  wanted = np.append(expected[cells], expected[~cells].sum())
  # at least 3 degrees of freedom: how many pieces reach an expected count of 5 depends on the
  # fixture's numerics (4 when it trains on one core, more on two), not on the sampler
  assert cells.sum() >= 3
  result = stats.chisquare(observed, wanted * observed.sum() / wanted.sum())
  assert result.pvalue > 1e-4, (result, observed, wanted)


def test_same_text_lines_get_independent_samples(draws):
  copies, _ = draws["across batches"]
  assert copies[0] != copies[1] and len(set(copies[:50])) > 1


def _translate(model_dir, args, stdin):
  return subprocess.run([sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
                         "--sampling_temperature=1", "--sampling_seed=1", "--progress=false", *args],
                        input=stdin, capture_output=True, text=True, cwd=_REPO, check=False,
                        timeout=600)


def test_same_samples_whatever_batch_tokens_from_a_file_and_from_stdin(trained_run, loaded,
                                                                       multi30k_slice, tmp_path):
  """Two equal lines decoded one per batch get equal samples; a mixed input gets the same
  samples with decoding budgets of 64, 1024 and 4096 tokens and from a pipe, read in batches
  of 3 lines as they arrive."""
  (tmp_path / "two.en").write_text("A dog.\nA dog.\n", encoding="utf-8")
  proc = _translate(trained_run.model_dir, [f"--input_file={tmp_path / 'two.en'}",
                                            "--decode_batch_tokens=1"], None)
  assert proc.returncode == 0, proc.stderr
  assert len(set(proc.stdout.splitlines())) == 2, proc.stdout
  dev = (multi30k_slice / "dev.en").read_text(encoding="utf-8").splitlines()[:12]
  lines = [SENTENCE, *dev[:6], "", SENTENCE, *dev[6:], SENTENCE, SENTENCE]
  (tmp_path / "in.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
  model, _, tokenizer = loaded
  outputs = [Translator(model, tokenizer, DecodeConfig(sampling_temperature=1.0, sampling_seed=1,
                                                       decode_batch_tokens=b)).translate(lines)
             for b in (64, 1024, 4096)]
  assert outputs[0] == outputs[1] == outputs[2]
  assert outputs[0][7] == "" and len(set(outputs[0][i] for i in (0, 8, 15, 16))) == 4
  from_file = _translate(trained_run.model_dir, [f"--input_file={tmp_path / 'in.en'}"], None)
  piped = _translate(trained_run.model_dir, ["--buffer_size=3"], "\n".join(lines) + "\n")
  assert from_file.returncode == 0 and piped.returncode == 0, from_file.stderr + piped.stderr
  assert from_file.stdout.splitlines() == piped.stdout.splitlines() == outputs[0]
