"""Ensembles of models sharing one vocabulary, decoded by one beam search.

At every step each model gives log-probabilities log p_m(y | prefix, x) over the shared
vocabulary; the ensemble's are the log of their mean in probability space,

  log p(y) = log (1/M) sum_m p_m(y) = logsumexp_m(log p_m(y)) - log M

(fairseq `EnsembleModel.forward_decoder`), and one beam search ranks the hypotheses by
them. Each model keeps its own encoder output and cache; all of them follow the beams.
"""

import tensorflow as tf

from t2t_repro.decoding import model_interface


class Ensemble:
  """Several `Transformer`s with one vocabulary, decoded as one model.

  Args:
    models: a non-empty list of `Transformer`s with equal `vocab_size` (checked by
      `decoding.loading.load_models`; an ensemble of one model decodes as that model).

  Attributes:
    vocab_size: the shared V.
    max_positions: the smallest of the models' (the longest sequence all accept).

  Raises:
    ValueError: no models, or different vocab_size.
  """

  def __init__(self, models):
    if not models:
      raise ValueError("an ensemble needs at least one model")
    sizes = sorted({model.vocab_size for model in models})
    if len(sizes) > 1:
      raise ValueError(f"the models of an ensemble need one vocabulary, got vocab_size {sizes}")
    self.models = list(models)
    self.vocab_size = sizes[0]
    self.max_positions = min(model.max_positions for model in models)

  def decoder(self, cached=True, fixed_size=False):
    """The beam-search interface (`decoding.model_interface`) of the ensemble."""
    return EnsembleDecoder([model_interface.decoder_for(model, cached, fixed_size)
                            for model in self.models])


def average_log_probs(log_probs):
  """log of the mean of probabilities: float32 [M, ..., V] -> [..., V] (logsumexp - log M)."""
  count = tf.cast(tf.shape(log_probs)[0], log_probs.dtype)
  return tf.reduce_logsumexp(log_probs, axis=0) - tf.math.log(count)


class EnsembleDecoder:
  """The model interface over member decoders: state = a tuple of the members' states."""

  def __init__(self, decoders):
    self.decoders = decoders
    self.vocab_size = decoders[0].vocab_size

  def start(self, inputs, beam_size, max_length):
    return tuple(d.start(inputs, beam_size, max_length) for d in self.decoders)

  def step(self, prev_ids, i, state):
    steps = [d.step(prev_ids, i, s) for d, s in zip(self.decoders, state)]
    if len(steps) == 1:
      return steps[0][0], (steps[0][1],)
    log_probs = average_log_probs(tf.stack([log_probs for log_probs, _ in steps]))
    return log_probs, tuple(s for _, s in steps)

  def reorder(self, state, rows, sentences=None):
    return tuple(d.reorder(s, rows, sentences) for d, s in zip(self.decoders, state))
