"""Tests for t2t_repro.parsing.evalb (EVALB semantics) and tools/parse.py."""

import dataclasses
import functools
import json
import os
import subprocess
import sys

import nltk
import pytest

from conftest import tool_path
from t2t_repro import errors
from t2t_repro.parsing import evalb
from t2t_repro.parsing import pipeline, prepare, treebank, trees

PARSE_TOOL = tool_path("parse")




def _t(text):
  return nltk.Tree.fromstring(text)


def _score(gold, test, params=evalb.COLLINS):
  if isinstance(gold, str):
    gold, test = [gold], [test]
  return evalb.evaluate([_t(g) for g in gold], [_t(t) for t in test], params)


# Gold brackets after deleting the "." word and the TOP bracket:
#   S(0,6) NP(0,2) VP(2,6) PP(3,6) NP(4,6)  -> 5 brackets over 6 kept words.
GOLD = ("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) "
        "(NP (DT the) (NN mat)))) (. .)))")
# One wrong label: PP(3,6) -> SBAR(3,6); test brackets S NP VP SBAR NP.
WRONG_LABEL = ("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (SBAR (IN on) "
               "(NP (DT the) (NN mat)))) (. .)))")
# Wrong attachment: test brackets S(0,6) NP(0,3) PP(3,6) NP(4,6).
WRONG_SPAN = ("(TOP (S (NP (DT The) (NN cat) (VBD sat)) (PP (IN on) "
              "(NP (DT the) (NN mat))) (. .)))")


# ---------------------------------------------------------------- parameters


def test_load_collins_prm(shared_data_dir):
  path = os.path.join(shared_data_dir, "ptb_sample", "evalb", "COLLINS.prm")
  if not os.path.exists(path):
    pytest.skip(f"{path} is absent")
  params = evalb.load_prm(path)
  assert params == evalb.COLLINS
  assert params.max_error == 10 and params.cutoff_len == 40 and params.labeled
  assert params.delete_labels == ("TOP", "-NONE-", ",", ":", "``", "''", ".")
  assert params.delete_labels_for_length == ("-NONE-",)
  assert params.eq_labels == (("ADVP", "PRT"),)


def test_parse_prm_details():
  text = ("# comment\nLABELED 0\nCUTOFF_LEN 100\nDELETE_LABEL TOP\n"
          "EQ_WORD colour color\nX\n")
  params = evalb.parse_prm(text)
  assert not params.labeled and params.cutoff_len == 100
  assert params.max_error == 10  # evalb.c default
  assert params.delete_labels == ("TOP",)
  assert params.word_equal("color", "colour")
  with pytest.warns(UserWarning):
    evalb.parse_prm("NO_SUCH_KEY 1\n")
  with pytest.raises(ValueError):
    evalb.parse_prm("EQ_LABEL ADVP\n")


# ---------------------------------------------------------------- hand-worked


def test_identical_trees_are_100():
  result = _score(GOLD, GOLD)
  for totals in (result.all, result.cutoff):
    assert (totals.recall, totals.precision, totals.f1) == (100, 100, 100)
    assert totals.complete_match == 100 and totals.tagging_accuracy == 100
  assert result.all.gold_brackets == 5 and result.all.words == 6


def test_one_wrong_label():
  # matched 4 (S NP VP NP), gold 5, test 5:
  # R = 4/5 = 80, P = 4/5 = 80, F = 80; not a complete match; no crossing.
  r = _score(GOLD, WRONG_LABEL).all
  assert (r.matched, r.gold_brackets, r.test_brackets) == (4, 5, 5)
  assert r.recall == pytest.approx(80) and r.precision == pytest.approx(80)
  assert r.f1 == pytest.approx(80)
  assert r.complete_match == 0 and r.crossing == 0


def test_one_wrong_span():
  # matched 3 (S(0,6) PP(3,6) NP(4,6)), gold 5, test 4:
  # R = 3/5 = 60, P = 3/4 = 75, F = 2*60*75/135 = 66.67.
  # NP(0,3) crosses gold VP(2,6): 1 crossing bracket.
  r = _score(GOLD, WRONG_SPAN).all
  assert (r.matched, r.gold_brackets, r.test_brackets) == (3, 5, 4)
  assert r.recall == pytest.approx(60) and r.precision == pytest.approx(75)
  assert r.f1 == pytest.approx(200 / 3)
  assert r.crossing == 1 and r.no_crossing == 0
  assert r.two_or_less_crossing == 100


def test_micro_average_over_sentences():
  # matched 4 + 3 = 7, gold 5 + 5 = 10, test 5 + 4 = 9:
  # R = 70, P = 7/9 = 77.78, F = 2*70*77.78/147.78 = 73.68.
  r = _score([GOLD, GOLD], [WRONG_LABEL, WRONG_SPAN]).all
  assert r.recall == pytest.approx(70)
  assert r.precision == pytest.approx(700 / 9)
  assert r.f1 == pytest.approx(2 * 70 * (700 / 9) / (70 + 700 / 9))
  assert r.average_crossing == pytest.approx(0.5)


def test_tagging_accuracy_is_separate_from_brackets():
  # "cat" NN -> NNS: 5 of 6 kept words (the "." is not counted) = 83.33;
  # the brackets are unchanged.
  r = _score(GOLD, GOLD.replace("(NN cat)", "(NNS cat)")).all
  assert r.tagging_accuracy == pytest.approx(500 / 6)
  assert r.f1 == 100 and r.words == 6


def test_punctuation_is_ignored():
  # "." attached inside VP instead of S, and tagged "," instead of ".":
  # both trees lose the word, so the spans are the same.
  moved = ("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) "
           "(NP (DT the) (NN mat))) (, .))))")
  r = _score(GOLD, moved).all
  assert (r.recall, r.precision, r.tagging_accuracy) == (100, 100, 100)
  # A phrase over punctuation only has an empty span and is deleted.
  extra = GOLD.replace("(. .)", "(X (. .))")
  assert _score(GOLD, extra).all.test_brackets == 5


def test_punctuation_with_a_word_tag_is_a_length_error():
  r = _score(GOLD, GOLD.replace("(. .)", "(NN .)"))
  assert r.all.error_sentences == 1 and r.all.valid_sentences == 0
  assert "Length unmatch (6|7)" in r.sentences[0].message


def test_advp_equals_prt():
  gold = "(TOP (S (NP (PRP He)) (VP (VBD gave) (PRT (RP up)))))"
  test = "(TOP (S (NP (PRP He)) (VP (VBD gave) (ADVP (RP up)))))"
  assert _score(gold, test).all.f1 == 100
  assert _score(test, gold).all.f1 == 100  # non-directional
  no_eq = dataclasses.replace(evalb.COLLINS, eq_labels=())
  # S NP VP match, PRT vs ADVP does not: 3/4.
  assert _score(gold, test, no_eq).all.recall == pytest.approx(75)


def test_unlabeled():
  unlabeled = dataclasses.replace(evalb.COLLINS, labeled=False)
  assert _score(GOLD, WRONG_LABEL, unlabeled).all.f1 == 100
  assert _score(GOLD, WRONG_SPAN, unlabeled).all.recall == pytest.approx(60)


def test_brackets_are_a_multiset():
  # Gold: S(0,3) NP(0,2) NP(0,2) VP(2,3); test has one NP(0,2).
  gold = "(TOP (S (NP (NP (DT the) (NN man))) (VP (VBD left))))"
  test = "(TOP (S (NP (DT the) (NN man)) (VP (VBD left))))"
  r = _score(gold, test).all
  assert (r.matched, r.gold_brackets, r.test_brackets) == (3, 4, 3)
  assert r.recall == pytest.approx(75) and r.precision == 100
  r = _score(test, gold).all
  assert r.recall == 100 and r.precision == pytest.approx(75)


def test_function_tags_traces_and_root():
  # README §[6].3 example: traces removed with the phrases over them only;
  # function tags cut; TOP deleted; an unlabelled root would be a bracket.
  gold = ("(TOP (S (NP-SBJ-1 (NNP He)) (VP (VBD reported) (SBAR (-NONE- 0) "
          "(S (-NONE- *T*-1)))) (. .)))")
  test = "(TOP (S (NP (NNP He)) (VP (VBD reported)) (. .)))"
  r = _score(gold, test)
  assert r.all.gold_brackets == 3 and r.all.f1 == 100
  assert r.sentences[0].length == 3  # -NONE- words not counted, "." is
  test_tags = "(TOP (S (NP-SBJ (NNP He)) (VP=2 (VBD reported)) (. .)))"
  assert _score(gold, test_tags).all.f1 == 100


def test_cutoff_length_counts_punctuation_not_traces():
  def flat(n_words, extra):
    return "(TOP (S " + " ".join(f"(NN w{i})" for i in range(n_words)) + \
        " " + extra + "))"

  long_punct = flat(39, "(, ,) (. .)")  # length 41: punctuation counts
  traces = flat(40, "(-NONE- *) (-NONE- *T*-1)")  # length 40
  r = _score([long_punct, traces], [long_punct, traces])
  assert [s.length for s in r.sentences] == [41, 40]
  assert r.all.sentences == 2 and r.cutoff.sentences == 1
  assert r.cutoff.words == 40


def test_skip_and_error_sentences():
  gold = [GOLD, GOLD, GOLD, GOLD]
  test = ["(TOP )", "(TOP (. .))", GOLD.replace("cat", "dog"), WRONG_SPAN]
  r = _score(gold, test)
  assert [s.status for s in r.sentences] == [2, 2, 1, 0]
  assert (r.all.sentences, r.all.skip_sentences, r.all.error_sentences,
          r.all.valid_sentences) == (4, 2, 1, 1)
  assert "Words unmatch (cat|dog)" in r.sentences[2].message
  # Skipped and error sentences add no brackets: only WRONG_SPAN counts.
  assert r.all.recall == pytest.approx(60) and r.all.precision == 75


def test_max_error_aborts_like_evalb():
  bad = GOLD.replace("cat", "dog")
  params = dataclasses.replace(evalb.COLLINS, max_error=1)
  # evalb.c exits at the error found when more than MAX_ERROR were counted:
  # the 3rd one for MAX_ERROR 1.
  assert _score([GOLD] * 2, [bad] * 2, params).all.error_sentences == 2
  with pytest.raises(evalb.EvalbAbort):
    _score([GOLD] * 3, [bad] * 3, params)
  with pytest.raises(ValueError):
    evalb.evaluate([_t(GOLD)], [], evalb.COLLINS)


def test_format_report():
  text = evalb.format_report(_score(GOLD, WRONG_LABEL), per_sentence=True)
  assert "Bracketing FMeasure       =  80.00" in text
  assert "-- All --" in text and "-- len<=40 --" in text
  assert "Tagging accuracy          = 100.00" in text
  summary = evalb.as_dict(_score(GOLD, WRONG_LABEL))
  assert summary["len<=40"]["f1"] == pytest.approx(80)


# ---------------------------------------------------------------- real data


@functools.lru_cache(maxsize=1)
def _real_trees(ptb_dir):
  # wsj_0001-0050 (999 trees) keeps the test fast; test_parsing_trees.py
  # covers all 3,914 trees.
  raw = treebank.read_treebank(ptb_dir,
                            [f"wsj_{i:04d}.mrg" for i in range(1, 51)])
  return raw, [trees.clean(t) for t in raw]


def test_real_raw_gold_against_cleaned_is_100(ptb_dir):
  raw, cleaned = _real_trees(ptb_dir)
  # EVALB removes -NONE- and function tags itself, so raw and cleaned gold
  # trees give the same counts.
  a = evalb.evaluate(raw, cleaned)
  b = evalb.evaluate(cleaned, cleaned)
  assert evalb.as_dict(a) == evalb.as_dict(b)
  assert a.all.valid_sentences == len(raw) and a.all.f1 == 100
  assert a.all.gold_brackets > 15000
  assert 0 < len(raw) - a.cutoff.sentences < 0.2 * len(raw)


def test_real_placeholder_tags_need_restoring(ptb_dir):
  _, cleaned = _real_trees(ptb_dir)
  sample = cleaned[:200]
  xx = [trees.placeholder_tree(t) for t in sample]
  # XX-tagged punctuation is not deleted: EVALB stops on length errors.
  with pytest.raises(evalb.EvalbAbort):
    evalb.evaluate(sample, xx)
  restored = [trees.restore_tags(x, trees.pos_tags(g), only="XX")
              for g, x in zip(sample, xx)]
  assert evalb.evaluate(sample, restored).all.f1 == 100


# ---------------------------------------------------------------- the tool


def test_tool_prepare_delinearize_evaluate(ptb_dir, tmp_path):
  out = str(tmp_path)
  stats = prepare.prepare(ptb_dir, out, splits={"train": (1, 3), "dev": (4, 4),
                                             "test": (5, 5)})
  assert stats["splits"]["train"]["files"] == 3
  for name in ("train", "dev", "test"):
    lines = {ext: open(os.path.join(out, f"{name}.{ext}")).read().split("\n")
             for ext in ("src", "tgt", "tree")}
    assert len(lines["src"]) == len(lines["tgt"]) == len(lines["tree"])
    assert stats["splits"][name]["sentences"] == len(lines["src"]) - 1
  assert json.load(open(os.path.join(out, "stats.json"))) == stats
  symbols = open(os.path.join(out, "symbols.txt")).read().split()
  assert "(NP" in symbols and ")NP" in symbols

  # Perfect predictions, then a broken one.
  predictions = open(os.path.join(out, "test.tgt")).read().split("\n")[:-1]
  predictions[0] = " ".join(predictions[0].split()[1:])  # S bracket lost
  with open(os.path.join(out, "pred.tgt"), "w") as f:
    f.write("\n".join(predictions) + "\n")
  counts = pipeline.delinearize_files(os.path.join(out, "test.src"),
                                      os.path.join(out, "pred.tgt"),
                                      os.path.join(out, "pred.tree"))
  assert counts["well_formed"] == counts["sentences"] - 1

  proc = subprocess.run(
      [sys.executable, PARSE_TOOL, "--mode=evaluate",
       f"--gold={out}/test.tree", f"--test={out}/pred.tree",
       f"--output_json={out}/scores.json"],
      capture_output=True, text=True, check=True)
  assert "Bracketing FMeasure" in proc.stdout
  scores = json.load(open(os.path.join(out, "scores.json")))
  assert scores["all"]["valid_sentences"] == counts["sentences"]
  assert 90 < scores["all"]["f1"] < 100


def test_several_top_level_brackets_are_one_sentence(tmp_path):
  """evalb.c reads `(P this) (Q is)` as one sentence of 2 words; so does read_tree_lines."""
  gold, test = tmp_path / "gold", tmp_path / "test"
  gold.write_text("(TOP (S (P this) (Q is)))\n(S (NP (DT a) (NN dog)))\n", encoding="utf-8")
  test.write_text("(P this) (Q is)\n(S (NP (DT a) (NN dog)))\n", encoding="utf-8")
  parsed = treebank.read_tree_lines(str(test))
  assert parsed[0] == _t("(TOP (P this) (Q is))")
  result = evalb.evaluate(treebank.read_tree_lines(str(gold)), parsed)
  first = result.sentences[0]
  assert first.status == evalb.STATUS_OK and first.length == 2
  assert (first.gold_brackets, first.test_brackets, first.matched) == (1, 0, 0)  # S vs none
  assert result.all.complete_match == 50.0


def test_reader_errors_name_file_and_line(tmp_path):
  path = tmp_path / "test.tree"
  path.write_text("(S (P this))\n(S (P this)\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=rf"{path}:2: 1 bracket\(s\) left open"):
    treebank.read_tree_lines(str(path))
  path.write_bytes(b"(S (P th\xffis))\n")
  with pytest.raises(errors.EncodingError, match=rf"{path}:1: invalid UTF-8"):
    treebank.read_tree_lines(str(path))
  prm = tmp_path / "x.prm"
  prm.write_text("MAX_ERROR ten\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=rf"{prm}:1: MAX_ERROR needs an integer"):
    evalb.load_prm(str(prm))
