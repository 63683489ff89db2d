"""The work of one beam-search loop iteration, counted (benchmarks/decode_ops.py): graph ops of
the traced decoding step and of the loop body, and op events per iteration as the executor runs
them, on a `tiny` model of random weights (2 + 2 layers), one sentence, beam 4, in float32 and
in bfloat16 (`--inference_dtype=bfloat16`: weights cast once per search, not per step). Upper
bounds just above the counts reached, so that per-step work cannot creep back unnoticed."""

import os
import sys

import pytest

from conftest import _REPO_ROOT

sys.path.insert(0, os.path.join(_REPO_ROOT, "benchmarks"))

import decode_ops  # noqa: E402  pylint: disable=wrong-import-position

# Counts reached (float32): step graph, loop body graph, op events per iteration, casts per
# iteration; each bound is the count plus a few ops.
BOUNDS = {"step_graph_ops": 290, "loop_body_ops": 1120, "events_per_iteration": 188,
          "casts_per_iteration": 2.1}
# bfloat16: the casts left are those of float32 LayerNorms, softmaxes and logits.
BFLOAT16_BOUNDS = {"events_per_iteration": 217, "casts_per_iteration": 23.1}


@pytest.fixture(scope="module", name="counts")
def fixture_counts():
  return decode_ops.count(decode_ops.random_model("tiny"), lines=1, beam_size=4)


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_ops_per_iteration_stay_below_their_bound(counts, name):
  assert counts[name] <= BOUNDS[name], counts


def test_bfloat16_casts_per_iteration_stay_below_their_bound():
  counts = decode_ops.count(decode_ops.random_model("tiny", inference_dtype="bfloat16"), lines=1,
                            beam_size=4)
  for name, bound in BFLOAT16_BOUNDS.items():
    assert counts[name] <= bound, counts


def test_iterations_are_counted(counts):
  """A random model runs each sentence to its maximum length: source 11 tokens + 10."""
  assert counts["iterations"] == 21
  assert counts["by_type_per_iteration"]["LogSoftmax"] == 1
