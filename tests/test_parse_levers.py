"""studies/parsing/parse_levers.py: the levers' commands, reading a finished run, skipping, the table."""

import json
import os
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(_REPO, "studies", "parsing"), os.path.join(_REPO, "studies")]

import parse_levers  # noqa: E402  pylint: disable=wrong-import-position


def _args(tmp_path, *extra):
  os.makedirs(tmp_path / "ptb", exist_ok=True)
  (tmp_path / "R.md").write_text("# Results\n")
  return [f"--ptb_dir={tmp_path / 'ptb'}", f"--work_dir={tmp_path / 'w'}",
          f"--results={tmp_path / 'r.jsonl'}", f"--doc={tmp_path / 'R.md'}", *extra]


def test_the_cooldown_scales_with_the_budget_and_a_flag_lever_replaces_the_recipes_flag(tmp_path):
  args = parse_levers.parse_args(_args(tmp_path, "--train_steps=5200", "--recipe=sinusoid_layers3_copies9"))
  assert parse_levers.overrides("reference", args) == \
      "cooldown_steps=1000,position_encoding=sinusoid,num_layers=3"
  assert parse_levers.overrides("relative", args) == \
      "cooldown_steps=1000,position_encoding=relative,num_layers=3,max_relative_position=16"
  assert parse_levers.overrides("layers4", args) == \
      "cooldown_steps=1000,position_encoding=sinusoid,num_layers=4"
  _, argv = parse_levers.command("augment19", args)
  assert [a for a in argv if a.startswith("--augment_copies")] == ["--augment_copies=19"]
  _, argv = parse_levers.command("reference", args)
  assert "--augment_copies=9" in argv and "--decode_splits=dev" in argv
  assert "--train_steps=5200" in argv and "--train_minutes=0" in argv
  full = parse_levers.parse_args(_args(tmp_path, "--train_steps=10400", "--recipe=sinusoid_layers3_copies9"))
  assert parse_levers.overrides("reference", full) == \
      "cooldown_steps=2000,position_encoding=sinusoid,num_layers=3"  # the recipe's positions, depth
  with pytest.raises(parse_levers.UsageError, match="unknown lever 'nope'"):
    parse_levers.parse_args(_args(tmp_path, "--levers=reference,nope"))


def test_the_registered_recipe_is_parsing_small_as_registered_with_19_copies_without_its_levers(tmp_path):
  args = parse_levers.parse_args(_args(tmp_path, "--train_steps=2600"))
  assert args.recipe == "registered" and not {"relative", "augment19", "layers4"} & set(args.names)
  assert parse_levers.overrides("reference", args) == "cooldown_steps=500"
  assert parse_levers.overrides("dropout0.3", args) == "cooldown_steps=500,dropout=0.3"
  model_dir, argv = parse_levers.command("reference", args)
  assert model_dir == str(tmp_path / "w" / "registered" / "reference")
  assert [a for a in argv if a.startswith("--augment_copies")] == ["--augment_copies=19"]
  assert parse_levers.settings(args)["augment_copies"] == 19
  for lever in ("relative", "augment19", "layers4"):
    with pytest.raises(parse_levers.UsageError, match=f"unknown lever '{lever}'"):
      parse_levers.parse_args(_args(tmp_path, f"--levers={lever}"))
  layers3 = parse_levers.parse_args(_args(tmp_path, "--recipe=layers3", "--train_steps=2600"))
  assert parse_levers.overrides("reference", layers3) == "cooldown_steps=500,num_layers=3"
  assert parse_levers.overrides("layers4", layers3) == "cooldown_steps=500,num_layers=4"
  layers3_copies9 = parse_levers.parse_args(_args(tmp_path, "--recipe=layers3_copies9", "--levers=augment19"))
  _, argv = parse_levers.command("reference", layers3_copies9)
  assert "--augment_copies=9" in argv and parse_levers.settings(layers3_copies9)["augment_copies"] == 9


def _fake_run(step):
  def run(argv, log_path):
    with open(log_path, "w", encoding="utf-8"):  # as runlib.run: the log before the model dir
      pass
    model_dir = next(a.split("=", 1)[1] for a in argv if a.startswith("--model_dir="))
    os.makedirs(model_dir, exist_ok=True)
    evalb = {"all": {"f1": 81.5}, "len<=40": {"f1": 82.25}}
    with open(os.path.join(model_dir, "parse_scores.json"), "w", encoding="utf-8") as f:
      json.dump({"train": {"step": step}, "decode": {
          "dev": {"evalb": evalb}, "alpha_sweep": {"0.0": 81.2, "0.3": 81.5, "0.6": 81.4}}}, f)
    with open(log_path, "a", encoding="utf-8") as f:
      f.write("dev step 100: loss 2.0 nll 1.0 ppl 2.7\ndev step 200: loss 1.5 nll 0.25 ppl 1.3\n")
    return 60.0, 90.0
  return run


def test_a_finished_lever_is_read_skipped_on_rerun_and_tabled(tmp_path, monkeypatch):
  monkeypatch.setattr(parse_levers.runlib, "run", _fake_run(200))
  argv = _args(tmp_path, "--levers=reference", "--train_steps=200")
  parse_levers.main(argv)
  result, = [json.loads(line) for line in open(tmp_path / "r.jsonl", encoding="utf-8")]
  assert (result["dev_f1"], result["dev_f1_len40"], result["dev_nll"]) == (81.5, 82.25, 0.25)
  assert result["settings"]["recipe"] == "registered"
  monkeypatch.setattr(parse_levers.runlib, "run", lambda *a: pytest.fail("ran a finished lever"))
  parse_levers.main(argv)
  doc = (tmp_path / "R.md").read_text()
  assert ("| reference | the recipe at this budget | 200 | 0.250 | 81.50 / 82.25 | 0.3 | "
          "1.0 / 1.5 (") in doc
  assert f"{result['load_avg'][1]}), {parse_levers.runlib.cpu_name()} |" in doc  # names its CPU
  assert "<!-- parse_levers:registered:begin" in doc and "<!-- parse_levers:registered:end -->" in doc
  parse_levers.main(_args(tmp_path, "--recipe=sinusoid_layers3_copies9", "--report_only"))
  assert "parse_levers:sinusoid" not in (tmp_path / "R.md").read_text()  # no results: no table


def test_a_run_that_stopped_early_is_not_recorded(tmp_path, monkeypatch):
  monkeypatch.setattr(parse_levers.runlib, "run", _fake_run(150))
  with pytest.raises(RuntimeError, match="stopped at update 150 of 200"):
    parse_levers.main(_args(tmp_path, "--levers=reference", "--train_steps=200"))
  assert not (tmp_path / "r.jsonl").exists()
