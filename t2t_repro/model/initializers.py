"""Weight initializers of the model's layers.

Keras 3 initializers fix their seed when they are made (an unseeded one draws its seed
once, at construction), so one initializer object passed to several `add_weight` calls
draws the same values for each: shared between W_Q, W_K, W_V and W_O it makes them equal
matrices, so that every query starts by attending mostly to itself. Each weight therefore
gets an initializer of its own from here.
"""

import keras


def glorot_uniform(scale=1.0):
  """A new Glorot (Xavier) uniform initializer for one weight.

  Glorot and Bengio 2010 (tensor2tensor's and Keras's dense layers): U(-limit, limit)
  with limit = sqrt(3 * scale * 2 / (fan_in + fan_out)), i.e. std
  sqrt(2 * scale / (fan_in + fan_out)), fans of the 2-D kernel [fan_in, fan_out].

  Args:
    scale: variance multiplier (1.0 = Glorot); float > 0.

  Returns:
    A `keras.initializers.VarianceScaling`, seeded from Keras's global seed
    (`keras.utils.set_random_seed`) when made; use it for one weight only.
  """
  return keras.initializers.VarianceScaling(scale, "fan_avg", "uniform")
