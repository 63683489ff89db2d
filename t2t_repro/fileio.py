"""The project's one line reader and one atomic writer.

`read_lines` splits UTF-8 text on "\\n" only, as tensor2tensor's
`txt_line_iterator` does, so line i of a source file stays aligned with line i of
its target whatever other Unicode line breaks the text holds. `write_atomic` (and
`write_json` on top of it) write through a temporary name and `os.replace`, so a
reader never sees a half-written file and a failed command leaves the old file;
`check_writable` refuses an output that cannot be written before a command does any work.
"""

import contextlib
import json
import os
import sys

from t2t_repro import staging
from t2t_repro.errors import EncodingError, MissingDataError, WriteError, writing


def decode_lines(data, path="<bytes>", first_line=1):
  """UTF-8 bytes -> list of lines without terminators (the rules of `read_lines`).

  Args:
    data: bytes, whole lines of a file.
    path: names the file in errors.
    first_line: the 1-based line number of `data`'s first line in the file (a stream read
      piece by piece); a byte order mark is removed only from line 1.

  Raises:
    EncodingError: invalid UTF-8 or a NUL byte; the message gives `path`, the 1-based
      line number and the byte offset.
  """
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + first_line
    raise EncodingError(f"{path}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x} at byte offset "
                        f"{e.start} of the file: {e.reason})") from None
  check_no_nul(data, path, lines_before=first_line - 1)
  lines = (text.removeprefix("\ufeff") if first_line == 1 else text).split("\n")
  if lines[-1] == "":
    lines.pop()
  return [line.removesuffix("\r") for line in lines]


def check_no_nul(data, path, lines_before=0, offset=0):
  """Refuses a NUL byte: never text; a UTF-16 file (every other byte NUL) would pass as UTF-8.

  Args:
    data: bytes, a whole file or one block of it.
    path: file name for the message.
    lines_before: lines of the file before `data` (for the 1-based line number).
    offset: byte offset of `data` in the file.

  Raises:
    EncodingError: `data` holds a NUL byte; the message gives `path`, the 1-based
      line number and the byte offset in the file.
  """
  nul = data.find(b"\0")
  if nul >= 0:
    line = lines_before + data.count(b"\n", 0, nul) + 1
    raise EncodingError(f"{path}:{line}: NUL byte at byte offset {offset + nul} (binary data, "
                        "or a UTF-16 file? text must be UTF-8)")


def read_lines(path):
  """Reads a UTF-8 text file (or "-" for stdin) as a list of lines without line terminators.

  Lines are split on "\\n" only (never on U+2028, "\\x0b" or the other breaks
  `str.splitlines` knows, which would shift the alignment); one "\\r" before
  the "\\n" is dropped; a final "\\n" does not start an extra line; a UTF-8 byte
  order mark at the start is removed. Lines are not stripped.

  Args:
    path: file path, or "-" for the bytes of standard input.

  Returns:
    list of str, one per line.

  Raises:
    MissingDataError: `path` does not exist or is a directory.
    EncodingError: invalid UTF-8 or a NUL byte; the message gives the path, the 1-based line
      number and the byte offset in the file.
  """
  if path == "-":
    return decode_lines(sys.stdin.buffer.read(), "<stdin>")
  try:
    with open(path, "rb") as f:
      data = f.read()
  except FileNotFoundError:
    raise MissingDataError(f"{path}: file does not exist") from None
  except IsADirectoryError:
    raise MissingDataError(f"{path}: is a directory, not a text file") from None
  return decode_lines(data, path)


def check_writable(path, inside=False):
  """Refuses, before any work, an output file (or folder) `path` whose folder cannot be
  written: the nearest existing folder on its way is a file, or it is read-only or refuses
  this user. The commands check their outputs with it before loading a model.

  Args:
    path: the output.
    inside: `path` is a folder the files are written into (not one staged beside it and
      renamed): that folder, when it exists, is checked instead of its parent.

  Raises:
    WriteError: "{path}: cannot write it: {reason}; nothing was done", reason "FILE is a
      file, not a folder", "read-only file system" or "permission denied".
  """
  if "://" in str(path):
    return
  folder = os.path.abspath(path) if inside else os.path.dirname(os.path.abspath(path))
  while not os.path.lexists(folder):
    folder = os.path.dirname(folder)
  if not os.path.isdir(folder):
    reason = f"{folder} is a file, not a folder"
  elif not os.access(folder, os.W_OK | os.X_OK):
    read_only = os.statvfs(folder).f_flag & os.ST_RDONLY
    reason = "read-only file system" if read_only else "permission denied"
  else:
    return
  raise WriteError(f"{path}: cannot write it: {reason}; nothing was done", path, reason)


@contextlib.contextmanager
def atomic_writer(path):
  """A binary file open for writing under a temporary name in `path`'s folder
  (`staging.file_name`); at a normal exit of the block it replaces `path` (`os.replace`),
  after an exception it is removed and `path` is untouched. So readers never see a
  half-written file. Creates the folder; removes the leftovers of killed earlier writes of
  `path` (`staging.remove_leftovers`). A full disk or a refused write raises one line naming
  `path` (`errors.writing`)."""
  folder, name = os.path.split(os.path.abspath(path))
  check_writable(path)
  with writing(path):
    os.makedirs(folder, exist_ok=True)
    staging.remove_leftovers(folder, name)
    tmp = os.path.join(folder, staging.file_name(name))
    try:
      with open(tmp, "wb") as f:
        yield f
      os.replace(tmp, path)
    finally:
      if os.path.exists(tmp):
        os.remove(tmp)


def write_atomic(path, data):
  """Writes `data` (bytes, or str as UTF-8) to `path` atomically (`atomic_writer`)."""
  with atomic_writer(path) as f:
    f.write(data.encode("utf-8") if isinstance(data, str) else data)


def write_lines(path, lines):
  """Writes str lines, each followed by "\\n", atomically (`write_atomic`)."""
  write_atomic(path, "".join(line + "\n" for line in lines))


def write_json(path, values):
  """Writes `values` as indented, key-sorted JSON atomically (`write_atomic`)."""
  write_atomic(path, json.dumps(values, indent=2, sort_keys=True) + "\n")
