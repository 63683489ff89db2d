"""What the commands print (t2t_repro.logs): a clean log in a file, a startup block whose
parameter count is `summary`'s, a closing block, a prompt exit, discoverable choices.

The training run is the suite's one end-to-end run (`trained_run` in conftest.py), with
stdout and stderr redirected to files at the default verbosity."""

import io
import os
import re
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from conftest import tool_path
from model_dir_util import make_model_dir
from t2t_repro.config import hparams as hparams_lib
from t2t_repro import logs
from t2t_repro.data.problems import list_problems

ANSI = re.compile(r"\x1b\[")
# TensorFlow's C++ log lines ("I0000 00:00:1795432438.790553    5383 port.cc:153] ...").
CPP_LOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+\.(cc|h):\d+\]", re.M)


def _block(text, title):
  """{key: value} of the logs.block titled `title` in `text`."""
  lines = text.split("\n")
  start = lines.index(title)
  rows = {}
  for line in lines[start + 1:]:
    if not line.startswith("  "):
      break
    key, value = re.match(r"  (\S+(?: \S+)?) {2,}(.*)", line).groups()
    rows[key] = value
  return rows


def _run(args, **kwargs):
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                        env=env, check=False, **kwargs)


@pytest.mark.slow
def test_log_file_is_plain_and_quiet(trained_run):
  err = trained_run.stderr
  assert trained_run.returncode == 0, err[-3000:]
  assert "\r" not in err and not ANSI.search(err), err[:2000]
  assert not CPP_LOG.search(err), CPP_LOG.search(err).group(0)
  for noise in ("absl::InitializeLog", "cuInit", "normalizer.cc", "UserWarning",
                "Sharding callback", "oneDNN"):
    assert noise not in err, noise
  assert trained_run.stdout == ""  # the log is on stderr; stdout stays free for data
  # Plain progress lines every --log_every_steps=5 updates, with rounded tokens/s.
  steps = [int(s) for s in re.findall(r"^step (\d+)/200 \| loss [\d.]+ \| nll [\d.]+ \| "
                                      r"lr [\d.e+-]+ \| [\d,]+ tok/s \| elapsed \d+:\d\d:\d\d \| "
                                      r"ETA (?:-|\d+:\d\d:\d\d)$", err, re.M)]
  assert steps == list(range(5, 201, 5)), steps
  # No ETA before 10 updates are timed after the first (step 5, 10), then the moving average's.
  etas = re.findall(r"^step \d+/200 .* \| ETA (\S+)$", err, re.M)
  assert etas[:2] == ["-", "-"] and all(re.fullmatch(r"\d+:\d\d:\d\d", e) for e in etas[2:])
  dropped = re.search(r"^train: 6,000 line pairs in .*; dropped (\d+) of the first 1,000 pairs: "
                      r"longer than (\d+) tokens$", err, re.M)
  assert dropped and dropped.group(2) == "256", err[:2000]


@pytest.mark.slow
def test_startup_block_matches_summary(trained_run):
  startup = _block(trained_run.stderr, "t2t_repro.train")
  assert startup["pairs"] == "train 6,000, dev 300, test 300"
  assert startup["vocabulary"] == f"2,000 pieces, {trained_run.model_dir / 'vocab.model'}"
  assert startup["hparams"] == "tiny, train_steps=200"
  assert startup["tokens/update"] == ("2,048 batch_tokens x 1 replica(s) x 1 accum_steps = 2,048")
  assert startup["precision"] == "float32"
  assert startup["start"] == "new run at step 0"
  assert startup["model dir"] == str(trained_run.model_dir)
  so_far, imports = map(float, re.fullmatch(r"([\d.]+) s so far, of which imports ([\d.]+) s",
                                            startup["start-up"]).groups())
  first, tracing = map(float, re.search(r"^first update done ([\d.]+) s after the start \(tracing "
                                        r"and running it ([\d.]+) s\)$", trained_run.stderr,
                                        re.M).groups())
  assert 0 < imports <= so_far < first and tracing <= first - so_far + 0.1
  summary = _run(["-m", "t2t_repro.summary", "--hparams=tiny"])
  assert summary.returncode == 0, summary.stderr[-2000:]
  built = re.search(r"parameters \(built model\): +([\d,]+)", summary.stdout).group(1)
  assert startup["parameters"] == built


@pytest.mark.slow
def test_closing_block_and_prompt_exit(trained_run):
  closing = _block(trained_run.stderr, "t2t_repro.train finished")
  assert trained_run.stderr.rstrip("\n").endswith(closing["outputs"])  # the last lines
  assert closing["checkpoint"] == tf.train.latest_checkpoint(str(trained_run.model_dir))
  assert closing["steps"] == "0 -> 200 (200 this run)"
  assert re.fullmatch(r"step 200: loss [\d.]+ nll [\d.]+ ppl [\d.]+ BLEU [\d.]+ "
                      r"\(sacreBLEU, first 20 dev lines\)", closing["dev"])
  test_bleu = re.search(r"^sacreBLEU \(primary[^)]*\): ([\d.]+)$", trained_run.stderr, re.M).group(1)
  assert closing["test"] == f"sacreBLEU {test_bleu} (parallel_text, first 20 lines, beam 4, alpha 0.6)"
  assert trained_run.exit_after_last_line < 5.0, trained_run.exit_after_last_line


def test_help_lists_every_problem_and_hparam_set():
  result = _run(["-m", "t2t_repro.train", "--help"])  # absl's --help exits with 1
  assert result.stderr == "" and "--model_dir" in result.stdout, result.stderr[-2000:]
  text = re.sub(r"\s+", " ", result.stdout)
  problems = re.search(r"--problem: Named data source. One of: ([^.]*)\.", text).group(1).split(", ")
  assert problems == list_problems()
  sets = re.search(r"--list_hparams describes them\): ([^.]*)\.", text).group(1).split(", ")
  assert sets == hparams_lib.list_hparams() and "big" in sets and "tiny" in sets
  listed = _run(["-m", "t2t_repro.train", "--list_hparams"])
  assert listed.returncode == 0 and listed.stderr == "", listed.stderr
  lines = listed.stdout.splitlines()
  assert len(lines) == len(sets)
  for name, line in zip(sets, lines):
    raw = hparams_lib.read_set(name)
    parent = f" (parent {raw['parent']})" if raw.get("parent") else ""
    assert line == f"{name}{parent}: {raw['description']}" and raw["description"]
  assert any(line.startswith("big (parent base): Transformer big") for line in lines)


def test_plot_attention_help_is_quiet_and_lazy():
  result = _run([tool_path("plot_attention"), "--help"])
  assert "--model_dir" in result.stdout and result.stderr == ""
  lazy = _run(["-c", "import sys; import t2t_repro.commands.plot_attention; "
                     "print('tensorflow' in sys.modules, 'matplotlib' in sys.modules)"])
  assert lazy.stdout.split() == ["False", "False"], lazy.stderr[-2000:]


def test_stderr_filter_drops_only_noise():
  """The descriptor-2 filter of logs.setup in a fresh process (no TensorFlow needed)."""
  script = (
      "import os, sys\n"
      "from t2t_repro import logs\n"
      "logs.setup(['cmd'])\n"
      "os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are "
      "written to STDERR\\n')\n"
      "os.write(2, b'I0000 00:00:1795432438.790553    5383 port.cc:153] oneDNN custom ops\\n')\n"
      "os.write(2, b'E0000 00:00:1795432440.036336    5383 cuda_platform.cc:52] failed call to "
      "cuInit: UNKNOWN ERROR (303)\\n')\n"
      "os.write(2, b'normalizer.cc(51) ')\n"
      "os.write(2, b'LOG(INFO) precompiled_charsmap is empty.\\n')\n"
      "os.write(2, b'W0000 00:00:1.5  7 some_op.cc:9] a warning\\n')\n"
      "os.write(2, b'E1123 11:14:02.5  7 loader.cc:12] a real error\\n')\n"
      "print('ours', file=sys.stderr)\n"
      "os.write(2, b'no newline at the end')\n")
  quiet = _run(["-c", script])
  assert quiet.returncode == 0
  assert quiet.stderr == "E1123 11:14:02.5  7 loader.cc:12] a real error\nours\nno newline at the end"
  loud = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0"), check=False)
  assert loud.stderr.count("\n") == 7 and "cuInit" in loud.stderr and "oneDNN" in loud.stderr
  verbose = _run(["-c", script.replace("logs.setup(['cmd'])", "logs.setup(['cmd', '-v', '1'])")])
  assert verbose.stderr == loud.stderr  # --verbosity=1 shows everything too


def test_progress_plain_lines_and_terminal_bar():
  out = io.StringIO()
  progress = logs.Progress(train_steps=20, start_step=10, log_every=4, terminal=False, stream=out)
  for step in range(11, 21):
    progress.update(step, loss=2.0, nll=1.5, lr=1e-3, tokens_per_sec=12345.678)
  progress.line("saved x")
  lines = out.getvalue().splitlines()
  assert [line.split(" | ")[0] for line in lines] == ["step 12/20", "step 16/20", "step 20/20",
                                                      "saved x"]
  assert lines[0].split(" | ")[1:5] == ["loss 2.0000", "nll 1.5000", "lr 1.000e-03", "12,346 tok/s"]
  assert lines[0].endswith("ETA -") and lines[2].endswith("ETA 0:00:00")  # too few; the end
  bar = io.StringIO()
  progress = logs.Progress(train_steps=20, start_step=0, log_every=4, terminal=True, stream=bar)
  time.sleep(0.06)  # the Progbar redraws at most every 0.05 s
  progress.update(1, loss=2.0, nll=1.5, lr=1e-3, tokens_per_sec=12345.678)
  progress.line("dev step 1: ...")
  text = bar.getvalue()
  assert "12,346 tok/s" in text and "\r" in text and "12345.6" not in text
  assert text.endswith("\ndev step 1: ...\n")  # the bar's line is ended before a message


def test_eta_is_a_moving_average_of_the_recent_updates():
  """No ETA until ETA_MIN_UPDATES updates are timed after the run's first one (whose tracing
  took 100 s here); then (remaining updates) x (mean time per update in the window)."""
  now = [0.0]
  out = io.StringIO()
  progress = logs.Progress(train_steps=1000, start_step=0, log_every=5, terminal=False, stream=out,
                           clock=lambda: now[0])
  now[0] = 100.0  # the first update: tracing
  progress.update(1, 2.0, 1.5, 1e-3, 1.0)
  for step in range(2, 41):  # 2 s per update, then 4 s per update from step 31
    now[0] += 2.0 if step <= 30 else 4.0
    progress.update(step, 2.0, 1.5, 1e-3, 1.0)
    if step == 5:
      assert progress.eta(5) is None
  etas = [line.rsplit("ETA ", 1)[1] for line in out.getvalue().splitlines()]
  assert etas[:2] == ["-", "-"]  # steps 5 and 10: 4 and 9 updates timed
  assert etas[2] == logs.hms(2.0 * (1000 - 15))  # not (100 + 28) / 15 s per update
  # Step 40: the window is the last 25 updates (5 intervals): 15 of 2 s and 10 of 4 s.
  assert progress.eta(40) == pytest.approx((15 * 2.0 + 10 * 4.0) / 25 * 960)
  assert etas[-1] == logs.hms((15 * 2.0 + 10 * 4.0) / 25 * 960)


def test_closing_block_names_the_phases_that_ran():
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from t2t_repro.training import report  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.train import TrainResult  # pylint: disable=import-outside-toplevel
  trainer = SimpleNamespace(step=100, model_dir="runs/x")
  result = TrainResult(step=100, checkpoint="runs/x/ckpt-100")
  text = report.closing_block(trainer, 0, [("training", 91.0)], 95.0, result)
  assert _block(text, "t2t_repro.train finished")["wall time"] == "0:01:35 (training 0:01:31)"
  text = report.closing_block(trainer, 0, [("training", 91.0), ("dev", 30.0), ("test", 12.0)],
                              140.0, result)
  assert _block(text, "t2t_repro.train finished")["wall time"] == (
      "0:02:20 (training 0:01:31, dev 0:00:30, test 0:00:12)")


def test_is_noise_levels():
  info = b"I0000 00:00:1795432438.790553    5383 port.cc:153] oneDNN custom operations are on."
  warning = b"W0000 00:00:1.0  1 x.cc:1] w"
  python_info = b"I1123 11:14:02.596747 140235749550976 vocab.py:81] Learned a vocabulary"
  assert logs.is_noise(info, 1) and logs.is_noise(warning, 2) and not logs.is_noise(warning, 1)
  assert not logs.is_noise(info, 0) and not logs.is_noise(python_info, 2)
  assert not logs.is_noise(b"step 5/20 | loss 1.0", 3)


@pytest.mark.slow
def test_averaging_a_short_run_says_what_to_do(trained_run, tmp_path):
  """README flow on a model dir with fewer checkpoints than it asks to average (5)."""
  result = _run([tool_path("average_checkpoints"), f"--model_dir={trained_run.model_dir}",
                 "--average_last=5", f"--output_dir={tmp_path / 'avg'}"])
  assert result.returncode == 2  # a usage error: --average_last
  assert result.stderr.startswith("average: error: ") and result.stderr.count("\n") == 1
  assert "lists 2 checkpoints, fewer than --average_last=5" in result.stderr
  assert "average those with --average_last=2" in result.stderr
  assert not os.path.exists(tmp_path / "avg")


def test_finish_does_not_wait_for_a_child_holding_stderr():
  """logs.finish drains the stderr filter and exits even while a child process keeps the
  filter's pipe open (it inherited descriptor 2)."""
  script = ("import subprocess, sys\n"
            "from t2t_repro import logs\n"
            "logs.setup(['cmd'])\n"
            "child = subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL)\n"
            "print('last line', file=sys.stderr)\n"
            "logs.finish(3)\n")
  started = time.monotonic()
  result = _run(["-c", script])
  assert result.returncode == 3 and result.stderr == "last line\n"
  assert time.monotonic() - started < 30  # not the child's 60 s


def test_error_line_survives_a_saturated_cpu():
  """The one-line error written just before `logs.finish` reaches stderr every time, even when
  the filter's reader thread is starved (40 runs, 8 at a time, beside 2 busy processes)."""
  # What `runner.run` and `launch` do on a user error (its imports, absl and numpy, would only slow the test).
  script = ("import sys\n"
            "from t2t_repro import logs\n"
            "logs.setup(['cmd'])\n"
            "sys.stderr.write('cmd: error: --beam_size=0: must be >= 1\\n')\n"
            "sys.stderr.flush()\n"
            "logs.finish(2)\n")
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
  results = []
  try:
    for _ in range(5):
      runs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env) for _ in range(8)]
      results += [(run.wait(timeout=120), run.stderr.read()) for run in runs]
      for run in runs:
        run.stdout.close()
        run.stderr.close()
  finally:
    for process in busy:
      process.kill()
      process.wait()
  assert results == [(2, b"cmd: error: --beam_size=0: must be >= 1\n")] * 40


def test_log_records_are_plain_lines():
  """The project's absl INFO/WARNING lines have the command's plain format; -v 1 keeps absl's."""
  script = ("from t2t_repro import logs\n"
            "logs.setup()\n"
            "from absl import logging\n"
            "from t2t_repro.commands import runner\n"
            "def main(argv):\n"
            "  logging.info('starting at step %d', 0)\n"
            "  logging.warning('only %d checkpoints', 3)\n"
            "  logging.debug('hidden')\n"
            "runner.run(main, 'cmd')\n")
  plain = _run(["-c", script])
  assert plain.returncode == 0 and plain.stderr == "starting at step 0\nWARNING: only 3 checkpoints\n"
  verbose = _run(["-c", script, "-v", "1"])
  assert re.fullmatch(r"I\d{4} [\d:.]+ \d+ <string>:6\] starting at step 0\n"
                      r"W\d{4} [\d:.]+ \d+ <string>:7\] only 3 checkpoints\n"
                      r"I\d{4} [\d:.]+ \d+ <string>:8\] hidden\n", verbose.stderr), verbose.stderr


def test_translate_log_is_plain(tmp_path_factory, shared_data_dir):
  """translate with stderr redirected: no Progbar redraws or colour codes, plain lines only."""
  model_dir = make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)
  result = _run(["-m", "t2t_repro.translate", f"--model_dir={model_dir}", "--beam_size=1"],
                input="A man .\n\nTwo dogs run .\n")
  assert result.returncode == 0, result.stderr[-2000:]
  assert len(result.stdout.split("\n")) == 4
  assert "\r" not in result.stderr and not ANSI.search(result.stderr), result.stderr
  assert re.fullmatch(r"loading \S+ckpt-\d+\ndecoding with beam_size 1, alpha [\d.]+, "
                      r"decode_extra_length \d+\ntranslated 3 lines in 0:00:\d\d\n", result.stderr), \
      result.stderr
