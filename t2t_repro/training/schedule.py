"""Learning-rate schedules: eq. 3 of Vaswani et al. 2017 (§5.3) and fairseq's inverse square root.

`make_schedule(hparams)` picks one by `hparams.lr_schedule`:

* "noam" (default): eq. 3, `TransformerSchedule`;
* "inverse_sqrt": fairseq's `inverse_sqrt` with `warmup_init_lr=0`, a linear warmup to
  `hparams.peak_learning_rate`, then decay with 1/sqrt(step), `InverseSqrtSchedule`;
* "constant": the same linear warmup, then `hparams.peak_learning_rate` until the end,
  `ConstantSchedule` (with a cooldown, the warmup-stable-decay schedule).

With `hparams.cooldown_steps` > 0 any one is wrapped in `CooldownSchedule`, which
takes the rate linearly down to 0 over the last `cooldown_steps` of `train_steps`.

All four are Keras-serializable `LearningRateSchedule`s (registered under "t2t_repro").
"""

import keras
import tensorflow as tf

SCHEDULES = ("noam", "inverse_sqrt", "constant")


@keras.saving.register_keras_serializable(package="t2t_repro")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """lrate = c * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)   (eq. 3).

  c = 1.0 is the paper; tensor2tensor's transformer_base uses c = 2.0 with the same
  shape (written there as min(1, step/warmup) * max(step, warmup)^-0.5). `step` is
  1-based: Keras passes the optimizer's 0-based iteration count, so update number
  n (n = 1, 2, ...) uses step = n.

  Args:
    d_model: model width.
    warmup_steps: warmup length [steps].
    constant: c.
  """

  def __init__(self, d_model, warmup_steps, constant=1.0):
    self.d_model = d_model
    self.warmup_steps = warmup_steps
    self.constant = constant

  def __call__(self, iteration):
    step = tf.cast(iteration, tf.float32) + 1.0
    warmup = float(self.warmup_steps)
    return (self.constant * self.d_model ** -0.5 *
            tf.minimum(tf.math.rsqrt(step), step * warmup ** -1.5))

  def get_config(self):
    return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "constant": self.constant}


@keras.saving.register_keras_serializable(package="t2t_repro")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """lrate = peak * min(step / warmup_steps, sqrt(warmup_steps / step)).

  fairseq's `inverse_sqrt` scheduler with `warmup_init_lr=0` (fairseq/optim/lr_scheduler/
  inverse_square_root_schedule.py): linear warmup from 0 to `peak_learning_rate` over
  `warmup_steps` updates, then `peak * sqrt(warmup_steps) / sqrt(step)`. The maximum,
  `peak`, is reached at step = warmup_steps. `step` is 1-based as in `TransformerSchedule`
  (update n uses step n); fairseq sets the rate of update n + 1 from n, so its first
  update runs at `warmup_init_lr` = 0 and its curve is this one delayed by one update.

  Args:
    peak_learning_rate: the rate at the end of warmup (fairseq `--lr`).
    warmup_steps: warmup length [steps] (fairseq `--warmup-updates`).
  """

  def __init__(self, peak_learning_rate, warmup_steps):
    self.peak_learning_rate = peak_learning_rate
    self.warmup_steps = warmup_steps

  def __call__(self, iteration):
    step = tf.cast(iteration, tf.float32) + 1.0
    warmup = float(self.warmup_steps)
    return self.peak_learning_rate * tf.minimum(step / warmup, tf.sqrt(warmup / step))

  def get_config(self):
    return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps}


@keras.saving.register_keras_serializable(package="t2t_repro")
class ConstantSchedule(InverseSqrtSchedule):
  """lrate = peak * min(1, step / warmup_steps).

  A linear warmup from 0 to `peak_learning_rate` over `warmup_steps` updates, then the peak
  rate until the end: the "warmup-stable" part of the warmup-stable-decay schedule (Zhai et
  al. 2022, "Scaling Vision Transformers"; Hägele et al. 2024, "Scaling Laws and
  Compute-Optimal Training Beyond Fixed Training Durations", §3), whose decay is
  `CooldownSchedule` (hparams `cooldown_steps`). It is `InverseSqrtSchedule` (same
  arguments and config) without the decay after the peak. `step` is 1-based as in
  `TransformerSchedule`.

  Args:
    peak_learning_rate: the rate at the end of warmup and after it.
    warmup_steps: warmup length [steps].
  """

  def __call__(self, iteration):
    step = tf.cast(iteration, tf.float32) + 1.0
    return self.peak_learning_rate * tf.minimum(step / float(self.warmup_steps), 1.0)


@keras.saving.register_keras_serializable(package="t2t_repro")
class CooldownSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """lrate = base(step) * min(1, (train_steps - step + 1) / cooldown_steps).

  A linear cooldown to 0 over the last `cooldown_steps` updates of a run of `train_steps`
  updates: update n = train_steps - cooldown_steps + k (k = 1..cooldown_steps) runs at
  (cooldown_steps - k + 1) / cooldown_steps of the base rate, so the last update runs at
  1 / cooldown_steps of it and every earlier update at the base rate. The cooldown of the
  "warmup-stable-decay" schedules (Zhai et al. 2022, "Scaling Vision Transformers";
  Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training
  Durations", §3), applied here on top of eq. 3, inverse_sqrt or constant. `step` is
  1-based as in `TransformerSchedule`. Under a wall-clock budget (`--train_minutes`) set `train_steps`
  to what the budget reaches, or the run stops before its cooldown ends. A resume with
  another `--train_steps` moves the cooldown to the new end.

  Args:
    base: the schedule being cooled down (a `LearningRateSchedule`).
    train_steps: the last update of the run [steps]; every later update gets rate 0.
    cooldown_steps: length of the linear decay [steps].

  Returns (when called with the optimizer's 0-based iteration count): a float32 scalar,
  the learning rate of that update.

  Raises:
    ValueError: cooldown_steps is not positive.
  """

  def __init__(self, base, train_steps, cooldown_steps):
    if not cooldown_steps > 0:
      raise ValueError(f"cooldown_steps must be positive, got {cooldown_steps}")
    self.base = base
    self.train_steps = train_steps
    self.cooldown_steps = cooldown_steps

  def __call__(self, iteration):
    left = float(self.train_steps) - tf.cast(iteration, tf.float32)  # train_steps - step + 1
    return self.base(iteration) * tf.clip_by_value(left / float(self.cooldown_steps), 0.0, 1.0)

  def get_config(self):
    return {"base": keras.saving.serialize_keras_object(self.base),
            "train_steps": self.train_steps, "cooldown_steps": self.cooldown_steps}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["base"] = keras.saving.deserialize_keras_object(config["base"])
    return cls(**config)


def make_schedule(hparams):
  """The schedule `hparams.lr_schedule` names, with its hparams.

  Args:
    hparams: `HParams` (lr_schedule, warmup_steps; d_model and learning_rate_constant for "noam",
      peak_learning_rate for "inverse_sqrt" and "constant"; cooldown_steps and train_steps
      for the cooldown).

  Returns:
    A `keras.optimizers.schedules.LearningRateSchedule`.

  Raises:
    ValueError: an unknown lr_schedule (`HParams` validation rejects it first).
  """
  if hparams.lr_schedule == "noam":
    schedule = TransformerSchedule(hparams.d_model, hparams.warmup_steps,
                                   hparams.learning_rate_constant)
  elif hparams.lr_schedule == "inverse_sqrt":
    schedule = InverseSqrtSchedule(hparams.peak_learning_rate, hparams.warmup_steps)
  elif hparams.lr_schedule == "constant":
    schedule = ConstantSchedule(hparams.peak_learning_rate, hparams.warmup_steps)
  else:
    raise ValueError(f"lr_schedule={hparams.lr_schedule!r} is not one of {SCHEDULES}")
  if hparams.cooldown_steps:
    schedule = CooldownSchedule(schedule, hparams.train_steps, hparams.cooldown_steps)
  return schedule
