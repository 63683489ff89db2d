r"""Data statistics and input-pipeline throughput of a problem (the command
`python -m t2t_repro.stats`, `t2t-stats`, prints them).

Per split: sentence pairs, pairs dropped as empty, source and target
tokens (BPE, EOS included), examples longer than --max_length (dropped in
training; batched alone in evaluation), batches in one pass and the padding
efficiency = real tokens / padded tokens (both sides; pad = 0). Then the
training pipeline's throughput in real tokens/s: the first epoch (read,
tokenize, filter, shuffle, bucket, pad) and later epochs (from the in-memory
cache of tokenized ids when the corpus fits --cache_examples_mb, else streamed
again). Every split is streamed (`Problem.corpus`): memory does not grow with
the corpus. The vocabulary is learned first if it is not cached; validation
records are kept in --vocab_dir.
"""

import dataclasses
import time

import numpy as np

from t2t_repro.data import batching

@dataclasses.dataclass
class SplitStats:
  """Counts of one split.

  Attributes:
    pairs, dropped_empty: sentence pairs kept / dropped as empty.
    source_tokens, target_tokens: BPE tokens of all pairs, EOS included.
    too_long: pairs longer than max_length (dropped in training).
    batches: batches of one pass through the pipeline.
    real_tokens, padded_tokens: non-pad / all positions of those batches,
      inputs and targets together.
  """

  split: str
  pairs: int
  dropped_empty: int
  source_tokens: int
  target_tokens: int
  too_long: int
  batches: int
  real_tokens: int
  padded_tokens: int

  @property
  def efficiency(self):
    """Real tokens / padded tokens of the batches (training: after dropping too-long ones)."""
    return self.real_tokens / max(1, self.padded_tokens)


def count_batch(batch):
  """(real tokens, real target tokens, padded tokens) of one batch, both sides."""
  inputs, targets = np.asarray(batch["inputs"]), np.asarray(batch["targets"])
  target = int(np.count_nonzero(targets))
  return int(np.count_nonzero(inputs)) + target, target, inputs.size + targets.size


def split_stats(problem, split, tokenizer, batch_tokens, max_length, seed=1, cache_dir=None):
  """Counts and batches one split as the pipeline sees it (training rules for "train").

  Streams `problem.corpus(split, cache_dir)` twice (counts, then batches).

  Returns:
    SplitStats.
  """
  text = problem.corpus(split, cache_dir)
  totals = batching.length_totals(text, tokenizer, max_length)
  dataset = batching.make_dataset(text, tokenizer, batch_tokens=batch_tokens, max_length=max_length,
                                  training=split == "train", seed=seed, repeat=False, cache_mb=0)
  batches, real, padded = 0, 0, 0
  for batch in dataset.as_numpy_iterator():
    batch_real, _, batch_padded = count_batch(batch)
    batches, real, padded = batches + 1, real + batch_real, padded + batch_padded
  return SplitStats(split, totals["examples"], len(text) - totals["examples"],
                    totals["source_tokens"], totals["target_tokens"], totals["too_long"], batches,
                    real, padded)


def throughput(pairs, tokenizer, batch_tokens, max_length, batches_per_epoch, epochs, seed=1,
               cache_mb=batching.DEFAULT_CACHE_MB):
  """Times the repeated training pipeline, as a training loop pulls from it.

  Args:
    pairs, tokenizer, batch_tokens, max_length, seed, cache_mb: as `batching.make_dataset`.
    batches_per_epoch: batches of one pass (`SplitStats.batches`).
    epochs: epochs timed after the first one (>= 1).

  Returns:
    [(real tokens/s, real target tokens/s) over the first `batches_per_epoch`
    batches (read, tokenize, shuffle, bucket, pad), the same over the next
    `epochs x batches_per_epoch` batches (from the cache when `pairs` fits
    `cache_mb`, see batching.make_dataset)].

  Raises:
    ValueError: epochs < 1.
  """
  if epochs < 1:
    raise ValueError(f"epochs must be >= 1 (the epochs timed after the first), got {epochs}")
  iterator = iter(batching.make_dataset(pairs, tokenizer, batch_tokens=batch_tokens,
                                        max_length=max_length, training=True, seed=seed,
                                        cache_mb=cache_mb))
  rates = []
  for num_batches in (batches_per_epoch, batches_per_epoch * epochs):
    start = time.perf_counter()
    real, target, _ = np.sum([count_batch(next(iterator)) for _ in range(num_batches)], axis=0)
    seconds = time.perf_counter() - start
    rates.append((real / seconds, target / seconds))
  return rates
