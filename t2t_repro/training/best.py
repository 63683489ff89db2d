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
import shutil
import tempfile
from typing import Optional

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
    if self.info is not None and self.info["metric"] == metric:
      self.patience.best = self.info["value"]
      state = self.model_dir.read_json(model_dir_lib.EARLY_STOPPING_FILE, required=False)
      if state is not None and state["metric"] == metric:
        self.patience.bad_evaluations = state["bad_evaluations"]
    elif self.info is not None:  # another metric: start over
      self.info = None

  def update(self, model, dev_stats):
    """Records the dev stats of one evaluation; writes best/ when the metric improved
    (`ModelDir.write_dir`: the old best/ stays complete until the new one is).

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

      def write(staging):
        staging.write_weights(model, dev_stats["step"], self.model_dir,
                              model_dir_lib.BEST_INFO_FILE, self.info)

      if self.chief:
        self.best_dir.write_dir(write)
      else:  # takes part in the save (collectives); the chief's copy counts
        scratch = tempfile.mkdtemp(prefix="t2t_worker_best_")
        write(ModelDir(scratch))
        shutil.rmtree(scratch, ignore_errors=True)
    if self.chief:
      self.model_dir.write_json(model_dir_lib.EARLY_STOPPING_FILE,
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
  """best.json of a best/ folder (a `ModelDir`) as a dict, or None when there is none."""
  return ModelDir(best_dir).read_json(model_dir_lib.BEST_INFO_FILE, required=False)
