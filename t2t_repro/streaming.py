"""Lines from a pipe or terminal in small batches, as they arrive (interactive translation).

`line_batches` batches like fairseq-interactive's `--buffer_size`: a batch is ready when
`buffer_size` lines are buffered, or when at least one is and no new line arrived within
`wait_seconds` (`select` on the descriptor), so one line typed or piped in is translated
at once while a fast producer still gets batches of `buffer_size`. Lines follow
`fileio.read_lines`'s rules (split on "\\n", one "\\r" dropped, UTF-8 checked with the
line number in the error).
"""

import os
import select

from t2t_repro import fileio

_READ_BYTES = 65536


def line_batches(fd, buffer_size, wait_seconds, path="<stdin>"):
  """Yields lists of str lines read from file descriptor `fd` until end of file.

  Args:
    fd: int, a readable descriptor (a pipe, terminal or file).
    buffer_size: most lines per batch (>= 1).
    wait_seconds: how long to wait for another line before a partial batch is yielded [s];
      None: wait until the batch is full or the input ends (batches of exactly
      buffer_size lines but the last, as two aligned files need).
    path: names the input in errors.

  Yields:
    list of str, 1..buffer_size lines in input order; a last line without "\\n" is
    yielded at end of file.

  Raises:
    errors.EncodingError: invalid UTF-8 or a NUL byte, naming `path` and the line.
  """
  batch, pending, lines_read, at_end = [], b"", 0, False
  while not at_end:
    if batch and not select.select([fd], [], [], wait_seconds)[0]:
      yield batch  # nothing new within wait_seconds
      batch = []
      continue
    chunk = os.read(fd, _READ_BYTES)
    at_end = not chunk
    if at_end and pending:
      chunk = b"\n"  # the last line, without its "\n"
    complete, newline, pending = (pending + chunk).rpartition(b"\n")
    if newline:
      new = fileio.decode_lines(complete + newline, path, first_line=lines_read + 1)
      lines_read += len(new)
      batch += new
    while len(batch) >= buffer_size:
      yield batch[:buffer_size]
      batch = batch[buffer_size:]
  if batch:
    yield batch
