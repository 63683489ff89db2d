"""One writer per model dir: the lock every command that writes into one holds.

`hold(path, command)` is held by train (the chief of a multi-worker job only), average into a
model dir, tune writing decoding.json, and parse's training, for as long as they run. A
second writer is refused at once: `LockedError`, one line naming the holder,

    runs/m: locked by train 4242@gpu1 since 2026-12-06 23:40:11 UTC: one writer per model dir;
    wait until it ends

Readers (translate, score, validate, export, average from a model dir) take no lock: they
read only the checkpoints that the `checkpoint` state file lists, which a writer updates after
a checkpoint is complete (`model_dir.check_listed`).

The lock of a model dir M is the file `.M.lock` beside it (M's parent folder: a new model dir
only appears, complete, when its staged write renames it into place), locked with
`fcntl.flock` and holding its holder as JSON: pid, host, command, since. A folder inside a
model dir (best/, averaged/, ema/, an average --output_dir there) has the lock of that model
dir (`owner`). The kernel drops a flock when its process ends, however it ends; the file,
which an orderly end removes, then still names the holder:

* of this host: the process is gone, and the next writer takes the lock over with one
  warning line;
* of another host (a shared file system, whose locks may not reach across hosts): the next
  writer cannot tell whether it still runs, and is refused with how to clear the lock
  (remove the file once that process is gone).

A URL (gs://...) has no lock (an object store has no flock); local paths only.
"""

import contextlib
import errno
import fcntl
import json
import os
import socket
import time

from absl import logging

from t2t_repro import errors, fileio
from t2t_repro.model_dir import HPARAMS_FILE

_HOST = socket.gethostname()
_HELD = {}  # lock file path -> how many `hold`s of this process are open on it


class LockedError(errors.DataError):
  """Another writer holds the model dir's lock (exit status 1); names it."""


def owner(path):
  """The folder whose lock a write into `path` takes: the model dir `path` is inside (its
  parent holds hparams.json: best/, averaged/, ema/ ...), else `path` itself; as given."""
  path = str(path).rstrip("/") or "/"
  parent = os.path.dirname(os.path.abspath(path))
  if os.path.isfile(os.path.join(parent, HPARAMS_FILE)):
    return os.path.dirname(path) or "."
  return path


def lock_path(path):
  """The lock file of the folder `path`: `.NAME.lock` beside its `owner` (absolute)."""
  folder = os.path.abspath(owner(path))
  return os.path.join(os.path.dirname(folder), f".{os.path.basename(folder)}.lock")


def _holder(fd):
  """The holder a lock file names (a dict), or None when it is empty or not ours."""
  data = os.pread(fd, 4096, 0)
  try:
    holder = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError):
    return None
  return holder if isinstance(holder, dict) and {"pid", "host"} <= holder.keys() else None


def _describe(holder):
  return (f"{holder.get('command', '?')} {holder['pid']}@{holder['host']} since "
          f"{holder.get('since', '?')}")


def _open_locked(path, folder):
  """A descriptor of the lock file `path`, flock'ed; the file is the one at `path` (a holder
  that ended may have removed the file we opened: then open it anew).

  Raises:
    LockedError: another process holds it.
  """
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno not in (errno.EAGAIN, errno.EACCES):
        os.close(fd)
        raise
      holder = _holder(fd)
      os.close(fd)
      raise LockedError(f"{folder}: locked by {_describe(holder) if holder else 'another writer'}"
                        ": one writer per model dir; wait until it ends") from None
    try:
      same = os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if same:
      return fd
    os.close(fd)


def _made_parents(folder):
  """Creates `folder` and its missing parents; returns those it created, deepest first."""
  made = []
  while not os.path.isdir(folder):
    made.append(folder)
    folder = os.path.dirname(folder)
  for path in reversed(made):
    os.mkdir(path)
  return made


@contextlib.contextmanager
def hold(path, command):
  """Holds the lock of the folder `path` (a model dir, or one inside it: `owner`) inside the
  block. Nested holds of one process on one lock are one hold. The folder need not exist.

  Args:
    path: the folder written (str, path or `ModelDir`); a URL takes no lock.
    command: what writes ("train", "tune", ...), named to a writer refused.

  Raises:
    LockedError: another process holds the lock, or a process of another host left it.
    errors.WriteError: the folder, or the folder of its lock file (its parent: the line
      says so), cannot be written (permission, read-only file system, a file on its way):
      one line naming it, before any work.
  """
  path = str(getattr(path, "path", path))
  if "://" in path:
    yield
    return
  folder, lock = owner(path), lock_path(path)
  if _HELD.get(lock):
    _HELD[lock] += 1
    try:
      yield
    finally:
      _HELD[lock] -= 1
    return
  for target in (folder, os.path.dirname(os.path.abspath(folder))):
    if os.path.isdir(target) and not os.access(target, os.W_OK | os.X_OK):
      where = "" if target == folder else (
          f"; the lock of {folder}, {os.path.basename(lock)}, goes there (one writer per model "
          "dir)")
      raise errors.WriteError(f"{target}: cannot write into this folder (read-only or permission "
                              f"denied){where}; nothing was done", target, "read-only")
  fileio.check_writable(folder)  # a file on its way
  with errors.writing(folder):
    made = _made_parents(os.path.dirname(lock))
    fd = _open_locked(lock, folder)
  try:
    _take(fd, lock, folder, command)
    _HELD[lock] = 1
    try:
      yield
    finally:
      del _HELD[lock]
      with contextlib.suppress(FileNotFoundError):
        os.remove(lock)
  finally:
    os.close(fd)
    for parent in made:
      with contextlib.suppress(OSError):
        os.rmdir(parent)


def _take(fd, lock, folder, command):
  """Writes this process as the holder into the locked file `fd`, after a holder that ended
  without removing it: one of this host is gone (one warning); one of another host may run.

  Raises:
    LockedError: the file names a process of another host.
  """
  previous = _holder(fd)
  if previous is not None and previous["host"] != _HOST:
    raise LockedError(f"{folder}: locked by {_describe(previous)} (another host); once that "
                      f"process is gone, remove {lock} to clear it")
  if previous is not None:
    logging.warning("%s: took over the lock left by %s (that process is gone)", folder,
                    _describe(previous))
  holder = {"pid": os.getpid(), "host": _HOST, "command": command,
            "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
  os.ftruncate(fd, 0)
  os.pwrite(fd, (json.dumps(holder) + "\n").encode("utf-8"), 0)
