"""Scoring given translations: `decoding.scoring` and the score command."""

import os
import subprocess
import sys

import numpy as np
import pytest

from t2t_repro import errors
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.decoding.ensemble import Ensemble
from t2t_repro.decoding.loading import load_for_inference, load_models
from t2t_repro.decoding.scoring import Scorer, normalized
from t2t_repro.decoding.translator import Translator

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ["A man is riding a bike.", "Two dogs play in the snow.", "A girl in a red dress jumps.",
           "People.", "A woman is cooking dinner in a small kitchen while a child watches."]


def _beam_then_score(model, tokenizer, alpha):
  translator = Translator(model, tokenizer, DecodeConfig(beam_size=4, alpha=alpha, n_best=2))
  nbest = translator.nbest(SOURCES, return_ids=True)
  sources = translator.encode(SOURCES)
  hyps = [hyp for hyps in nbest for hyp in hyps]
  repeated = [src for src in sources for _ in range(2)]
  pieces = Scorer(model, batch_tokens=64).score_ids(repeated, [hyp.ids for hyp in hyps])
  return hyps, pieces


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_score_of_the_beams_own_outputs_equals_the_beams_score(trained_run, alpha):
  model, _, tokenizer = load_for_inference(str(trained_run.model_dir))
  hyps, pieces = _beam_then_score(model, tokenizer, alpha)
  for (beam_score, _, ids, _), log_probs in zip(hyps, pieces):
    assert len(log_probs) == len(ids)
    assert np.all(log_probs <= 0)
    assert normalized(float(np.sum(log_probs)), len(ids), alpha) == pytest.approx(beam_score,
                                                                                  abs=1e-4)


def test_ensemble_scores_as_it_decodes(trained_run):
  model_dir = str(trained_run.model_dir)
  loaded = load_models([model_dir], [f"{model_dir}/ckpt-100", f"{model_dir}/ckpt-200"])
  assert isinstance(loaded.model, Ensemble)
  hyps, pieces = _beam_then_score(loaded.model, loaded.tokenizer, 0.0)
  for (beam_score, _, _, _), log_probs in zip(hyps, pieces):
    assert float(np.sum(log_probs)) == pytest.approx(beam_score, abs=1e-4)
  # log of the mean probability: between the members' log-probabilities, piece by piece
  ids = [h[2] for h in hyps]
  sources = Translator(loaded.model, loaded.tokenizer).encode(SOURCES)
  sources = [src for src in sources for _ in range(2)]
  singles = [Scorer(m, 64).score_ids(sources, ids) for m in loaded.model.models]
  for both, one, two in zip(pieces, *singles):
    assert np.all(both <= np.maximum(one, two) + 1e-5)
    assert np.all(both >= np.minimum(one, two) - 1e-5)


def test_batching_does_not_change_scores(trained_run):
  model, _, tokenizer = load_for_inference(str(trained_run.model_dir))
  translator = Translator(model, tokenizer)
  sources = translator.encode(SOURCES)
  targets = translator.encode(["Ein Mann.", "Zwei Hunde spielen.", "", "Leute.", "Eine Frau kocht."])
  alone = Scorer(model, 1).score_ids(sources, targets)
  together = Scorer(model, 10_000).score_ids(sources, targets)
  for a, b in zip(alone, together):
    np.testing.assert_allclose(a, b, atol=1e-5)


def _score(model_dir, tmp_path, *flags, sources=SOURCES, targets=None):
  (tmp_path / "s.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
  targets = targets if targets is not None else ["Ein Mann fährt Fahrrad."] * len(sources)
  (tmp_path / "t.de").write_text("\n".join(targets) + "\n", encoding="utf-8")
  return subprocess.run([sys.executable, "-m", "t2t_repro.score", f"--model_dir={model_dir}",
                         f"--src={tmp_path / 's.en'}", f"--tgt={tmp_path / 't.de'}", *flags],
                        capture_output=True, text=True, cwd=_REPO, check=False)


def test_score_command_writes_one_line_per_pair(trained_run, tmp_path):
  proc = _score(trained_run.model_dir, tmp_path, "--normalized", "--per_piece", "--alpha=0.6")
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  assert len(lines) == len(SOURCES)
  model, _, tokenizer = load_for_inference(str(trained_run.model_dir))
  target = np.asarray(tokenizer.encode("Ein Mann fährt Fahrrad.").numpy(), np.int32)
  for line, source in zip(lines, SOURCES):
    total, norm, pieces = line.split("\t")
    pieces = [float(x) for x in pieces.split()]
    assert len(pieces) == len(target)
    assert float(total) == pytest.approx(sum(pieces), abs=5e-4)
    assert float(norm) == pytest.approx(float(total) / ((5 + len(target)) / 6) ** 0.6, abs=1e-3)
    src = Translator(model, tokenizer).encode([source])
    expected = Scorer(model, 4096).score_ids(src, [target])[0]
    assert float(total) == pytest.approx(float(np.sum(expected)), abs=5e-4)
  assert "scored 5 pairs" in proc.stderr


def test_score_header_names_the_written_columns(trained_run, tmp_path):
  proc = _score(trained_run.model_dir, tmp_path, "--header", "--per_piece")
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  assert lines[0] == "log_prob\tpiece_log_probs" and len(lines) == 1 + len(SOURCES)
  for line in lines[1:]:
    total, pieces = line.split("\t")
    assert float(total) == pytest.approx(sum(float(x) for x in pieces.split()), abs=5e-4)
  assert "scoring pairs 1-5" in proc.stderr


def test_score_command_errors(trained_run, tmp_path):
  proc = _score(trained_run.model_dir, tmp_path, targets=["eins", "zwei"])
  assert proc.returncode == 1
  errors = [line for line in proc.stderr.splitlines() if line.startswith("score: error: ")]
  assert len(errors) == 1 and "has 5 lines" in errors[0] and "Traceback" not in proc.stderr
  long_line = " ".join(["word"] * 600)
  proc = _score(trained_run.model_dir, tmp_path, sources=["A man.", long_line], targets=["a", "b"])
  assert proc.returncode == 1 and "line 2:" in proc.stderr and "max_positions" in proc.stderr
  proc = _score(trained_run.model_dir, tmp_path, "--decode_batch_tokens=0")
  assert proc.returncode == 2 and "--decode_batch_tokens" in proc.stderr
  assert all(len(p.stderr.strip().splitlines()) == 1 for p in [proc])


def test_pair_chunks_stream_both_files_in_aligned_chunks(tmp_path, monkeypatch):
  from t2t_repro.commands import score  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(score, "CHUNK_PAIRS", 2)
  (tmp_path / "s").write_text(" a\nb \nc\nd\ne", encoding="utf-8")
  (tmp_path / "t").write_text("A\nB\n\nD\nE\n", encoding="utf-8")
  chunks = list(score._pair_chunks(str(tmp_path / "s"), str(tmp_path / "t")))  # pylint: disable=protected-access
  assert chunks == [(1, ["a", "b"], ["A", "B"]), (3, ["c", "d"], ["", "D"]), (5, ["e"], ["E"])]
  (tmp_path / "t").write_text("A\nB\nC\nD\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"has 5 lines, --tgt=.* 4$"):
    list(score._pair_chunks(str(tmp_path / "s"), str(tmp_path / "t")))  # pylint: disable=protected-access


def test_score_command_leaves_output_file_as_it_was_on_a_data_error(trained_run, tmp_path):
  out = tmp_path / "scores.txt"
  out.write_text("old\n", encoding="utf-8")
  proc = _score(trained_run.model_dir, tmp_path, f"--output_file={out}", targets=["eins", "zwei"])
  assert proc.returncode == 1 and "has 5 lines" in proc.stderr
  assert out.read_text(encoding="utf-8") == "old\n"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["s.en", "scores.txt", "t.de"]
  proc = _score(trained_run.model_dir, tmp_path, f"--output_file={out}")
  assert proc.returncode == 0, proc.stderr
  assert len(out.read_text(encoding="utf-8").splitlines()) == len(SOURCES)
