"""The same command, seed and machine give bit-identical checkpoints (float32, CPU)."""

import subprocess

import numpy as np
import tensorflow as tf

from conftest import train_command


def test_two_runs_of_one_command_write_identical_checkpoints(multi30k_slice, tmp_path):
  readers = []
  for run in ("a", "b"):
    proc = subprocess.run(train_command(multi30k_slice, tmp_path / run, "--train_steps=6",
                                        "--eval_every_steps=0", "--save_checkpoints_steps=6"),
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    readers.append(tf.train.load_checkpoint(str(tmp_path / run / "ckpt-6")))
  names = [n for n in readers[0].get_variable_to_shape_map() if "CHECKPOINTABLE" not in n]
  assert len(names) > 100  # the model's weights and Adam's slots, the step, the dropout seeds
  assert any("optimizer" in n for n in names)
  for name in names:
    assert np.array_equal(readers[0].get_tensor(name), readers[1].get_tensor(name)), name
