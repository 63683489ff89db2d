"""Tests for load_for_inference and t2t_repro.translate (API and CLI) on a tiny random model dir."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model_dir_util import make_model_dir
from t2t_repro.data.batching import length_sorted_batches
from t2t_repro.decoding.translator import DecodeConfig, Translator, check_positions, format_nbest
from t2t_repro.model.transformer import Transformer
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.model.weights import restore_weights

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data_dir):
  return make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)


@pytest.fixture(scope="module")
def loaded(model_dir):
  return load_for_inference(model_dir)


@pytest.fixture(scope="module")
def news_lines(shared_data_dir):
  with open(os.path.join(shared_data_dir, "wmt14", "newstest2014-full.en-de.en"), encoding="utf-8") as f:
    lines = [next(f).rstrip("\n") for _ in range(6)]
  lines = [line[:80] for line in lines]  # keep the decoding short
  return [lines[0], "", lines[1], "   ", lines[2], "Ja.", lines[3], lines[4], lines[5]]


def test_load_for_inference_restores_weights(model_dir, loaded):
  model, hparams, tokenizer = loaded
  assert hparams.vocab_size == tokenizer.vocab_size == 1000 and hparams.beam_size == 3
  reader = tf.train.load_checkpoint(os.path.join(model_dir, "ckpt-7"))
  names = [name for name, _ in tf.train.list_variables(os.path.join(model_dir, "ckpt-7"))]
  key = next(n for n in names if n.startswith("model/") and "embedding" in n)
  np.testing.assert_array_equal(reader.get_tensor(key), model.embedding.embeddings.numpy())
  older, _, _ = load_for_inference(model_dir, os.path.join(model_dir, "ckpt-5"))
  assert not np.array_equal(older.embedding.embeddings.numpy(), model.embedding.embeddings.numpy())
  with pytest.raises(FileNotFoundError, match="ckpt-99"):
    load_for_inference(model_dir, os.path.join(model_dir, "ckpt-99"))
  with pytest.raises(FileNotFoundError, match="hparams.json"):
    load_for_inference(os.path.join(model_dir, "nowhere"))


def test_restore_weights_checks_every_weight(tmp_path, loaded):
  model, hparams, _ = loaded
  only_step = tf.train.Checkpoint(step=tf.Variable(3)).write(str(tmp_path / "only_step"))
  with pytest.raises(ValueError, match="lacks 61 of the model's 61 weights"):
    restore_weights(Transformer.from_hparams(hparams), only_step)
  other = Transformer.from_hparams(hparams.replace(d_model=16, num_heads=2))
  path = tf.train.Checkpoint(model=other).write(str(tmp_path / "other"))
  with pytest.raises(ValueError, match="does not fit"):
    restore_weights(Transformer.from_hparams(hparams), path)
  # A model-only checkpoint (as tools/average_checkpoints.py writes) round-trips.
  path = tf.train.Checkpoint(model=model).write(str(tmp_path / "same"))
  fresh = Transformer.from_hparams(hparams)
  restore_weights(fresh, path)
  for a, b in zip(fresh.weights, model.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_length_sorted_batches():
  lengths = [5, 1, 9, 3, 3, 20, 2]
  batches = length_sorted_batches(lengths, batch_tokens=10)
  assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
  flat = [lengths[i] for b in batches for i in b]
  assert flat == sorted(flat)
  for b in batches:
    assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 10
  assert [5] in batches  # longer than the budget: alone
  assert batches == [[1, 6, 3], [4, 0], [2], [5]]


def _translator(loaded, num_batch_threads=1, **settings):
  model, hparams, tokenizer = loaded
  return Translator(model, tokenizer, DecodeConfig.resolve(hparams, **settings),
                    num_batch_threads=num_batch_threads)


def test_decode_config_resolution(loaded):
  _, hparams, _ = loaded  # beam 3, alpha 0.6, extra 4
  assert DecodeConfig.resolve(hparams) == DecodeConfig(3, 0.6, 4, 4096, 1)
  assert DecodeConfig.resolve(hparams, alpha=0.0, n_best=5, decode_batch_tokens=64) == \
      DecodeConfig(5, 0.0, 4, 64, 5)  # the beam widened to n_best
  assert DecodeConfig.resolve(hparams, beam_size=7, decode_extra_length=0).beam_size == 7
  for bad in (dict(beam_size=0), dict(alpha=-1.0), dict(decode_batch_tokens=0), dict(n_best=3, beam_size=2),
              dict(decode_extra_length=-1)):
    with pytest.raises(ValueError, match=next(iter(bad)) if "n_best" not in bad else "n_best"):
      DecodeConfig(**bad)


def test_max_positions_checked_at_decode_time(loaded):
  model, hparams, tokenizer = loaded
  assert model.max_positions == hparams.max_positions == 512
  check_positions(512, 508, 4)  # exactly fits
  with pytest.raises(ValueError, match="line 7: 509 source tokens .* max_positions=512"):
    check_positions(512, 509, 4, where="line 7")
  long_line = " ".join(["Haus"] * 300)
  # A too long line is cut to what the table leaves (512 - 300 = 212 tokens), not refused.
  translator = Translator(model, tokenizer, DecodeConfig(beam_size=1, decode_extra_length=300))
  assert translator.max_input_length() == 212
  (cut,) = translator.bound_lengths(translator.encode([long_line]), [3])
  assert len(cut) == 212 and cut[-1] == 1
  assert len(translator.translate(["Ja.", "", long_line])) == 3
  # An explicit bound that does not fit the table is refused, naming the flag.
  too_long = Translator(model, tokenizer, DecodeConfig(beam_size=1, decode_extra_length=300,
                                                       max_input_length=213))
  with pytest.raises(ValueError, match=r"max_input_length: 213 source tokens \+ decode_extra_length 300"):
    too_long.translate(["Ja."])
  # The graph path (what the SavedModel runs) checks it too.
  inputs = tf.constant([[5] * 300 + [1]], tf.int32)
  with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_positions=512"):
    translator.search(inputs)


def test_translator_order_blank_and_batching(loaded, news_lines):
  one_batch = _translator(loaded, decode_batch_tokens=100000).translate(news_lines)
  small = _translator(loaded, decode_batch_tokens=40).translate(news_lines)
  assert small == one_batch and len(one_batch) == len(news_lines)
  assert one_batch[1] == "" and one_batch[3] == ""
  assert all(one_batch[i] for i in (0, 2, 4, 5, 6, 7, 8))
  # Input order: each line alone gives the same translation.
  for i in (0, 5):
    assert _translator(loaded).translate([news_lines[i]]) == [one_batch[i]]
  nbest = _translator(loaded, n_best=3).nbest(news_lines)
  assert [hyps[0][1] for hyps in nbest] == one_batch
  assert nbest[1] == [(0.0, "")]
  assert len(nbest[0]) == 3 and nbest[0][0][0] >= nbest[0][1][0] >= nbest[0][2][0]


def test_batch_threads_give_the_same_outputs_in_input_order(loaded, news_lines):
  """Batches decoded 3 at a time give one thread's n-best lists (scores included), in input
  order, on the first call (decoded alone) and on later ones."""
  lines = news_lines * 3
  one = _translator(loaded, decode_batch_tokens=40, n_best=2).nbest(lines)
  assert len({len(lines[i].split()) for i in range(len(lines)) if lines[i].strip()}) > 3
  threaded = _translator(loaded, num_batch_threads=3, decode_batch_tokens=40, n_best=2)
  assert len(list(threaded.padded_batches(threaded.encode([l for l in lines if l.strip()])))) > 3
  assert threaded.nbest(lines) == one
  # Other batches (the lines reversed): the same texts, scores to float32 rounding.
  again = threaded.nbest(lines[::-1])[::-1]
  assert [[text for _, text in hyps] for hyps in again] == [[t for _, t in h] for h in one]
  assert np.allclose([s for h in again for s, _ in h], [s for h in one for s, _ in h], rtol=1e-5)


def test_cli_nbest_and_evaluate(tmp_path, model_dir, loaded, news_lines):
  src, out, ref = tmp_path / "src.en", tmp_path / "out.txt", tmp_path / "ref.de"
  src.write_text("".join(line + "\n" for line in news_lines), encoding="utf-8")
  ref.write_text("".join(line + "\n" for line in news_lines), encoding="utf-8")
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
       f"--input_file={src}", f"--output_file={out}", "--n_best=2", "--decode_batch_tokens=50",
       "--num_batch_threads=3",
       "--decode_extra_length=4", "--evaluate", f"--ref={ref}"],
      cwd=_REPO, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
  expected = _translator(loaded, n_best=2).nbest(news_lines)
  assert rows == [l.split("\t") for l in format_nbest(expected)]
  assert [r[0] for r in rows] == ["0", "0", "1", "2", "2", "3", "4", "4", "5", "5", "6", "6", "7",
                                  "7", "8", "8"]
  assert "sacreBLEU" in result.stdout and "chrF" in result.stdout
  # Progress goes to stderr, never into the output; not a terminal: one plain line, no bar.
  assert result.stderr.startswith("loading ") and "\ntranslated 9 lines in " in result.stderr
  assert "translated" not in result.stdout
