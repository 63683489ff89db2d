"""A data folder is read-only input: every command that reads `--data_dir` (or `--ptb_dir`)
leaves it byte for byte as it was, and caches go to the model dir or the user's cache."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LINES = {"train": 3000, "val": 200, "test_2016_flickr": 50}


def _snapshot(folder):
  """{relative path: (size, mtime_ns, mode)} of every file and folder under `folder`."""
  found = {}
  for root, dirs, files in os.walk(folder):
    for name in dirs + files:
      path = os.path.join(root, name)
      info = os.lstat(path)
      found[os.path.relpath(path, folder)] = (info.st_size, info.st_mtime_ns, info.st_mode)
  return found


@pytest.fixture(name="readonly_data")
def fixture_readonly_data(shared_data_dir, tmp_path):
  """A copy of the first lines of Multi30k (train, val, test_2016_flickr) and the PTB sample's
  first 5 files, every file and folder without write bits."""
  data = tmp_path / "data"
  (data / "multi30k").mkdir(parents=True)
  for name, count in _LINES.items():
    for lang in ("en", "de"):
      with open(os.path.join(shared_data_dir, "multi30k", f"{name}.{lang}"), encoding="utf-8") as f:
        lines = [next(f) for _ in range(count)]
      (data / "multi30k" / f"{name}.{lang}").write_text("".join(lines), encoding="utf-8")
  ptb = data / "ptb"
  ptb.mkdir()
  for name in sorted(os.listdir(os.path.join(shared_data_dir, "ptb_sample", "combined")))[:5]:
    shutil.copy(os.path.join(shared_data_dir, "ptb_sample", "combined", name), ptb)
  for root, dirs, files in os.walk(data):
    for name in dirs + files:
      path = os.path.join(root, name)
      os.chmod(path, os.stat(path).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
  os.chmod(data, 0o555)
  yield data
  for root, dirs, _ in os.walk(data):
    for name in dirs:
      os.chmod(os.path.join(root, name), 0o755)
  os.chmod(data, 0o755)


def _run(args, env):
  result = subprocess.run([sys.executable, "-m", *args], cwd=_REPO, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def test_no_command_writes_into_the_data_folder(readonly_data, tmp_path):
  """train, validate, stats and parse's prepare on a read-only data copy (as root, the
  mode bits alone would not stop a write: the folder's listing, sizes and times are
  compared). The vocabulary lands in the model dir (train) and in $XDG_CACHE_HOME (stats)."""
  before = _snapshot(readonly_data)
  cache = tmp_path / "cache"
  env = dict(os.environ, XDG_CACHE_HOME=str(cache), TF_CPP_MIN_LOG_LEVEL="2")
  model_dir = tmp_path / "model"
  common = ["--problem=translate_ende_multi30k", f"--data_dir={readonly_data}"]
  _run(["t2t_repro.train", "--hparams=tiny", *common, f"--model_dir={model_dir}",
        "--hparams_override=vocab_size=500", "--train_steps=2", "--eval_every_steps=0",
        "--test_bleu_lines=0", "--dev_bleu_lines=0"], env)
  assert (model_dir / "vocab.model").exists()
  _run(["t2t_repro.validate", f"--model_dir={model_dir}", *common, "--split=dev"], env)
  stats = _run(["t2t_repro.stats", *common, "--vocab_size=500", "--splits=train,dev",
                "--throughput_epochs=0"], env)
  assert str(cache / "t2t_repro") in stats.stdout
  assert any(name.endswith(".500.model") for name in os.listdir(cache / "t2t_repro"))
  _run(["t2t_repro.parse", "--mode=prepare", f"--ptb_dir={readonly_data / 'ptb'}",
        f"--output_dir={tmp_path / 'parse'}", "--splits=train=1-2,dev=3-3,test=4-4"], env)
  assert _snapshot(readonly_data) == before
