"""Tests for t2t_repro.data.text_files: reading and validating parallel text."""

import os

import pytest

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.data import text_files


@pytest.fixture(scope="module")
def real_lines(shared_data_dir):
  """The first 50 lines of Multi30k val (en, de), read naively."""
  def head(lang):
    with open(os.path.join(shared_data_dir, f"multi30k/val.{lang}"), encoding="utf-8") as f:
      return [next(f).rstrip("\n") for _ in range(50)]
  return head("en"), head("de")


def _write(path, lines, ending="\n"):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("".join(line + ending for line in lines))
  return str(path)


def test_reads_real_files(shared_data_dir):
  src = os.path.join(shared_data_dir, "multi30k/val.en")
  tgt = os.path.join(shared_data_dir, "multi30k/val.de")
  text = text_files.read_parallel(src, tgt)
  assert len(text) == 1014 and text.dropped_empty == 0
  with open(src, encoding="utf-8") as f:
    assert text.sources == [line.strip() for line in f]
  assert src in text.origin and tgt in text.origin


def test_line_count_mismatch_names_both_files_and_counts(tmp_path, real_lines):
  en, de = real_lines
  src, tgt = _write(tmp_path / "a.en", en), _write(tmp_path / "a.de", de[:-1])
  with pytest.raises(text_files.LineCountError) as e:
    text_files.read_parallel(src, tgt)
  message = str(e.value)
  assert src in message and tgt in message and "50 lines" in message and "49 lines" in message
  assert isinstance(e.value, ValueError)


def test_invalid_utf8_names_file_and_line(tmp_path, real_lines):
  en, de = real_lines
  src = _write(tmp_path / "a.en", en)
  tgt = tmp_path / "a.de"
  data = "".join(line + "\n" for line in de).encode("utf-8").split(b"\n")
  data[6] = data[6][:10] + b"\xff" + data[6][10:]  # line 7
  tgt.write_bytes(b"\n".join(data))
  with pytest.raises(errors.EncodingError, match=rf"{tgt}:7: invalid UTF-8 \(byte 0xff"):
    text_files.read_parallel(src, str(tgt))


def test_missing_file_is_named(tmp_path, real_lines):
  src = _write(tmp_path / "a.en", real_lines[0])
  with pytest.raises(errors.MissingDataError, match=str(tmp_path / "nope.de")):
    text_files.read_parallel(src, str(tmp_path / "nope.de"))


def test_empty_lines_dropped_counted_and_pairs_stay_aligned(tmp_path, real_lines):
  en, de = list(real_lines[0]), list(real_lines[1])
  en[3], de[10], en[20], de[20] = "", "   ", "", ""  # one side empty twice, both sides once
  text = text_files.read_parallel(_write(tmp_path / "a.en", en), _write(tmp_path / "a.de", de))
  assert text.dropped_empty == 3 and len(text) == 47
  expected = [(s.strip(), t.strip()) for i, (s, t) in enumerate(zip(*real_lines))
              if i not in (3, 10, 20)]
  assert text.pairs == expected


def test_line_endings_bom_and_unicode_separators(tmp_path):
  lines = ["a\u2028b", "c\x0bd", "x\u00a0y  z"]  # never split inside a line
  path = tmp_path / "f.txt"
  path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8"))  # BOM, CRLF, no final EOL
  assert text_files.read_lines(str(path)) == lines


def test_read_parallel_files_concatenates_in_order(shared_data_dir):
  pairs = [(os.path.join(shared_data_dir, f"multi30k/{name}.en"),
            os.path.join(shared_data_dir, f"multi30k/{name}.de"))
           for name in ("test_2017_mscoco", "val")]
  text = text_files.read_parallel_files(pairs)
  assert len(text) == 461 + 1014
  assert text.pairs[461] == text_files.read_parallel(*pairs[1]).pairs[0]


def test_write_atomic_replaces(tmp_path):
  path = str(tmp_path / "sub" / "m.model")
  fileio.write_atomic(path, b"one")
  fileio.write_atomic(path, b"two")
  assert open(path, "rb").read() == b"two" and os.listdir(tmp_path / "sub") == ["m.model"]


def test_lone_carriage_return_does_not_split(tmp_path):
  """'a\\rb' is one line (stdin and sacreBLEU read 2 lines here, universal newlines read 3)."""
  path = tmp_path / "f.txt"
  path.write_bytes(b"a\rb\nc\r\n")
  assert text_files.read_lines(str(path)) == ["a\rb", "c"]
  assert fileio.decode_lines(b"a\rb\nc\n", "<stdin>") == ["a\rb", "c"]


def test_nul_byte_is_an_error_naming_the_line(tmp_path):
  path = tmp_path / "f.txt"
  path.write_bytes("one\ntwo\n".encode("utf-16-le"))  # valid UTF-8 bytes, every other one NUL
  with pytest.raises(errors.EncodingError, match=r"f\.txt:1: NUL byte at byte offset 1"):
    text_files.read_lines(str(path))
  with pytest.raises(errors.EncodingError, match=r"<stdin>:2: NUL"):
    fileio.decode_lines(b"a\nb\0\n", "<stdin>")


def test_directory_is_named(tmp_path):
  with pytest.raises(errors.MissingDataError, match="is a directory"):
    text_files.read_lines(str(tmp_path))


def test_every_input_path_has_the_same_rules(tmp_path):
  """Training (streamed), dev, translate, evaluate and parse read text with one set of rules:
  a NUL byte is an error naming the file and line; Unicode whitespace is stripped alike."""
  from t2t_repro import evaluation  # pylint: disable=import-outside-toplevel
  from t2t_repro.data import corpus, problems  # pylint: disable=import-outside-toplevel
  from t2t_repro.parsing import pipeline, treebank  # pylint: disable=import-outside-toplevel
  good = _write(tmp_path / "good.txt", ["a b", "c d", "e f"])
  nul = tmp_path / "nul.txt"
  nul.write_bytes(b"a b\nc \x00d\ne f\n")
  nul = str(nul)
  problem = problems.get_problem("parallel_text", train_src=nul, train_tgt=good, dev_src=nul,
                                 dev_tgt=good)
  readers = {
      "training": lambda: problem.corpus("train"),
      "training, one block at a time": lambda: text_files.scan_lines(nul, 2, block_bytes=3),
      "dev": lambda: problem.text_pairs("dev"),
      "translate": lambda: fileio.read_lines(nul),
      "evaluate": lambda: evaluation.evaluate_files(good, [nul]),
      "parse": lambda: treebank.read_tree_lines(nul),
      "parse (delinearize)": lambda: pipeline.delinearize_files(good, nul, str(tmp_path / "o")),
  }
  for name, read in readers.items():
    with pytest.raises(errors.EncodingError, match=r"nul\.txt:2: NUL byte at byte offset 6"):
      read()
      pytest.fail(name)

  spaces = ["\u00a0", "\u3000 \u3000", "\u2028", "\u00a0x y\u2028 "]
  src = _write(tmp_path / "space.src", spaces)
  tgt = _write(tmp_path / "space.tgt", ["t"] * len(spaces))
  expected = [("x y", "t")]
  assert text_files.read_parallel(src, tgt).pairs == expected
  streamed = corpus.ParallelCorpus([(src, tgt)])
  assert list(streamed.iter_pairs()) == expected
  assert [(s.decode(), t.decode()) for s, t in
          streamed.dataset(training=False).as_numpy_iterator()] == expected
