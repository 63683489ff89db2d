"""Ctrl-C at any moment: every phase of a training run can be interrupted.

Setup (checks, vocabulary learning, model building) and dev evaluation end at once
on SIGINT/SIGTERM, even inside a long native call, and leave the model dir absent
or complete; the training steps save first (tested in test_train_cli.py).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def _python(code):
  return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=_ENV)


def _wait_for(proc, stream, text, timeout=600):
  """Reads `stream` line by line until `text` appears; returns what was read."""
  seen, deadline = [], time.time() + timeout
  for line in stream:
    seen.append(line)
    if text in line:
      return "".join(seen)
    assert time.time() < deadline, "".join(seen)[-3000:]
  raise AssertionError(f"{text!r} never appeared (exit {proc.wait()}): {''.join(seen)[-3000:]}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_exit_at_once_ends_a_native_call(sig):
  """Inside exit_at_once a signal ends the process even while C code runs (a Python
  handler would wait for the call to return: here a 60 s `sleep` in libc via ctypes)."""
  proc = _python("""
      import ctypes
      from t2t_repro.training.signals import exit_at_once
      with exit_at_once():
        print("ready", flush=True)
        ctypes.CDLL(None).sleep(60)
      """)
  _wait_for(proc, proc.stdout, "ready")
  start = time.time()
  proc.send_signal(sig)
  assert proc.wait(timeout=30) == -sig
  assert time.time() - start < 30


def test_stop_signal_only_sets_a_flag():
  proc = _python("""
      import os, signal
      from t2t_repro.training.signals import StopSignal
      with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
      print("received", stop.received)
      """)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 0, err
  assert out.strip() == "received SIGINT"


def _train(tmp_path, model_dir, dev_lines):
  words = "a man rides a bike in the snow while two dogs play with a red ball".split()
  text = "\n".join(" ".join(words[(i + j) % len(words)] for j in range(12)) for i in range(300))
  (tmp_path / "train.txt").write_text(text + "\n", encoding="utf-8")
  long = "\n".join(" ".join(words[(i + j) % len(words)] for j in range(120)) for i in range(dev_lines))
  (tmp_path / "dev.txt").write_text(long + "\n", encoding="utf-8")
  return subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.train", "--hparams=tiny", "--problem=parallel_text",
       "--hparams_override=vocab_size=60,batch_tokens=512,max_length=200",
       f"--train_src={tmp_path / 'train.txt'}", f"--train_tgt={tmp_path / 'train.txt'}",
       f"--dev_src={tmp_path / 'dev.txt'}", f"--dev_tgt={tmp_path / 'dev.txt'}",
       f"--model_dir={model_dir}", "--dev_bleu_lines=0", "--dev_samples=0", "--train_steps=1000",
       "--eval_at_start"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_ENV)


def test_sigterm_during_the_first_dev_evaluation(tmp_path):
  """The run ends within seconds, not after the evaluation; the model dir is complete
  (hparams, flags, vocab) with no partial files, so the same command resumes."""
  model_dir = tmp_path / "model"
  proc = _train(tmp_path, model_dir, dev_lines=4000)
  _wait_for(proc, proc.stderr, "dev evaluation at step 0")
  start = time.time()
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=60) == -signal.SIGTERM
  assert time.time() - start < 20
  names = sorted(os.listdir(model_dir))
  assert [n for n in names if not n.startswith("corpus.")] == [
      "dev", "flags.json", "hparams.json", "projector_config.pbtxt", "train", "vocab.model",
      "vocab.tsv"]
  assert all(n.endswith(".json") and "tmp" not in n for n in names if n.startswith("corpus."))


def test_sigint_during_setup_leaves_no_model_dir(tmp_path):
  """Interrupted before its model dir is written, a run leaves no model dir (it used to
  create the folder first) and prints no traceback."""
  model_dir = tmp_path / "model"
  proc = _train(tmp_path, model_dir, dev_lines=10)
  _wait_for(proc, proc.stderr, "reading the parallel_text data")  # setup before the model dir
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=60)
  assert proc.returncode == -signal.SIGINT, err[-3000:]
  assert "Traceback" not in err
  assert not model_dir.exists()
  # Only the model dir's lock (`writer_lock`), which the process ended at once could not
  # remove; the next writer takes it over with one warning line (test_writer_lock.py).
  assert [p for p in os.listdir(tmp_path) if p.startswith(".model")] == [".model.lock"]
