"""`serve --tensorflow_inter_op_parallelism`: TensorFlow's inter-op pool of the server process
(its threads are named tf_Compute) has the asked size, and the answers stay the same."""

import json
import os
import sys

import httpx
import pytest

from serve_util import start_server


def _compute_threads(pid):
  """Threads of process `pid` named tf_Compute (TensorFlow's inter-op pool)."""
  names = []
  for task in os.listdir(f"/proc/{pid}/task"):
    with open(f"/proc/{pid}/task/{task}/comm", encoding="utf-8") as f:
      names.append(f.read().strip())
  return names.count("tf_Compute")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for thread names")
def test_one_inter_op_thread_serves_the_same_answers(exported_model, multi30k_slice):
  lines = (multi30k_slice / "dev.en").read_text(encoding="utf-8").splitlines()[:4]
  answers, threads = {}, {}
  for flags in ((), ("--tensorflow_inter_op_parallelism=1",)):
    process, base = start_server(exported_model, *flags)
    try:
      response = httpx.post(f"{base}/v1/models/transformer:predict",
                            content=json.dumps({"instances": lines}), timeout=300)
      assert response.status_code == 200
      answers[flags] = [row["translations"] for row in response.json()["predictions"]]
      threads[flags] = _compute_threads(process.pid)
    finally:
      process.kill()
      process.wait()
  assert threads[("--tensorflow_inter_op_parallelism=1",)] == 1
  # TensorFlow's default: one per core this process may run on
  assert threads[()] == len(os.sched_getaffinity(0))
  assert answers[()] == answers[("--tensorflow_inter_op_parallelism=1",)]
