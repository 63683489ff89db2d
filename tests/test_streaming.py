"""Streaming translate: line batches as they arrive, and a translation before stdin closes."""

import os
import select
import subprocess
import sys
import threading
import time

import pytest

from model_dir_util import make_model_dir
from t2t_repro import errors
from t2t_repro import streaming

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_line_batches_by_size_and_by_silence():
  read_fd, write_fd = os.pipe()

  def produce():
    os.write(write_fd, b"a\nb\n")
    time.sleep(0.5)  # silence: a, b are yielded without waiting for a third line
    os.write(write_fd, b"".join(b"%d\r\n" % i for i in range(7)) + b"\ntail")
    os.close(write_fd)

  thread = threading.Thread(target=produce)
  thread.start()
  batches = list(streaming.line_batches(read_fd, 3, 0.2))
  thread.join()
  os.close(read_fd)
  assert batches == [["a", "b"], ["0", "1", "2"], ["3", "4", "5"], ["6", "", "tail"]]


def test_line_batches_name_the_bad_line():
  read_fd, write_fd = os.pipe()
  os.write(write_fd, b"ok\n")
  batches = streaming.line_batches(read_fd, 1, 0.1)
  assert next(batches) == ["ok"]
  os.write(write_fd, b"fine\nbad \xff\n")
  os.close(write_fd)
  with pytest.raises(errors.EncodingError, match=r"^<stdin>:3: invalid UTF-8"):
    list(batches)
  os.close(read_fd)


def _read_line(stream, timeout):
  """One line of an unbuffered pipe (`select` sees all that is unread)."""
  assert select.select([stream], [], [], timeout)[0], "no translation within the timeout"
  return stream.readline()


def test_translate_answers_each_line_before_stdin_closes(tmp_path_factory, shared_data_dir):
  model_dir = make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)
  process = subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}", "--n_best=2"],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=_REPO, bufsize=0,
      env=dict(os.environ, PYTHONPATH=_REPO))
  try:
    process.stdin.write(b"A man is riding a bike.\n")
    process.stdin.flush()
    first = [_read_line(process.stdout, 240) for _ in range(2)]  # n_best=2: two lines
    process.stdin.write(b"Two dogs play.\n")
    process.stdin.flush()
    second = [_read_line(process.stdout, 120) for _ in range(2)]
    process.stdin.close()
    assert process.wait(timeout=120) == 0, process.stderr.read()
  finally:
    process.kill()
  assert [line.split(b"\t")[0] for line in first + second] == [b"0", b"0", b"1", b"1"]
  log = process.stderr.read()
  assert log.startswith(b"loading ") and b"\ntranslated 2 lines in " in log
