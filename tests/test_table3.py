"""studies/table3/table3.py: the rows' settings, resuming a table, its report and its errors."""

import json
import os
import subprocess
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(_REPO, "studies", "table3"), os.path.join(_REPO, "studies")]

import table3  # noqa: E402  pylint: disable=wrong-import-position
import table3_report  # noqa: E402  pylint: disable=wrong-import-position
from t2t_repro.config import hparams as hparams_lib  # noqa: E402  pylint: disable=wrong-import-position
from t2t_repro.model.summary import closed_form_params  # noqa: E402  pylint: disable=wrong-import-position


def test_twenty_rows_with_the_papers_values():
  assert len(table3.ROWS) == 20
  paper = {row.name: (row.paper_ppl, row.paper_bleu) for row in table3.ROWS}
  assert paper["base"] == (4.92, 25.8) and paper["big"] == (4.33, 26.4)
  assert paper["A_h1"] == (5.29, 24.9) and paper["C_N2"] == (6.11, 23.7)
  assert paper["D_drop0"] == (5.77, 24.6) and paper["E_learned"] == (4.92, 25.7)


@pytest.mark.parametrize("factor", [1, 4, 8])
def test_every_width_is_divided_by_the_factor_and_nothing_else_changes(factor):
  for row in table3.ROWS:
    paper, scaled = table3.paper_hparams(row), table3.scaled_hparams(row, factor)
    for key, value in paper.items():
      assert scaled[key] == (value // factor if key in table3.WIDTHS else value), (row.name, key)
    # (A): d_k = d_v = d_model / h in every head count; big: 2x the base widths, 16 heads.
    if row.group == "A":
      assert scaled["d_k"] * scaled["num_heads"] == scaled["d_model"]
  big = table3.scaled_hparams(table3.ROWS[-1], factor)
  base = table3.scaled_hparams(table3.ROWS[0], factor)
  assert (big["d_model"], big["d_ff"], big["num_heads"]) == (2 * base["d_model"], 2 * base["d_ff"], 16)
  assert table3.ROWS[-1].steps_factor == 3


def test_unscaled_rows_have_the_papers_parameter_counts():
  """The closed form (what t2t-summary prints) of each row at factor 1 with the paper's
  37k vocabulary is within 8% of Table 3's count, and the differences to base agree."""
  base = hparams_lib.get_hparams("base")
  count = {row.name: closed_form_params(base.replace(**table3.scaled_hparams(row, 1))) / 1e6
           for row in table3.ROWS}
  for row in table3.ROWS:
    if row.paper_params:
      assert 0.92 <= count[row.name] / row.paper_params <= 1.03, row.name
      assert abs((count[row.name] - count["base"]) - (row.paper_params - 65)) <= 4.5, row.name


def test_a_factor_that_does_not_divide_a_width_is_refused():
  with pytest.raises(table3.UsageError, match="--factor=3"):
    table3.scaled_hparams(table3.ROWS[0], 3)


def test_rows_selection():
  assert table3.select_rows("A") == ["base", "A_h1", "A_h4", "A_h16", "A_h32"]
  assert table3.select_rows("big,D_ls0") == ["base", "D_ls0", "big"]
  assert len(table3.select_rows("all")) == 26  # the paper's 20 and the extra runs, last
  assert table3.select_rows("extra") == ["base", "A_h8_wide", "base_x4", "A_h1_x4", "D_drop0_x4",
                                         "C_N8_pre", "big_pre"]
  # The longer-budget runs: the settings of base, A_h1 and D_drop0 with 4x the updates.
  for name, same in (("base_x4", "base"), ("A_h1_x4", "A_h1"), ("D_drop0_x4", "D_drop0")):
    row = table3.ROW_BY_NAME[name]
    assert (row.change, row.steps_factor) == (table3.ROW_BY_NAME[same].change, 4)
  # The extra run: 8 heads as wide as A_h1's one (d_k = d_v = d_model at every factor).
  wide = table3.scaled_hparams(table3.ROW_BY_NAME["A_h8_wide"], 8)
  assert (wide["num_heads"], wide["d_k"], wide["d_v"]) == (8, wide["d_model"], wide["d_model"])
  with pytest.raises(table3.UsageError, match="unknown row or group 'Z'"):
    table3.select_rows("A,Z")


def _fake_result(name, seed, shared, ppl, bleu):
  row = table3.ROW_BY_NAME[name]
  return {"row": name, "group": row.group, "seed": seed, "settings": shared, "protocol": "p1",
          "hparams": table3.scaled_hparams(row, shared["factor"]),
          "train_steps": 10 * row.steps_factor,
          "params": 1000, "dev_ppl": ppl, "dev_bleu": bleu, "train_wall_s": 60, "train_cpu_s": 100,
          "load_avg": [1.0, 1.0], "dev_curve": [],
          "paper_ppl": row.paper_ppl, "paper_bleu": row.paper_bleu, "paper_params": row.paper_params,
          "vocab_sha256": "v"}


def test_finished_rows_are_skipped_on_rerun(tmp_path, monkeypatch):
  args = table3.parse_args([f"--results={tmp_path / 'r.jsonl'}", f"--doc={tmp_path / 'T.md'}",
                            "--rows=B", "--base_seeds=2", f"--data_dir={tmp_path}", "--report_only"])
  shared = table3.settings(args)
  done = [("base", 1234), ("base", 1235), ("B_dk16", 1234)]
  with open(args.results, "w", encoding="utf-8") as f:
    for i, (name, seed) in enumerate(done):
      f.write(json.dumps(_fake_result(name, seed, shared, 5.0 + i / 10, 20.0 - i)) + "\n")
    # the same row under other settings does not count as done
    f.write(json.dumps(_fake_result("B_dk32", 1234, {**shared, "train_steps": 1}, 6.0, 1.0)) + "\n")
  ran = []

  def fake_run(row, seed, run_args):
    ran.append((row.name, seed))
    return _fake_result(row.name, seed, table3.settings(run_args), 5.5, 19.5)

  monkeypatch.setattr(table3, "run_row", fake_run)
  os.makedirs(tmp_path / "multi30k")
  argv = [f"--results={args.results}", f"--doc={args.doc}", "--rows=B", "--base_seeds=2",
          f"--data_dir={tmp_path}"]
  table3.main(argv)
  assert ran == [("B_dk32", 1234)]
  table3.main(argv)  # everything done now: nothing runs
  assert ran == [("B_dk32", 1234)]
  doc = (tmp_path / "T.md").read_text()
  assert doc.count(table3_report.marker("rows:p3")[0]) == 1  # the default protocol's
  assert "| B_dk32 |" in doc and "| base |" in doc
  assert (tmp_path / "t.png").stat().st_size > 1000


def test_report_gives_differences_in_units_of_the_base_seed_spread():
  shared = {"factor": 8}
  results = [_fake_result("base", 1, shared, 5.0, 20.0), _fake_result("base", 2, shared, 5.2, 21.0),
             _fake_result("C_N2", 1, shared, 6.0, 18.0), _fake_result("D_ls0", 1, shared, 5.12, 20.6)]
  text = table3_report.table(results)
  lines = {line.split(" | ")[0][2:]: line for line in text.splitlines()[2:]}
  # base: mean 5.1 / 20.5, sd 0.1414 / 0.7071
  assert "5.10 (5.00, 5.20)" in lines["base"] and "sd 0.141 (2 seeds)" in lines["base"]
  assert "+0.900 (+6.4)" in lines["C_N2"] and "-2.50 (-3.5)" in lines["C_N2"]
  assert lines["C_N2"].split(" | ")[18] == "yes / yes"  # paper: N=2 worse on both
  # D_ls0: PPL +0.02 is within noise where the paper has it lower: "within noise".
  assert lines["D_ls0"].split(" | ")[18] == "within noise / within noise"
  # A row the paper does not have: no paper columns, no agreement claimed.
  extra = table3_report.table(results + [_fake_result("A_h8_wide", 1, shared, 4.0, 25.0)])
  cells = [line for line in extra.splitlines() if line.startswith("| A_h8_wide |")][0].split(" | ")
  assert (cells[11], cells[13], cells[18]) == ("", "", "extra run (not in the paper)")
  # Longer-budget runs: base_x4 against base; the other x4 runs against base_x4 (same updates).
  longer = table3_report.table(results + [_fake_result("base_x4", 1, shared, 4.0, 24.0),
                                          _fake_result("A_h1_x4", 1, shared, 3.5, 25.0)])
  cells = {line.split(" | ")[0][2:]: line.split(" | ") for line in longer.splitlines()[2:]}
  assert cells["base_x4"][9] == "40" and cells["A_h1_x4"][9] == "40"
  assert cells["base_x4"][16:19] == ["-1.100", "+3.50",
                                     "extra run (not in the paper); differences to base"]
  assert cells["A_h1_x4"][16:19] == ["-0.500", "+1.00",
                                     "extra run (not in the paper); differences to base_x4"]


def test_the_papers_no_change_rows_agree_within_two_base_seed_sd():
  """The paper's "no change": A_h16 (paper PPL -0.01, BLEU 0), E_learned (0, -0.1) and D_ls0.2's
  BLEU (-0.1) are the paper's "no change"; our row agrees when within 2 base-seed sd."""
  assert [table3_report.paper_direction(v, b, k) for v, b, k in (
      (4.91, 4.92, "dev_ppl"), (25.8, 25.8, "dev_bleu"), (4.92, 4.92, "dev_ppl"),
      (25.7, 25.8, "dev_bleu"), (5.47, 4.92, "dev_ppl"), (25.7, 25.8, "dev_bleu"),
      (5.00, 4.92, "dev_ppl"), (25.5, 25.8, "dev_bleu"))] == ["~", "~", "~", "~", "+", "~", "+", "-"]
  shared = {"factor": 8}
  base = [_fake_result("base", 1, shared, 5.0, 20.0), _fake_result("base", 2, shared, 5.2, 21.0)]
  # base: mean 5.1 / 20.5, sd 0.1414 / 0.7071, so 2 sd = 0.283 PPL, 1.414 BLEU.
  inside = base + [_fake_result("A_h16", 1, shared, 5.35, 21.9),
                   _fake_result("E_learned", 1, shared, 4.85, 19.2),
                   _fake_result("D_ls0.2", 1, shared, 5.5, 21.8)]
  cells = {line.split(" | ")[0][2:]: line.split(" | ")[18]
           for line in table3_report.table(inside).splitlines()[2:]}
  assert cells["A_h16"] == "yes / yes" and cells["E_learned"] == "yes / yes"
  assert cells["D_ls0.2"] == "yes / yes"  # PPL +0.4 (+2.8 sd, higher as in the paper), BLEU ~
  outside = base + [_fake_result("A_h16", 1, shared, 5.45, 22.0),
                    _fake_result("E_learned", 1, shared, 4.7, 18.9),
                    _fake_result("D_ls0.2", 1, shared, 5.2, 22.1)]
  cells = {line.split(" | ")[0][2:]: line.split(" | ")[18]
           for line in table3_report.table(outside).splitlines()[2:]}
  assert cells["A_h16"] == "no (paper: no change) / no (paper: no change)"
  assert cells["E_learned"] == "no (paper: no change) / no (paper: no change)"
  assert cells["D_ls0.2"] == "within noise / no (paper: no change)"
  # The findings table: E's finding holds inside, does not hold outside; A's is mixed when
  # A_h1's PPL agrees and its BLEU does not, and marked partial while A_h32 has not run.
  assert table3_report.finding_verdict(inside, ["E_learned"])[0] == "holds"
  assert table3_report.finding_verdict(outside, ["E_learned"])[0] == "does not hold"
  mixed = inside + [_fake_result("A_h1", 1, shared, 5.6, 21.0)]  # PPL worse, BLEU within noise
  assert table3_report.finding_verdict(mixed, ["A_h1", "A_h32"])[0] == \
      "mixed (1 of 2) so far (1 of 2 rows run)"
  assert table3_report.finding_verdict(mixed, ["A_h1"])[0] == "mixed (1 of 2)"
  assert table3_report.finding_verdict(base, ["A_h1"])[0] == "not run"


def test_a_trained_base_is_flat_before_its_cooldown_and_reaches_25_bleu():
  result = {"train_steps": 8000, "settings": {"train_steps": 8000, "cooldown_steps": 2000},
            "dev_curve": [[4000, 2.50], [5000, 2.30], [6000, 2.285], [8000, 2.1]],
            "dev_bleu": 30.0}
  move, accepted = table3_report.acceptance(result)
  assert round(move, 3) == -0.015 and accepted
  assert not table3_report.acceptance({**result, "dev_bleu": 24.9})[1]
  steep = {**result, "dev_curve": [[5000, 2.40], [6000, 2.30], [8000, 2.1]]}
  assert not table3_report.acceptance(steep)[1]
  # No cooldown: the last 1,000 updates; a curve without those points cannot be judged.
  flat = {**result, "settings": {"train_steps": 8000, "cooldown_steps": 0},
          "dev_curve": [[7000, 2.2], [8000, 2.19]]}
  assert table3_report.acceptance(flat)[1]
  assert table3_report.acceptance({**flat, "dev_curve": [[7200, 2.2], [8000, 2.19]]}) == (None, False)


def test_the_sweep_table_times_a_resumed_run_by_its_last_command():
  args = table3.parse_args(["--protocol=sweep", "--report_only", "--train_steps=8000",
                            "--cooldown_steps=2000", "--warmup_steps=4000",
                            "--learning_rate_constant=1.0"])
  run = {**_fake_result("base", 1234, table3.settings(args), 7.3, 32.75), "protocol": "sweep",
         "train_steps": 8000, "dev_curve": [[5000, 2.5], [6000, 2.23]], "train_wall_s": 3000}
  fresh, resumed = table3_report.sweep_table([run, {**run, "train_first_step": 3500}]).split("\n")[2:]
  assert fresh.endswith("| 1.98e-03 | -0.270 | 7.30 | 32.75 | no | 50.0 / 1.7 |")
  assert resumed.endswith("| no | 50.0 / 1.7 (updates 3,500-8,000) |")


def test_a_run_stopped_before_its_last_update_is_not_scored(tmp_path):
  """A trainer stopped by SIGTERM saves a checkpoint and exits 0: runlib.train refuses to
  treat that as a finished run (it would be scored at update 2,120 of 8,000)."""
  import runlib  # pylint: disable=import-outside-toplevel
  model_dir = tmp_path / "m"
  model_dir.mkdir()
  (model_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-2120"\n'
                                        'all_model_checkpoint_paths: "ckpt-2120"\n')
  (model_dir / "ckpt-2120.index").write_bytes(b"")
  done = [sys.executable, "-c", "pass"]
  with pytest.raises(RuntimeError, match="stopped at update 2120 of 8000"):
    runlib.train(done, str(tmp_path / "log"), str(model_dir), 8000)
  wall, cpu, first_step = runlib.train(done, str(tmp_path / "log"), str(model_dir), 2120)
  assert wall >= 0 and cpu >= 0 and first_step == 2120  # this command resumed at 2,120
  assert runlib.train(done, str(tmp_path / "log"), str(tmp_path / "fresh"), 0)[2] == 0


def test_training_time_averages_only_the_runs_timed_whole():
  """A resumed run's times are those of its last command: averaging them with whole runs would
  understate the time of a run (one timed over its last 1,500 updates)."""
  import runlib  # pylint: disable=import-outside-toplevel
  whole = {"train_wall_s": 6000, "train_cpu_s": 5400, "train_steps": 20000}
  resumed = {**whole, "train_wall_s": 400, "train_cpu_s": 390, "train_first_step": 18500}
  assert runlib.train_time_cell([whole]) == "100.0 / 90.0"
  assert runlib.train_time_cell([whole, resumed, {**whole, "train_wall_s": 7200}]) == \
      "110.0 / 90.0 (2 of 3 runs timed whole)"
  assert runlib.train_time_cell([resumed]) == "6.7 / 6.5 (updates 18,500-20,000)"



def test_training_time_names_the_cpu_and_averages_only_the_last_runs_cpu():
  """Times from two CPUs (up to 5x apart in speed) are never averaged: the cell is the mean of
  the whole runs on the last run's CPU, and names it."""
  import runlib  # pylint: disable=import-outside-toplevel
  old = {"train_wall_s": 6000, "train_cpu_s": 5400, "train_steps": 20000}
  new = {**old, "train_wall_s": 9000, "train_cpu_s": 8400, "cpu": "AMD EPYC family 25 model 1, AVX2"}
  assert runlib.train_time_cell([old, new]) == \
      "150.0 / 140.0 (1 of 2 runs on this CPU), AMD EPYC family 25 model 1, AVX2"
  assert runlib.train_time_cell([new, {**new, "train_wall_s": 12000}]) == \
      "175.0 / 140.0, AMD EPYC family 25 model 1, AVX2"


def test_cpu_name_reads_model_family_and_the_widest_isa(tmp_path):
  import runlib  # pylint: disable=import-outside-toplevel
  def cpu(flags):
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                    f"model name\t: AMD EPYC 9R14\nflags\t\t: fpu sse2 {flags}\n\n"
                    "processor\t: 1\nmodel name\t: other\n", encoding="utf-8")
    return runlib.cpu_name(str(path))
  assert cpu("avx2 avx512f avx512_bf16") == "AMD EPYC 9R14 family 25 model 17, AVX-512 + BF16"
  assert cpu("avx2 avx512f") == "AMD EPYC 9R14 family 25 model 17, AVX-512"
  assert cpu("avx2") == "AMD EPYC 9R14 family 25 model 17, AVX2"
  assert cpu("sse4_2") == "AMD EPYC 9R14 family 25 model 17, no AVX2"
  assert runlib.cpu_name(str(tmp_path / "absent")) == "unknown"

def test_bad_arguments_are_one_line_errors(tmp_path):
  for args, message in ((["--rows=Q"], "unknown row or group"), (["--factor=0"], "--factor"),
                        ([f"--data_dir={tmp_path}"], "no multi30k folder")):
    proc = subprocess.run([sys.executable, os.path.join(_REPO, "studies", "table3", "table3.py"),
                           *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("table3: error: ") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("protocol, learning_rate_constant, seed", [("p2", 1.0, 1234), ("p3", 0.7, 1236)])
def test_a_protocol_is_its_accepted_sweep_schedule_and_the_sweep_run_is_one_of_its_base_seeds(
    protocol, learning_rate_constant, seed):
  sweep = table3.parse_args(["--protocol=sweep", "--report_only", "--train_steps=20000",
                             "--cooldown_steps=5000", "--warmup_steps=4000",
                             f"--learning_rate_constant={learning_rate_constant}"])
  chosen = table3.parse_args([f"--protocol={protocol}", "--report_only"])
  assert (chosen.train_steps, chosen.warmup_steps, chosen.learning_rate_constant,
          chosen.cooldown_steps) == (20000, 4000, learning_rate_constant, 5000)
  accepted = {**_fake_result("base", seed, table3.settings(sweep), 5.5, 36.0), "protocol": "sweep"}
  assert table3.is_done([accepted], "base", seed, table3.settings(chosen))
  assert not table3.is_done([accepted], "base", seed + 1, table3.settings(chosen))
  other = "p3" if protocol == "p2" else "p2"
  assert not table3.is_done([accepted], "base", seed,
                            table3.settings(table3.parse_args([f"--protocol={other}",
                                                               "--report_only"])))
  # Same model dirs: a protocol's row resumes the sweep's run of the same row and seed.
  row = table3.ROW_BY_NAME["base"]
  assert table3.commands(row, seed, chosen)[0] == table3.commands(row, seed, sweep)[0]
  # Dev evaluations every 500 updates (1,500 for big's 3x run): the acceptance window's ends.
  train = table3.commands(table3.ROW_BY_NAME["big"], 1234, chosen)[1][0]
  assert "--eval_every_steps=1500" in train and "--train_steps=60000" in train
  assert f"learning_rate_constant={learning_rate_constant}," in " ".join(train)
  with pytest.raises(table3.UsageError, match=f"--protocol={protocol} fixes the schedule"):
    table3.parse_args([f"--protocol={protocol}", "--report_only", "--train_steps=100"])


def test_runs_at_another_factor_have_their_own_dirs_and_a_table_beside_the_protocols(tmp_path):
  """p3's rows again at factor 4 (d_k 16 for base, docs/TABLE3.md). They must not
  resume factor 8's model dirs, nor enter factor 8's table; the report writes them beside it."""
  f8 = table3.parse_args(["--protocol=p3", "--report_only", f"--results={tmp_path / 'r.jsonl'}",
                          f"--doc={tmp_path / 'T.md'}"])
  f4 = table3.parse_args(["--protocol=p3", "--report_only", "--factor=4",
                          f"--results={tmp_path / 'r.jsonl'}", f"--doc={tmp_path / 'T.md'}"])
  base = table3.ROW_BY_NAME["base"]
  assert table3.commands(base, 1234, f8)[0].endswith("base_s1234_lr0.7_w4000_cd5000_n20000")
  assert table3.commands(base, 1234, f4)[0].endswith("base_s1234_lr0.7_w4000_cd5000_n20000_f4")
  p1 = table3.parse_args(["--protocol=p1", "--report_only", "--factor=4"])
  assert table3.commands(base, 1234, p1)[0].endswith("base_s1234_f4")
  runs = [(f8, "base", 1234, 6.0, 36.0), (f8, "base", 1235, 6.2, 35.0),
          (f8, "A_h1", 1234, 5.6, 37.0), (f8, "A_h16", 1234, 6.4, 34.0),
          (f4, "base", 1234, 5.0, 38.0), (f4, "A_h16", 1234, 5.1, 38.5)]
  with open(f8.results, "w", encoding="utf-8") as f:
    for args, name, seed, ppl, bleu in runs:
      f.write(json.dumps({**_fake_result(name, seed, table3.settings(args), ppl, bleu),
                          "protocol": "p3", "train_steps": 20000,
                          "dev_curve": [[14000, 1.90], [15000, 1.89]]}) + "\n")
  table3.main(["--report_only", f"--results={f8.results}", f"--doc={f8.doc}"])
  doc = (tmp_path / "T.md").read_text()
  # A factor-4 command ends by rewriting the same tables, not factor 4's runs in factor 8's place.
  table3.report(f4)
  assert (tmp_path / "T.md").read_text() == doc
  rows_p3 = doc.split(table3_report.marker("rows:p3")[0])[1].split("<!--")[0]
  assert rows_p3.count("| base |") == 1 and "38.00" not in rows_p3  # factor 8's table only
  block = doc.split(table3_report.marker("factor4:p3")[0])[1].split("<!--")[0]
  lines = {line.split(" | ")[0][2:]: line.split(" | ") for line in block.strip().splitlines()[2:]}
  assert set(lines) == {"base", "A_h16"}
  # A_h16: d_k 4 at factor 8, 8 at factor 4; the paper's -0.01 PPL / 0 BLEU; at factor 8
  # +0.300 PPL (+2.1 sd of 0.1414), -1.50 BLEU (-2.1 sd of 0.7071); at factor 4 +0.100 / +0.50
  # (one base seed, no sd).
  assert lines["A_h16"][1:7] == ["16", "4 / 8", "-0.01 / +0.0",
                                 "+0.300 (+2.1 sd) / -1.50 (-2.1 sd)", "5.10 / 38.50",
                                 "+0.100 / +0.50"]
  assert lines["base"][2:6] == ["8 / 16", "reference", "reference", "5.00 / 38.00"]
  # p3's acceptance rule at factor 4: -0.010 nats over updates 14,000-15,000, BLEU 38 >= 25.
  assert lines["base"][6] == "reference; a trained base: yes (-0.010 nats)"


def test_the_committed_doc_is_the_report_of_the_committed_results(tmp_path):
  """docs/TABLE3.md is what `--report_only` writes from studies/table3/results.jsonl (at most
  300 lines: p3, its findings, the sweep, one line per protocol), so a result added without
  rewriting the doc, or a doc edited between the markers, fails here."""
  doc = os.path.join(_REPO, "docs", "TABLE3.md")
  results = os.path.join(_REPO, "studies", "table3", "results.jsonl")
  with open(doc, encoding="utf-8") as f:
    committed = f.read()
  assert len(committed.splitlines()) <= 300
  (tmp_path / "TABLE3.md").write_text(committed, encoding="utf-8")
  table3.main(["--report_only", f"--results={results}", f"--doc={tmp_path / 'TABLE3.md'}"])
  assert (tmp_path / "TABLE3.md").read_text(encoding="utf-8") == committed
  # A result missing from the file (or one not yet written into the doc) changes the doc.
  with open(results, encoding="utf-8") as f:
    lines = [line for line in f if '"row": "big"' not in line]
  (tmp_path / "fewer.jsonl").write_text("".join(lines), encoding="utf-8")
  table3.main(["--report_only", f"--results={tmp_path / 'fewer.jsonl'}",
               f"--doc={tmp_path / 'TABLE3.md'}"])
  assert (tmp_path / "TABLE3.md").read_text(encoding="utf-8") != committed
