"""What the commands print: quiet TensorFlow, progress, startup and closing blocks.

`t2t_repro.commands.launch` calls `setup()` for every command before the command, and so
TensorFlow, is imported (never on import as a library). It silences what is not the
user's business and gives every line one plain format:

* TensorFlow's C++ log lines below `TF_CPP_MIN_LOG_LEVEL` (default here 2:
  warnings and errors are kept; 3 in a worker of a multi-worker job, TF_CONFIG set,
  whose survivors of a lost worker would log their collectives' abort), including the ones TensorFlow prints before it
  reads that variable (the oneDNN / cudart / CPU-feature startup block, printed
  once per TensorFlow library, and `failed call to cuInit` on machines without a
  GPU driver), and sentencepiece's `normalizer.cc ... LOG(INFO)` line from
  tensorflow_text's tokenizer kernel. They are written to file descriptor 2 by
  C++ code, so the filter is a pipe on descriptor 2 whose reader thread drops
  those lines and passes everything else through unchanged.
* TensorFlow's Python INFO logs ("Sharding callback duration", SavedModel
  export's function listings) and the tf.data options `UserWarning`.
* absl log records are written as plain lines: the message for INFO, `WARNING: ...`
  / `ERROR: ...` above (not absl's `I1124 06:44:01.109879 1396... file.py:348] ...`).

`--verbosity=1` (absl's flag, `-v 1`) or `TF_CPP_MIN_LOG_LEVEL=0` shows everything
(`--verbosity=1` in absl's own format).

Training output goes to stderr (stdout is left for data). On a terminal a keras
`Progbar` shows progress; otherwise (a file, a pipe, a scheduler's log) plain
lines every `--log_every_steps` updates, with no carriage returns or colour codes
(fairseq's and OpenNMT-tf's log style).
"""

import atexit
import collections
import contextlib
import logging
import os
import re
import select
import sys
import threading
import time
import warnings

# C++ log lines of TensorFlow/absl/XLA: "I0000 00:00:1795432438.790553    5383 port.cc:153] ..."
# (Python's absl lines look alike but name a .py file; they are left to Python's logging levels).
_CPP_LINE = re.compile(rb"^([IWEF])\d{4} [\d:.]+ +\d+ [\w.+-]+\.(?:cc|h|cpp):\d+\] ")
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
_NOISE = re.compile(
    rb"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    rb"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler"
    rb"|normalizer\.cc\(\d+\) LOG\(INFO\) )")
# Benign on a machine without a GPU driver, alarming to read ("E0000 ... UNKNOWN ERROR (303)").
_NO_GPU = re.compile(rb"failed call to cuInit")
_LOGGING_PATH = re.compile(r"[/\\]logging[/\\]__init__\.py$")
_LIBRARY_PATH = re.compile(r"[/\\](tensorflow|keras|tf_keras)[/\\]")

_state = {"level": None, "terminal": None, "filter": None, "kept": [], "started": None,
          "imported": None}


def _verbosity(argv):
  """absl's --verbosity / -v value in `argv` (flags are not parsed yet), else 0."""
  for i, arg in enumerate(argv):
    for name in ("--verbosity", "-v"):
      if arg.startswith(name + "="):
        value = arg.split("=", 1)[1]
      elif arg == name and i + 1 < len(argv):
        value = argv[i + 1]
      else:
        continue
      try:
        return int(value)
      except ValueError:
        return 0
  return 0


def is_noise(line, level):
  """True if `line` (bytes, one line of stderr) is a log line to drop at TF_CPP_MIN_LOG_LEVEL
  `level` (0 keeps everything; 2 drops INFO and WARNING C++ lines, the startup block and the
  no-GPU cuInit error)."""
  if level <= 0:
    return False
  match = _CPP_LINE.match(line)
  if match:
    return _SEVERITY[match.group(1)] < level or bool(_NO_GPU.search(line))
  return bool(_NOISE.match(line))


class _StderrFilter:
  """Replaces file descriptor 2 with a pipe; a thread copies it to the real stderr, minus noise."""

  def __init__(self, level):
    self.level = level
    self.stderr_fd = os.dup(2)
    read_fd, write_fd = os.pipe()
    sys.stderr.flush()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    self._read = os.fdopen(read_fd, "rb", buffering=0)
    self._closing = False
    self._thread = threading.Thread(target=self._copy, name="stderr_filter", daemon=True)
    self._thread.start()

  def _copy(self):
    pending = b""  # an unfinished line: held briefly, C++ loggers write one line in pieces
    while True:
      # Read before waiting: once `close` has set it, everything this process wrote is already
      # in the pipe, so a wait that then finds the pipe empty proves it drained. (Checked after
      # the wait, it could be set between an empty wait and the check, losing the last line.)
      closing = self._closing
      if not select.select([self._read], [], [], 0.1)[0]:
        if pending:
          os.write(self.stderr_fd, pending)  # e.g. a progress bar redrawn with "\r"
          pending = b""
        if closing:  # drained; a child process may still hold the pipe, do not wait for EOF
          return
        continue
      chunk = self._read.read(65536)
      if not chunk:
        break
      lines = (pending + chunk).split(b"\n")
      pending = lines.pop()
      out = b"".join(line + b"\n" for line in lines if not is_noise(line, self.level))
      if out:
        os.write(self.stderr_fd, out)
    if pending and not is_noise(pending, self.level):
      os.write(self.stderr_fd, pending)

  def close(self):
    """Puts the real stderr back on descriptor 2 and waits until the pipe is drained."""
    with contextlib.suppress(Exception):
      sys.stderr.flush()
    os.dup2(self.stderr_fd, 2)  # nothing of ours writes into the pipe any more
    self._closing = True
    self._thread.join(timeout=30.0)


class _PlainFormatter(logging.Formatter):
  """A log record as the command's other lines are written: the message alone for INFO,
  `WARNING: message` / `ERROR: message` above it (absl's default prefixes the date, time,
  thread id and file:line, `I1124 06:44:01.109879 139652478319488 train.py:348] ...`)."""

  def format(self, record):
    message = super().format(record)
    return message if record.levelno < logging.WARNING else f"{record.levelname}: {message}"


def _logged_by_library():
  """Whether the code that called the logging function being run lives in TensorFlow or Keras
  (the caller's frame: the first one outside logging modules and this file)."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    path = frame.f_code.co_filename
    if not (_LOGGING_PATH.search(path) or path == __file__):
      return bool(_LIBRARY_PATH.search(path))
    frame = frame.f_back
  return False


def setup(argv=None):
  """Quiets TensorFlow for a command; call before TensorFlow is imported.

  Args:
    argv: the command line (default sys.argv), read for --verbosity / -v.

  Sets TF_CPP_MIN_LOG_LEVEL (unless the environment has it) to 2 (3 with TF_CONFIG set), or
  0 with --verbosity >= 1; installs the stderr filter (level > 0), lowers TensorFlow's
  Python logger to WARNING and ignores tf.data's options UserWarning. Idempotent.
  """
  if _state["level"] is not None:
    return
  _state["started"] = time.monotonic()
  verbose = _verbosity(sys.argv if argv is None else argv) >= 1
  # A worker of a multi-worker job (TF_CONFIG): 3, also without errors, since a lost worker
  # makes every survivor's collectives log their abort (E lines of ring_alg.cc,
  # base_collective_executor.cc, ...) before the command's one line that names it.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL",
                        "0" if verbose else "3" if os.environ.get("TF_CONFIG") else "2")
  try:
    level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
  except ValueError:
    level = 2
  _state["level"] = level
  _state["terminal"] = os.isatty(2)
  if level > 0:
    _state["filter"] = _StderrFilter(level)
    atexit.register(_state["filter"].close)
  if not verbose:
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    # TensorFlow and Keras also log INFO through absl's logger ("Sharding callback duration").
    from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
    absl_logging.get_absl_logger().addFilter(  # (absl's own logger class, so import absl first)
        lambda record: record.levelno >= logging.WARNING or not _logged_by_library())
    absl_logging.get_absl_handler().setFormatter(_PlainFormatter())
    warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data options",
                            category=UserWarning)


def mark_imported():
  """Records that the command's modules are imported (`launch`, just before its main runs)."""
  _state["imported"] = time.monotonic()


def startup_times():
  """(seconds from `setup` to now, seconds of it spent importing the command's modules and
  TensorFlow) in a command; (None, None) outside one (library use, tests)."""
  if _state["started"] is None:
    return None, None
  imported = _state["imported"]
  return (time.monotonic() - _state["started"],
          None if imported is None else imported - _state["started"])


def stderr_is_terminal():
  """Whether the user's stderr is a terminal (checked before `setup` replaced descriptor 2)."""
  if _state["terminal"] is not None:
    return _state["terminal"]
  return sys.stderr.isatty()


def keep_until_exit(obj):
  """In a command (after `setup`), holds `obj` until the process ends with `finish`, so its
  destructor never runs: the destructor of a tf.data iterator that is still prefetching (the
  training input's MultiDeviceIterator) waits for its background threads (the autotuning
  model thread, the buffer's thread) and kept `big`'s smoke run 15 s after its last line.
  Outside a command (library use, tests) it does nothing."""
  if _state["level"] is not None:
    _state["kept"].append(obj)
  return obj


def finish(code=0):
  """Ends the process now, once everything written is out: flushes stdout/stderr, drains the
  stderr filter and calls `os._exit`.

  Args:
    code: a SystemExit code: None or 0 (success), an int, or a message (printed; exit 1).

  Why: tearing TensorFlow down at interpreter exit runs destructors that wait for
  background threads (tf.data iterators still prefetching, see `keep_until_exit`; the
  SavedModel export's functions); on a loaded machine that kept processes alive for
  7-100 s after their last line. Call it only when every file the command writes is closed.
  """
  if code is not None and not isinstance(code, int):
    print(code, file=sys.stderr)
    code = 1
  for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(Exception):
      stream.flush()
  if _state["filter"] is not None:
    _state["filter"].close()
  os._exit(code or 0)  # pylint: disable=protected-access


def hms(seconds):
  """'H:MM:SS' of a duration in seconds."""
  seconds = int(round(max(seconds, 0)))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def block(title, rows):
  """A titled block of aligned `key  value` rows (startup and closing summaries)."""
  width = max(len(key) for key, _ in rows)
  return "\n".join([title] + [f"  {key:<{width}}  {value}" for key, value in rows])


def _progbar_class():
  import keras  # pylint: disable=import-outside-toplevel

  class Bar(keras.utils.Progbar):
    """keras Progbar that shows target tokens/s as a rounded integer after the time per step
    (its metrics are always printed with 4 decimals)."""

    tokens_per_sec = 0.0

    def _format_time(self, time_per_unit, unit_name):
      return super()._format_time(time_per_unit, unit_name) + f" - {self.tokens_per_sec:,.0f} tok/s"

  return Bar


# Updates timed before the plain lines show an ETA, and the window of the moving average
# [log intervals]: the first update (tracing, the first batches) is never in it.
ETA_MIN_UPDATES = 10
ETA_WINDOW_INTERVALS = 5


class Progress:
  """Training progress on stderr: a keras Progbar on a terminal, else plain lines.

  The plain lines' ETA is the remaining updates times the mean time per update of the last
  `ETA_WINDOW_INTERVALS` log intervals (at least `ETA_MIN_UPDATES` updates, counted from the
  end of the run's first update, so tracing is not in it); before that it is "ETA -". A dev
  evaluation inside the window counts, as it will recur. On a terminal the ETA is Keras's.

  Args:
    train_steps: the last step [updates].
    start_step: the step training starts (or resumes) at.
    log_every: plain lines every this many updates (and at the last one).
    terminal: draw the bar (default: `stderr_is_terminal()`).
    stream: where to write (default sys.stderr).
    clock: the time source [seconds] (default time.monotonic; tests pass their own).
  """

  def __init__(self, train_steps, start_step, log_every, terminal=None, stream=None,
               clock=time.monotonic):
    self.train_steps, self.start_step, self.log_every = train_steps, start_step, max(1, log_every)
    self.terminal = stderr_is_terminal() if terminal is None else terminal
    self.stream = stream or sys.stderr
    self.clock = clock
    self.start = clock()
    # (step, time at its end) of the recent updates: the moving average's window.
    self._times = collections.deque(
        maxlen=max(ETA_MIN_UPDATES, ETA_WINDOW_INTERVALS * self.log_every) + 1)
    self._bar = None
    self._bar_open = False
    if self.terminal:
      self._bar = _progbar_class()(train_steps, stateful_metrics=["loss", "nll", "lr"])
      self._draw(start_step, [])

  def eta(self, step):
    """Seconds left after update `step` by the moving average, or None while fewer than
    ETA_MIN_UPDATES updates are timed (0 at the last step)."""
    if step >= self.train_steps:
      return 0.0
    if not self._times or self._times[-1][0] - self._times[0][0] < ETA_MIN_UPDATES:
      return None
    (first_step, first_time), (last_step, last_time) = self._times[0], self._times[-1]
    return (last_time - first_time) / (last_step - first_step) * (self.train_steps - step)

  def _draw(self, step, values):
    with contextlib.redirect_stdout(self.stream):  # Progbar writes to sys.stdout
      self._bar.update(step, values)
    self._bar_open = step < self.train_steps

  def update(self, step, loss, nll, lr, tokens_per_sec):
    """Reports update `step`: loss and nll per target token, the learning rate used and
    the target tokens/s of the last window."""
    if self._bar is not None:
      self._bar.tokens_per_sec = tokens_per_sec
      self._draw(step, [("loss", loss), ("nll", nll), ("lr", lr)])
      return
    now = self.clock()
    self._times.append((step, now))
    if step % self.log_every and step < self.train_steps:
      return
    eta = self.eta(step)
    self.line(f"step {step}/{self.train_steps} | loss {loss:.4f} | nll {nll:.4f} | lr {lr:.3e} | "
              f"{tokens_per_sec:,.0f} tok/s | elapsed {hms(now - self.start)} | "
              f"ETA {'-' if eta is None else hms(eta)}")

  def line(self, text):
    """Writes a message on its own line(s) (ends the bar's line first on a terminal)."""
    if self._bar_open:
      self.stream.write("\n")
      self._bar_open = False
    self.stream.write(text + "\n")
    self.stream.flush()


def cpu_name(cpuinfo="/proc/cpuinfo"):
  """The CPU this process runs on, as a timing names it: the vendor's model name, family and
  model number, and the widest vector ISA that TensorFlow's CPU kernels use ('AVX-512 +
  BF16', 'AVX-512', 'AVX2' or 'no AVX2'); 'unknown' where `cpuinfo` cannot be read."""
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      text = f.read().split("\n\n", 1)[0]
  except OSError:
    return "unknown"
  fields = dict((k.strip(), v.strip()) for k, _, v in
                (line.partition(":") for line in text.splitlines()))
  flags = set(fields.get("flags", "").split())
  isa = ("AVX-512 + BF16" if flags & {"avx512_bf16", "amx_bf16"} else
         "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2")
  return (f"{fields.get('model name', 'unknown')} family {fields.get('cpu family', '?')} "
          f"model {fields.get('model', '?')}, {isa}")
