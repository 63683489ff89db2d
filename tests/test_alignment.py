"""Alignments from cross-attention (t2t_repro.decoding.alignment) and translate --alignments."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model_dir_util import add_eos_reward, make_model_dir
from t2t_repro.decoding import alignment
from t2t_repro.decoding.ensemble import Ensemble
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.decoding.translator import DecodeConfig, Translator

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = ["A man is riding a bike.", "", "Two dogs play in the snow."]


def test_hard_and_soft_formats_of_a_constructed_attention():
  weights = np.array([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.0, 0.1, 0.9], [0.2, 0.5, 0.3]])
  assert alignment.hard_alignment(weights) == "1-0 0-1 2-2 1-3"
  assert alignment.hard_alignment(np.eye(3)) == "0-0 1-1 2-2"  # identity
  assert alignment.hard_alignment(np.zeros([0, 4])) == ""
  line = alignment.soft_alignment(np.eye(2, 3) * 0.123456, ["▁a", "b", "c"], ["▁x", "y"])
  assert json.loads(line) == {"source": ["▁a", "b", "c"], "target": ["▁x", "y"],
                              "alignment": [[0.1235, 0.0, 0.0], [0.0, 0.1235, 0.0]]}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data_dir):
  return make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)


@pytest.fixture(scope="module")
def translator(model_dir):
  model, _, tokenizer = load_for_inference(model_dir)
  add_eos_reward(model, 6.8)  # hypotheses of lengths 1, 2 and 8 at beam 4
  return Translator(model, tokenizer, DecodeConfig(beam_size=4, n_best=2, alpha=0.6,
                                                   decode_extra_length=8))


def test_alignment_belongs_to_the_returned_hypothesis(translator):
  nbest = translator.nbest(LINES, return_ids=True)
  soft = [json.loads(line) for line in alignment.alignment_lines(translator, nbest, "soft")]
  hard = alignment.alignment_lines(translator, nbest, "hard")
  hyps = [(i, hyp) for i, hyps in enumerate(nbest) for hyp in hyps]
  assert len(soft) == len(hard) == len(hyps) == 5
  lengths = set()
  for (i, (_, text, ids, source_ids)), entry, pairs in zip(hyps, soft, hard):
    if not LINES[i]:
      assert entry == {"source": [], "target": [], "alignment": []} and pairs == ""
      continue
    assert translator.tokenizer.decode(ids).numpy().decode() == text
    source = translator.encode([LINES[i]])[0]
    np.testing.assert_array_equal(source_ids, source)  # the decoded source, not encoded again
    # One sentence alone, unpadded, teacher-forced on the returned ids.
    weights = translator.model.attention_weights(source[None], ids[None])["encoder_decoder"][-1]
    pieces = len(ids) - int(ids[-1] == 1)  # EOS excluded; a cut hypothesis has none
    expected = tf.reduce_mean(weights, 1)[0].numpy()[:pieces, :len(source) - 1]
    assert len(entry["target"]) == pieces and len(entry["source"]) == len(source) - 1
    np.testing.assert_allclose(np.reshape(entry["alignment"], expected.shape), expected, atol=1e-4)
    assert pairs == " ".join(f"{a}-{j}" for j, a in enumerate(expected.argmax(1)))
    lengths.add(len(ids))
  assert len(lengths) > 1 and max(lengths) > 3  # of different lengths: the rows differ


def test_ensemble_of_a_model_with_itself_aligns_as_the_model(translator):
  nbest = translator.nbest(LINES[:1], return_ids=True)
  pairs = [(translator.encode(LINES[:1])[0], nbest[0][0].ids)]
  alone = alignment.sentence_weights(translator.model, pairs, layer=0)
  twice = alignment.sentence_weights(Ensemble([translator.model, translator.model]), pairs, 0)
  np.testing.assert_allclose(twice[0], alone[0], atol=1e-6)
  with pytest.raises(ValueError, match="`alignment_layer`=5"):
    alignment.check_layer(translator.model, 5)


def test_translate_cli_writes_alignments(model_dir, tmp_path):
  source = tmp_path / "in.txt"
  source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
  env = dict(os.environ, PYTHONPATH=_REPO)
  base = [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
          f"--input_file={source}", "--noprogress", "--beam_size=2", "--decode_extra_length=5"]
  out = tmp_path / "align.txt"
  proc = subprocess.run(base + ["--alignments=hard", f"--alignment_file={out}"],
                        capture_output=True, text=True, env=env, cwd=_REPO, check=False)
  assert proc.returncode == 0, proc.stderr
  lines = out.read_text(encoding="utf-8").split("\n")[:-1]
  assert len(lines) == len(proc.stdout.splitlines()) == 3
  assert lines[1] == "" and all(pair.count("-") == 1 for pair in lines[0].split())
  bad = subprocess.run(base + ["--alignments=soft"], capture_output=True, text=True, env=env,
                       cwd=_REPO, check=False)
  assert bad.returncode == 2
  assert bad.stderr.strip().splitlines()[-1] == (
      "translate: error: --alignments and --alignment_file go together")
