"""Teacher-forced perplexity of a trained model on parallel text (Table 3's "PPL (dev)").

The unit is the paper's: nats per target word piece, without label smoothing (Table 3's
footnote: "perplexities are per-wordpiece"), every real target piece counted once, EOS
included. The batches and the per-batch sums are the trainer's dev loss's own
(`data.batching.make_dataset` with `truncate_length=max_length`, `loss.batch_loss_sums`),
so on the same checkpoint and pairs `perplexity` equals the `nll`/`ppl` the trainer logs
for its dev set (tested). Same role as fairseq-validate, OpenNMT-tf `eval`, t2t-eval.
"""

import math

import tensorflow as tf

from t2t_repro.data import batching
from t2t_repro.training.loss import batch_loss_sums

# exp() of a larger mean NLL is reported as this, not as an overflow [nats].
MAX_LOG_PPL = 50.0


def perplexity(model, tokenizer, pairs, *, batch_tokens, max_length):
  """Mean teacher-forced NLL and perplexity per target piece over `pairs`.

  Args:
    model: a `Transformer` (dropout off: evaluated with training=False).
    tokenizer: the model's `data.vocab.Tokenizer`.
    pairs: list of (source, target) str, a `data.text_files.ParallelText`, or a streamed
      `data.corpus` corpus (read once, in bounded memory: nothing grows with its size).
    batch_tokens: padded tokens per batch and side [tokens] (a batching choice: the
      result does not depend on it beyond float rounding).
    max_length: each side longer than this is cut to its first max_length - 1 pieces
      + EOS, as the trainer's dev loss does (hparams.max_length) [tokens].

  Returns:
    dict: nll (mean NLL per target piece [nats], float), ppl (exp(nll), float),
    target_pieces (int, EOS included), pairs (int, the pairs scored: both sides
    non-empty).

  Raises:
    ValueError: no pair with text on both sides, or batch_tokens < 1.
  """
  if batch_tokens < 1:
    raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
  dataset = batching.make_dataset(pairs, tokenizer, batch_tokens=batch_tokens,
                                  max_length=max_length, training=False,
                                  truncate_length=max_length, cache_mb=0)

  @tf.function
  def totals(dataset):
    sums, rows = tf.zeros([4]), tf.constant(0)
    for batch in dataset:  # one trace for every bucket shape
      sums += tf.stack(batch_loss_sums(model, batch, 0.0, training=False))
      rows += tf.shape(batch["targets"])[0]
    return sums, rows

  sums, rows = totals(dataset)
  _, nll_sum, target_pieces, _ = (float(x) for x in sums.numpy())
  if not int(rows):
    raise ValueError("no sentence pair with text on both sides to score")
  nll = nll_sum / target_pieces
  return {"nll": nll, "ppl": math.exp(min(nll, MAX_LOG_PPL)), "target_pieces": int(target_pieces),
          "pairs": int(rows)}
