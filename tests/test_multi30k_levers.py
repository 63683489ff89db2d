"""studies/multi30k/multi30k_levers.py: the levers' settings, skipping finished levers, the table."""

import os
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(_REPO, "studies", "multi30k"), os.path.join(_REPO, "studies")]

import multi30k_levers  # noqa: E402  pylint: disable=wrong-import-position


def _args(tmp_path, *extra):
  os.makedirs(tmp_path / "multi30k", exist_ok=True)
  (tmp_path / "R.md").write_text("# Results\n")
  return [f"--data_dir={tmp_path}", f"--work_dir={tmp_path / 'w'}",
          f"--results={tmp_path / 'r.jsonl'}", f"--doc={tmp_path / 'R.md'}", *extra]


def test_a_levers_override_and_its_budget_fraction(tmp_path):
  args = multi30k_levers.parse_args(_args(tmp_path, "--train_steps=3000"))
  assert multi30k_levers.overrides("cooldown", args) == "cooldown_steps=900"
  assert multi30k_levers.overrides("reference", args) == ""
  assert multi30k_levers.overrides("wsd", args) == "lr_schedule=constant,cooldown_steps=900"
  _, train, scoring = multi30k_levers.commands("relative", args)
  assert "--hparams_override=position_encoding=relative,max_relative_position=16" in train
  assert "--train_steps=3000" in train and "--ema_decay=0.999" in train
  run_dir = tmp_path / "w" / "relative"
  dirs = [f"--model_dir={run_dir}", f"--model_dir={run_dir / 'averaged'}",
          f"--model_dir={run_dir / 'ema'}"]
  assert [validate[3] for validate, _ in scoring] == dirs
  assert [translate[3] for _, translate in scoring] == dirs
  assert all(t[-2:] == ["--beam_size=4", "--alpha=1.0"] for _, t in scoring)  # the recipe's
  with pytest.raises(multi30k_levers.UsageError, match="unknown lever 'nope'"):
    multi30k_levers.parse_args(_args(tmp_path, "--levers=reference,nope"))


def test_finished_levers_are_skipped_and_the_table_is_rewritten(tmp_path, monkeypatch):
  ran = []

  def fake(name, args):
    ran.append(name)
    scores = {v: {"dev_nll": 1.5 + i / 10, "val_sacrebleu": 40.0 - i, "val_bleu_lc_tok": 41.0 - i}
              for i, v in enumerate(multi30k_levers.VARIANTS)}
    return {"lever": name, "what": multi30k_levers.LEVERS[name][2],
            "settings": multi30k_levers.settings(args), "scores": scores, "train_wall_s": 600,
            "train_cpu_s": 1200, "load_avg": [2.0, 2.1]}

  monkeypatch.setattr(multi30k_levers, "run_lever", fake)
  argv = _args(tmp_path, "--levers=reference,ls0.2")
  multi30k_levers.main(argv)
  multi30k_levers.main(argv)
  assert ran == ["reference", "ls0.2"]
  multi30k_levers.main(_args(tmp_path, "--levers=reference", "--train_steps=100"))
  assert ran == ["reference", "ls0.2", "reference"]  # another budget is another lever run
  doc = (tmp_path / "R.md").read_text()
  assert doc.count(multi30k_levers.BEGIN) == 1  # the last settings' table only
  assert ("| reference | the recipe as registered | 100 | 1.500 / 1.600 / 1.700 | "
          "40.00 / 39.00 / 38.00 | 41.00 / 40.00 / 39.00 | 10.0 / 20.0 (2.0-2.1) |") in doc
