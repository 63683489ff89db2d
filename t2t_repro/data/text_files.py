"""Reading parallel text with validation.

A parallel corpus is two UTF-8 files with one sentence per line; line i of
the source file is the translation of line i of the target file. Everything
that could silently misalign or truncate the pairs is an error here:

* a missing file -> `MissingDataError` naming the path;
* source and target line counts differ -> `LineCountError` naming both files
  and both counts;
* bytes that are not UTF-8, or a NUL byte (never text; the sign of a binary or
  UTF-16 file) -> `EncodingError` naming the file, the 1-based line number and
  the byte offset.

Every error is a `DataError`, a `ValueError` subclass.

Normalization, the same as tensor2tensor's `text_problems.txt_line_iterator`
(`line.strip()`): a line ends at "\\n" (a "\\r" before it is part of the line
terminator) and leading/trailing whitespace (Python `str.strip()`, so also
U+00A0) is removed. Inner whitespace is kept as is. A pair where either side
is empty after stripping is dropped and counted (`ParallelText.dropped_empty`),
never silently shifted.
"""

import dataclasses
from collections.abc import Sequence

import numpy as np

from t2t_repro import fileio
from t2t_repro.errors import DataError, EncodingError, MissingDataError
from t2t_repro.fileio import read_lines  # the one line reader, also `text_files.read_lines`


# Python's str.isspace() characters (str.strip removes exactly these), as an RE2 class.
WHITESPACE_RE2 = (r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}"
                  r"\x{2029}\x{202f}\x{205f}\x{3000}]")
_STRIP_RE2 = f"^{WHITESPACE_RE2}+|{WHITESPACE_RE2}+$"


def strip_in_graph(lines):
  """Python `str.strip()` in graph: removes leading/trailing Unicode whitespace.

  The one stripping rule of every reader in graph form (training corpora, the
  exported SavedModel's `translate`); `tf.strings.strip` would remove ASCII
  whitespace only and keep e.g. U+00A0, U+3000 or U+2028.

  Args:
    lines: tf.string Tensor of any shape (UTF-8).

  Returns:
    tf.string Tensor of the same shape.
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.strings.regex_replace(lines, _STRIP_RE2, "")


class LineCountError(DataError):
  """Source and target files have different numbers of lines."""


@dataclasses.dataclass
class ParallelText:
  """Validated sentence pairs of one split.

  Attributes:
    pairs: list of (source, target) Python strings, stripped, none empty, in
      file order (files in the order given).
    dropped_empty: number of line pairs dropped because a side was empty.
    origin: where the pairs come from (file paths or a TFDS name), for messages.
  """

  pairs: list
  dropped_empty: int = 0
  origin: str = ""

  def __len__(self):
    return len(self.pairs)

  @property
  def sources(self):
    return [s for s, _ in self.pairs]

  @property
  def targets(self):
    return [t for _, t in self.pairs]


def iter_lines(paths):
  """Yields the lines of several files in order (see `read_lines`), e.g. for `vocab.learn_vocab`."""
  for path in paths:
    yield from read_lines(path)


def strip_pair(source, target):
  """The pair rule of every reader: both sides `str.strip()`ped; None when a side is then empty."""
  source, target = source.strip(), target.strip()
  return (source, target) if source and target else None


def clean_pairs(pairs, origin=""):
  """Strips both sides of every pair and drops (and counts) pairs with an empty side.

  Args:
    pairs: iterable of (source, target) str.
    origin: description of where the pairs come from, kept in the result.

  Returns:
    ParallelText.
  """
  kept, dropped = [], 0
  for src, tgt in pairs:
    pair = strip_pair(src, tgt)
    if pair:
      kept.append(pair)
    else:
      dropped += 1
  return ParallelText(kept, dropped, origin)


def read_parallel(source_path, target_path):
  """Reads one aligned pair of files.

  Args:
    source_path, target_path: UTF-8 text files, one sentence per line.

  Returns:
    ParallelText with the stripped, non-empty pairs and the count of dropped
    empty ones.

  Raises:
    MissingDataError, EncodingError: see `read_lines`.
    LineCountError: the files have different line counts (message names both
      files and both counts).
  """
  sources, targets = read_lines(source_path), read_lines(target_path)
  if len(sources) != len(targets):
    raise LineCountError(f"{source_path} has {len(sources)} lines but {target_path} has "
                         f"{len(targets)} lines; parallel files must have one line per sentence pair")
  return clean_pairs(zip(sources, targets), f"{source_path} + {target_path}")


def read_parallel_files(file_pairs: Sequence):
  """Reads and concatenates several aligned file pairs (each checked on its own).

  Args:
    file_pairs: sequence of (source_path, target_path).

  Returns:
    ParallelText: pairs in the order of `file_pairs`; `dropped_empty` summed.

  Raises:
    the errors of `read_parallel`.
  """
  parts = [read_parallel(src, tgt) for src, tgt in file_pairs]
  return ParallelText([p for part in parts for p in part.pairs],
                      sum(part.dropped_empty for part in parts),
                      "; ".join(part.origin for part in parts))


SCAN_BLOCK_BYTES = 1 << 24
UTF8_BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass(frozen=True)
class LineScan:
  """What one streaming pass learned about a file (see `scan_lines`).

  Attributes:
    lines: number of lines (as `read_lines` counts them).
    size: file size [bytes].
    start: byte offset of the first line (3 after a UTF-8 byte order mark, else 0).
    marks: byte offsets where line `k * every` starts, for k = 1, 2, ... while
      that line exists (a sparse line index for seeking).
  """

  lines: int
  size: int
  start: int
  marks: tuple


def scan_lines(path, every, block_bytes=SCAN_BLOCK_BYTES):
  """Validates a text file as UTF-8 and counts its lines in one streaming pass.

  Reads `block_bytes` at a time (memory does not grow with the file) and
  applies the rules of `read_lines`: lines end at "\n", a final "\n" does not
  start an extra line, a UTF-8 byte order mark at the start is not text.

  Args:
    path: file path.
    every: record the byte offset of every `every`-th line start [lines].
    block_bytes: read size [bytes].

  Returns:
    LineScan.

  Raises:
    MissingDataError: `path` does not exist.
    EncodingError: invalid UTF-8 or a NUL byte; the message gives the path, the
      1-based line number and the byte offset in the file (as `read_lines`).
  """
  try:
    f = open(path, "rb")  # pylint: disable=consider-using-with
  except FileNotFoundError:
    raise MissingDataError(f"{path}: file does not exist") from None
  with f:
    head = f.read(3)
    start = 3 if head == UTF8_BOM else 0
    f.seek(start)
    offset, lines, marks, carry, last = start, 0, [], b"", b"\n"
    while True:
      block = f.read(block_bytes)
      data = carry + block
      try:
        data.decode("utf-8")
        carry = b""
      except UnicodeDecodeError as e:
        if block and e.reason == "unexpected end of data":  # a character split by the block end
          carry = data[e.start:]
        else:
          line = lines + data.count(b"\n", 0, e.start) + 1
          raise EncodingError(f"{path}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x} at byte "
                              f"offset {offset + e.start} of the file: {e.reason})") from None
      if not block:
        break
      body = data[:len(data) - len(carry)]
      fileio.check_no_nul(body, path, lines, offset)
      ends = np.flatnonzero(np.frombuffer(body, np.uint8) == 10)
      # The line of 0-based index lines + i + 1 starts after newline i of this block.
      first = -(lines + 1) % every
      marks.extend(int(offset + ends[i] + 1) for i in range(first, len(ends), every))
      lines += len(ends)
      offset += len(body)
      last = body[-1:] or last
    size = offset + len(carry)
  if last != b"\n" and size > start:
    lines += 1
  return LineScan(lines, size, start, tuple(m for m in marks if m < size))
