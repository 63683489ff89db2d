"""t2t_repro.model_dir.ModelDir: the one owner of a model dir's layout."""

import json

import pytest

from t2t_repro import errors, model_dir
from t2t_repro.config.hparams import get_hparams
from t2t_repro.model_dir import ModelDir


def test_reads_what_training_writes(tmp_path):
  files = ModelDir(tmp_path)
  hp = get_hparams("tiny")
  (tmp_path / model_dir.HPARAMS_FILE).write_text(json.dumps(hp.to_dict()))
  (tmp_path / model_dir.FLAGS_FILE).write_text(json.dumps({"accum_steps": 2, "replicas": 1}))
  assert files.read_hparams() == hp
  assert files.read_flags()["accum_steps"] == 2
  assert files.subdir(model_dir.BEST_DIR).path == str(tmp_path / "best")
  assert model_dir.FILES == ("hparams.json", "vocab.model", "flags.json")


def test_missing_and_bad_files_are_data_errors_naming_the_file(tmp_path):
  files = ModelDir(tmp_path)
  assert files.read_flags() == {}  # a model dir written by averaging a checkpoint list has none
  with pytest.raises(errors.MissingDataError, match=rf"{tmp_path}/hparams.json does not exist "
                                                    rf"\(is {tmp_path} a model dir\?\)"):
    files.read_hparams()
  (tmp_path / "hparams.json").write_text('{"d_model": 64,\n"num_heads": }')
  with pytest.raises(errors.DataError, match=rf"{tmp_path}/hparams.json:2: invalid JSON"):
    files.read_hparams()
  (tmp_path / "hparams.json").write_text('{"d_modle": 64}')
  with pytest.raises(errors.DataError, match=rf"{tmp_path}/hparams.json.*'d_modle'"):
    files.read_hparams()  # the file is wrong, not a flag: a data error (exit 1)
  (tmp_path / "hparams.json").write_text('{}')
  with pytest.raises(errors.MissingDataError, match="vocab.model does not exist"):
    files.check_files()


def test_resolve_checkpoint(tmp_path):
  files = ModelDir(tmp_path)
  with pytest.raises(errors.MissingDataError, match=f"no checkpoint in {tmp_path}"):
    files.resolve_checkpoint()
  with pytest.raises(errors.MissingDataError, match="ckpt-7 does not exist"):
    files.resolve_checkpoint(str(tmp_path / "ckpt-7"))
  (tmp_path / "ckpt-7.index").write_bytes(b"")
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-7"\n')
  assert files.resolve_checkpoint() == str(tmp_path / "ckpt-7")
  assert files.resolve_checkpoint(str(tmp_path / "ckpt-7")) == str(tmp_path / "ckpt-7")


def test_update_settings_are_read_where_each_is_written_once(tmp_path):
  from t2t_repro.training.preflight import saved_update_settings  # pylint: disable=import-outside-toplevel
  assert saved_update_settings(str(tmp_path)) == {}  # a new dir
  hp = get_hparams("tiny", batch_tokens=512)
  (tmp_path / model_dir.HPARAMS_FILE).write_text(json.dumps(hp.to_dict()))
  assert saved_update_settings(str(tmp_path)) == {}  # no flags.json: an averaged dir
  flags = {"accum_steps": 2, "replicas": 1, "mixed_precision": "none", "ema_decay": 0.0,
           "batch_tokens": None}  # the --batch_tokens flag; the value is in hparams.json
  (tmp_path / model_dir.FLAGS_FILE).write_text(json.dumps(flags))
  assert saved_update_settings(str(tmp_path)) == {
      "accum_steps": 2, "replicas": 1, "mixed_precision": "none", "ema_decay": 0.0,
      "batch_tokens": 512}
  # flags.json of older runs kept the settings in an "update" block, which wins.
  (tmp_path / model_dir.FLAGS_FILE).write_text(json.dumps(
      flags | {"update": {"accum_steps": 4, "batch_tokens": 2048, "replicas": 2}}))
  assert saved_update_settings(str(tmp_path))["accum_steps"] == 4
  assert saved_update_settings(str(tmp_path))["batch_tokens"] == 2048


# The writer: staged writes, so a failure leaves the folder as it was.

def _snapshot(folder):
  """{relative path: bytes} of every file under `folder` (hidden staging files included)."""
  import os  # pylint: disable=import-outside-toplevel
  return {os.path.relpath(os.path.join(d, f), folder): open(os.path.join(d, f), "rb").read()
          for d, _, names in os.walk(folder) for f in names}


def test_a_failed_file_write_leaves_the_old_file(tmp_path, monkeypatch):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  files = ModelDir(tmp_path)
  files.write_json(model_dir.PARSE_SCORES_FILE, {"train": {"step": 20}})
  before = _snapshot(tmp_path)
  with pytest.raises(TypeError):  # not JSON: nothing is written
    files.write_json(model_dir.PARSE_SCORES_FILE, {"decode": object()})
  assert _snapshot(tmp_path) == before

  def fail(*args, **kwargs):
    raise OSError("disk gone")
  monkeypatch.setattr(tf.io.gfile, "rename", fail)  # fails after the new bytes are written
  with pytest.raises(OSError, match="disk gone"):
    files.update_json(model_dir.PARSE_SCORES_FILE, {"decode": {"f1": 90.0}})
  assert _snapshot(tmp_path) == before  # the old file, and no temporary file left
  monkeypatch.undo()
  assert files.update_json(model_dir.PARSE_SCORES_FILE, {"decode": {"f1": 90.0}}) == {
      "train": {"step": 20}, "decode": {"f1": 90.0}}
  assert json.loads((tmp_path / model_dir.PARSE_SCORES_FILE).read_text()) == {
      "train": {"step": 20}, "decode": {"f1": 90.0}}


def test_write_dir_replaces_a_folder_whole_or_not_at_all(tmp_path):
  best = ModelDir(tmp_path).subdir(model_dir.BEST_DIR)
  best.write_dir(lambda staging: staging.write_json(model_dir.BEST_INFO_FILE, {"step": 1}))
  assert best.read_json(model_dir.BEST_INFO_FILE) == {"step": 1}
  before = _snapshot(tmp_path)

  def write_then_fail(staging):
    staging.write_json(model_dir.BEST_INFO_FILE, {"step": 2})
    staging.write_bytes("ckpt-2.index", b"half")
    raise KeyboardInterrupt  # e.g. SIGINT in the middle of the checkpoint
  with pytest.raises(KeyboardInterrupt):
    best.write_dir(write_then_fail)
  assert _snapshot(tmp_path) == before  # best/ as it was, no staging folder left

  assert best.write_dir(lambda staging: staging.write_json(model_dir.BEST_INFO_FILE,
                                                           {"step": 3}) or "done") == "done"
  assert _snapshot(tmp_path) == {f"{model_dir.BEST_DIR}/{model_dir.BEST_INFO_FILE}":
                                 b'{\n  "step": 3\n}\n'}
  # A new folder appears complete; its parents are created.
  fresh = ModelDir(tmp_path / "runs" / "new")
  fresh.write_dir(lambda staging: staging.write_json(model_dir.HPARAMS_FILE, {}))
  assert sorted(_snapshot(tmp_path / "runs")) == [f"new/{model_dir.HPARAMS_FILE}"]


def test_a_gfile_url_model_dir_is_read_and_written_through_gfile(tmp_path):
  """A URL (gs://... in use; TensorFlow's in-memory ram:// here) never reaches os or open()."""
  hp = get_hparams("tiny")
  files = ModelDir("ram://t2t_model_dir_test/run")
  assert files.file(model_dir.HPARAMS_FILE) == "ram://t2t_model_dir_test/run/hparams.json"
  assert not files.exists()
  files.write_json(model_dir.HPARAMS_FILE, hp.to_dict())
  (tmp_path / "vocab.model").write_bytes(b"\x00pieces")
  files.copy_file(str(tmp_path / "vocab.model"), model_dir.VOCAB_FILE)
  files.update_json(model_dir.PARSE_SCORES_FILE, {"train": 1})
  files.update_json(model_dir.PARSE_SCORES_FILE, {"decode": 2})
  assert files.exists() and files.read_hparams() == hp
  assert files.read_bytes(model_dir.VOCAB_FILE) == b"\x00pieces"
  assert files.read_json(model_dir.PARSE_SCORES_FILE) == {"train": 1, "decode": 2}
  assert files.read_flags() == {}
  files.check_files()
  assert files.glob("*.json") == [files.file(model_dir.HPARAMS_FILE),
                                  files.file(model_dir.PARSE_SCORES_FILE)]  # no temporary files


def test_no_module_spells_a_model_dir_file_name():
  """Each file name of a model dir is a constant of t2t_repro/model_dir.py, used elsewhere by
  name: no other module under t2t_repro/ holds it as a string literal."""
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  names = {value for key, value in vars(model_dir).items()
           if key.endswith(("_FILE", "_DIR", "_PREFIX", "_RECORD")) and isinstance(value, str)}
  assert {"hparams.json", "best.json", "parse_scores.json", "checkpoint", "averaged"} <= names
  package = pathlib.Path(model_dir.__file__).parent
  found = []
  for path in package.rglob("*.py"):
    if path.name == "model_dir.py" and path.parent == package:
      continue
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    for node in ast.walk(tree):
      if isinstance(node, ast.Constant) and isinstance(node.value, str) \
          and id(node) not in docstrings:
        # A file name itself ("hparams.json"; the folder names are also dict keys and words,
        # "best"), or a path built from one (f"{model_dir}/hparams.json", ".../checkpoint").
        if any(node.value == name if "." in name else node.value.startswith(f"/{name}")
               for name in names) or any(node.value.startswith(f"/{name}") for name in names):
          found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {node.value!r}")
  assert not found, found
