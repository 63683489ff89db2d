"""Scoring given translations: log P(Y | X) of each (source, target) pair under a model or
an ensemble (fairseq `--score-reference`, OpenNMT-tf `score`, t2t `--score_file`,
`sockeye-score`).

A pair's score is the sum over its target pieces, EOS included, of the teacher-forced
log p(y_t | y_<t, x); an ensemble's per-piece log-probability is the log of the mean of
its members' probabilities, exactly as its beam search ranks hypotheses
(`decoding.ensemble.average_log_probs`). So scoring the beam search's own output with
alpha = 0 gives back the score the search reported (tested to 1e-4). The length-normalized
score divides by the GNMT length penalty lp(|Y|) of the beam search
(`beam_search.length_penalty`, Wu et al. 2016, eq. 14), |Y| counting EOS.

Pairs are batched by the one decoding batcher (`data.batching.length_sorted_batches`,
padded tokens of the longer side per batch); results come back in input order.
"""

import numpy as np
import tensorflow as tf

from t2t_repro.config.decode import DecodeConfig
from t2t_repro.constants import PAD_ID
from t2t_repro.data import batching
from t2t_repro.decoding import loading
from t2t_repro.decoding.beam_search import length_penalty
from t2t_repro.decoding.ensemble import Ensemble, average_log_probs


def piece_log_probs(model, inputs, targets):
  """Teacher-forced log-probability of every target piece.

  Args:
    model: a `Transformer` or an `Ensemble`.
    inputs: int32 [batch, src_len], 0-padded, rows ending in EOS.
    targets: int32 [batch, tgt_len], 0-padded, rows ending in EOS.

  Returns:
    float32 [batch, tgt_len]: log p(targets[b, t] | targets[b, :t], inputs[b]) [nats],
    0 at padding.
  """
  members = model.models if isinstance(model, Ensemble) else [model]
  log_probs = [tf.nn.log_softmax(m((inputs, targets), training=False)) for m in members]
  log_probs = log_probs[0] if len(log_probs) == 1 else average_log_probs(tf.stack(log_probs))
  picked = tf.gather(log_probs, targets[..., None], batch_dims=2)[..., 0]
  return tf.where(tf.not_equal(targets, PAD_ID), picked, 0.0)


class Scorer:
  """Scores (source, target) pairs with one model or ensemble: text (`score`) or ids
  (`score_ids`).

  >>> Scorer.from_model_dir("runs/m").score(["A dog."], ["Ein Hund."])  # doctest: +SKIP
  [-3.52...]

  Args:
    model: a `Transformer` or an `Ensemble` with restored weights.
    batch_tokens: padded tokens of the longer side per batch [tokens] (the `score`
      command's `decode_batch_tokens`).
    tokenizer: its `data.vocab.Tokenizer`, for `score` and `encode` (None: ids only).
  """

  def __init__(self, model, batch_tokens=DecodeConfig.decode_batch_tokens, tokenizer=None):
    if batch_tokens < 1:
      raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    self.model = model
    self.batch_tokens = batch_tokens
    self.tokenizer = tokenizer
    spec = tf.TensorSpec([None, None], tf.int32)
    self._log_probs = tf.function(lambda x, y: piece_log_probs(model, x, y),
                                  input_signature=[spec, spec], autograph=False)

  @classmethod
  def from_model_dir(cls, model_dir, checkpoint_path=None,
                     batch_tokens=DecodeConfig.decode_batch_tokens):
    """The scorer of a trained model dir (`load_for_inference`), with its tokenizer."""
    model, _, tokenizer = loading.load_for_inference(model_dir, checkpoint_path)
    return cls(model, batch_tokens, tokenizer)

  def encode(self, lines):
    """list[str] -> list of int32 numpy id arrays, each ending with EOS.

    Raises:
      ValueError: the scorer has no tokenizer.
    """
    if self.tokenizer is None:
      raise ValueError("a Scorer without a tokenizer scores ids only (`score_ids`); build it "
                       "with `Scorer.from_model_dir` or give the tokenizer")
    return [np.asarray(row, np.int32) for row in self.tokenizer.encode(lines).to_list()] \
        if lines else []

  def score(self, sources, targets):
    """log P(target | source) of each pair of text lines [nats, natural log, EOS included],
    the `score` command's first column.

    Args:
      sources, targets: equal-length lists of str (one sentence each).

    Returns:
      list (input order) of float.

    Raises:
      ValueError: lists of different lengths, no tokenizer (`encode`), or a pair longer
        than the model's max_positions (`check_lengths`, naming its line from 1).
    """
    if len(sources) != len(targets):
      raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    source_ids, target_ids = self.encode(sources), self.encode(targets)
    self.check_lengths(source_ids, target_ids, range(1, len(sources) + 1))
    return [float(np.sum(p, dtype=np.float64)) for p in self.score_ids(source_ids, target_ids)]

  def check_lengths(self, sources, targets, line_numbers):
    """Raises ValueError naming the first pair longer than the model's max_positions."""
    limit = self.model.max_positions
    for number, src, tgt in zip(line_numbers, sources, targets):
      if max(len(src), len(tgt)) > limit:
        raise ValueError(f"line {number}: {len(src)} source and {len(tgt)} target pieces; the "
                         f"model accepts at most max_positions={limit}")

  def score_ids(self, sources, targets):
    """Per-piece log-probabilities of each pair.

    Args:
      sources, targets: equal-length lists of int sequences, each ending in EOS and at
        most the model's max_positions long (`check_lengths`).

    Returns:
      list (input order) of float32 numpy [len(target)] arrays [nats].
    """
    lengths = [max(len(s), len(t)) for s, t in zip(sources, targets)]
    results = [None] * len(sources)
    for batch in batching.length_sorted_batches(lengths, self.batch_tokens):
      inputs = batching.pad_rows([sources[i] for i in batch])
      outputs = batching.pad_rows([targets[i] for i in batch])
      log_probs = self._log_probs(inputs, outputs).numpy()
      for row, i in enumerate(batch):
        results[i] = log_probs[row, :len(targets[i])]
    return results


def normalized(log_prob, length, alpha):
  """log P(Y|X) / lp(|Y|): the beam search's score of a hypothesis of `length` pieces."""
  return log_prob / length_penalty(length, alpha)
