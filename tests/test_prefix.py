"""Forced target prefixes (`decoding.prefix.TargetPrefix`) through the Translator and translate."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro import errors
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.decoding.scoring import Scorer
from t2t_repro.decoding.translator import Translator
from t2t_repro.serving.saved_model import ServingModule

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "", "A girl jumps."]
PREFIXES = ["Eine Frau", "", "Egal", "Zwei Katzen spielen"]


@pytest.fixture(name="loaded", scope="module")
def fixture_loaded(trained_run):
  return load_for_inference(str(trained_run.model_dir))


@pytest.mark.parametrize("config", [DecodeConfig(beam_size=4, alpha=0.0, n_best=2),
                                    DecodeConfig(sampling_topk=5, n_samples=3, alpha=0.0)])
def test_every_output_starts_with_its_prefix_and_scores_as_the_model(loaded, config):
  model, _, tokenizer = loaded
  translator = Translator(model, tokenizer, config)
  nbest = translator.nbest(LINES, return_ids=True, prefixes=PREFIXES)
  plain = Translator(model, tokenizer, config).nbest(LINES, return_ids=True)
  scorer = Scorer(model, 4096)
  for line, prefix, hyps, plain_hyps in zip(LINES, PREFIXES, nbest, plain):
    if not line:  # a blank line is not decoded, whatever its prefix
      assert [h[1] for h in hyps] == [""]
      continue
    assert len(hyps) == config.outputs_per_sentence
    if not prefix:  # no prefix: exactly the unconstrained output
      assert [h[1] for h in hyps] == [h[1] for h in plain_hyps]
      continue
    forced = tokenizer.encode(prefix).numpy()[:-1]
    source = translator.encode([line])[0]
    for score, text, ids, _ in hyps:
      assert np.array_equal(ids[:len(forced)], forced)
      assert text.startswith(prefix)
      log_prob = float(np.sum(scorer.score_ids([source], [ids])[0]))
      assert log_prob == pytest.approx(score, abs=1e-4)


def test_translate_target_prefix_file(trained_run, tmp_path):
  (tmp_path / "in.en").write_text("\n".join(LINES) + "\n", encoding="utf-8")
  (tmp_path / "prefix.de").write_text("\n".join(PREFIXES) + "\n", encoding="utf-8")
  proc = subprocess.run([sys.executable, "-m", "t2t_repro.translate",
                         f"--model_dir={trained_run.model_dir}", f"--input_file={tmp_path / 'in.en'}",
                         f"--target_prefix_file={tmp_path / 'prefix.de'}"],
                        capture_output=True, text=True, cwd=_REPO, check=False)
  assert proc.returncode == 0, proc.stderr
  out = proc.stdout.splitlines()
  assert len(out) == 4 and out[0].startswith("Eine Frau") and out[3].startswith("Zwei Katzen")
  assert out[2] == ""
  (tmp_path / "short.de").write_text("Eine\n", encoding="utf-8")
  proc = subprocess.run([sys.executable, "-m", "t2t_repro.translate",
                         f"--model_dir={trained_run.model_dir}", f"--input_file={tmp_path / 'in.en'}",
                         f"--target_prefix_file={tmp_path / 'short.de'}"],
                        capture_output=True, text=True, cwd=_REPO, check=False)
  assert proc.returncode == 1 and "--target_prefix_file" in proc.stderr
  assert len(proc.stderr.strip().splitlines()) == 1


LONG_PREFIX = "Ein Hund läuft schnell über die grüne Wiese im Park neben dem See"


def test_a_prefix_longer_than_the_output_limit_is_kept_whole_with_a_warning(loaded, caplog):
  """The limit of a line becomes max(source, prefix length) + decode_extra_length: the
  whole prefix, then up to decode_extra_length pieces (an example that was cut to
  "Ein Hund läuft schnell über die grüne")."""
  model, _, tokenizer = loaded
  config = DecodeConfig(beam_size=2, decode_extra_length=5)
  translator = Translator(model, tokenizer, config)
  with caplog.at_level(logging.WARNING):
    nbest = translator.nbest(["Two dogs play.", "A dog."], return_ids=True,
                             prefixes=["Zwei", LONG_PREFIX], first_line=10)
  forced = tokenizer.encode(LONG_PREFIX).numpy()[:-1]
  source = translator.encode(["A dog."])[0]
  assert len(forced) > len(source) + 5  # the case: longer than source + extra
  _, text, ids, _ = nbest[1][0]
  assert text.startswith(LONG_PREFIX) and np.array_equal(ids[:len(forced)], forced)
  assert len(ids) <= len(forced) + 5
  warnings = [r.getMessage() for r in caplog.records if "target prefix" in r.getMessage()]
  assert warnings == [f"input line 12: its target prefix has {len(forced)} pieces, more than "
                      f"the maximum output length {len(source) + 5} (source length + "
                      f"decode_extra_length); decoding up to {len(forced) + 5} (prefix + "
                      f"decode_extra_length)"]
  assert nbest[0][0][1].startswith("Zwei")
  module = ServingModule(translator)  # held: a tf.function method refers to it weakly
  served = module.translate_prefix(tf.constant(["Two dogs play.", "A dog."]),
                                   tf.constant(["Zwei", LONG_PREFIX]))
  assert served["translations"].numpy()[1].decode("utf-8") == text


def test_a_prefix_beyond_the_position_table_is_refused_naming_the_line(loaded):
  model, _, tokenizer = loaded
  translator = Translator(model, tokenizer, DecodeConfig(beam_size=2, decode_extra_length=5))
  huge = " ".join(["Hund"] * model.max_positions)
  with pytest.raises(errors.DataError, match=r"^input line 2: its target prefix of \d+ pieces "
                     rf"\+ decode_extra_length 5 exceeds the model's max_positions="
                     rf"{model.max_positions}$"):
    translator.nbest(["A dog.", "A cat."], prefixes=["", huge])
