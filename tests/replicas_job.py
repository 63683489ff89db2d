"""Dev loss and one update of one model over 1, 2, 3 and 8 logical CPU replicas (run by
tests/test_empty_replica.py, not by pytest: the number of logical CPUs is fixed before
TensorFlow starts, and the test process has two).

    python tests/replicas_job.py HPARAMS_OVERRIDES

With the "key=value,..." override of `HPARAMS`, builds the model once and copies its weights
into a `Trainer` under each strategy below (each on its own devices: strategies of one
process on the same devices would share collective instance keys). Prints one JSON line
{"real_tokens": the non-pad target tokens of the dev batches, and}

* "dev": {N: [loss, nll, target_tokens]}: `Trainer.evaluate` of DEV_BATCHES batches over N
  replicas, as the trainer's dev evaluation reads them (one input pipeline, batches dealt
  to the replicas in turn): the last step leaves some replicas without rows for every N > 1;
* "update": [loss, reference loss, max |weight - reference weight|] of one update of 2 replicas with
  accum_steps 2 (XLA on) on the micro-batches (a, empty, empty, empty): replica 0 gets a and
  an empty micro-batch, replica 1 two empty ones; the reference is one replica's update on a
  (the 1-replica trainer of "dev").
"""

import json
import sys
import tempfile

import numpy as np

REPLICAS = (1, 2, 3, 8)
DEV_BATCHES = 13
# Adam's epsilon 1 and a one-update warmup make the update nearly linear in the gradient
# (tests/test_distribution.py), so equal weights mean equal gradients.
HPARAMS = "vocab_size=50,dropout=0,adam_epsilon=1,warmup_steps=1"


def dev_batches():
  """`DEV_BATCHES` EOS-terminated int32 batches of varied rows and lengths, with padding."""
  rng = np.random.default_rng(7)
  out = []
  for i in range(DEV_BATCHES):
    rows, src_len, tgt_len = 1 + i % 4, 3 + i % 5, 2 + (3 * i) % 7
    inputs = rng.integers(3, 50, size=(rows, src_len)).astype(np.int32)
    targets = rng.integers(3, 50, size=(rows, tgt_len)).astype(np.int32)
    inputs[:, -1], targets[:, -1] = 1, 1
    inputs[0, src_len // 2:], targets[-1, tgt_len // 2:] = 0, 0
    out.append({"inputs": inputs, "targets": targets})
  return out


def main(override):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * max(REPLICAS))
  import keras  # pylint: disable=import-outside-toplevel

  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.training.trainer import Trainer  # pylint: disable=import-outside-toplevel

  batches = dev_batches()
  empty = {"inputs": np.zeros([0, 0], np.int32), "targets": np.zeros([0, 0], np.int32)}
  devices = [d.name for d in tf.config.list_logical_devices("CPU")]
  hparams = get_hparams("tiny", f"{HPARAMS},{override}")

  def dataset(elements):
    ds = tf.data.Dataset.from_tensors(elements[0])
    for b in elements[1:]:
      ds = ds.concatenate(tf.data.Dataset.from_tensors(b))
    return ds

  def trainer(on, weights, **kwargs):
    strategy = tf.distribute.OneDeviceStrategy(on[0]) if len(on) == 1 \
        else tf.distribute.MirroredStrategy(on)
    keras.utils.set_random_seed(1)
    out = Trainer(hparams, strategy, tempfile.mkdtemp(prefix="replicas_job_"), **kwargs)
    if weights is not None:
      out.model.set_weights(weights)
    return out

  one = trainer(devices[:1], None)
  weights, dev = one.model.get_weights(), {}
  for n in REPLICAS:
    t = one if n == 1 else trainer(devices[:n], weights)
    stats = t.evaluate(t.strategy.distribute_datasets_from_function(lambda _: dataset(batches)))
    dev[n] = [float(stats["loss"]), float(stats["nll"]), float(stats["target_tokens"])]
  expected = one.train_step(iter(dataset([batches[0]])))["loss"]
  split = trainer(devices[-2:], weights, accum_steps=2, jit_compile=True)
  loss = split.train_step(iter(dataset([batches[0], empty, empty, empty])))["loss"]
  diff = max(float(np.abs(a - b).max()) for a, b in
             zip(split.model.get_weights(), one.model.get_weights()))
  print(json.dumps({"real_tokens": float(sum((b["targets"] != 0).sum() for b in batches)),
                    "dev": dev, "update": [loss, expected, diff]}))


if __name__ == "__main__":
  main(sys.argv[1])
