"""Tests for `python -m t2t_repro.stats` (the command end to end, on real files)."""

import os
import re
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_stats_command_on_parallel_text(shared_data_dir, tmp_path):
  news = os.path.join(shared_data_dir, "wmt_news_other_years")
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.stats", "--problem=parallel_text",
       f"--train_src={news}/newstest2016.en", f"--train_tgt={news}/newstest2016.de",
       f"--dev_src={news}/newstest2015.en", f"--dev_tgt={news}/newstest2015.de",
       "--vocab_size=1000", f"--vocab_dir={tmp_path}", "--batch_tokens=2048",
       "--throughput_epochs=1"],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr
  out = result.stdout
  assert "(1000 pieces)" in out and "batch_tokens 2048 per replica, max_length 256, 42 buckets" in out
  rows = {m.group(1): m.groups()[1:] for m in re.finditer(
      r"^(train|dev)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)$", out, re.M)}
  assert rows["train"][0] == "2999" and rows["dev"][0] == "2169"  # pairs
  assert all(0.8 < float(row[-1]) <= 1.0 for row in rows.values())  # padding efficiency
  assert re.search(r"throughput, training pipeline: first epoch [\d,]+ tokens/s", out)
  assert len([f for f in os.listdir(tmp_path) if f.endswith(".1000.model")]) == 1


def test_stats_throughput_epochs_zero_prints_the_table_and_no_throughput(shared_data_dir, tmp_path):
  """--throughput_epochs=0 means no throughput measurement (it ended in a TypeError
  traceback after the table)."""
  news = os.path.join(shared_data_dir, "wmt_news_other_years")
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.stats", "--problem=parallel_text",
       f"--train_src={news}/newstest2016.en", f"--train_tgt={news}/newstest2016.de",
       "--vocab_size=1000", f"--vocab_dir={tmp_path}", "--throughput_epochs=0"],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr
  assert re.search(r"^train\s+2999\s", result.stdout, re.M)
  assert "throughput, training pipeline" not in result.stdout and "Traceback" not in result.stderr


def test_throughput_needs_an_epoch_after_the_first():
  from t2t_repro.data import stats  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="epochs must be >= 1"):
    stats.throughput([("a", "b")], None, 64, 8, 1, 0)


def test_an_unknown_split_is_refused_before_the_vocabulary_is_learnt(shared_data_dir, tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.stats", "--problem=translate_ende_multi30k",
       f"--data_dir={shared_data_dir}", "--splits=dev,nope", f"--vocab_dir={tmp_path}"],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert (result.returncode, result.stderr.splitlines()[-1:]) == (2, [
      "stats: error: --splits: unknown split 'nope'; the splits of translate_ende_multi30k "
      "are: train, dev, test, test_2016_flickr, test_2017_flickr, test_2017_mscoco, "
      "test_2018_flickr"]), result.stderr[-3000:]
  assert os.listdir(tmp_path) == []
