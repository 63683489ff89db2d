"""A run stopped between a dev evaluation and the end of its best/ write, or during the
evaluation, or by a full disk during the best/ write, and resumed by the same call ends with
the best/, best.json and early_stopping.json of the run never stopped (docs/RELIABILITY.md).
The stop is injected at a named point in-process (an exception that nothing catches, as a
kill -9 there)."""

import json

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro import errors
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.training.api import train_model
from t2t_repro.config.train import TrainConfig
from t2t_repro.training.evaluator import Evaluator

STEPS, EVAL_EVERY = 8, 4


class _Killed(BaseException):
  """The injected stop: a BaseException, as nothing in the run catches it."""


def _train(data, model_dir, min_improvement):
  """`tiny` for STEPS updates, a checkpoint every 2, dev loss every EVAL_EVERY, patience 3;
  min_improvement=100 (nats): only the first evaluation improves; 0: both do."""
  files = {f"{split}_{side}": str(data / f"{split}.{lang}")
           for split in ("train", "dev") for side, lang in (("src", "en"), ("tgt", "de"))}
  return train_model(TrainConfig(
      hparams="tiny", problem="parallel_text", model_dir=str(model_dir), vocab_dir=str(data),
      train_steps=STEPS, eval_every_steps=EVAL_EVERY, save_checkpoints_steps=2,
      save_checkpoints_secs=0, dev_bleu_lines=0, dev_samples=0, early_stopping=3,
      min_improvement=min_improvement, log_every_steps=4,
      **files))


@pytest.fixture(scope="module")
def uninterrupted(multi30k_slice, tmp_path_factory):
  """min_improvement -> the model dir of the run never stopped (trained once each)."""
  runs = {}

  def run(min_improvement):
    if min_improvement not in runs:
      runs[min_improvement] = tmp_path_factory.mktemp("best_resume") / "whole"
      _train(multi30k_slice, runs[min_improvement], min_improvement)
    return runs[min_improvement]
  return run


def _assert_same_best(dir_a, dir_b):
  """best/'s checkpoint (every tensor), best.json and early_stopping.json are equal."""
  for name in (model_dir_lib.EARLY_STOPPING_FILE, f"{model_dir_lib.BEST_DIR}/{model_dir_lib.BEST_INFO_FILE}"):
    assert json.loads((dir_a / name).read_text()) == json.loads((dir_b / name).read_text()), name
  paths = [tf.train.latest_checkpoint(str(d / model_dir_lib.BEST_DIR)) for d in (dir_a, dir_b)]
  assert paths[0].rsplit("/", 1)[1] == paths[1].rsplit("/", 1)[1]
  readers = [tf.train.load_checkpoint(p) for p in paths]
  names = [n for n in readers[0].get_variable_to_shape_map() if "CHECKPOINTABLE" not in n]
  assert len(names) > 30
  for name in names:
    np.testing.assert_array_equal(readers[0].get_tensor(name), readers[1].get_tensor(name), name)


def _stop_in_best_write(monkeypatch, step):
  """Stops the run after best/'s checkpoint of `step` is written in its staging folder."""
  write_weights = model_dir_lib.ModelDir.write_weights

  def stopping(self, model, at, *args):
    written = write_weights(self, model, at, *args)
    if at == step and ".best.new-" in self.path:
      raise _Killed
    return written
  monkeypatch.setattr(model_dir_lib.ModelDir, "write_weights", stopping)


def _disk_full_in_best_write(monkeypatch, step):
  """The device fills while best/'s checkpoint of `step` is written (TensorFlow's error)."""
  write_weights = model_dir_lib.ModelDir.write_weights

  def full(self, model, at, *args):
    if at == step and ".best.new-" in self.path:
      raise tf.errors.ResourceExhaustedError(
          None, None, f"{self.path}/ckpt-{at}_temp/part-00000-of-00001.data-00000-of-00001."
          "tempstate1; No space left on device")
    return write_weights(self, model, at, *args)
  monkeypatch.setattr(model_dir_lib.ModelDir, "write_weights", full)


def _stop_in_evaluation(monkeypatch, step):
  """Stops the run inside the dev evaluation of `step` (after its checkpoint)."""
  evaluate = Evaluator.__call__

  def stopping(self, at, label="dev", **kwargs):
    if at == step and label == "dev":
      raise _Killed
    return evaluate(self, at, label, **kwargs)
  monkeypatch.setattr(Evaluator, "__call__", stopping)


@pytest.mark.parametrize("stop,step,min_improvement", [
    (_stop_in_best_write, EVAL_EVERY, 100.0), (_stop_in_best_write, STEPS, 0.0),
    (_stop_in_evaluation, EVAL_EVERY, 100.0), (_stop_in_evaluation, STEPS, 100.0),
    (_disk_full_in_best_write, STEPS, 0.0)],
                         ids=["best_write_first", "best_write_last", "evaluation_first",
                              "evaluation_last", "disk_full_in_best_write"])
def test_a_resumed_run_ends_with_the_best_of_the_run_never_stopped(
    multi30k_slice, uninterrupted, tmp_path, monkeypatch, stop, step, min_improvement):
  whole = uninterrupted(min_improvement)
  best_step = STEPS if min_improvement == 0 else EVAL_EVERY
  best_json = whole / model_dir_lib.BEST_DIR / model_dir_lib.BEST_INFO_FILE
  assert json.loads(best_json.read_text())["step"] == best_step
  model_dir = tmp_path / "stopped"
  stop(monkeypatch, step)
  if stop is _disk_full_in_best_write:  # one line; best/ of the step before intact
    with pytest.raises(errors.DiskFullError) as failed:
      _train(multi30k_slice, model_dir, min_improvement)
    assert str(failed.value) == (f"{model_dir}/best: cannot write it: no space left on device; "
                                 "it is left as it was")
    best_json = model_dir / model_dir_lib.BEST_DIR / model_dir_lib.BEST_INFO_FILE
    assert json.loads(best_json.read_text())["step"] == EVAL_EVERY
    assert sorted(p.name for p in model_dir.iterdir() if p.name.startswith(".")) == []
  else:
    with pytest.raises(_Killed):
      _train(multi30k_slice, model_dir, min_improvement)
  monkeypatch.undo()
  assert tf.train.latest_checkpoint(str(model_dir)).endswith(f"ckpt-{step}")
  result = _train(multi30k_slice, model_dir, min_improvement)
  assert result.step == STEPS and result.best["step"] == best_step
  _assert_same_best(whole, model_dir)
