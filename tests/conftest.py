"""Shared pytest fixtures."""

import contextlib
import dataclasses
import fcntl
import json
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf

# Two logical CPU devices, so MirroredStrategy tests can run 2 replicas on this machine.
# Must happen before TensorFlow initializes its devices, hence at import of conftest.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def shared_data_dir():
  """The real data folder: $T2T_DATA_DIR, else ../shared/data next to the repository.

  Skips the test (with the path in the reason) when the folder is absent.
  """
  path = os.environ.get("T2T_DATA_DIR") or os.path.join(os.path.dirname(_REPO_ROOT), "shared", "data")
  if not os.path.isdir(path):
    pytest.skip(f"real data folder {path} is absent (set T2T_DATA_DIR to a copy of shared/data)")
  return path


@pytest.fixture(name="ptb_dir", scope="session")
def fixture_ptb_dir(shared_data_dir):
  """shared/data/ptb_sample/combined; skips when absent."""
  path = os.path.join(shared_data_dir, "ptb_sample", "combined")
  if not os.path.isdir(path):
    pytest.skip(f"PTB sample {path} is absent")
  return path


def tool_path(name):
  """Path of the command-line tool tools/NAME.py."""
  return os.path.join(_REPO_ROOT, "tools", f"{name}.py")


@contextlib.contextmanager
def _built_once(tmp_path_factory, name):
  """(folder, done): a folder that every pytest-xdist worker of this session shares, held
  under an exclusive lock; `done` is False for the first worker to get it, which builds
  the folder's contents and must write `{folder}/done.json`, and True for the others,
  which read them. Without xdist the folder is the session's own."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # the basetemp every worker's basetemp sits in
  folder = root / name
  with open(root / f"{name}.lock", "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    folder.mkdir(exist_ok=True)
    yield folder, (folder / "done.json").exists()


@pytest.fixture(scope="session")
def multi30k_slice(shared_data_dir, tmp_path_factory):
  """The first 6000 train and 300 val pairs of Multi30k, as parallel_text files
  (train.en/.de, dev.en/.de); also the vocabulary cache of the CLI runs. One folder for
  the whole session (all xdist workers): tests treat it as read-only."""
  with _built_once(tmp_path_factory, "m30k") as (out, done):
    if not done:
      for split, name, n in (("train", "train", 6000), ("dev", "val", 300)):
        for lang in ("en", "de"):
          with open(os.path.join(shared_data_dir, "multi30k", f"{name}.{lang}"),
                    encoding="utf-8") as f:
            lines = [next(f) for _ in range(n)]
          (out / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
      _learn_tiny_vocab(out)  # before any worker's training run would learn it concurrently
      (out / "done.json").write_text("{}", encoding="utf-8")
  return out


def _learn_tiny_vocab(data):
  """The vocabulary `train_command`'s runs use (`tiny`: 2000 pieces), cached in `data`."""
  from t2t_repro.data import problems, vocab  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem("parallel_text", None, train_src=str(data / "train.en"),
                                 train_tgt=str(data / "train.de"))
  vocab.get_or_learn_vocab(problem, get_hparams("tiny").vocab_size, str(data))


def train_command(data, model_dir, *extra):
  """`python -m t2t_repro.train` with `tiny` on the multi30k_slice files."""
  return [sys.executable, "-m", "t2t_repro.train", "--hparams=tiny", "--problem=parallel_text",
          f"--train_src={data / 'train.en'}", f"--train_tgt={data / 'train.de'}",
          f"--dev_src={data / 'dev.en'}", f"--dev_tgt={data / 'dev.de'}",
          f"--model_dir={model_dir}", f"--vocab_dir={data}", "--log_every_steps=5",
          "--dev_samples=0", *extra]  # TensorBoard's translations and attention: trained_run only


@dataclasses.dataclass
class TrainedRun:
  """One finished `train` run: its model dir, return code, stdout, stderr (as written to a
  file) and the seconds from the last byte written to stderr to the process's exit."""
  model_dir: object
  returncode: int
  stdout: str
  stderr: str
  exit_after_last_line: float


@pytest.fixture(scope="session")
def trained_run(multi30k_slice, tmp_path_factory):
  """The one end-to-end training run of the suite, shared by the tests that need a trained
  model or the command's output: `tiny` for 200 steps on real Multi30k text (dev loss at
  step 0 and 200, dev BLEU and test BLEU on 20 lines, TensorBoard's translations of 10 dev lines
  and attention images, checkpoints at 100 and 200), at the
  default verbosity (TF_CPP_MIN_LOG_LEVEL unset) with stdout and stderr redirected to files.
  Trained once per session, whatever the number of xdist workers; tests only read it.
  """
  with _built_once(tmp_path_factory, "trained") as (work, done):
    if not done:
      _train_shared_run(multi30k_slice, work)
    info = json.loads((work / "done.json").read_text(encoding="utf-8"))
  return TrainedRun(work / "model", info["returncode"],
                    (work / "stdout.txt").read_text(encoding="utf-8"),
                    (work / "stderr.txt").read_text(encoding="utf-8"), info["exit_after_last_line"])


def _train_shared_run(data, work):
  """Runs `trained_run`'s command into `work`; writes work/done.json (return code, seconds
  from the last byte written to stderr to the exit)."""
  model_dir = work / "model"
  cmd = train_command(data, model_dir, "--train_steps=200", "--eval_every_steps=200",
                      "--eval_at_start", "--dev_bleu_lines=20", "--test_bleu_lines=20",
                      "--save_checkpoints_steps=100", "--dev_samples=10",
                      f"--test_src={data / 'dev.en'}",
                      f"--test_tgt={data / 'dev.de'}")
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  out_path, err_path = work / "stdout.txt", work / "stderr.txt"
  with open(out_path, "wb") as out, open(err_path, "wb") as err:
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
    size, last_write, deadline = 0, time.monotonic(), time.monotonic() + 900
    while proc.poll() is None:
      assert time.monotonic() < deadline, "train did not finish in 900 s"
      if os.path.getsize(err_path) != size:
        size, last_write = os.path.getsize(err_path), time.monotonic()
      time.sleep(0.05)
    exited = time.monotonic()
  if os.path.getsize(err_path) != size:  # written during the last poll interval
    last_write = exited
  (work / "done.json").write_text(json.dumps(
      {"returncode": proc.returncode, "exit_after_last_line": exited - last_write}), encoding="utf-8")


@pytest.fixture(scope="session")
def exported_model(trained_run, tmp_path_factory):
  """The model base path of the server tests: `trained_run`'s model exported by
  `python -m t2t_repro.export` as <folder>/1. Exported once per session."""
  with _built_once(tmp_path_factory, "exported") as (work, done):
    if not done:
      result = subprocess.run(
          [sys.executable, "-m", "t2t_repro.export", f"--model_dir={trained_run.model_dir}",
           f"--export_dir={work / 'base' / '1'}"], capture_output=True, text=True, timeout=900,
          check=False)
      assert result.returncode == 0, result.stderr[-3000:]
      (work / "done.json").write_text("{}", encoding="utf-8")
  return work / "base"


@pytest.fixture(scope="session")
def litert_export(trained_run, tmp_path_factory):
  """A model base path whose version 1 is `trained_run`'s model exported by
  `python -m t2t_repro.export --format=tflite` (float32). Exported once per session."""
  with _built_once(tmp_path_factory, "litert") as (work, done):
    if not done:
      result = subprocess.run(
          [sys.executable, "-m", "t2t_repro.export", "--format=tflite", "--n_best=3",
           f"--model_dir={trained_run.model_dir}", f"--export_dir={work / 'base' / '1'}"],
          capture_output=True, text=True, timeout=900, check=False)
      assert result.returncode == 0, result.stderr[-3000:]
      (work / "done.json").write_text("{}", encoding="utf-8")
  return work / "base"


_EXIT_STATUS = []


def pytest_sessionfinish(session, exitstatus):
  del session
  _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
  """Ends the test process as soon as pytest has reported (t2t_repro.logs.finish): tearing
  down the TensorFlow objects the tests left (tf.data iterators still prefetching) kept
  pytest alive for many seconds after its summary on a loaded machine. Only for a
  command-line pytest run, not for pytest.main() inside another program."""
  if _EXIT_STATUS and os.path.basename(sys.argv[0]) in ("pytest", "py.test", "__main__.py") \
      and config.pluginmanager.has_plugin("terminalreporter"):
    from t2t_repro import logs  # pylint: disable=import-outside-toplevel
    logs.finish(_EXIT_STATUS[-1])
