"""Tests for t2t_repro.evaluation: known scores, compound splitting, real data."""

import math
import os
import subprocess
import sys

import pytest

from t2t_repro import errors
from t2t_repro import evaluation
from t2t_repro import fileio

def test_identical_is_100():
  lines = ["Die Kaffee-Maschine ist kaputt.", "Das ist ein \"Test\" & mehr."]
  s = evaluation.evaluate_translations(lines, lines)
  assert s["sacrebleu"] == pytest.approx(100.0)
  assert s["chrf"] == pytest.approx(100.0)
  assert s["bleu_tok_compound"] == pytest.approx(100.0)
  assert s["bleu_lc_tok"] == pytest.approx(100.0)
  assert s["num_sentences"] == 2 and s["num_refs"] == 1


def test_hand_computed_two_sentences():
  # Plain lowercase words: 13a, Moses and whitespace tokenization all agree,
  # and nothing has a hyphen, so all three BLEU flavours are the same number.
  hyps = ["the cat is on the mat", "he reads a good book"]
  refs = ["the cat sat on the mat", "he reads a good book today"]
  # Sentence 1 (hyp 6 tokens, ref 6):
  #   1-grams: the x2, cat, on, mat match; "is" not          -> 5/6
  #   2-grams: the cat, on the, the mat match; cat is, is on -> 3/5
  #   3-grams: only "on the mat"                              -> 1/4
  #   4-grams: none                                           -> 0/3
  # Sentence 2 (hyp 5 tokens, ref 6): every hyp n-gram is in the ref
  #   -> 5/5, 4/4, 3/3, 2/2.
  # Corpus: p1 = 10/11, p2 = 7/9, p3 = 4/7, p4 = 2/5; product = 560/3465
  # = 16/99. Lengths c = 11, r = 12 -> BP = exp(1 - 12/11) = exp(-1/11).
  # BLEU = exp(-1/11) * (16/99)^(1/4) = 0.913101 * 0.634049 = 57.895...
  expected = 100 * math.exp(-1 / 11) * (16 / 99) ** 0.25
  assert expected == pytest.approx(57.895, abs=1e-3)
  s = evaluation.evaluate_translations(hyps, refs)
  assert s["sacrebleu"] == pytest.approx(expected, abs=1e-9)
  assert s["bleu_tok_compound"] == pytest.approx(expected, abs=1e-9)
  # sacrebleu prints the precisions as percentages.
  assert "90.9/77.8/57.1/40.0" in s["sacrebleu_details"]


def test_sacrebleu_documented_example_two_refs():
  # The example of sacrebleu's README (Python API section): 2 reference
  # streams; BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944
  # hyp_len = 17 ref_len = 18), chrF2 = 59.73.
  refs = [["The dog bit the man.", "It was not unexpected.",
           "The man bit him first."],
          ["The dog had bit the man.", "No one was surprised.",
           "The man had bitten the dog."]]
  hyps = ["The dog bit the man.", "It wasn't surprising.",
          "The man had just bitten him."]
  s = evaluation.evaluate_translations(hyps, refs)
  assert round(s["sacrebleu"], 2) == 48.53
  assert "82.4/50.0/45.5/37.5" in s["sacrebleu_details"]
  assert round(s["chrf"], 2) == 59.73
  assert s["num_refs"] == 2
  assert s["sacrebleu_signature"].startswith(
      "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:")
  assert s["chrf_signature"].startswith("nrefs:2|case:mixed|eff:yes|nc:6|nw:0")


def test_compound_splitting():
  assert evaluation.split_compounds("Kaffee-Maschine").split() == [
      "Kaffee", "##AT##-##AT##", "Maschine"]
  # perl's s///g does not overlap matches: "a-b-c" keeps the second hyphen.
  assert evaluation.split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
  assert evaluation.split_compounds("a - b -x") == "a - b -x"
  assert evaluation.split_compounds("B 33-Fußgängerampel") == (
      "B 33 ##AT##-##AT## Fußgängerampel")
  # Moses tokenizer -l de (escaping on, no -a) then splitting.
  assert evaluation.tokenize_for_paper_bleu(
      "Die \"Kaffee-Maschine\" kostet 3,50 €, z.B. bei Aldi & Co.") == (
          "Die &quot; Kaffee ##AT##-##AT## Maschine &quot; kostet 3,50 € , "
          "z.B. bei Aldi &amp; Co.")


def test_compound_splitting_changes_score():
  hyps = ["die Kaffee-Maschine ist kaputt"]
  refs = ["die Espresso-Maschine ist kaputt"]
  s = evaluation.evaluate_translations(hyps, refs)
  # 13a keeps "Kaffee-Maschine" whole: 3/4 unigrams, 1/3 bigrams, 0/2 3-grams
  # -> exp-smoothed; split: 6 tokens, 5/6, 3/5, 2/4, 1/3 -> no zero.
  split = 100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
  assert s["bleu_tok_compound"] == pytest.approx(split, abs=1e-9)
  assert s["bleu_tok_compound"] > s["sacrebleu"]


def test_tok_bleu_zero_precision_is_zero_like_multi_bleu():
  # multi-bleu.perl gives 0 when any n-gram order has no match (no smoothing).
  s = evaluation.evaluate_translations(["a b c d"], ["a b x d"])  # no matching 3-gram
  assert s["bleu_tok_compound"] == 0.0
  assert s["sacrebleu"] > 0.0  # sacreBLEU's default exp smoothing


def _lowercased_bleu_by_hand(hyps, refs, lang="de"):
  """sacremoses + sacreBLEU called directly: the Multi30k papers' recipe."""
  import sacrebleu  # pylint: disable=g-import-not-at-top
  from sacremoses import MosesPunctNormalizer, MosesTokenizer  # pylint: disable=g-import-not-at-top
  norm, tok = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
  prep = lambda line: tok.tokenize(norm.normalize(line.lower()),
                                   return_str=True, escape=False)
  return sacrebleu.corpus_bleu(
      [prep(h) for h in hyps], [[prep(r) for r in refs]], tokenize="none",
      smooth_method="none", force=True).score


def test_lowercased_moses_bleu_multi30k():
  # Case, punctuation (« », „ “, ’) and attached commas/periods differ between
  # hypothesis and reference; lowercasing + normalization + tokenization make
  # them the same tokens.
  hyps = ["Ein Mann, der „Gitarre“ spielt.", "Zwei HUNDE rennen im Schnee!",
          "Eine Frau mit rotem Hut sitzt auf der Bank."]
  refs = ["ein mann , der \"gitarre\" spielt .", "zwei hunde laufen im schnee !",
          "Eine Frau mit einem roten Hut sitzt auf einer Bank."]
  s = evaluation.evaluate_translations(hyps, refs)
  expected = _lowercased_bleu_by_hand(hyps, refs)
  assert s["bleu_lc_tok"] == pytest.approx(expected, abs=1e-9)
  # By hand: sentence 1 is identical after preprocessing (9 tokens):
  # 9/9, 8/8, 7/7, 6/6; sentence 2 (6 tokens, "rennen" != "laufen"):
  # 5/6, 3/5, 1/4, 0/3; sentence 3 (10 tokens vs 11): 8/10, 5/9, 2/8, 0/7.
  # p = 22/25, 16/22, 10/19, 6/16 (product 12/95); c = 25, r = 26.
  by_hand = 100 * math.exp(1 - 26 / 25) * (12 / 95) ** 0.25
  assert s["bleu_lc_tok"] == pytest.approx(by_hand, abs=1e-9)
  assert evaluation.tokenize_lowercased(hyps[0]) == (
      'ein mann , der " gitarre " spielt .')
  # Dropping the lowercasing or the tokenization changes the score.
  plain = evaluation.sacrebleu.corpus_bleu(
      [h.lower() for h in hyps], [[r.lower() for r in refs]],
      tokenize="none", smooth_method="none", force=True).score
  cased = evaluation.sacrebleu.corpus_bleu(
      [evaluation.tokenize_lowercased(h) for h in hyps],
      [[evaluation.moses_tokenize(r) for r in refs]], tokenize="none",
      smooth_method="none", force=True).score
  assert expected > plain + 10 and expected > cased + 10
  assert "case:lc" in s["bleu_lc_tok_signature"]
  assert "moses-norm-punct" in s["bleu_lc_tok_signature"]
  report = evaluation.format_scores(s)
  assert f"{evaluation.LOWERCASED_LABEL}: {s['bleu_lc_tok']:.2f}" in report
  assert "Multi30k" in evaluation.LOWERCASED_LABEL
  # sacreBLEU (cased, 13a) stays the first, primary line.
  assert report.splitlines()[0].startswith(evaluation.SACREBLEU_LABEL)


def test_ref_count_mismatch_api():
  with pytest.raises(ValueError, match="2 lines.*1 lines"):
    evaluation.evaluate_translations(["a", "b"], ["a"])


def test_file_errors(tmp_path):
  hyp = tmp_path / "hyp.txt"
  ref = tmp_path / "ref.txt"
  hyp.write_text("a b c\nd e f\n", encoding="utf-8")
  ref.write_text("a b c\n", encoding="utf-8")
  with pytest.raises(ValueError) as e:
    evaluation.evaluate_files(str(hyp), [str(ref)])
  msg = str(e.value)
  assert str(hyp) in msg and str(ref) in msg
  assert "2 lines" in msg and "1 lines" in msg
  with pytest.raises(errors.MissingDataError, match="missing.txt"):
    evaluation.evaluate_files(str(hyp), [str(tmp_path / "missing.txt")])


def _run_cli(*args):
  return subprocess.run(
      [sys.executable, "-m", "t2t_repro.evaluate", *args],
      capture_output=True, text=True, timeout=120, check=False)


def test_cli(tmp_path):
  hyp = tmp_path / "hyp.txt"
  ref1 = tmp_path / "ref1.txt"
  ref2 = tmp_path / "ref2.txt"
  hyp.write_text("the cat is on the mat\nhe reads a good book\n",
                 encoding="utf-8")
  ref1.write_text("the cat sat on the mat\nhe reads a good book today\n",
                  encoding="utf-8")
  ref2.write_text("a cat is on the mat\nhe reads a book\n", encoding="utf-8")
  out = _run_cli(f"--hyp={hyp}", f"--ref={ref1}", f"--ref={ref2}",
                 "--tgt_lang=de")
  assert out.returncode == 0, out.stderr
  assert "sacreBLEU (primary" in out.stdout
  assert "nrefs:2|case:mixed|eff:no|tok:13a" in out.stdout
  assert "chrF:" in out.stdout
  assert evaluation.PAPER_LABEL in out.stdout
  assert evaluation.LOWERCASED_LABEL in out.stdout
  assert "references per sentence: 2" in out.stdout

  out = _run_cli(f"--hyp={hyp}", f"--ref={tmp_path / 'nope.txt'}")
  assert out.returncode != 0
  assert "nope.txt: file does not exist" in out.stderr
  assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def newstest_de(shared_data_dir):
  path = os.path.join(shared_data_dir, "wmt14", "newstest2014-full.en-de.de")
  if not os.path.exists(path):
    pytest.skip(f"{path} not available")
  return fileio.read_lines(path)


def test_real_newstest2014_self_is_100(newstest_de):
  assert len(newstest_de) == 3003
  s = evaluation.evaluate_translations(newstest_de, newstest_de)
  assert s["sacrebleu"] == pytest.approx(100.0)
  assert s["chrf"] == pytest.approx(100.0)
  assert s["bleu_tok_compound"] == pytest.approx(100.0)


def test_real_newstest2014_drop_last_word(newstest_de):
  perturbed = [" ".join(line.split()[:-1]) for line in newstest_de]
  s = evaluation.evaluate_translations(perturbed, [newstest_de])
  # Each hypothesis is a prefix of its reference (up to the cut last word), so
  # BLEU falls mostly through the brevity penalty: ~10% fewer tokens.
  for key in ("sacrebleu", "bleu_tok_compound"):
    assert 80.0 < s[key] < 95.0, (key, s[key])
  assert 85.0 < s["chrf"] < 99.0
  # The last word's token (or its trailing punctuation) is gone everywhere,
  # so the perturbation costs more than 5 points on every metric.
  assert s["sacrebleu"] < 95.0 and s["chrf"] < 95.0
