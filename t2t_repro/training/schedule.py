"""The learning-rate schedule of Vaswani et al. 2017, §5.3, eq. 3."""

import keras
import tensorflow as tf


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
