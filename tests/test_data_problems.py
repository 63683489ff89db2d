"""Tests for t2t_repro.data.problems: the registry, local layouts and errors."""

import os
import shutil

import pytest

from t2t_repro.data import problems, text_files
from t2t_repro.errors import MissingDataError


def test_registry():
  assert problems.list_problems() == [
      "parallel_text", "translate_ende_multi30k", "translate_ende_wmt14",
      "translate_ende_wmt_news", "translate_enfr_wmt14"]
  sizes = {name: problems.get_problem(name, "/x").vocab_size_default
           for name in problems.list_problems()}
  assert sizes["translate_ende_wmt14"] == 37000 and sizes["translate_enfr_wmt14"] == 32000
  assert sizes["translate_ende_wmt_news"] == sizes["translate_ende_multi30k"] == 8000
  enfr = problems.get_problem("translate_enfr_wmt14", "/x")
  assert (enfr.source_lang, enfr.target_lang, enfr.tfds_name) == ("en", "fr", "wmt14_translate/fr-en")
  with pytest.raises(ValueError, match="unknown problem 'nope'.*translate_ende_wmt_news"):
    problems.get_problem("nope")


def test_wmt_news_real_splits(shared_data_dir):
  problem = problems.get_problem("translate_ende_wmt_news", shared_data_dir)
  train = problem.text_pairs("train")
  assert len(train) == 24241 and train.dropped_empty == 0
  assert len(problem.file_pairs("train")) == 9
  assert len(problem.text_pairs("dev")) == 3000 and len(problem.text_pairs("test")) == 3003
  assert problem.source_file("test") == os.path.join(shared_data_dir, "wmt14/newstest2014-full.en-de.en")
  assert problem.target_file("test") == os.path.join(shared_data_dir, "wmt14/newstest2014-full.en-de.de")
  with pytest.raises(ValueError, match="9 file pairs"):
    problem.source_file("train")


def test_multi30k_real_splits(shared_data_dir):
  problem = problems.get_problem("translate_ende_multi30k", shared_data_dir)
  assert problem.splits == ("train", "dev", "test") + problems.MULTI30K_TESTS
  counts = {split: len(problem.text_pairs(split)) for split in problem.splits if split != "train"}
  assert counts == {"dev": 1014, "test": 1000, "test_2016_flickr": 1000, "test_2017_flickr": 1000,
                    "test_2017_mscoco": 461, "test_2018_flickr": 1071}
  assert problem.text_pairs("test").pairs == problem.text_pairs("test_2016_flickr").pairs
  with pytest.raises(MissingDataError, match="has no split 'test_2019'.*test_2017_mscoco"):
    problem.text_pairs("test_2019")


def test_data_dir_from_env_or_error(monkeypatch, shared_data_dir):
  monkeypatch.delenv(problems.DATA_DIR_ENV, raising=False)
  problem = problems.get_problem("translate_ende_multi30k")
  with pytest.raises(MissingDataError, match=r"pass data_dir or set \$T2T_DATA_DIR.*multi30k/val.en"):
    problem.text_pairs("dev")
  monkeypatch.setenv(problems.DATA_DIR_ENV, shared_data_dir)
  assert len(problems.get_problem("translate_ende_multi30k").text_pairs("dev")) == 1014


def test_missing_file_names_path_and_download_command(tmp_path):
  problem = problems.get_problem("translate_ende_wmt_news", str(tmp_path))
  with pytest.raises(MissingDataError) as e:
    problem.text_pairs("dev")
  message = str(e.value)
  assert os.path.join(str(tmp_path), "wmt14/newstest2013.en") in message
  assert f"python -m t2t_repro.download translate_ende_wmt_news --data_dir={tmp_path}" in message


def _wmt14_dir(tmp_path, shared_data_dir):
  """A data dir with newstest2013/2014 and a local training text made of real lines."""
  os.makedirs(tmp_path / "wmt14")
  for name in ("newstest2013.en", "newstest2013.de", "newstest2014-full.en-de.en",
               "newstest2014-full.en-de.de"):
    shutil.copy(os.path.join(shared_data_dir, "wmt14", name), tmp_path / "wmt14" / name)
  return str(tmp_path)


def test_wmt14_local_train_files(tmp_path, shared_data_dir):
  data_dir = _wmt14_dir(tmp_path, shared_data_dir)
  news = os.path.join(shared_data_dir, "wmt_news_other_years")
  for lang in ("en", "de"):
    shutil.copy(os.path.join(news, f"newstest2012.{lang}"),
                os.path.join(data_dir, f"wmt14/train.en-de.{lang}"))
  problem = problems.get_problem("translate_ende_wmt14", data_dir)
  train = problem.text_pairs("train")
  assert train.pairs == text_files.read_parallel(os.path.join(news, "newstest2012.en"),
                                                 os.path.join(news, "newstest2012.de")).pairs
  assert len(problem.text_pairs("dev")) == 3000 and len(problem.text_pairs("test")) == 3003


def test_wmt14_without_train_text_names_local_files_and_tfds(tmp_path, shared_data_dir):
  data_dir = _wmt14_dir(tmp_path, shared_data_dir)
  problem = problems.get_problem("translate_ende_wmt14", data_dir)
  with pytest.raises(MissingDataError) as e:
    problem.text_pairs("train")
  message = str(e.value)
  assert os.path.join(data_dir, "wmt14/train.en-de.en") in message
  assert "wmt14_translate/de-en" in message and os.path.join(data_dir, "tfds") in message
  assert "python -m t2t_repro.download translate_ende_wmt14" in message


def test_parallel_text_files_and_errors(tmp_path, shared_data_dir):
  multi30k = os.path.join(shared_data_dir, "multi30k")
  problem = problems.get_problem(
      "parallel_text", train_src=os.path.join(multi30k, "val.en"),
      train_tgt=os.path.join(multi30k, "val.de"), test_src=os.path.join(multi30k, "test_2017_mscoco.en"),
      test_tgt=os.path.join(multi30k, "test_2017_mscoco.de"), dev_src=None, source_lang="en")
  assert problem.splits == ("test", "train") and problem.source_lang == "en"
  assert len(problem.text_pairs("train")) == 1014 and len(problem.text_pairs("test")) == 461
  with pytest.raises(MissingDataError, match="no split 'dev'.*dev_src and dev_tgt"):
    problem.text_pairs("dev")
  with pytest.raises(ValueError, match="give both dev_src and dev_tgt"):
    problems.get_problem("parallel_text", dev_src="a.en")
  with pytest.raises(ValueError, match="unknown keyword 'train_source'"):
    problems.get_problem("parallel_text", train_source="a.en")
  missing = problems.get_problem("parallel_text", train_src=str(tmp_path / "no.en"),
                                 train_tgt=os.path.join(multi30k, "val.de"))
  with pytest.raises(MissingDataError, match=f"{tmp_path / 'no.en'}.*--train_src"):
    missing.text_pairs("train")


def test_vocab_key_depends_on_user_train_files():
  a = problems.get_problem("parallel_text", train_src="/a.en", train_tgt="/a.de")
  b = problems.get_problem("parallel_text", train_src="/b.en", train_tgt="/b.de")
  assert a.vocab_key != b.vocab_key and a.vocab_key.startswith("parallel_text-")
  assert problems.get_problem("translate_ende_multi30k", "/x").vocab_key == "translate_ende_multi30k"
