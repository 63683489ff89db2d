"""The optimization and schedule group of the hparams: `OptimizationConfig`.

The loss (label smoothing, R-Drop), the learning-rate schedule (`training.schedule`),
Adam, clipping, the number of updates and the checkpoint averaging at the end (Vaswani et
al. 2017, §5.3-5.4, §6.1). `t2t_repro.config.hparams.HParams` inherits these fields; no
TensorFlow here.
"""

import dataclasses

from t2t_repro.config import settings
from t2t_repro.config.settings import setting


@dataclasses.dataclass(frozen=True)
class OptimizationConfig:
  """How the model is trained; each field's help, default (the paper's) and range are in
  its `settings.setting`.

  Raises:
    errors.UsageError (a ValueError): a field outside its choices or range.
  """

  label_smoothing: float = setting(0.1, "eps_ls (§5.4).", min_value=0, below=1)
  rdrop_alpha: float = setting(
      0.0, "R-Drop (Liang et al. 2021, eq. 3): each training pair runs twice with its own "
      "dropout masks and the loss adds this weight times the symmetric KL divergence of the "
      "two output distributions (0: off; the paper uses 5 for IWSLT translation). Doubles the "
      "computation of an update.", min_value=0)
  lr_schedule: str = setting(
      "noam", "noam (eq. 3 of §5.3, the paper), inverse_sqrt (fairseq's inverse_sqrt: linear "
      "warmup to peak_learning_rate, then ~ 1/sqrt(step)) or constant (the same warmup, then "
      "peak_learning_rate; with cooldown_steps the warmup-stable-decay schedule); see "
      "training.schedule.", choices=("noam", "inverse_sqrt", "constant"))
  learning_rate_constant: float = setting(
      1.0, "Constant multiplier of eq. 3 (1.0 paper, 2.0 tensor2tensor, whose name this is); noam "
      "only.", above=0)
  peak_learning_rate: float = setting(
      0.0, "The rate at the end of warmup; inverse_sqrt and constant only (must be positive "
      "there).",
      min_value=0)
  warmup_steps: int = setting(4000, "Warmup of every schedule [steps].", min_value=1)
  cooldown_steps: int = setting(
      0, "The last cooldown_steps of train_steps take the rate linearly down to 0 (the "
      "warmup-stable-decay cooldown, training.schedule.CooldownSchedule); 0 disables it "
      "[steps]. Must be <= train_steps.", min_value=0)
  adam_beta1: float = setting(0.9, "Adam's beta1 (§5.3).", min_value=0, below=1)
  adam_beta2: float = setting(0.98, "Adam's beta2 (§5.3).", min_value=0, below=1)
  adam_epsilon: float = setting(1e-9, "Adam's epsilon (§5.3).", above=0)
  clip_norm: float = setting(0.0, "Global gradient-norm clipping; 0 disables it.", min_value=0)
  train_steps: int = setting(100000, "Optimizer updates to run [steps].", min_value=1)
  average_last: int = setting(
      5, "At the end of training, average the last N checkpoints into model_dir/averaged/, and "
      "the default N of the average command (§6.1: 5 for base, 20 for big; 0: off).",
      min_value=0)

  def __post_init__(self):
    settings.check(self)
