"""The declared library API (`t2t_repro.__all__`): pinned, lazily imported, and used end to end
by examples/library/library_api.py."""

import os
import subprocess
import sys

import t2t_repro

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")

PINNED = ["DataConfig", "DecodeConfig", "HParams", "ModelConfig", "OptimizationConfig", "Scorer",
          "SearchConfig", "Tokenizer", "TrainConfig", "TrainResult", "Transformer", "Translator",
          "average_checkpoints", "beam_search", "evaluate_translations", "export_model",
          "get_hparams", "get_problem", "list_hparams", "load_for_inference", "sample",
          "train_model", "tune_decoding"]


def test_the_api_is_pinned():
  assert t2t_repro.__all__ == PINNED


def test_every_name_resolves_and_import_stays_light():
  """In a fresh process: `import t2t_repro` imports no TensorFlow; every name of __all__
  resolves to a class or function (not a submodule)."""
  code = ("import sys, types, t2t_repro as t\n"
          "assert 'tensorflow' not in sys.modules\n"
          "values = [getattr(t, n) for n in t.__all__]\n"
          "assert not any(isinstance(v, types.ModuleType) for v in values)\n"
          "print(len(values))\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_ENV,
                          timeout=300, check=False)
  assert result.returncode == 0 and result.stdout.strip() == str(len(PINNED)), result.stderr[-2000:]


def test_no_public_name_changes_meaning_after_importing_any_module():
  """In a fresh process: every name of __all__ is the same object after importing every
  module of the package (the `python -m` entry modules included), and none is a module's
  name; the old names warn and give the new names' values."""
  code = ("import importlib, pkgutil, warnings, t2t_repro as t\n"
          "before = {n: getattr(t, n) for n in t.__all__}\n"
          "modules = [m.name for m in pkgutil.walk_packages(t.__path__, 't2t_repro.')]\n"
          "for name in modules:\n"
          "  importlib.import_module(name)\n"
          "changed = [n for n in t.__all__ if getattr(t, n) is not before[n]]\n"
          "assert not changed, changed\n"
          "clashes = sorted(set(t.__all__) & {m.split('.')[1] for m in modules})\n"
          "assert not clashes, clashes\n"
          "print(len(modules))\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_ENV,
                          timeout=300, check=False)
  assert result.returncode == 0 and int(result.stdout.strip()) > 100, result.stderr[-2000:]


def test_old_names_work_with_a_warning():
  import warnings  # pylint: disable=import-outside-toplevel
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert t2t_repro.__getattr__("score") is t2t_repro.evaluate_translations
  assert [str(w.message) for w in caught] == [
      "t2t_repro.score is deprecated: use t2t_repro.evaluate_translations (the old name goes in "
      "the next release)"] and caught[0].category is FutureWarning


def test_the_package_root_holds_at_most_ten_modules():
  """Besides __init__ and the `python -m t2t_repro.<command>` entry modules (and __main__)."""
  from t2t_repro.commands import launch  # pylint: disable=import-outside-toplevel
  root = os.path.join(_REPO, "t2t_repro")
  entries = {f"{name}.py" for name in (*launch.COMMANDS, "__init__", "__main__")}
  modules = sorted(f for f in os.listdir(root) if f.endswith(".py") and f not in entries)
  assert len(modules) <= 10, modules


def test_the_library_example_runs(shared_data_dir, tmp_path):
  result = subprocess.run(
      [sys.executable, os.path.join(_REPO, "examples", "library", "library_api.py"),
       f"--data_dir={shared_data_dir}", f"--work_dir={tmp_path}", "--train_steps=40"],
      capture_output=True, text=True, env=_ENV, timeout=900, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  assert "trained to update 40" in out and "chosen on dev: beam" in out
  assert "dev sacreBLEU:" in out and "log P(ref | src): -" in out
  assert os.path.exists(tmp_path / "export" / "1" / "saved_model.pb")
