"""Ensembles (t2t_repro.decoding.ensemble) and loading them (t2t_repro.decoding.loading)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model_dir_util import make_model_dir
from t2t_repro.decoding import beam_search as bs
from t2t_repro.decoding import loading
from t2t_repro.decoding.ensemble import Ensemble, average_log_probs
from test_beam_search import random_sources, tiny_model

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def models():
  return tiny_model(vocab_size=12, seed=3), tiny_model(vocab_size=12, seed=4)


@pytest.fixture(scope="module")
def sources():
  return random_sources(12)


def test_average_log_probs_by_hand():
  # Mean of (0.5, 0.5) and (0.9, 0.1) in probability space is (0.7, 0.3).
  log_probs = tf.math.log(tf.constant([[0.5, 0.5], [0.9, 0.1]]))
  np.testing.assert_allclose(np.exp(average_log_probs(log_probs).numpy()), [0.7, 0.3], rtol=1e-6)


def test_ensemble_of_one_model_equals_the_model(models, sources):
  ids, scores = bs.beam_search(models[0], sources, beam_size=3, n_best=3)
  e_ids, e_scores = bs.beam_search(Ensemble([models[0]]), sources, beam_size=3, n_best=3)
  np.testing.assert_array_equal(e_ids.numpy(), ids.numpy())
  np.testing.assert_array_equal(e_scores.numpy(), scores.numpy())


def test_ensemble_of_a_model_with_itself_gives_its_ids(models, sources):
  ids, scores = bs.beam_search(models[0], sources, beam_size=3, n_best=2)
  e_ids, e_scores = bs.beam_search(Ensemble([models[0], models[0]]), sources, beam_size=3,
                                   n_best=2)
  np.testing.assert_array_equal(e_ids.numpy(), ids.numpy())
  np.testing.assert_allclose(e_scores.numpy(), scores.numpy(), atol=1e-4)


def greedy(model, inputs):
  """Greedy decoding (beam size 1, alpha 0) of at most 6 tokens: ids [batch, T], log P [batch]."""
  ids, scores = bs.beam_search(model, inputs, beam_size=1, alpha=0.0, max_decode_length=6)
  return ids[:, 0], scores[:, 0]


def test_ensemble_step_is_the_probability_mean_of_the_full_decoders(models, sources):
  # Greedy output of the ensemble, then each model teacher-forced on it: the ensemble's
  # score is the sum over positions of log of the mean of the models' probabilities.
  ensemble = Ensemble(list(models))
  ids, scores = greedy(ensemble, sources[:3])
  probs = [tf.nn.softmax(m((sources[:3], ids), training=False)) for m in models]
  token_probs = [tf.gather(p, ids, batch_dims=2) for p in probs]
  mean = (token_probs[0] + token_probs[1]) / 2
  up_to_eos = tf.cumsum(tf.cast(tf.equal(ids, 1), tf.int32), axis=1, exclusive=True) == 0
  expected = tf.reduce_sum(tf.where(up_to_eos, tf.math.log(mean), 0.0), axis=1)
  np.testing.assert_allclose(scores.numpy(), expected.numpy(), atol=1e-4)
  # And the ensemble differs from either model alone on some sentence.
  assert any(not np.array_equal(greedy(m, sources[:3])[1].numpy(), scores.numpy()) for m in models)


def test_uncached_ensemble_equals_cached(models, sources):
  ensemble = Ensemble(list(models))
  ids, scores = bs.beam_search(ensemble, sources, beam_size=3, n_best=2)
  u_ids, u_scores = bs.beam_search(ensemble, sources, beam_size=3, n_best=2, cached=False)
  np.testing.assert_array_equal(u_ids.numpy(), ids.numpy())
  np.testing.assert_allclose(u_scores.numpy(), scores.numpy(), atol=1e-4)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, shared_data_dir):
  """(a, copy of a, a with another vocab.model, a with another vocab_size)."""
  a = make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)
  root = tmp_path_factory.mktemp("ensemble")
  copies = [str(root / name) for name in ("copy", "other_vocab", "other_size")]
  for path in copies:
    shutil.copytree(a, path)
  with open(os.path.join(copies[1], "vocab.model"), "ab") as f:
    f.write(b"\0")
  hparams_path = os.path.join(copies[2], "hparams.json")
  with open(hparams_path, encoding="utf-8") as f:
    hparams = json.load(f)
  hparams["vocab_size"] += 1
  with open(hparams_path, "w", encoding="utf-8") as f:
    json.dump(hparams, f)
  return [a] + copies


def test_load_models(model_dirs):
  a, copy = model_dirs[:2]
  single = loading.load_models([a])
  assert not isinstance(single.model, Ensemble)
  assert single.checkpoint_paths == [os.path.join(a, "ckpt-7")]
  both = loading.load_models([a, copy])
  assert isinstance(both.model, Ensemble) and len(both.model.models) == 2
  runs = loading.load_models([a], [os.path.join(a, "ckpt-5"), os.path.join(a, "ckpt-7")])
  assert runs.checkpoint_paths == [os.path.join(a, "ckpt-5"), os.path.join(a, "ckpt-7")]
  assert not np.array_equal(runs.model.models[0].weights[0].numpy(),
                            runs.model.models[1].weights[0].numpy())
  assert loading.split_names(" a, b ,,") == ["a", "b"]


def test_load_models_errors(model_dirs):
  a, copy, other_vocab, other_size = model_dirs
  with pytest.raises(loading.EnsembleError, match=f"{other_vocab}/vocab.model differs from {a}"):
    loading.load_models([a, other_vocab])
  with pytest.raises(loading.EnsembleError, match=f"{other_size} has vocab_size"):
    loading.load_models([a, other_size])
  with pytest.raises(loading.EnsembleError, match="model_dir has 2 names and checkpoint_path 3"):
    loading.load_models([a, copy], ["x", "y", "z"])


def test_translate_cli_ensemble(model_dirs, tmp_path):
  a, copy, other_vocab = model_dirs[:3]
  source = tmp_path / "in.txt"
  source.write_text("A man is riding a bike.\nTwo dogs.\n", encoding="utf-8")
  env = dict(os.environ, PYTHONPATH=_REPO)

  def translate(model_dir):
    return subprocess.run([sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
                           f"--input_file={source}", "--noprogress", "--n_best=2"],
                          capture_output=True, text=True, env=env, cwd=_REPO, check=False)

  alone, ensemble = translate(a), translate(f"{a},{copy}")
  assert alone.returncode == 0 and ensemble.returncode == 0, ensemble.stderr
  assert [line.split("\t")[2] for line in ensemble.stdout.splitlines()] == \
         [line.split("\t")[2] for line in alone.stdout.splitlines()]
  bad = translate(f"{a},{other_vocab}")
  assert bad.returncode == 2
  assert bad.stderr.strip().splitlines()[-1] == (
      f"translate: error: an ensemble needs one vocabulary: {other_vocab}/vocab.model differs "
      f"from {a}/vocab.model")
