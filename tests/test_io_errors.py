"""A corrupt checkpoint, an unreadable model dir, a read-only or full output and an invalid
hparams.json give every command ONE line naming the file and what is wrong, exit 1 (data and
I/O), and leave the model dir byte-for-byte as it was (docs/RELIABILITY.md). The failures a
root test process cannot cause (a read-only filesystem, a refused read) are injected at the
call that meets them."""

import hashlib
import os
import shutil

import pytest

from command_util import error_line, run_command
from model_dir_util import HPARAMS, make_model_dir, make_trainer_dir
from t2t_repro import errors

DATA_EXIT = errors.DATA_EXIT


def _snapshot(folder):
  """{relative path: sha1} of every file under `folder`."""
  result = {}
  for root, _, names in os.walk(folder):
    for name in names:
      with open(os.path.join(root, name), "rb") as f:
        result[os.path.relpath(os.path.join(root, name), folder)] = hashlib.sha1(
            f.read()).hexdigest()
  return result


@pytest.fixture(name="text")
def fixture_text(tmp_path):
  """A small parallel text (the same file on both sides)."""
  path = tmp_path / "text.txt"
  path.write_text("a man rides a bike .\ntwo dogs play in the snow .\n" * 20, encoding="utf-8")
  return path


def _train_args(model_dir, text):
  return ["--hparams=tiny", f"--hparams_override={HPARAMS}", "--problem=parallel_text",
          f"--train_src={text}", f"--train_tgt={text}", f"--model_dir={model_dir}",
          "--train_steps=1", "--eval_every_steps=0"]


def _truncate(path):
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 2])


def test_a_truncated_checkpoint_index_is_called_corrupt(tmp_path, shared_data_dir, text):
  model_dir = tmp_path / "model"
  shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  _truncate(model_dir / "ckpt-7.index")
  before = _snapshot(tmp_path)
  corrupt = f"checkpoint {model_dir}/ckpt-7 is corrupt (not an sstable (bad magic number))"
  for command, args in (
      ("translate", [f"--model_dir={model_dir}", f"--input_file={text}"]),
      ("score", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}"]),
      ("validate", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}"]),
      ("average", [f"--model_dir={model_dir}", "--average_last=1",
                   f"--output_dir={tmp_path / 'averaged'}"]),
      ("export", [f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'export'}"]),
      ("export", [f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'ct2'}",
                  "--format=ctranslate2"])):
    line = error_line(run_command("", command, *args), DATA_EXIT, command)
    assert line == f"{command}: error: {corrupt}"
  assert _snapshot(tmp_path) == before


def test_train_calls_a_truncated_checkpoint_corrupt(tmp_path, shared_data_dir, text):
  """Not "checkpoints of another model" with hparams advice (the usage error of a checkpoint
  that does not fit)."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_trainer_dir(tmp_path / "trained", shared_data_dir), model_dir)
  _truncate(model_dir / "ckpt-0.index")
  before = _snapshot(model_dir)
  line = error_line(run_command("", "train", *_train_args(model_dir, text)), DATA_EXIT, "train")
  assert line == (f"train: error: checkpoint {model_dir}/ckpt-0 is corrupt (not an sstable (bad "
                  f"magic number)); no checkpoint is listed before it in {model_dir}/checkpoint: "
                  "train in a new --model_dir")
  assert _snapshot(model_dir) == before


def test_training_into_a_copy_of_best_points_to_init_from(tmp_path, shared_data_dir, text):
  """best/, averaged/ and ema/ hold a model's weights without optimizer state: not checkpoints
  of another model, and not a run to resume."""
  from t2t_repro.model_dir import ModelDir  # pylint: disable=import-outside-toplevel
  from t2t_repro.training import averaging  # pylint: disable=import-outside-toplevel
  source = make_model_dir(tmp_path / "source", shared_data_dir)
  copy = tmp_path / "copy"
  averaging.average_checkpoints([f"{source}/ckpt-7"], ModelDir(str(copy)))
  before = _snapshot(copy)
  line = error_line(run_command("", "train", *_train_args(copy, text)), errors.USAGE_EXIT, "train")
  assert line == (f"train: error: --model_dir={copy} holds a model's weights without optimizer "
                  f"state ({copy}/ckpt-7, as best/, averaged/ and ema/ are written), which training "
                  f"cannot resume; to start a run from them, give --init_from={copy} and a new "
                  "--model_dir")
  assert _snapshot(copy) == before


def _readers(model_dir, text, tmp_path):
  """(command, args) of every command that reads a checkpoint of `model_dir`."""
  return (("translate", [f"--model_dir={model_dir}", f"--input_file={text}"]),
          ("score", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}"]),
          ("validate", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}"]),
          ("tune", [f"--model_dir={model_dir}", f"--src={text}", f"--tgt={text}",
                    "--beam_sizes=1", "--alphas=0.6"]),
          ("average", [f"--model_dir={model_dir}", "--average_last=1",
                       f"--output_dir={tmp_path / 'averaged'}"]),
          ("export", [f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'export'}"]))


def test_a_short_or_garbled_checkpoint_data_file_is_called_corrupt(tmp_path, shared_data_dir,
                                                                   text):
  """A .data file cut in half (TensorFlow: IndexError "Read less bytes than requested") or with
  garbled bytes (a checksum that does not match) gives every reader the corrupt line, and
  train's resume says how to resume from the checkpoint before it."""
  short, garbled = tmp_path / "short", tmp_path / "garbled"
  for model_dir in (short, garbled):
    shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  _truncate(short / "ckpt-7.data-00000-of-00001")
  data = bytearray((garbled / "ckpt-7.data-00000-of-00001").read_bytes())
  data[100::7] = bytes(b ^ 0x55 for b in data[100::7])
  (garbled / "ckpt-7.data-00000-of-00001").write_bytes(bytes(data))
  before = _snapshot(tmp_path)
  for model_dir in (short, garbled):
    for command, args in _readers(model_dir, text, tmp_path):
      line = error_line(run_command("", command, *args), DATA_EXIT, command)
      assert line.startswith(f"{command}: error: checkpoint {model_dir}/ckpt-7 is corrupt ("), line
  line = error_line(run_command("", "train", *_train_args(short, text)), DATA_EXIT, "train")
  assert line == (f"train: error: checkpoint {short}/ckpt-7 is corrupt (Read less bytes than "
                  f"requested); to resume from ckpt-5, the one before it, move {short}/ckpt-7.index "
                  f"and {short}/ckpt-7.data-* away and, in {short}/checkpoint, set "
                  'model_checkpoint_path: "ckpt-5" and remove the line of "ckpt-7"')
  assert _snapshot(tmp_path) == before


def test_serve_calls_a_short_variables_file_corrupt(tmp_path, shared_data_dir):
  """A SavedModel's variables are a checkpoint: serve's loading says the same line."""
  model_dir = make_model_dir(tmp_path / "source", shared_data_dir)
  version = tmp_path / "export" / "1"
  result = run_command("", "export", f"--model_dir={model_dir}", f"--export_dir={version}")
  assert result.returncode == 0, result.stderr[-3000:]
  _truncate(version / "variables" / "variables.data-00000-of-00001")
  result = run_command("", "serve", f"--model_base_path={tmp_path / 'export'}",
                       "--rest_api_port=0")
  assert error_line(result, DATA_EXIT, "serve") == (
      f"serve: error: checkpoint {version}/variables/variables is corrupt (Read less bytes than "
      "requested)")


def test_another_models_hparams_beside_a_checkpoint_is_one_line(tmp_path, shared_data_dir, text):
  """hparams.json of d_model 64 beside a d_model 32 checkpoint: one line naming the first
  tensor whose shape differs, without TensorFlow's warnings of unrestored values."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  hparams = (model_dir / "hparams.json").read_text(encoding="utf-8")
  assert '"d_model": 32' in hparams
  (model_dir / "hparams.json").write_text(hparams.replace('"d_model": 32', '"d_model": 64'),
                                          encoding="utf-8")
  before = _snapshot(tmp_path)
  for command, args in _readers(model_dir, text, tmp_path):
    result = run_command("", command, *args)
    line = error_line(result, DATA_EXIT, command)
    assert line == (f"{command}: error: checkpoint {model_dir}/ckpt-7 does "
                    "not fit this model: transformer/shared_embedding/embeddings has shape (1000, "
                    "32) there, (1000, 64) here")
    assert "Value in checkpoint could not be found" not in result.stderr
  assert _snapshot(tmp_path) == before


# Every write under the folder READ_ONLY fails as on a read-only filesystem: Python's open and
# os.makedirs with OSError EROFS, TensorFlow's file system (tf.io.gfile, the SavedModel and
# checkpoint writers go through it) with its PermissionDeniedError.
_READ_ONLY = """
    import builtins, errno, os
    import tensorflow as tf
    READ_ONLY = {folder!r}
    def _refused(path):
      return os.path.abspath(str(path)).startswith(READ_ONLY)
    def _python(function, writes):
      def wrapped(path, *args, **kwargs):
        if _refused(path) and writes(*args, **kwargs):
          raise OSError(errno.EROFS, "Read-only file system", str(path))
        return function(path, *args, **kwargs)
      return wrapped
    builtins.open = _python(builtins.open, lambda mode="r", *a, **k: set(mode) & set("wax+"))
    os.makedirs = _python(os.makedirs, lambda *a, **k: True)
    def _tensorflow(function):
      def wrapped(path, *args, **kwargs):
        if _refused(path):
          raise tf.errors.PermissionDeniedError(None, None, f"{{path}}; Read-only file system")
        return function(path, *args, **kwargs)
      return wrapped
    tf.io.gfile.makedirs = _tensorflow(tf.io.gfile.makedirs)
    tf.io.gfile.mkdir = _tensorflow(tf.io.gfile.mkdir)
    """


def test_output_on_a_read_only_filesystem(tmp_path, shared_data_dir, text):
  model_dir = make_model_dir(tmp_path / "model", shared_data_dir)
  read_only = tmp_path / "read_only"
  read_only.mkdir()
  inject = _READ_ONLY.format(folder=str(read_only))
  before = _snapshot(tmp_path)
  for command, args, target in (
      ("translate", [f"--input_file={text}"], read_only / "out.txt"),
      ("score", [f"--src={text}", f"--tgt={text}"], read_only / "scores.txt"),
      ("average", ["--average_last=1"], read_only / "averaged"),
      ("export", [], read_only / "export")):
    flag = {"translate": "output_file", "score": "output_file", "average": "output_dir",
            "export": "export_dir"}[command]
    result = run_command(inject, command, f"--model_dir={model_dir}", *args, f"--{flag}={target}")
    line = error_line(result, DATA_EXIT, command)
    assert line == (f"{command}: error: {target}: cannot write it: read-only file system; it is "
                    "left as it was")
  assert _snapshot(tmp_path) == before


# os.access says the folder MODEL is unreadable (chmod 000 for a user other than root).
_UNREADABLE = """
    import os
    MODEL, access = {folder!r}, os.access
    os.access = lambda path, mode, **k: False if str(path) == MODEL else access(path, mode, **k)
    """


def test_an_unreadable_model_dir_is_called_unreadable(tmp_path, shared_data_dir, text):
  model_dir = tmp_path / "model"
  shutil.copytree(make_trainer_dir(tmp_path / "trained", shared_data_dir), model_dir)
  before = _snapshot(model_dir)
  inject = _UNREADABLE.format(folder=str(model_dir))
  unreadable = f"{model_dir}: the folder is unreadable (permission denied)"
  for command, args in (("train", _train_args(model_dir, text)),
                        ("translate", [f"--model_dir={model_dir}", f"--input_file={text}"])):
    line = error_line(run_command(inject, command, *args), DATA_EXIT, command)
    assert line == f"{command}: error: {unreadable}"
  assert _snapshot(model_dir) == before


def test_an_invalid_hparams_json_is_a_data_error_from_every_command(tmp_path, shared_data_dir,
                                                                     text):
  model_dir = tmp_path / "model"
  shutil.copytree(make_trainer_dir(tmp_path / "trained", shared_data_dir), model_dir)
  (model_dir / "hparams.json").write_text('{"d_model": 32,\n"num_heads": }')
  before = _snapshot(model_dir)
  invalid = f"{model_dir}/hparams.json:2: invalid JSON (Expecting value)"
  for command, args in (
      ("train", _train_args(model_dir, text)),
      ("translate", [f"--model_dir={model_dir}", f"--input_file={text}"]),
      ("export", [f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'export'}"]),
      ("average", [f"--model_dir={model_dir}", f"--output_dir={tmp_path / 'averaged'}"])):
    line = error_line(run_command("", command, *args), DATA_EXIT, command)
    assert line == f"{command}: error: {invalid}"
  assert _snapshot(model_dir) == before
  assert not (tmp_path / "export").exists() and not (tmp_path / "averaged").exists()


# os.access says this user cannot write into the folder REFUSED (chmod 555 for a user other
# than root).
_REFUSED = """
    import os
    REFUSED, access = {folder!r}, os.access
    os.access = lambda path, mode, **k: (False if str(path) == REFUSED and mode & os.W_OK
                                         else access(path, mode, **k))
    """


def test_an_output_that_cannot_be_written_is_refused_before_any_loading(tmp_path,
                                                                        shared_data_dir, text):
  """Every command that writes a file checks its output first: an output whose folder is a
  file (`--output_file=FILE/out.de`) or a folder it cannot write is one line, exit 1, before
  the model is loaded: the model dir's checkpoint is corrupt, which loading would report."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_model_dir(tmp_path / "source", shared_data_dir), model_dir)
  _truncate(model_dir / "ckpt-7.index")
  refused = tmp_path / "refused"
  refused.mkdir()
  before = _snapshot(tmp_path)
  model = f"--model_dir={model_dir}"
  cases = [  # (command, args, output flag, output folder)
      ("translate", [model, f"--input_file={text}"], "output_file", text),
      ("translate", [model, f"--input_file={text}", "--alignments=hard"], "alignment_file", text),
      ("score", [model, f"--src={text}", f"--tgt={text}"], "output_file", text),
      ("validate", [model, f"--src={text}", f"--tgt={text}"], "output_json", text),
      ("export", [model], "export_dir", text),
      ("average", [model, "--average_last=1"], "output_dir", text),
      ("train", _train_args(tmp_path / "unused", text), "model_dir", text),  # the last wins
      ("plot_attention", [model, "--source=a man ."], "output_dir", text),
      ("parse", ["--mode=evaluate", f"--gold={text}", f"--test={text}"], "output_json", text),
      ("translate", [model, f"--input_file={text}"], "output_file", refused),
      ("export", [model, "--format=ctranslate2"], "export_dir", refused)]
  for command, args, flag, folder in cases:
    target = folder / "out"
    result = run_command(_REFUSED.format(folder=str(refused)), command, *args,
                         f"--{flag}={target}")
    reason = "permission denied" if folder == refused else f"{text} is a file, not a folder"
    assert error_line(result, DATA_EXIT, command) == (
        f"{command}: error: {target}: cannot write it: {reason}; nothing was done")
  assert _snapshot(tmp_path) == before
