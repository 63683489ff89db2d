"""Label-smoothed cross-entropy summed over real target tokens (§5.4)."""

import tensorflow as tf


def smoothed_cross_entropy(logits, labels, weights, label_smoothing):
  """Sums of the label-smoothed loss and of the plain NLL over weighted tokens.

  The smoothed target puts 1 - eps on the true token and eps / (V - 1) on every
  other token (tensor2tensor's smoothing, §5.4 with eps = eps_ls). Sums, not means:
  the caller divides by the GLOBAL number of real target tokens, so that an update
  does not depend on how a batch is split across replicas or accumulation steps.

  Args:
    logits: float [num_tokens, V] (cast to float32 here).
    labels: int32 [num_tokens] true ids.
    weights: float32 [num_tokens], 1 for real tokens, 0 for padding.
    label_smoothing: eps in [0, 1).

  Returns:
    (smoothed_sum, nll_sum): float32 scalars [nats].
  """
  logits = tf.cast(logits, tf.float32)
  vocab = tf.cast(tf.shape(logits)[-1], tf.float32)
  log_z = tf.reduce_logsumexp(logits, axis=-1)
  true_logit = tf.gather(logits, labels[:, None], batch_dims=1)[:, 0]
  nll = log_z - true_logit
  # -sum_v q(v) log p(v) with q = low everywhere, plus (confidence - low) at the label.
  confidence = 1.0 - label_smoothing
  low = label_smoothing / (vocab - 1.0)
  sum_neg_log_p = vocab * log_z - tf.reduce_sum(logits, axis=-1)
  smoothed = (confidence - low) * nll + low * sum_neg_log_p
  return tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights)
