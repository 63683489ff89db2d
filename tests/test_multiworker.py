"""Two worker processes on 127.0.0.1 (MultiWorkerMirroredStrategy, TF_CONFIG) train like
one process with two MirroredStrategy replicas on the same per-replica batches; only the
chief writes into the model dir."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, os.path.dirname(__file__))
import multiworker_job  # noqa: E402  pylint: disable=wrong-import-position
from workers_util import free_ports  # noqa: E402  pylint: disable=wrong-import-position

from t2t_repro.config.hparams import get_hparams  # noqa: E402
from t2t_repro.training.trainer import Trainer, make_strategy  # noqa: E402

JOB = os.path.join(os.path.dirname(__file__), "multiworker_job.py")


def _single_process_run(tmp_path):
  """The reference: 2 replicas in one process, replica r gets batch(s, r) at step s."""
  strategy = make_strategy("mirrored")
  assert strategy.num_replicas_in_sync == 2
  trainer = Trainer(get_hparams(*multiworker_job.HPARAMS), strategy, str(tmp_path / "single"))
  init = {f"w{i}": v.numpy() for i, v in enumerate(trainer.model.trainable_variables)}
  batches = [multiworker_job.batch(s, r) for s in range(multiworker_job.STEPS) for r in range(2)]
  ds = tf.data.Dataset.from_tensors(batches[0])
  for b in batches[1:]:
    ds = ds.concatenate(tf.data.Dataset.from_tensors(b))
  iterator = iter(ds)
  losses = [trainer.train_step(iterator)["loss"] for _ in range(multiworker_job.STEPS)]
  final = [v.numpy() for v in trainer.model.trainable_variables]
  return init, losses, final


@pytest.mark.integration
def test_two_workers_equal_single_process(tmp_path):
  init, losses, final = _single_process_run(tmp_path)
  init_path = tmp_path / "init.npz"
  np.savez(init_path, **init)
  model_dir, out = tmp_path / "model", tmp_path / "out.npz"
  ports = free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  procs = []
  for index in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster,
                                                 "task": {"type": "worker", "index": index}}),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    procs.append(subprocess.Popen([sys.executable, JOB, str(init_path), str(model_dir), str(out)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  try:
    outputs = [p.communicate(timeout=300)[0] for p in procs]
  finally:
    for p in procs:
      p.kill()
  for p, text in zip(procs, outputs):
    assert p.returncode == 0, text[-3000:]
  result = np.load(out)
  np.testing.assert_allclose(result["losses"], losses, rtol=1e-5)
  for i, expected in enumerate(final):
    np.testing.assert_allclose(result[f"w{i}"], expected, atol=1e-5)
  # Only the chief wrote into the model dir: one checkpoint, no worker scratch folders.
  assert tf.train.latest_checkpoint(str(model_dir)).endswith(f"ckpt-{multiworker_job.STEPS}")
  assert sorted(os.listdir(model_dir)) == ["checkpoint", f"ckpt-{multiworker_job.STEPS}.data-00000-of-00001",
                                           f"ckpt-{multiworker_job.STEPS}.index"]


if __name__ == "__main__":
  pytest.main([__file__, "-q"])
