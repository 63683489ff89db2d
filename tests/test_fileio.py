"""t2t_repro.fileio: the one line reader and the one atomic writer."""

import errno
import json
import os

import pytest

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.data import text_files


def test_read_lines_splits_on_newline_only(tmp_path):
  path = tmp_path / "x.txt"
  path.write_bytes("\ufeffa\u2028b\r\nc\x0bd\n\ne".encode("utf-8"))
  assert fileio.read_lines(str(path)) == ["a\u2028b", "c\x0bd", "", "e"]
  assert text_files.read_lines is fileio.read_lines  # one reader


def test_read_lines_errors_name_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.txt: file does not exist") as e:
    fileio.read_lines(str(tmp_path / "nope.txt"))
  assert isinstance(e.value, ValueError) and isinstance(e.value, errors.DataError)
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"ok\nok\n\xff\n")
  with pytest.raises(errors.EncodingError, match=r"bad.txt:3: invalid UTF-8 \(byte 0xff at byte offset 6"):
    fileio.read_lines(str(bad))


def test_atomic_writers_replace_and_leave_no_temporary(tmp_path):
  path = str(tmp_path / "sub" / "out.txt")
  fileio.write_lines(path, ["one", "two"])
  fileio.write_lines(path, ["three"])
  assert fileio.read_lines(path) == ["three"]
  fileio.write_json(str(tmp_path / "v.json"), {"b": 1, "a": [1, 2]})
  with open(tmp_path / "v.json", encoding="utf-8") as f:
    assert json.load(f) == {"a": [1, 2], "b": 1}
  assert sorted(os.listdir(tmp_path)) == ["sub", "v.json"]
  assert os.listdir(tmp_path / "sub") == ["out.txt"]


def test_failed_write_keeps_the_old_file(tmp_path):
  path = str(tmp_path / "v.json")
  fileio.write_json(path, {"a": 1})
  with pytest.raises(TypeError):
    fileio.write_json(path, {"a": object()})  # not JSON: fails before anything is written
  with open(path, encoding="utf-8") as f:
    assert json.load(f) == {"a": 1}
  assert os.listdir(tmp_path) == ["v.json"]


def test_a_full_disk_or_refused_write_is_one_line_naming_the_output(tmp_path):
  """ENOSPC while the block writes: a DiskFullError naming the output, which is left as it
  was; an error reading another file inside the block is that file's, unchanged."""
  path = str(tmp_path / "out.txt")
  fileio.write_lines(path, ["old"])
  with pytest.raises(errors.DiskFullError) as e:
    with fileio.atomic_writer(path) as f:
      f.write(b"new\n")
      raise OSError(errno.ENOSPC, "No space left on device")
  assert str(e.value) == f"{path}: cannot write it: no space left on device; it is left as it was"
  elsewhere = tmp_path.parent / "input.txt"
  with pytest.raises(PermissionError) as e:
    with fileio.atomic_writer(path):
      raise PermissionError(errno.EACCES, "Permission denied", str(elsewhere))
  assert e.value.filename == str(elsewhere)
  assert fileio.read_lines(path) == ["old"] and os.listdir(tmp_path) == ["out.txt"]
