"""A replica without rows contributes nothing: the dev loss over 1, 2, 3 and 8 replicas is
one replica's, and an update whose replicas or micro-batches include empty batches is the
update of the rows there are (tests/replicas_job.py, a process with 8 logical CPUs).

The job runs on TensorFlow's Eigen CPU kernels (TF_ENABLE_ONEDNN_OPTS=0), which check
shapes as the GPU kernels do: there a model run on an empty batch fails ("Matrix
size-incompatible: In[0]: [0,4,0,0], In[1]: [0,4,1,16]"), while oneDNN's kernels let
it through."""

import json
import os
import subprocess
import sys

import pytest

JOB = os.path.join(os.path.dirname(__file__), "replicas_job.py")
# Both position encodings and both norm orders, each once (pairwise).
OVERRIDES = ("position_encoding=sinusoid,norm_type=post", "position_encoding=relative,norm_type=pre")


@pytest.fixture(scope="module", params=OVERRIDES)
def job(request):
  env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="2",
             CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, JOB, request.param], capture_output=True, text=True,
                        env=env, timeout=900, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_dev_loss_over_replicas_is_one_replicas(job):
  dev = job["dev"]
  loss, nll, tokens = dev["1"]
  assert tokens == job["real_tokens"]  # every real target token once, no padding
  for n in ("2", "3", "8"):
    assert dev[n][0] == pytest.approx(loss, rel=1e-5), n
    assert dev[n][1] == pytest.approx(nll, rel=1e-5), n
    assert dev[n][2] == tokens, n


def test_empty_replicas_and_micro_batches_add_nothing_to_an_update(job):
  loss, expected, weight_diff = job["update"]
  assert loss == pytest.approx(expected, rel=1e-5)
  assert weight_diff < 1e-5
