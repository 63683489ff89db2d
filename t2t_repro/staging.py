"""Names of staged writes, and the removal of what an interrupted one leaves.

A staged write builds its result under a temporary sibling name and renames it into place:
a folder (`model_dir.ModelDir.write_dir`: a model dir, best/, ema/, averaged/, an average
--output_dir, an export --export_dir) under `.NAME.new-TOKEN` (and an existing one is moved
aside to `.NAME.old-TOKEN` for the two renames), a file (`ModelDir.write_bytes`,
`fileio.atomic_writer`) under `NAME.tmp-TOKEN`. TOKEN is `PID@HOST-RANDOM`, the writing
process and its host. A writer killed before its rename leaves that sibling; the next staged
write of the same NAME (and a resumed `train`, for everything inside its model dir) removes
it with one warning line (`remove_leftovers`), but only once its writer is gone: a process of
this host that no longer exists. A leftover of another host, or of a process id in use again,
is kept (and named in no warning). An `.NAME.old-TOKEN` whose NAME is absent (a kill between
the two renames) is renamed back to NAME: the folder is then as before the write.

Paths may be local or URLs (gs://...) that TensorFlow's `tf.io.gfile` reads; a local path
never imports TensorFlow.
"""

import os
import re
import shutil
import socket
import uuid

from absl import logging

_HOST = socket.gethostname()
# .NAME.new-PID@HOST-RANDOM, .NAME.old-...: a staged folder; NAME.tmp-PID@HOST-RANDOM: a file.
# (@HOST was absent from the names of earlier versions.)
_FOLDER = re.compile(r"^\.(?P<base>.+)\.(?P<kind>new|old)-(?P<pid>\d+)(?:@(?P<host>.+))?"
                     r"-[0-9a-f]{8}$")
_FILE = re.compile(r"^(?P<base>.+)\.tmp-(?P<pid>\d+)(?:@(?P<host>.+))?-[0-9a-f]{8}$")


def _token():
  return f"{os.getpid()}@{_HOST}-{uuid.uuid4().hex[:8]}"


def folder_names(name):
  """(staging, aside): the names of the sibling folder a staged write of folder `name` builds
  in, and of the one an existing `name` is moved to; both carry one token."""
  token = _token()
  return f".{name}.new-{token}", f".{name}.old-{token}"


def file_name(name):
  """The name of the temporary sibling a staged write of file `name` writes."""
  return f"{name}.tmp-{_token()}"


def _is_url(path):
  return "://" in path


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


def _join(folder, name):
  return f"{folder.rstrip('/')}/{name}" if _is_url(folder) else os.path.join(folder, name)


def writer_gone(pid, host=None):
  """True when the process `pid` of `host` (None: this host) no longer exists. False for this
  process, a process that exists (also of another user), and any process of another host."""
  if (host is not None and host != _HOST) or pid == os.getpid():
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return True
  except PermissionError:
    return False
  return False


def _size(path):
  """Bytes of a file, or of every file under a folder."""
  if _is_url(path):
    gfile = _gfile()
    if not gfile.isdir(path):
      return gfile.stat(path).length
    return sum(gfile.stat(_join(d, f)).length for d, _, fs in gfile.walk(path) for f in fs)
  if not os.path.isdir(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def leftovers(folder, name=None):
  """The leftovers of interrupted staged writes in `folder` whose writer is gone.

  Args:
    folder: where to look (local path or URL); absent: none.
    name: only those of the file or folder `name` (None: of every name).

  Returns:
    list of (path, name it was written for, kind: "new", "old" or "tmp"), sorted by path.
  """
  try:
    entries = _gfile().listdir(folder) if _is_url(folder) else os.listdir(folder)
  except (FileNotFoundError, NotADirectoryError):
    return []
  if _is_url(folder):
    entries = [e.rstrip("/") for e in entries]
  found = []
  for entry in sorted(entries):
    match = _FOLDER.match(entry) or _FILE.match(entry)
    if match is None or (name is not None and match["base"] != name):
      continue
    if writer_gone(int(match["pid"]), match["host"]):
      found.append((_join(folder, entry), match["base"], match.groupdict().get("kind", "tmp")))
  return found


def remove_leftovers(folder, name=None, warn=True):
  """Removes `leftovers(folder, name)`: an `.NAME.old-*` folder whose NAME is absent is renamed
  back to NAME, every other one is deleted. With `warn`, logs one warning line naming them and
  the bytes freed (`warn_removed`), if any.

  Returns:
    (list of the paths removed or renamed back, bytes freed).
  """
  found = leftovers(folder, name)
  if not found:
    return [], 0
  exists = _gfile().exists if _is_url(folder) else os.path.exists
  freed = 0
  for path, base, kind in found:
    target = _join(folder, base)
    if kind == "old" and not exists(target):
      (_gfile().rename if _is_url(folder) else os.rename)(path, target)
      continue
    freed += _size(path)
    if _is_url(path):
      (_gfile().rmtree if _gfile().isdir(path) else _gfile().remove)(path)
    elif os.path.isdir(path):
      shutil.rmtree(path)
    else:
      os.remove(path)
  paths = [path for path, _, _ in found]
  if warn:
    warn_removed(paths, freed)
  return paths, freed


def warn_removed(paths, freed):
  """The one warning line of removed leftovers of interrupted writes."""
  logging.warning("removed %d leftovers of interrupted writes (%d bytes): %s", len(paths), freed,
                  ", ".join(paths))
