"""The distributed configurations through the `train` command on real Multi30k text: 1, 2, 3
and 8 replicas (logical CPUs), float32 / mixed_bfloat16 / mixed_float16 (loss scaling),
accum_steps 1 and 2, XLA on and off, sinusoidal and relative positions, each value at least
once (pairwise, not the product; XLA on one replica only and with max_length=8, the one
bucket shape, since XLA compiles every batch shape anew: 20 s an update on 2 loaded cores
with the 15 shapes of max_length=64). One layer each side (a replica's graph is traced
once per replica). Each configuration evaluates on dev twice, writes best/,
the moving average (ema/) and the average of the last checkpoints (averaged/), and a run
stopped by SIGTERM and resumed ends on the tensors of the run never stopped: every
checkpoint variable, best/, ema/ and averaged/. The 8-replica run's best/ is scored by
`validate` (one device), which gives the dev nll the run logged."""

import json
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import train_command

STEPS = 6
DEV_PAIRS = 100
# (replicas, mixed_precision, accum_steps, jit_compile, position_encoding, max_length,
#  batch_tokens)
CONFIGS = {
    "1_float32_accum2_xla_relative": (1, "none", 2, True, "relative", 8, 128),
    "2_bfloat16_accum1_sinusoid": (2, "mixed_bfloat16", 1, False, "sinusoid", 64, 128),
    "3_float16_accum2_sinusoid": (3, "mixed_float16", 2, False, "sinusoid", 64, 128),
    "8_float32_accum1_relative": (8, "none", 1, False, "relative", 64, 512),
}


@pytest.fixture(scope="module")
def data(multi30k_slice, tmp_path_factory):
  """multi30k_slice with its first DEV_PAIRS dev pairs as the dev set (as links, so the
  slice's vocabulary cache is shared)."""
  folder = tmp_path_factory.mktemp("small_dev")
  for path in multi30k_slice.iterdir():
    if path.name.startswith("dev."):
      lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:DEV_PAIRS]
      (folder / path.name).write_text("".join(lines), encoding="utf-8")
    else:
      (folder / path.name).symlink_to(path)
  return folder


def _command(data, model_dir, config):
  replicas, precision, accum, xla, position, max_length, batch_tokens = config
  return train_command(
      data, model_dir, f"--train_steps={STEPS}", "--eval_every_steps=3",
      "--save_checkpoints_steps=1", "--dev_bleu_lines=0", "--ema_decay=0.9", "--average_last=2",
      f"--hparams_override=num_layers=1,max_length={max_length},batch_tokens={batch_tokens},"
      f"position_encoding={position}",
      f"--num_cpu_replicas={replicas}", f"--mixed_precision={precision}",
      f"--accum_steps={accum}", f"--jit_compile={xla}")


def _run(cmd):
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stderr


def _checkpoint(model_dir):
  path = tf.train.latest_checkpoint(str(model_dir))
  assert path, f"no checkpoint in {model_dir}"
  return path


def _assert_same_tensors(path_a, path_b):
  """Every variable of two checkpoints bit-equal (not the input position, a variant)."""
  readers = [tf.train.load_checkpoint(p) for p in (path_a, path_b)]
  names = [n for n in readers[0].get_variable_to_shape_map()
           if "CHECKPOINTABLE" not in n and not n.startswith("input/")]
  assert len(names) > 30
  assert sorted(names) == sorted(n for n in readers[1].get_variable_to_shape_map()
                                 if "CHECKPOINTABLE" not in n and not n.startswith("input/"))
  for name in names:
    assert np.array_equal(readers[0].get_tensor(name), readers[1].get_tensor(name)), name


def _stopped_and_resumed(cmd, model_dir):
  """`cmd` stopped by SIGTERM once ckpt-2 is written, then run again to its end."""
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.monotonic() + 600
  while proc.poll() is None and int((tf.train.latest_checkpoint(str(model_dir)) or "-0")
                                    .rsplit("-", 1)[1]) < 2:
    assert time.monotonic() < deadline
    time.sleep(0.02)
  proc.send_signal(signal.SIGTERM)
  # 0: saved and stopped after a step; -SIGTERM: ended at once in a dev evaluation (the
  # step was saved before it).
  assert proc.wait(timeout=300) in (0, -signal.SIGTERM)
  stopped_at = int(_checkpoint(model_dir).rsplit("-", 1)[1])
  assert 2 <= stopped_at < STEPS
  stderr = _run(cmd)
  assert f"resumed from {model_dir}/ckpt-{stopped_at} at step {stopped_at}" in stderr
  return stderr


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", list(CONFIGS))
def test_trains_evaluates_stops_and_resumes_exactly(data, tmp_path, name):
  config = CONFIGS[name]
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  stderr = _run(_command(data, whole, config))
  replicas = config[0]
  assert f"{replicas} replica(s)" in stderr
  dev_lines = re.findall(r"^dev step (\d+): loss [\d.]+ nll ([\d.]+)", stderr, re.M)
  assert [int(step) for step, _ in dev_lines] == [3, STEPS]
  assert re.search(rf"^ema dev step {STEPS}: loss ", stderr, re.M)
  _stopped_and_resumed(_command(data, parts, config), parts)

  for sub in ("", "ema", "averaged"):
    assert _checkpoint(whole / sub).endswith(f"ckpt-{STEPS}"), sub
  for sub in ("", "best", "ema", "averaged"):
    _assert_same_tensors(_checkpoint(whole / sub), _checkpoint(parts / sub))
  if replicas == 8:  # its dev nll is one device's: `validate` of best/ (float32)
    best_step = re.findall(r"^best dev loss so far: [\d.]+ at step (\d+)", stderr, re.M)[-1]
    logged = float(dict(dev_lines)[best_step])
    out = tmp_path / "validate.json"
    proc = subprocess.run([sys.executable, "-m", "t2t_repro.validate", f"--model_dir={whole / 'best'}",
                           f"--src={data / 'dev.en'}", f"--tgt={data / 'dev.de'}",
                           f"--output_json={out}"], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text(encoding="utf-8"))["nll"] == pytest.approx(logged, abs=6e-5)
