"""Checkpoints: interrupted writes are cleaned on start, a full disk gives
one clear message, and the earlier checkpoints stay intact; a resume that changes the
update settings goes ahead only with --allow_update_change, and says so."""

import errno
import json
import os
import shutil
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from model_dir_util import HPARAMS, make_trainer_dir
from t2t_repro import errors
from t2t_repro.config.hparams import get_hparams
from t2t_repro.training import checkpoints
from t2t_repro.training.trainer import Trainer, make_strategy


def _leftovers(model_dir):
  """What an interrupted save leaves: a `ckpt-N_temp/` folder and a `_temp` file."""
  os.makedirs(os.path.join(model_dir, "ckpt-9_temp", "part-00000-of-00001"))
  with open(os.path.join(model_dir, "ckpt-9_temp", "part-00000-of-00001", "x.tempstate1"), "wb") as f:
    f.write(b"\0" * 1000)
  with open(os.path.join(model_dir, "ckpt-11_temp_abc.index"), "wb") as f:
    f.write(b"\0" * 24)


def test_remove_partial_checkpoints(tmp_path):
  (tmp_path / "ckpt-3.index").write_bytes(b"keep")
  (tmp_path / "ckpt-3.data-00000-of-00001").write_bytes(b"keep")
  _leftovers(str(tmp_path))
  removed, freed = checkpoints.remove_partial_checkpoints(str(tmp_path))
  assert [os.path.basename(p) for p in removed] == ["ckpt-11_temp_abc.index", "ckpt-9_temp"]
  assert freed == 1024
  assert sorted(os.listdir(tmp_path)) == ["ckpt-3.data-00000-of-00001", "ckpt-3.index"]


def test_disk_full_keeps_earlier_checkpoints(tmp_path, monkeypatch):
  hp = get_hparams("tiny", "vocab_size=40,dropout=0")
  trainer = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  first = trainer.save()
  weights = [w.numpy() for w in trainer.model.weights]
  write = trainer.checkpoint._write  # pylint: disable=protected-access

  def failing_write(prefix, options=None):
    os.makedirs(f"{prefix}_temp/part-00000-of-00001")  # what TF leaves mid-write
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(trainer.checkpoint, "_write", failing_write)
  trainer.optimizer.iterations.assign(5)
  with pytest.raises(errors.DiskFullError) as e:
    trainer.save()
  message = str(e.value)
  assert f"model_dir={tmp_path}" in message and "ckpt-5" in message
  needed = checkpoints.checkpoint_bytes(first)
  assert needed > 100_000 and f"about {needed} bytes" in message
  assert "\n" not in message
  assert not checkpoints.partial_checkpoints(str(tmp_path))
  assert tf.train.latest_checkpoint(str(tmp_path)) == first
  monkeypatch.setattr(trainer.checkpoint, "_write", write)
  again = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  assert again.restore() == first
  for a, b in zip(weights, again.model.weights):
    np.testing.assert_array_equal(a, b.numpy())


def test_resume_removes_leftovers(tmp_path, shared_data_dir):
  """A real resume (`python -m t2t_repro.train`) of a dir with leftovers deletes them: those
  of checkpoint writes, and those of staged writes killed in it (best/, ema/, averaged/, a
  file) and beside it (the model dir itself, killed while being created)."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_trainer_dir(tmp_path / "trained", shared_data_dir), model_dir)
  _leftovers(str(model_dir))
  gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True).stdout.strip()
  token = f"{gone}@{socket.gethostname()}-0123abcd"
  staged = [model_dir / f".{name}.new-{token}" for name in ("best", "ema", "averaged")]
  staged += [model_dir / f"flags.json.tmp-{token}", tmp_path / f".model.new-{token}"]
  for path in staged:
    path.mkdir() if path.name.startswith(".") else path.write_bytes(b"{}")
  # flags.json as runs before the settings were written once recorded them: an "update" block.
  with open(model_dir / "flags.json", "w", encoding="utf-8") as f:
    json.dump({"update": {"accum_steps": 2, "batch_tokens": 2048, "replicas": 1,
                          "mixed_precision": "none"}}, f)
  data = tmp_path / "data.txt"
  data.write_text("a man rides a bike .\ntwo dogs play in the snow .\n" * 20, encoding="utf-8")
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.train", "--hparams=tiny", f"--hparams_override={HPARAMS}",
       "--problem=parallel_text", f"--train_src={data}", f"--train_tgt={data}",
       f"--model_dir={model_dir}", "--train_steps=1", "--eval_every_steps=0",
       "--allow_update_change"],
      capture_output=True, text=True, timeout=600, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "removed 7 leftovers of interrupted writes (1026 bytes)" in result.stderr
  assert not any(path.exists() for path in staged)
  assert "changed update settings: accum_steps: saved 2 vs now 1" in result.stderr
  with open(model_dir / "flags.json", encoding="utf-8") as f:
    flags = json.load(f)
  assert flags["accum_steps"] == 1 and flags["replicas"] == 1 and "update" not in flags
  assert not checkpoints.partial_checkpoints(str(model_dir))
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-1")


def test_checkpoints_after_a_resume_equal_the_uninterrupted_runs(tmp_path):
  """A trainer that saved ckpt-2 and stopped at step 3 (SIGTERM saves the step it stops at),
  restored from ckpt-3, writes a ckpt-4 equal to that of the trainer that wrote ckpt-2 and
  ckpt-4 in one go, in every tensor: save_counter, tf.train.Checkpoint's count of its saves,
  included (a new process restarted it at 1, and the stop's save counted; it is the step)."""
  hp = get_hparams("tiny", "vocab_size=40,dropout=0")

  def save(trainer, step):
    trainer.optimizer.iterations.assign(step)
    return trainer.save()

  keras.utils.set_random_seed(1)
  whole = Trainer(hp, make_strategy("one_device"), str(tmp_path / "whole"))
  for step in (2, 4):
    save(whole, step)
  keras.utils.set_random_seed(1)
  first = Trainer(hp, make_strategy("one_device"), str(tmp_path / "parts"))
  save(first, 2)
  save(first, 3)
  resumed = Trainer(hp, make_strategy("one_device"), str(tmp_path / "parts"))
  assert resumed.restore().endswith("ckpt-3")
  save(resumed, 4)
  readers = [tf.train.load_checkpoint(str(tmp_path / d / "ckpt-4")) for d in ("whole", "parts")]
  names = [n for n in readers[0].get_variable_to_shape_map() if "CHECKPOINTABLE" not in n]
  assert "save_counter/.ATTRIBUTES/VARIABLE_VALUE" in names and len(names) > 100
  assert sorted(names) == sorted(n for n in readers[1].get_variable_to_shape_map()
                                 if "CHECKPOINTABLE" not in n)
  for name in names:
    np.testing.assert_array_equal(readers[0].get_tensor(name), readers[1].get_tensor(name), name)
