"""The best checkpoint on dev and early stopping with patience (as fairseq's
`--best-checkpoint-metric` / `--patience`).

After each dev evaluation `BestCheckpoint.update` compares the run's `metric`
("loss": dev loss, lower is better; "bleu": dev sacreBLEU on --dev_bleu_lines,
higher is better) with the best so far. An improvement by more than
`min_improvement` writes `{model_dir}/best/` as a complete model dir (hparams.json,
flags.json, vocab.model, the checkpoint and `best.json` = {"metric", "value",
"step", "bleu_lines"}), so translate, export and averaging take it unchanged.
`patience` > 0 stops training after that many evaluations in a row without one.
The patience counter is kept in `{model_dir}/early_stopping.json`; with best.json
it restores the state on resume.
"""

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Optional

from t2t_repro import fileio
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.model.weights import write_weights_model_dir

STATE_FILE = "early_stopping.json"


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

  Args:
    model_dir: the run's model dir (holds hparams.json, flags.json, vocab.model).
    metric, patience, min_improvement: see `Patience`.
    chief: only the chief writes files; the others keep the same state.
  """

  def __init__(self, model_dir, metric, patience=0, min_improvement=0.0, chief=True):
    self.model_dir, self.chief = model_dir, chief
    self.dir = os.path.join(model_dir, model_dir_lib.BEST_DIR)
    self.state_path = os.path.join(model_dir, STATE_FILE)
    self.patience = Patience(metric, patience, min_improvement)
    self.info = read_best(self.dir)
    if self.info is not None and self.info["metric"] == metric:
      self.patience.best = self.info["value"]
      if os.path.exists(self.state_path):
        with open(self.state_path, encoding="utf-8") as f:
          state = json.load(f)
        if state["metric"] == metric:
          self.patience.bad_evaluations = state["bad_evaluations"]
    elif self.info is not None:  # another metric: start over
      self.info = None

  def update(self, model, dev_stats):
    """Records the dev stats of one evaluation; writes best/ when the metric improved.

    Args:
      model: the trained `Transformer` (its weights are written on improvement).
      dev_stats: `Evaluator` stats: "step", "loss" [, "bleu", "bleu_lines"].

    Returns:
      True when the metric improved.
    """
    value = float(dev_stats[self.patience.metric])
    improved = self.patience.update(value)
    if improved:
      self.info = {"metric": self.patience.metric, "value": value,
                   "step": dev_stats["step"], "bleu_lines": dev_stats.get("bleu_lines", 0)}
      target = self.dir if self.chief else tempfile.mkdtemp(prefix="t2t_worker_best_")
      write_weights_model_dir(model, dev_stats["step"], self.model_dir, target, "best.json",
                              self.info)
      if not self.chief:  # took part in the save (collectives); the chief's copy counts
        shutil.rmtree(target, ignore_errors=True)
    if self.chief:
      fileio.write_json(self.state_path,
                        {"metric": self.patience.metric, "best": self.patience.best,
                         "bad_evaluations": self.patience.bad_evaluations})
    return improved

  @property
  def exhausted(self):
    return self.patience.exhausted

  @property
  def summary(self):
    """best.json of the best checkpoint plus "dir" (the best/ folder), or None before one."""
    return dict(self.info, dir=self.dir) if self.info else None


def read_best(best_dir):
  """best.json of a best/ folder as a dict, or None when there is none."""
  path = os.path.join(best_dir, "best.json")
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)
