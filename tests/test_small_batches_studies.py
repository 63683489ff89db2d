"""The small-batch study scripts run (studies/small_batches): their tables at the smallest size."""

import os
import re
import subprocess
import sys

_STUDIES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "studies",
                        "small_batches")


def _run(script, *flags):
  result = subprocess.run([sys.executable, os.path.join(_STUDIES, script), *flags],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  return [line for line in result.stdout.splitlines() if line.startswith("| ")]


def test_matmul_floor_prints_each_row():
  rows = _run("matmul_floor.py", "--iterations=2")
  assert rows[0] == "| matmuls (4 rows, float32, 1 thread) | ms per iteration |"
  assert len(rows) == 8
  assert all(re.fullmatch(r"\| [^|]+ \| \d+\.\d{3} \|", row) for row in rows[1:])


def test_inter_op_runs_each_setting(exported_model, multi30k_slice):
  rows = _run("inter_op.py", f"--export_dir={exported_model / '1'}",
              f"--input_file={multi30k_slice / 'dev.en'}", "--lines=6", "--rounds=1")
  settings = [tuple(cell.strip() for cell in row.split("|")[2:4]) for row in rows[1:]]
  assert settings == [("1", "1"), ("default", "1"), ("1", "2"), ("default", "2")]
  assert all(float(row.split("|")[4]) > 0 for row in rows[1:])
