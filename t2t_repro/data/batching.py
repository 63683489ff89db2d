"""Token-budget bucketed batching in tf.data (tensor2tensor `data_reader` style).

An example is a pair of int32 id sequences, each ending in EOS. Its length is
max(len(inputs), len(targets)) [tokens, EOS included], as in t2t's
`example_length`. Bucket lengths are t2t's geometric boundaries
(`bucket_boundaries`: 8, 9, ..., 17, 18, 19, 20, 22, 24, ... growing by x1.1)
followed by `max_length`; an example goes to the first bucket length >= its
length, and both its sides are padded with 0 to exactly that length. So a
batch from the bucket of length L has shape [batch_tokens // L, L] for
"inputs" and for "targets" (fewer rows only in the last batch of a finite
pass), never more than `batch_tokens` padded tokens per side, and only
len(bucket_lengths) different shapes reach the model.

Training: examples longer than `max_length` are dropped (count them with
`length_totals`), then shuffled with a seed, repeated
and bucketed. Evaluation: no drop, no shuffle, deterministic order; an example
longer than `max_length` is batched alone, padded to its own length.

`batch_tokens` is per replica: with tf.distribute, build the input with
`make_distributed_dataset`, which shards the examples by
`tf.distribute.InputContext` and gives every replica batches of
`batch_tokens`.
"""

import numpy as np
import tensorflow as tf

from t2t_repro.constants import PAD_ID
from t2t_repro.data import corpus as corpus_lib
from t2t_repro.data import text_files

TOKENIZE_BATCH = 1024
MAX_SHUFFLE_BUFFER = 200_000
STREAM_SHUFFLE_BUFFER = 32_768
DEFAULT_CACHE_MB = 1024
# Memory of one tokenized example in a tf.data cache, estimated as 1 byte per byte of text (int32
# ids, ~4 bytes of text per BPE token) plus this much per example (two tensors) [bytes]. Measured
# on Multi30k (135 bytes of text per pair): 550 bytes of RSS per cached example, so the estimate
# (735) errs on the safe side.
CACHE_BYTES_PER_EXAMPLE = 600


def bucket_boundaries(max_length, min_length=8, growth=1.1):
  """Geometric bucket boundaries, exactly tensor2tensor's.

  Source: tensor2tensor `utils/data_reader._bucket_boundaries`
  (`length_bucket_step` = growth).

  Args:
    max_length: boundaries stay below this [tokens].
    min_length: first boundary [tokens].
    growth: ratio between neighbouring boundaries (> 1).

  Returns:
    list of int: min_length, then x <- max(x + 1, int(x * growth)) while
    x < max_length (8, 9, ..., 17, 18, 19, 20, 22, 24, 26, 28, 30, 33, ...).
  """
  if growth <= 1.0:
    raise ValueError(f"growth must be > 1, got {growth}")
  boundaries, x = [], min_length
  while x < max_length:
    boundaries.append(x)
    x = max(x + 1, int(x * growth))
  return boundaries


def bucket_lengths(max_length, min_length=8, growth=1.1):
  """The padded lengths of the buckets: `bucket_boundaries(...) + [max_length]` [tokens].

  (t2t's `batching_scheme` also ends its per-bucket batch sizes with
  `max_length`.)
  """
  return bucket_boundaries(max_length, min_length, growth) + [max_length]


def bucket_batch_sizes(lengths, batch_tokens):
  """Examples per batch of each bucket: max(1, batch_tokens // L) for each length L.

  Source: tensor2tensor `data_reader.batching_scheme` (`batch_size // length`).
  """
  return [max(1, batch_tokens // length) for length in lengths]


def _pairs_dataset(pairs, training=False, seed=None, input_context=None):
  """(source, target) tf.string scalars from a corpus, a Dataset, a ParallelText or a list of
  pairs; sharded by `input_context` (a corpus shards itself: each pipeline reads its chunks)."""
  if isinstance(pairs, (corpus_lib.ParallelCorpus, corpus_lib.TfdsCorpus)):
    return pairs.dataset(training=training, seed=seed, input_context=input_context)
  if isinstance(pairs, tf.data.Dataset):
    ds = pairs
  else:
    if isinstance(pairs, text_files.ParallelText):
      pairs = pairs.pairs
    sources = tf.constant([s for s, _ in pairs], tf.string)
    targets = tf.constant([t for _, t in pairs], tf.string)
    ds = tf.data.Dataset.from_tensor_slices((sources, targets))
  if input_context is not None:
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  return ds


def tokenize_pairs(pairs, tokenizer, input_context=None, training=False, seed=None):
  """Tokenizes sentence pairs in tf.data, 1024 lines per tokenizer call.

  Args:
    pairs: list of (source, target) str, a text_files.ParallelText, a
      tf.data.Dataset of (source, target) tf.string scalars, or a streamed
      corpus.ParallelCorpus / corpus.TfdsCorpus.
    tokenizer: vocab.Tokenizer.
    input_context: optional tf.distribute.InputContext; this pipeline keeps
      every num_input_pipelines-th pair (shard before tokenizing), or, for a
      corpus, reads only its own chunks (`ParallelCorpus.dataset`).
    training, seed: for a corpus: read its chunks in a seeded random order.

  Returns:
    tf.data.Dataset of {"inputs": int32 [src_len], "targets": int32 [tgt_len]},
    both ending in EOS, in input order (a corpus in training: its chunk order).
  """
  return _tokenize(_pairs_dataset(pairs, training, seed, input_context), tokenizer)


def _tokenize(ds, tokenizer):
  """(source, target) tf.string pairs -> {"inputs", "targets"} int32 ids ending in EOS."""
  ds = ds.batch(TOKENIZE_BATCH).map(
      lambda src, tgt: {"inputs": tokenizer.encode(src), "targets": tokenizer.encode(tgt)},
      num_parallel_calls=tf.data.AUTOTUNE).unbatch()
  # Unbatched ragged rows have a RaggedTensorSpec of ragged_rank 0; passing them
  # through a map makes them plain tensors, which padded_batch needs.
  return ds.map(lambda ex: ex)


def cache_bytes(pairs):
  """Estimated memory of the tokenized examples of `pairs` in a tf.data cache [bytes]; None for
  a Dataset (size unknown). Text bytes + `CACHE_BYTES_PER_EXAMPLE` per pair."""
  if isinstance(pairs, tf.data.Dataset):
    return None
  if isinstance(pairs, (corpus_lib.ParallelCorpus, corpus_lib.TfdsCorpus)):
    return pairs.num_bytes + CACHE_BYTES_PER_EXAMPLE * len(pairs)
  if isinstance(pairs, text_files.ParallelText):
    pairs = pairs.pairs
  return sum(len(s) + len(t) for s, t in pairs) + CACHE_BYTES_PER_EXAMPLE * len(pairs)


def length_totals(pairs, tokenizer, max_length):
  """Counts over all pairs in one streamed pass (memory does not grow with the corpus).

  Args:
    pairs, tokenizer: as `tokenize_pairs`.
    max_length: [tokens].

  Returns:
    dict: "examples" (pairs, after dropping those with an empty side),
    "source_tokens", "target_tokens" (EOS included), "too_long" (examples that
    training drops: max(source, target length) > max_length).
  """
  def totals(ex):
    src, tgt = tf.size(ex["inputs"], tf.int64), tf.size(ex["targets"], tf.int64)
    return tf.stack([tf.constant(1, tf.int64), src, tgt,
                     tf.cast(tf.maximum(src, tgt) > max_length, tf.int64)])

  total = tokenize_pairs(pairs, tokenizer).map(totals).reduce(
      tf.zeros([4], tf.int64), lambda acc, x: acc + x).numpy()
  return dict(zip(("examples", "source_tokens", "target_tokens", "too_long"), map(int, total)))


def truncate(ids, length):
  """int32 [n] ids ending in EOS -> at most `length` ids, still ending in EOS (tf)."""
  return tf.cond(tf.size(ids) > length, lambda: tf.concat([ids[:length - 1], ids[-1:]], 0),
                 lambda: ids)


def _example_length(ex):
  return tf.maximum(tf.size(ex["inputs"]), tf.size(ex["targets"]))


def _bucket_by_length(ds, lengths, batch_tokens):
  """Groups examples into padded batches by bucket; longer than lengths[-1]: alone, own length."""
  padded = tf.constant(lengths + [-1], tf.int64)
  sizes = tf.constant(bucket_batch_sizes(lengths, batch_tokens) + [1], tf.int64)
  sorted_lengths = tf.constant(lengths, tf.int32)

  def bucket_id(ex):
    """Index of the first bucket length >= the example's; len(lengths) if none."""
    length = _example_length(ex)[None]
    return tf.searchsorted(sorted_lengths, length, side="left", out_type=tf.int64)[0]

  def batch(bucket, window):
    shape = padded[bucket][None]
    return window.padded_batch(sizes[bucket], padded_shapes={"inputs": shape, "targets": shape})

  def same_width(batch):
    """Pads the shorter side of a batch padded to its own length (-1) to the other's width."""
    width = tf.maximum(tf.shape(batch["inputs"])[1], tf.shape(batch["targets"])[1])
    return {k: tf.pad(v, [[0, 0], [0, width - tf.shape(v)[1]]]) for k, v in batch.items()}

  ds = ds.group_by_window(bucket_id, batch, window_size_func=lambda bucket: sizes[bucket])
  return ds.map(same_width, num_parallel_calls=tf.data.AUTOTUNE)


def make_dataset(pairs, tokenizer, *, batch_tokens, max_length=256, training, seed=None,
                 input_context=None, repeat=None, cache_mb=DEFAULT_CACHE_MB, shuffle_buffer=None,
                 min_length=8, growth=1.1, truncate_length=None, sampling_tokenizer=None):
  """The input pipeline: tokenize, (filter, shuffle, repeat,) bucket, pad, prefetch.

  Args:
    pairs: list of (source, target) str, a text_files.ParallelText, a
      tf.data.Dataset of (source, target) tf.string scalars, or a streamed
      corpus.ParallelCorpus / corpus.TfdsCorpus (training text of any size).
    tokenizer: vocab.Tokenizer.
    batch_tokens: padded tokens per batch and side, per replica [tokens].
    max_length: longest example kept in training; the last bucket [tokens].
    training: True: drop examples longer than max_length, shuffle, repeat.
      False: keep everything, no shuffle, one pass; the order is deterministic
      (rows of a batch in input order; a batch leaves when its bucket is full,
      the partial ones at the end).
    seed: shuffle seed (training); None: not reproducible.
    input_context: tf.distribute.InputContext (see `make_distributed_dataset`).
    repeat: repeat forever; default = training.
    cache_mb: keep the tokenized examples in memory after the first pass when
      their estimated size (`cache_bytes`) is at most this [MiB] (0: never; a
      Dataset input of unknown size is never cached).
    shuffle_buffer: examples in the shuffle buffer; default: all of them (at
      most 200,000) when they are cached, else 32,768 for a streamed corpus
      (whose chunks are also read in a random order) and 200,000 for a
      Dataset input.
    min_length, growth: see `bucket_boundaries`.
    truncate_length: evaluation: cut each side longer than this to its first
      truncate_length - 1 tokens + EOS, so no batch exceeds a token bound [tokens].
    sampling_tokenizer: training with subword regularization: a `Tokenizer.sampling`
      of the model's tokenizer, which tokenizes each pair anew every time it is read
      (the cache then holds the text, not the ids).

  Returns:
    tf.data.Dataset of {"inputs": int32 [b, L], "targets": int32 [b, L]},
    right-padded with 0, every row ending in EOS, L in
    `bucket_lengths(max_length)` (evaluation: or the length of a single longer
    example) and b = batch_tokens // L (fewer in the last batch of a bucket in
    a finite pass).

  Raises:
    ValueError: training with batch_tokens < max_length (the longest bucket
      would not fit one example).
  """
  if training and batch_tokens < max_length:
    raise ValueError(f"batch_tokens={batch_tokens} must be >= max_length={max_length} so one example "
                     "of the longest bucket fits in a batch")
  size = cache_bytes(pairs)
  cached = size is not None and size <= cache_mb * 2**20
  if sampling_tokenizer is None:
    ds = tokenize_pairs(pairs, tokenizer, input_context, training, seed)
    if truncate_length is not None:
      ds = ds.map(lambda ex: {k: truncate(v, truncate_length) for k, v in ex.items()})
    if cached:
      ds = ds.cache()
  else:  # a new segmentation at every read: cache the text, tokenize after the cache
    ds = _pairs_dataset(pairs, training, seed, input_context)
    if cached:
      ds = ds.cache()
    ds = _tokenize(ds, sampling_tokenizer)
  if training:
    ds = ds.filter(lambda ex: _example_length(ex) <= max_length)
    if shuffle_buffer is None:
      shuffle_buffer = (min(len(pairs), MAX_SHUFFLE_BUFFER) if cached
                        else MAX_SHUFFLE_BUFFER if size is None else STREAM_SHUFFLE_BUFFER)
    ds = ds.shuffle(max(1, shuffle_buffer), seed=seed, reshuffle_each_iteration=True)
  repeat = training if repeat is None else repeat
  if repeat:
    ds = ds.repeat()
  ds = _bucket_by_length(ds, bucket_lengths(max_length, min_length, growth), batch_tokens)
  return ds.prefetch(tf.data.AUTOTUNE).with_options(_checkpointable())


def _checkpointable():
  """tf.data options under which an iterator of the pipeline can be saved in a checkpoint:
  its external state (the tokenizer's model, the corpus's chunk reader) is left out of the
  saved state, which is right because both are pure functions of their input."""
  options = tf.data.Options()
  options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
  return options


def make_distributed_dataset(strategy, pairs, tokenizer, **kwargs):
  """Per-replica input for tf.distribute.

  Calls `strategy.distribute_datasets_from_function` with a function that
  builds `make_dataset(pairs, tokenizer, input_context=ctx, **kwargs)`: each
  input pipeline reads its shard of the pairs and yields batches of
  `batch_tokens` per replica (so a step sees batch_tokens x replicas).

  Args:
    strategy: a tf.distribute.Strategy.
    pairs, tokenizer, **kwargs: as `make_dataset` (pass Python pairs, so every
      worker can build its own pipeline).

  Returns:
    tf.distribute.DistributedDataset.
  """
  return strategy.distribute_datasets_from_function(
      lambda input_context: make_dataset(pairs, tokenizer, input_context=input_context, **kwargs))


def pad_rows(rows):
  """Id sequences -> one right-padded matrix, as decoding and scoring feed the model.

  Args:
    rows: non-empty list of int sequences (lists or numpy arrays).

  Returns:
    numpy int32 [len(rows), max(1, longest)], PAD_ID (0) after each row.
  """
  out = np.full([len(rows), max([1] + [len(r) for r in rows])], PAD_ID, np.int32)
  for i, row in enumerate(rows):
    out[i, :len(row)] = row
  return out


@tf.function(input_signature=[tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32)])
def length_sorted_chunks(lengths, batch_tokens):
  """The decoding batcher: sentences sorted by length, cut into token-budget batches.

  Decoding knows every source length up front, so it sorts them (no buckets): a batch
  holds consecutive sentences of the sorted order while len(batch) x max(length in
  batch) <= batch_tokens, the same budget (rows x padded length) as `make_dataset`'s.
  One tf.function (traced once), so the same code batches for `decoding.translator.Translator`
  and `decoding.scoring.Scorer` (through `length_sorted_batches`) and inside the exported
  SavedModel's graph (`serving.saved_model`).

  Args:
    lengths: int32 [n] source lengths [tokens], each >= 1.
    batch_tokens: int32 scalar, padded tokens per batch [tokens]; a longer sentence gets
      a batch of its own.

  Returns:
    order: int32 [n], indices into `lengths`, shortest first (ties in input order).
    sizes: int32 [num_batches], sentences per batch: batch b is order[sum(sizes[:b]):][:sizes[b]].
  """
  order = tf.argsort(lengths, stable=True)
  sorted_lengths = tf.gather(lengths, order)
  total = tf.size(sorted_lengths)

  def cut(start, sizes):
    # Ascending lengths: rows x (length of the last row) grows with the rows, so the
    # sentences that fit are a prefix of what is left, of at most batch_tokens rows.
    rest = sorted_lengths[start:start + tf.maximum(batch_tokens, 1)]
    fits = tf.range(1, tf.size(rest) + 1) * rest <= batch_tokens
    size = tf.maximum(tf.reduce_sum(tf.cast(fits, tf.int32)), 1)
    return start + size, sizes.write(sizes.size(), size)

  sizes = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[])
  _, sizes = tf.while_loop(lambda start, _: start < total, cut, (tf.constant(0), sizes))
  return order, sizes.stack()


def length_sorted_batches(lengths, batch_tokens):
  """`length_sorted_chunks` as Python lists, for eager callers.

  Args:
    lengths: list of int source lengths [tokens].
    batch_tokens: padded tokens per batch [tokens].

  Returns:
    list of lists of indices into `lengths`, shortest first (ties in input order).
  """
  if len(lengths) == 0:  # pylint: disable=g-explicit-length-test
    return []
  order, sizes = length_sorted_chunks(np.asarray(lengths, np.int32), np.int32(batch_tokens))
  return [b.tolist() for b in np.split(order.numpy(), np.cumsum(sizes.numpy())[:-1])]
