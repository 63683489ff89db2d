"""studies/small_batches/table.py: section 0's small-batch row from decode_throughput results."""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_REPO, "studies", "small_batches"))
import table  # noqa: E402  pylint: disable=wrong-import-position


def _run(mode, cpu, wall, load=1.0):
  return {"mode": mode, "batching": "unsorted", "threads": "2x1", "tokens_per_cpu_s": cpu,
          "tokens_per_s": wall, "loadavg_1min_before": load}


def test_one_row_of_medians_and_ratios():
  results = [_run("cached", 800, 1600), _run("cached_bfloat16", 900, 1700),
             _run("ctranslate2_float32", 1000, 1000, load=0.5),
             _run("ctranslate2_int8", 2000, 3000),
             _run("cached", 1000, 1800), _run("cached_bfloat16", 1100, 1900),
             _run("ctranslate2_float32", 1000, 2000, load=1.5),
             _run("ctranslate2_int8", 1800, 2600)]
  lines = table.table(results)
  assert len(lines) == 3
  # medians 900 / 1,000 / 1,000 / 1,900; rounds 0.80 and 1.00 -> 0.90; wall 1.6 and 0.9 -> 1.25
  assert lines[2] == ("| (b) 64 unsorted rows | 2x1 | 900 / 1,000 / 1,000 / 1,900 | **0.90x** "
                      "(0.80, 1.00) | 1.25x | 1.00x | 1.90x | 0.5-1.5 |")


def test_before_and_after_tables_ratios_and_equal_outputs():
  """run_idle.sh's records: a table per variant, after / before of the median tokens/CPU-s of
  each mode, and the float32 outputs compared run by run."""
  def record(variant, round_, scale, outputs):
    results = [_run(m, c * scale, c) for m, c in (("cached", 500), ("cached_bfloat16", 400),
                                                   ("ctranslate2_float32", 1000),
                                                   ("ctranslate2_int8", 2000))]
    results[0]["outputs"] = outputs
    return {"variant": variant, "round": round_, "revision": "r", "cpu": "X", "results": results}

  lines = table.before_after([record("before", 1, 1.0, [[5, 1], [6, 1]]),
                              record("after", 1, 2.0, [[5, 1], [7, 1]])])
  assert "before (X):" in lines and "after (X):" in lines
  assert "| (b) 64 unsorted rows | 2x1 | cached | 2.00x |" in lines
  assert "| (b) 64 unsorted rows | 2x1 | cached_bfloat16 | 2.00x |" in lines
  assert lines[-1] == "float32 outputs equal before and after: 1 of 2 (1 runs)"
