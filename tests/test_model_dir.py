"""t2t_repro.model_dir.ModelDir: the one owner of a model dir's layout."""

import json

import pytest

from t2t_repro import errors, model_dir
from t2t_repro.hparams import HParamsError, get_hparams
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
  with pytest.raises(HParamsError, match="d_modle"):
    files.read_hparams()
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
