"""Label-smoothed cross-entropy summed over real target tokens (§5.4), and the
teacher-forced loss sums of one batch that training, the trainer's dev loss and
`t2t_repro.training.perplexity` share."""

import tensorflow as tf

from t2t_repro.constants import PAD_ID


def smoothed_cross_entropy(hidden, matrix, labels, weights, label_smoothing):
  """Sums of the label-smoothed loss and of the plain NLL of the output layer's logits.

  The logits are hidden @ matrix^T: the tied pre-softmax projection (§3.4,
  `SharedEmbedding.logits`), computed here so that its gradient can be fused with the
  loss's. The smoothed target q puts 1 - eps on the true token and eps / (V - 1) on
  every other token (tensor2tensor's smoothing, §5.4 with eps = eps_ls). Sums, not
  means: the caller divides by the GLOBAL number of real target tokens, so that an
  update does not depend on how a batch is split across replicas or accumulation steps.

  How it is computed (the [num_tokens, V] logits are the largest tensor of the step:
  4080 x 37000 for `base`): since (1 - eps) + (V - 1) eps / (V - 1) = 1,
      -sum_v q(v) log p(v) = nll + low * (V * logit[label] - sum_v logit[v]),
  with low = eps / (V - 1). p comes from one softmax kernel (oneDNN's on CPU), and
  log Z from its largest entry, which cannot underflow (p_max >= 1 / V):
      nll = log Z - logit[label],   log Z = max_v logit[v] - log p_max.
  The gradient with respect to the logits of row n is a_n p - b_n - c_n onehot(label_n)
  (a = d smoothed + d nll, b = low d smoothed, c = a - low V d smoothed; softmax - q for
  the smoothed loss). It is never written as a [num_tokens, V] tensor: the custom
  gradient takes p itself into the two matmuls of the projection's gradient and adds the
  b and c terms as a column sum, a gather of the label rows of `matrix` and a segment
  sum into them. A gradient written as a [num_tokens, V] tensor costs a pass over it and a
  scatter of the label terms into a copy of it (about 2 % of a `small` step,
  docs/BENCHMARKS.md section 0).

  Args:
    hidden: float32, bfloat16 or float16 [num_tokens, d_model], the decoder output of
      the real target positions (the matmuls run in its dtype; p is cast to it before the
      gradient matmuls, the per-row scale applied after).
    matrix: float32 [V, d_model], the shared embedding matrix E.
    labels: int32 [num_tokens] true ids in [0, V).
    weights: float32 [num_tokens], 1 for real tokens, 0 for padding.
    label_smoothing: eps in [0, 1).

  Returns:
    (smoothed_sum, nll_sum): float32 scalars [nats]. Gradients flow to `hidden` and
    `matrix` from both (d smoothed / d logits = softmax - q, d nll / d logits =
    softmax - onehot), in their own dtypes.

  Raises:
    tf.errors.InvalidArgumentError: (when run) a label outside [0, V).
  """
  labels = tf.cast(labels, tf.int32)
  vocab = tf.cast(tf.shape(matrix)[0], tf.float32)
  low = label_smoothing / (vocab - 1.0)

  @tf.custom_gradient
  def per_token(hidden, matrix):
    weights_in = tf.cast(matrix, hidden.dtype)
    logits = tf.cast(tf.matmul(hidden, weights_in, transpose_b=True), tf.float32)
    p = tf.nn.softmax(logits)
    true_logit = tf.gather(logits, labels[:, None], batch_dims=1)[:, 0]
    log_z = tf.reduce_max(logits, axis=-1) - tf.math.log(tf.reduce_max(p, axis=-1))
    nll = log_z - true_logit
    smoothed = nll + low * (vocab * true_logit - tf.reduce_sum(logits, axis=-1))

    def grad(d_smoothed, d_nll):
      a = (d_smoothed + d_nll)[:, None]
      b = (low * d_smoothed)[:, None]
      c = a - (low * vocab * d_smoothed)[:, None]
      p_in = tf.cast(p, hidden.dtype)
      hidden32 = tf.cast(hidden, tf.float32)
      d_hidden = (a * tf.cast(tf.matmul(p_in, weights_in), tf.float32)
                  - b * tf.reduce_sum(matrix, axis=0)[None, :]
                  - c * tf.gather(matrix, labels))
      scaled = tf.cast(a * hidden32, hidden.dtype)
      d_matrix = (tf.cast(tf.matmul(p_in, scaled, transpose_a=True), tf.float32)
                  - tf.reduce_sum(b * hidden32, axis=0)[None, :]
                  - tf.math.unsorted_segment_sum(c * hidden32, labels, tf.shape(matrix)[0]))
      return tf.cast(d_hidden, hidden.dtype), tf.cast(d_matrix, matrix.dtype)

    return (smoothed, nll), grad

  smoothed, nll = per_token(hidden, tf.convert_to_tensor(matrix))
  return tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights)


def symmetric_kl_sum(hidden_a, hidden_b, matrix, weights):
  """Sum over tokens of KL(p_a || p_b) + KL(p_b || p_a) of two passes' output distributions.

  R-Drop's consistency term (Liang et al. 2021, eq. 2): p = softmax(hidden @ matrix^T), the
  tied output layer, in float32; sum_v (p_a - p_b)(log p_a - log p_b) per token.

  Args:
    hidden_a, hidden_b: float [num_tokens, d_model], the decoder outputs of the same target
      tokens under two dropout masks.
    matrix: float32 [V, d_model], the shared embedding matrix E.
    weights: float32 [num_tokens], 1 for real tokens, 0 for padding.

  Returns:
    float32 scalar [nats], differentiable in both passes.
  """
  def log_probs(hidden):
    logits = tf.matmul(hidden, tf.cast(matrix, hidden.dtype), transpose_b=True)
    return tf.nn.log_softmax(tf.cast(logits, tf.float32))

  log_a, log_b = log_probs(hidden_a), log_probs(hidden_b)
  per_token = tf.reduce_sum((tf.exp(log_a) - tf.exp(log_b)) * (log_a - log_b), axis=-1)
  return tf.reduce_sum(per_token * weights)


def batch_loss_sums(model, batch, label_smoothing, training, static_shapes=False, rdrop_alpha=0.0):
  """Teacher-forced loss sums of one batch (§5.4): the one computation behind a training
  step, the trainer's dev loss and `perplexity.perplexity`.

  With `rdrop_alpha` > 0 and `training`, R-Drop (Liang et al. 2021): the batch runs twice
  (concatenated, so every copy gets its own dropout masks) and the smoothed sum is
  (CE_1 + CE_2) / 2 + rdrop_alpha / 4 * (KL(p_1 || p_2) + KL(p_2 || p_1)) over the batch's
  tokens, the ratio of cross-entropy to KL of their fairseq criterion; the nll sum is the
  two passes' mean.

  Args:
    model: a `Transformer`.
    batch: {"inputs": int32 [batch, src_len], "targets": int32 [batch, tgt_len]}, padded
      with PAD_ID, every row ending in EOS (`data.batching.make_dataset`).
    label_smoothing: eps_ls of the smoothed sum (the nll sum never has smoothing).
    training: dropout on (True) or off.
    static_shapes: project every position and weight padding by 0 (static shapes, for
      XLA); otherwise only the real target tokens get logits and a softmax.
    rdrop_alpha: R-Drop's weight of the symmetric KL (0: off; used only when training).

  Returns:
    (smoothed_sum, nll_sum, target_tokens, source_tokens): float32 scalars; the sums
    are in nats over the real (non-pad) target tokens, EOS included [tokens].
  """
  inputs, targets = batch["inputs"], batch["targets"]
  copies = 2 if training and rdrop_alpha > 0 else 1
  run_inputs, run_targets = (tf.concat([inputs] * copies, 0), tf.concat([targets] * copies, 0))
  memory, src_bias = model.encode(run_inputs, training=training)
  hidden = model.decoder_hidden(run_targets, memory, src_bias, training=training)
  mask = tf.not_equal(run_targets, PAD_ID)
  if static_shapes:
    hidden = tf.reshape(hidden, [-1, tf.shape(hidden)[-1]])
    labels = tf.reshape(run_targets, [-1])
    weights = tf.cast(tf.reshape(mask, [-1]), tf.float32)
  else:
    hidden = tf.boolean_mask(hidden, mask)
    labels = tf.boolean_mask(run_targets, mask)
    weights = tf.ones_like(labels, tf.float32)
  matrix = model.embedding.embeddings
  smoothed, nll = smoothed_cross_entropy(hidden, matrix, labels, weights, label_smoothing)
  if copies == 2:  # the copies' tokens in the same order: the first half, then the second
    hidden_a, hidden_b = tf.split(hidden, 2)
    kl = symmetric_kl_sum(hidden_a, hidden_b, matrix, tf.split(weights, 2)[0])
    smoothed, nll = smoothed / 2 + rdrop_alpha / 4 * kl, nll / 2
  return (smoothed, nll, tf.reduce_sum(tf.cast(tf.not_equal(targets, PAD_ID), tf.float32)),
          tf.reduce_sum(tf.cast(tf.not_equal(inputs, PAD_ID), tf.float32)))
