"""Staged writes: a folder or file appears complete or not at all, and what a killed writer
leaves (`.NAME.new-*`, `.NAME.old-*`, `NAME.tmp-*`) is removed by the next write there once
that writer is gone (docs/RELIABILITY.md, "Staged writes")."""

import logging
import os
import socket
import subprocess
import sys

import pytest

from command_util import error_line, run_command
from model_dir_util import make_model_dir
from t2t_repro import errors, fileio, staging
from t2t_repro.model_dir import ModelDir

_HOST = socket.gethostname()


@pytest.fixture(name="dead_pid", scope="module")
def fixture_dead_pid():
  """The id of a process that has ended (and was reaped)."""
  proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  return int(proc.stdout)


def _leftover(folder, name, pid, host=_HOST, kind="new"):
  """Plants what a writer `pid` of `host` killed mid-write leaves: a staging folder with a
  file, or (kind "tmp") a temporary file. Returns its path."""
  token = f"{pid}@{host}-0123abcd"
  if kind == "tmp":
    path = folder / f"{name}.tmp-{token}"
    path.write_bytes(b"x" * 10)
  else:
    path = folder / f".{name}.{kind}-{token}"
    path.mkdir(parents=True)
    (path / "part").write_bytes(b"x" * 100)
  return path


def test_a_killed_writers_leftovers_go_with_the_next_write_of_the_name(tmp_path, dead_pid,
                                                                        caplog):
  best = ModelDir(tmp_path).subdir("best")
  dead = [_leftover(tmp_path, "best", dead_pid), _leftover(tmp_path, "hparams.json", dead_pid,
                                                           kind="tmp")]
  kept = [_leftover(tmp_path, "best", os.getpid()),  # a live writer: this process
          _leftover(tmp_path, "best", 1),  # another live process
          _leftover(tmp_path, "best", dead_pid, host="another-host"),  # cannot tell: kept
          _leftover(tmp_path, "ema", dead_pid)]  # another name: its own next write
  with caplog.at_level(logging.WARNING):
    best.write_dir(lambda folder: folder.write_json("best.json", {"step": 1}))
  assert not dead[0].exists() and dead[1].exists() and all(p.exists() for p in kept)
  lines = [r.getMessage() for r in caplog.records if "leftovers" in r.getMessage()]
  assert lines == [f"removed 1 leftovers of interrupted writes (100 bytes): {dead[0]}"]
  ModelDir(tmp_path).write_json("hparams.json", {})
  assert not dead[1].exists()
  # A resumed train removes every one inside its model dir and its own beside it.
  inside = _leftover(tmp_path, "averaged", dead_pid)
  beside = _leftover(tmp_path.parent, tmp_path.name, dead_pid)
  removed, freed = ModelDir(tmp_path).remove_leftovers()
  assert sorted(removed) == sorted(map(str, (kept[3], inside, beside))) and freed == 300
  assert all(p.exists() for p in kept[:3])


def test_a_folder_moved_aside_by_a_killed_write_is_put_back(tmp_path, dead_pid):
  """Killed between its two renames, a write leaves NAME absent, the old folder aside and the
  new one complete: the next write puts the old one back first (as before the write)."""
  target = ModelDir(tmp_path / "averaged")
  aside = _leftover(tmp_path, "averaged", dead_pid, kind="old")
  _leftover(tmp_path, "averaged", dead_pid)
  removed, _ = staging.remove_leftovers(str(tmp_path), "averaged")
  assert len(removed) == 2 and os.listdir(tmp_path) == ["averaged"]
  assert (tmp_path / "averaged" / "part").read_bytes() == b"x" * 100 and not aside.exists()
  assert target.exists()


def test_output_files_are_staged_and_their_leftovers_removed(tmp_path, dead_pid):
  left = _leftover(tmp_path, "out.txt", dead_pid, kind="tmp")
  fileio.write_lines(str(tmp_path / "out.txt"), ["a"])
  assert os.listdir(tmp_path) == ["out.txt"] and not left.exists()


# Ends the process at once (as kill -9: no cleanup) when the SavedModel has been written to
# its staging folder, or (aside=True) between the two renames that replace an existing one.
_KILL_IN_EXPORT = """
    import os
    import tensorflow as tf
    save, rename = tf.saved_model.save, tf.io.gfile.rename
    def killed_save(obj, path, **kwargs):
      save(obj, path, **kwargs)
      if not {aside}:
        os._exit(9)
    def killed_rename(source, target, overwrite=False):
      rename(source, target, overwrite)
      if {aside} and ".old-" in target:
        os._exit(9)
    tf.saved_model.save, tf.io.gfile.rename = killed_save, killed_rename
    """


@pytest.mark.parametrize("aside", [False, True], ids=["while_writing", "between_renames"])
def test_a_killed_export_leaves_the_export_dir_absent_or_as_it_was(tmp_path, shared_data_dir,
                                                                  aside):
  """Killed while the SavedModel is written, the export leaves --export_dir as it was (absent
  here); killed between the renames that replace an earlier export (--overwrite), absent with
  the earlier one aside. The same command again succeeds and removes the leftovers."""
  model_dir = make_model_dir(tmp_path.parent / "tiny_model_dir", shared_data_dir)
  export_dir = tmp_path / "export" / "1"
  export_dir.parent.mkdir()
  args = [f"--model_dir={model_dir}", f"--export_dir={export_dir}"]
  if aside:  # an earlier export, replaced with --overwrite
    export_dir.mkdir()
    (export_dir / "old.txt").write_text("an earlier export")
    args.append("--overwrite")
  killed = run_command(_KILL_IN_EXPORT.format(aside=aside), "export", *args)
  assert killed.returncode == 9, killed.stderr[-3000:]
  left = sorted(os.listdir(export_dir.parent))
  assert [n[:7] for n in left] == ([".1.new-", ".1.old-"] if aside else [".1.new-"])
  again = run_command("", "export", *args)
  assert again.returncode == 0, again.stderr[-3000:]
  assert f"removed {len(left)} leftovers of interrupted writes" in again.stderr
  assert os.listdir(export_dir.parent) == ["1"]
  assert (export_dir / "saved_model.pb").exists() and not (export_dir / "old.txt").exists()
  if not aside:  # a non-empty --export_dir without --overwrite: one line, exit 2
    line = error_line(run_command("", "export", *args), errors.USAGE_EXIT, "export")
    assert line == (f"export: error: --export_dir={export_dir} is not empty; give --overwrite "
                    "to replace it, or a new folder")


def test_a_ctranslate2_export_is_staged(tmp_path, shared_data_dir, monkeypatch):
  pytest.importorskip("ctranslate2")
  from t2t_repro.serving import ctranslate2  # pylint: disable=import-outside-toplevel
  model_dir = make_model_dir(tmp_path.parent / "tiny_model_dir", shared_data_dir)
  out = tmp_path / "ct2"

  def killed(spec, path, quantization=None):
    assert os.path.basename(path).startswith(".ct2.new-")
    raise KeyboardInterrupt  # stops the export while its folder is being written
  monkeypatch.setattr(ctranslate2, "save_spec", killed)
  with pytest.raises(KeyboardInterrupt):
    ctranslate2.export_ctranslate2(model_dir, str(out))
  assert os.listdir(tmp_path) == []
  monkeypatch.undo()
  ctranslate2.export_ctranslate2(model_dir, str(out))
  assert sorted(os.listdir(out)) == ["README.md", "config.json", "decoding.json", "model.bin",
                                     "sentencepiece.model", "shared_vocabulary.json"]
