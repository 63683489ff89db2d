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
          "average_checkpoints", "beam_search", "export_model", "get_hparams", "get_problem",
          "list_hparams", "load_for_inference", "sample", "score", "train", "tune_decoding"]


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
