"""One writer per model dir (`t2t_repro.writer_lock`, docs/RELIABILITY.md): while a training
runs, a second training, tune, and an average into the model dir are refused at once with one
line naming the holder; an average elsewhere reads only complete (listed) checkpoints; a lock
left by a killed process is taken over with one warning, one of another host is refused with
how to clear it; a read-only model dir is one line before any work."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from command_util import ENV, error_line, run_command
from model_dir_util import HPARAMS, make_model_dir
from t2t_repro import errors, writer_lock

DATA_EXIT = errors.DATA_EXIT
HOLDS = "import sys, time\nfrom t2t_repro import writer_lock\n" \
        "with writer_lock.hold(sys.argv[1], 'train'):\n  print('held', flush=True)\n  time.sleep(600)\n"


@pytest.fixture(name="text")
def fixture_text(tmp_path):
  path = tmp_path / "text.txt"
  path.write_text("a man rides a bike .\ntwo dogs play in the snow .\n" * 20, encoding="utf-8")
  return path


def _new_model_dir(tmp_path, shared_data_dir, name="model"):
  """A model dir holding only vocab.model and hparams.json: `train` starts a new run there."""
  source = make_model_dir(tmp_path / "source", shared_data_dir)
  model_dir = tmp_path / name
  model_dir.mkdir()
  for file_name in ("vocab.model", "hparams.json"):
    shutil.copy(os.path.join(source, file_name), model_dir / file_name)
  return model_dir


def _train_args(model_dir, text, steps):
  return ["--hparams=tiny", f"--hparams_override={HPARAMS}", "--problem=parallel_text",
          f"--train_src={text}", f"--train_tgt={text}", f"--model_dir={model_dir}",
          f"--train_steps={steps}", "--eval_every_steps=0", "--save_checkpoints_steps=5",
          "--save_checkpoints_secs=0", "--keep_checkpoint_max=1000", "--average_last=0"]


def _start_training(model_dir, text):
  """A training that runs until killed, once it holds the lock and listed 2 checkpoints."""
  program = ("import sys\nfrom t2t_repro.commands import launch\n"
             f"sys.argv = ['train', *{list(map(str, _train_args(model_dir, text, 10 ** 6)))!r}]\n"
             "launch.launch('train')\n")
  process = subprocess.Popen([sys.executable, "-c", program], env=ENV,  # pylint: disable=consider-using-with
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  deadline = time.monotonic() + 300
  try:
    while len(_listed(model_dir)) < 2:
      assert process.poll() is None, process.stderr.read()[-3000:]
      assert time.monotonic() < deadline
      time.sleep(0.5)
  except BaseException:
    process.kill()
    process.wait()
    raise
  return process


def _listed(model_dir):
  """The checkpoint names the `checkpoint` state file lists (without TensorFlow)."""
  try:
    text = (model_dir / "checkpoint").read_text(encoding="utf-8")
  except FileNotFoundError:
    return []
  return [line.split('"')[1] for line in text.splitlines()
          if line.startswith("all_model_checkpoint_paths")]


def _holder(model_dir):
  with open(writer_lock.lock_path(model_dir), encoding="utf-8") as f:
    return json.load(f)


def _refusal(model_dir, holder):
  return (f"{model_dir}: locked by train {holder['pid']}@{holder['host']} since "
          f"{holder['since']}: one writer per model dir; wait until it ends")


def test_one_writer_while_training(tmp_path, shared_data_dir, text):
  model_dir = _new_model_dir(tmp_path, shared_data_dir)
  training = _start_training(model_dir, text)
  try:
    holder = _holder(model_dir)
    assert holder["pid"] == training.pid and holder["host"] == socket.gethostname()
    for command, args in (
        ("train", _train_args(model_dir, text, 10)),
        ("tune", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}",
                  "--beam_sizes=1", "--alphas=0.6"]),
        ("average", [f"--model_dir={model_dir}", "--average_last=2",
                     f"--output_dir={model_dir / 'averaged'}"])):
      line = error_line(run_command("", command, *args), DATA_EXIT, command)
      assert line == f"{command}: error: {_refusal(model_dir, holder)}"
    assert not (model_dir / "decoding.json").exists() and not (model_dir / "averaged").exists()
    # A reader takes no lock, and averages the last two checkpoints the state file listed.
    result = run_command("", "average", f"--model_dir={model_dir}", "--average_last=2",
                         f"--output_dir={tmp_path / 'averaged'}")
    assert result.returncode == 0, result.stderr[-3000:]
    sources = json.loads((tmp_path / "averaged" / "averaged.json").read_text())["checkpoints"]
    listed = _listed(model_dir)
    names = [os.path.basename(p) for p in sources]
    assert len(names) == 2 and set(names) <= set(listed)
    assert listed.index(names[1]) == listed.index(names[0]) + 1
    # The training went on; a save that is not listed yet is not read.
    assert training.poll() is None
  finally:
    training.kill()
    training.wait()


def test_a_checkpoint_not_listed_yet_is_not_read(tmp_path, shared_data_dir, text):
  """ckpt-9's files are all there but the state file does not list it: what a reader meets
  between a writer's last checkpoint file and its update of the state file."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(model_dir / f"ckpt-7{suffix}", model_dir / f"ckpt-9{suffix}")
  unlisted = (f"checkpoint {model_dir}/ckpt-9 is not listed in {model_dir}/checkpoint (still "
              "being written, or dropped from the list); give a listed one")
  for command, args in (
      ("translate", [f"--model_dir={model_dir}", f"--checkpoint_path={model_dir}/ckpt-9",
                     f"--input_file={text}"]),
      ("average", [f"--checkpoints={model_dir}/ckpt-7,{model_dir}/ckpt-9",
                   f"--output_dir={tmp_path / 'averaged'}"])):
    line = error_line(run_command("", command, *args), DATA_EXIT, command)
    assert line == f"{command}: error: {unlisted}"
  assert not (tmp_path / "averaged").exists()


def test_a_lock_left_by_kill_9_is_taken_over(tmp_path, shared_data_dir, text):
  model_dir = _new_model_dir(tmp_path, shared_data_dir)
  training = _start_training(model_dir, text)
  try:
    holder = _holder(model_dir)
  finally:
    training.send_signal(signal.SIGKILL)
    training.wait()
  assert _holder(model_dir) == holder  # left behind, naming the dead process
  # Killed at any point of a save: a reader averages the last two listed checkpoints.
  listed = _listed(model_dir)
  result = run_command("", "average", f"--model_dir={model_dir}", "--average_last=2",
                       f"--output_dir={tmp_path / 'averaged'}")
  assert result.returncode == 0, result.stderr[-3000:]
  sources = json.loads((tmp_path / "averaged" / "averaged.json").read_text())["checkpoints"]
  assert [os.path.basename(p) for p in sources] == listed[-2:]
  steps = int(listed[-1].split("-")[1]) + 5
  result = run_command("", "train", *_train_args(model_dir, text, steps))
  assert result.returncode == 0, result.stderr[-3000:]
  warnings = [line for line in result.stderr.splitlines() if "took over the lock" in line]
  assert len(warnings) == 1
  assert warnings[0].endswith(f"{model_dir}: took over the lock left by train {holder['pid']}@"
                              f"{holder['host']} since {holder['since']} (that process is gone)")
  assert _listed(model_dir)[-1] == f"ckpt-{steps}"
  assert not os.path.exists(writer_lock.lock_path(model_dir))


def test_a_lock_of_another_host_says_how_to_clear_it(tmp_path, shared_data_dir, text):
  model_dir = tmp_path / "model"
  shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  lock = writer_lock.lock_path(model_dir)
  holder = {"pid": 4242, "host": "elsewhere", "command": "train", "since": "2026-01-02 03:04:05 UTC"}
  with open(lock, "w", encoding="utf-8") as f:
    json.dump(holder, f)
  result = run_command("", "tune", f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}",
                       "--beam_sizes=1", "--alphas=0.6")
  assert error_line(result, DATA_EXIT, "tune") == (
      f"tune: error: {model_dir}: locked by train 4242@elsewhere since 2026-01-02 03:04:05 UTC "
      f"(another host); once that process is gone, remove {lock} to clear it")
  with open(lock, encoding="utf-8") as f:
    assert json.load(f) == holder
  assert not (model_dir / "decoding.json").exists()


# os.access says the folder MODEL cannot be written (chmod a-w for a user other than root, or a
# read-only filesystem).
_READ_ONLY = """
    import os
    MODEL, access = {folder!r}, os.access
    os.access = lambda path, mode, **k: (False if str(path) == MODEL and mode & os.W_OK
                                         else access(path, mode, **k))
    """


def test_a_read_only_model_dir_is_one_line_before_any_work(tmp_path, shared_data_dir, text):
  model_dir = tmp_path / "model"
  shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  inject = _READ_ONLY.format(folder=str(model_dir))
  read_only = (f"{model_dir}: cannot write into this folder (read-only or permission denied); "
               "nothing was done")
  for command, args in (
      ("tune", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}",
                "--beam_sizes=1,2", "--alphas=0.6,1.0"]),
      ("train", _train_args(model_dir, text, 10)),
      ("average", [f"--model_dir={model_dir}", "--average_last=1",
                   f"--output_dir={model_dir / 'averaged'}"])):
    result = run_command(inject, command, *args)
    assert error_line(result, DATA_EXIT, command) == f"{command}: error: {read_only}"
    assert "BLEU" not in result.stdout  # refused before the grid is decoded
  assert not (model_dir / "decoding.json").exists() and not (model_dir / "averaged").exists()
  # A writable model dir in a read-only folder: its lock goes there, and the line says so.
  inject = _READ_ONLY.format(folder=str(tmp_path))
  result = run_command(inject, "average", f"--model_dir={model_dir}", "--average_last=1",
                       f"--output_dir={model_dir / 'averaged'}")
  assert error_line(result, DATA_EXIT, "average") == (
      f"average: error: {tmp_path}: cannot write into this folder (read-only or permission "
      f"denied); the lock of {model_dir}, .model.lock, goes there (one writer per model dir); "
      "nothing was done")
  assert not (model_dir / "averaged").exists()


def test_nested_holds_of_one_process_are_one(tmp_path):
  folder = tmp_path / "model"
  with writer_lock.hold(folder, "parse"):
    with writer_lock.hold(folder, "train"):
      assert _holder(folder)["command"] == "parse"
    assert os.path.exists(writer_lock.lock_path(folder))
  assert not os.path.exists(writer_lock.lock_path(folder)) and not folder.exists()


def test_a_folder_inside_a_model_dir_has_its_lock(tmp_path):
  (tmp_path / "model").mkdir()
  (tmp_path / "model" / "hparams.json").write_text("{}")
  assert writer_lock.owner(tmp_path / "model" / "best") == str(tmp_path / "model")
  assert writer_lock.lock_path(tmp_path / "model" / "best") == str(tmp_path / ".model.lock")
  assert writer_lock.owner(tmp_path / "other") == str(tmp_path / "other")


def test_a_second_process_is_refused_and_a_killed_ones_lock_taken_over(tmp_path, caplog):
  folder = tmp_path / "model"
  holder_process = subprocess.Popen([sys.executable, "-c", HOLDS, str(folder)], env=ENV,  # pylint: disable=consider-using-with
                                    stdout=subprocess.PIPE, text=True)
  try:
    assert holder_process.stdout.readline() == "held\n"
    holder = _holder(folder)
    with pytest.raises(writer_lock.LockedError) as refused:
      with writer_lock.hold(folder, "tune"):
        pass
    assert str(refused.value) == _refusal(folder, holder)
  finally:
    holder_process.kill()
    holder_process.wait()
  with writer_lock.hold(folder, "tune"):
    assert _holder(folder)["pid"] == os.getpid()
  assert [r.getMessage() for r in caplog.records if "took over" in r.getMessage()] == [
      f"{folder}: took over the lock left by train {holder['pid']}@{holder['host']} since "
      f"{holder['since']} (that process is gone)"]
