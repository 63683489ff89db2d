"""One worker of the multi-worker test (run by tests/test_multiworker.py, not by pytest).

    TF_CONFIG=... python tests/multiworker_job.py INIT.npz MODEL_DIR OUT.npz

Builds a Trainer under MultiWorkerMirroredStrategy, loads the initial weights from
INIT.npz, runs STEPS updates where worker w at step s trains on `batch(s, w)`, saves a
checkpoint (only the chief writes into MODEL_DIR) and, on the chief, writes the final
weights to OUT.npz.
"""

import json
import os
import sys

import numpy as np

STEPS = 3
HPARAMS = ("tiny", "vocab_size=50,dropout=0")


def batch(step, replica):
  """The deterministic per-replica batch of update `step`: int32 ids, EOS-terminated."""
  rng = np.random.default_rng(100 * step + replica)
  rows, src_len, tgt_len = 2 + replica, 5 + step, 4 + replica + step
  inputs = rng.integers(3, 50, size=(rows, src_len)).astype(np.int32)
  targets = rng.integers(3, 50, size=(rows, tgt_len)).astype(np.int32)
  inputs[:, -1], targets[:, -1] = 1, 1
  targets[0, tgt_len // 2:] = 0
  return {"inputs": inputs, "targets": targets}


def main(init_path, model_dir, out_path):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.training.trainer import Trainer, make_strategy  # pylint: disable=import-outside-toplevel

  strategy = make_strategy("multi_worker")
  worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  trainer = Trainer(get_hparams(*HPARAMS), strategy, model_dir)
  init = np.load(init_path)
  for i, v in enumerate(trainer.model.trainable_variables):
    v.assign(init[f"w{i}"])

  ctx = trainer.input_context()
  assert (ctx.input_pipeline_id, ctx.num_input_pipelines) == (worker, 2)
  batches = [batch(s, ctx.input_pipeline_id) for s in range(STEPS)]
  ds = tf.data.Dataset.from_tensors(batches[0])
  for b in batches[1:]:
    ds = ds.concatenate(tf.data.Dataset.from_tensors(b))
  iterator = iter(ds)
  losses = [trainer.train_step(iterator)["loss"] for _ in range(STEPS)]
  trainer.save()
  if trainer.chief:
    np.savez(out_path, losses=np.array(losses),
             **{f"w{i}": v.numpy() for i, v in enumerate(trainer.model.trainable_variables)})


if __name__ == "__main__":
  main(*sys.argv[1:4])
  from t2t_repro import logs  # pylint: disable=wrong-import-position
  logs.finish(0)  # skip the slow teardown of the strategy and its collectives
