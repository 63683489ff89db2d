"""The best checkpoint on dev and early stopping with patience (as fairseq's
`--best-checkpoint-metric` / `--patience`).

After each dev evaluation `BestCheckpoint.update` compares the run's `metric`
("loss": dev loss, lower is better; "bleu": dev sacreBLEU on --dev_bleu_lines,
higher is better) with the best so far. An improvement by more than
`min_improvement` writes `{model_dir}/best/` as a complete model dir (hparams.json,
flags.json, vocab.model, the checkpoint and `best.json` = {"metric", "value",
"step", "bleu_lines"}), so translate, export and averaging take it unchanged.
`patience` > 0 stops training after that many evaluations in a row without one.
The patience state is kept in `{model_dir}/early_stopping.json`, written after each
evaluation and before best/, from which a resumed run restores it and redoes an
interrupted best/ write (`BestCheckpoint.resume`).
"""

import dataclasses
import shutil
import tempfile
from typing import Optional

from absl import logging

from t2t_repro import model_dir as model_dir_lib
from t2t_repro.model_dir import ModelDir


@dataclasses.dataclass
class Patience:
  """The best dev value so far and the evaluations since it improved (no I/O).

  Attributes:
    metric: "loss" (lower is better) or "bleu" (higher is better).
    patience: evaluations in a row without improvement that stop training (0: never).
    min_improvement: an improvement must exceed this (in the metric's units).
    best: the best value so far, None before the first evaluation.
    bad_evaluations: evaluations since the last improvement.
  """
  metric: str
  patience: int = 0
  min_improvement: float = 0.0
  best: Optional[float] = None
  bad_evaluations: int = 0

  def update(self, value):
    """Records one dev value; returns True when it improves on the best (then it is the best)."""
    if self.best is None:
      improved = True
    elif self.metric == "loss":
      improved = value < self.best - self.min_improvement
    else:
      improved = value > self.best + self.min_improvement
    if improved:
      self.best, self.bad_evaluations = value, 0
    else:
      self.bad_evaluations += 1
    return improved

  @property
  def exhausted(self):
    """True when training should stop: `patience` evaluations in a row did not improve."""
    return bool(self.patience) and self.bad_evaluations >= self.patience


class BestCheckpoint:
  """Keeps `{model_dir}/best/` and the patience state of a run (chief writes, see `update`).

  The state of early stopping is `{model_dir}/early_stopping.json`: "metric", "best" (the
  best value), "bad_evaluations", "step" (the last evaluation recorded) and "best_info" (the
  best.json of the best evaluation). `update` writes it BEFORE best/, so a run killed between
  a dev evaluation and the end of its best/ write knows on resume what to redo (`resume`):
  the same command ends with the best/, best.json and early_stopping.json of the run never
  stopped. (The checkpoint of the evaluated step is written before the evaluation, so that an
  interrupted evaluation loses nothing; the evaluation's result goes to this file.)

  Args:
    model_dir: the run's `ModelDir` (holds hparams.json, flags.json, vocab.model).
    metric, patience, min_improvement: see `Patience`.
    chief: only the chief writes files; the others keep the same state.
  """

  def __init__(self, model_dir, metric, patience=0, min_improvement=0.0, chief=True):
    self.model_dir, self.chief = ModelDir(model_dir), chief
    self.best_dir = self.model_dir.subdir(model_dir_lib.BEST_DIR)
    self.dir = self.best_dir.path
    self.state_path = self.model_dir.file(model_dir_lib.EARLY_STOPPING_FILE)
    self.patience = Patience(metric, patience, min_improvement)
    self.info = read_best(self.best_dir)
    state = self.model_dir.read_json(model_dir_lib.EARLY_STOPPING_FILE, required=False)
    if state is not None and state["metric"] != metric:
      state = None  # another metric: start over
    if self.info is not None and self.info["metric"] != metric:
      self.info = None
    # The last evaluation recorded: None before the first; a state file of a version that
    # did not record it (no "step") counts as up to date.
    self.evaluated_step = None if state is None else state.get("step", float("inf"))
    self.best_info = state.get("best_info", self.info) if state is not None else self.info
    if self.best_info is not None:
      self.patience.best = self.best_info["value"]
    if state is not None:
      self.patience.bad_evaluations = state["bad_evaluations"]

  def update(self, model, dev_stats):
    """Records the dev stats of one evaluation (early_stopping.json), then writes best/ when
    the metric improved (`ModelDir.write_dir`: the old best/ stays complete until the new
    one is).

    Args:
      model: the trained `Transformer` (its weights are written on improvement).
      dev_stats: `Evaluator` stats: "step", "loss" [, "bleu", "bleu_lines"].

    Returns:
      True when the metric improved.
    """
    value = float(dev_stats[self.patience.metric])
    improved = self.patience.update(value)
    self.evaluated_step = dev_stats["step"]
    if improved:
      self.best_info = {"metric": self.patience.metric, "value": value,
                        "step": dev_stats["step"], "bleu_lines": dev_stats.get("bleu_lines", 0)}
    if self.chief:
      self.model_dir.write_json(model_dir_lib.EARLY_STOPPING_FILE,
                                {"metric": self.patience.metric, "best": self.patience.best,
                                 "bad_evaluations": self.patience.bad_evaluations,
                                 "step": self.evaluated_step, "best_info": self.best_info})
    if improved:
      self._write(model)
    return improved

  def resume(self, model, step):
    """Redoes what a run stopped at `step` left undone: the best/ write of its last evaluation
    (when that evaluation, at `step`, improved and best/ does not hold it), from `model`, which
    holds the weights of `step` (its checkpoint was written before the evaluation).

    Returns:
      True when the evaluation at `step` is not recorded (the run stopped before the end of
      it): the caller evaluates again if one was due at `step`.
    """
    if self.evaluated_step is None or self.evaluated_step < step:
      return True
    if self.evaluated_step == step and self.best_info is not None \
        and self.best_info["step"] == step and self.info != self.best_info:
      logging.info("writing %s of step %d again: the run stopped before it was complete",
                   self.dir, step)
      self._write(model)
    return False

  def _write(self, model):
    """Writes best/ from `model` and `best_info`, then takes it as `info`."""
    info = self.best_info

    def write(staging):
      staging.write_weights(model, info["step"], self.model_dir, model_dir_lib.BEST_INFO_FILE,
                            info)

    if self.chief:
      self.best_dir.write_dir(write)
    else:  # takes part in the save (collectives); the chief's copy counts
      scratch = tempfile.mkdtemp(prefix="t2t_worker_best_")
      write(ModelDir(scratch))
      shutil.rmtree(scratch, ignore_errors=True)
    self.info = info

  @property
  def exhausted(self):
    return self.patience.exhausted

  @property
  def summary(self):
    """best.json of the best checkpoint plus "dir" (the best/ folder), or None before one."""
    return dict(self.info, dir=self.dir) if self.info else None


def read_best(best_dir):
  """best.json of a best/ folder (a `ModelDir`) as a dict, or None when there is none."""
  return ModelDir(best_dir).read_json(model_dir_lib.BEST_INFO_FILE, required=False)
