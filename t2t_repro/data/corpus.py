"""Streaming parallel corpora: validated once, indexed, read in chunks.

A training corpus (WMT14 En-Fr: 36M line pairs, 9 GB) is never held in memory.
`ParallelCorpus(file_pairs, cache_dir)` validates every file pair in one
streaming pass (`text_files.scan_lines`: UTF-8, equal line counts) and keeps
a sparse line index: the byte offsets where every `chunk_lines`-th line starts
in both files. Both are remembered in a small JSON record under `cache_dir`
(keyed by absolute path, size and modification time of both files), so a
restart reads nothing before the first step; touching a file invalidates it.

A *chunk* is `chunk_lines` consecutive line pairs (16384 by default, ~2-3 MB
of text per side). `ParallelCorpus.dataset` reads chunks with a seek (a `tf.py_function` of the
chunk index; the rest is in graph):
split on "\\n", strip both sides (Python `str.strip` whitespace, as
`text_files`), drop pairs with an empty side, and yield (source, target)
tf.string scalars:

* evaluation (`training=False`): the pairs in file order;
* training: a seeded permutation of the chunks (a new one each pass, by a
  tf.data shuffle of the chunk indices, so it is saved with an iterator),
  `INTERLEAVE_CHUNKS` chunks interleaved line by line; the caller's shuffle
  buffer mixes further (`batching.make_dataset`);
* with a `tf.distribute.InputContext`, input pipeline i reads only chunks
  i, i + n, i + 2n, ... (its own byte ranges, never the whole corpus); a
  corpus with fewer chunks than pipelines is small and is sharded by line.

`TfdsCorpus` gives the same interface over a prepared TFDS builder
(`wmt14_translate/de-en`), reading its shuffled files (sharded by file per
input pipeline through `tfds.ReadConfig(input_context=...)`).

Sources: the streaming designs of OpenNMT-tf (text + shuffle buffer) and
tensor2tensor/TFDS (shuffled shards + buffer); normalization as
tensor2tensor's `txt_line_iterator` (`line.strip()`).
"""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.config.data import CORPUS_RECORD
from t2t_repro.data import text_files
from t2t_repro.data.text_files import LineCountError

CHUNK_LINES = 16384
INTERLEAVE_CHUNKS = 8
RECORD_VERSION = 1

def _stat_key(path):
  st = os.stat(path)
  return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def index_file_pair(source_path, target_path, chunk_lines=CHUNK_LINES):
  """Validates one aligned file pair in a streaming pass and indexes its chunks.

  Args:
    source_path, target_path: UTF-8 text files, one sentence per line.
    chunk_lines: lines per chunk.

  Returns:
    dict: "lines" (line pairs), "source"/"target" ({"path", "size",
    "mtime_ns"} read before the scan), "chunks": list of [source start,
    source end, target start, target end, lines] (byte offsets, end exclusive).

  Raises:
    MissingDataError, EncodingError: see `text_files.scan_lines`.
    LineCountError: the files have different line counts (names both files
      and both counts).
  """
  keys = {}
  scans = []
  for side, path in (("source", source_path), ("target", target_path)):
    scans.append(text_files.scan_lines(path, chunk_lines))
    keys[side] = _stat_key(path)
  src, tgt = scans
  if src.lines != tgt.lines:
    raise LineCountError(f"{source_path} has {src.lines} lines but {target_path} has {tgt.lines} "
                         "lines; parallel files must have one line per sentence pair")
  src_starts = (src.start,) + src.marks + (src.size,)
  tgt_starts = (tgt.start,) + tgt.marks + (tgt.size,)
  chunks = [[src_starts[k], src_starts[k + 1], tgt_starts[k], tgt_starts[k + 1],
             min(chunk_lines, src.lines - k * chunk_lines)]
            for k in range(len(src_starts) - 1) if src.lines > k * chunk_lines]
  return {"version": RECORD_VERSION, "chunk_lines": chunk_lines, "lines": src.lines, **keys,
          "chunks": chunks}


def record_path(cache_dir, source_path, target_path):
  """`{cache_dir}/corpus.{sha1 of both absolute paths}.json`: the validation record of a pair."""
  key = "\n".join(os.path.abspath(p) for p in (source_path, target_path))
  return os.path.join(cache_dir, CORPUS_RECORD.format(
      key=hashlib.sha1(key.encode()).hexdigest()[:16]))


def load_or_index(source_path, target_path, cache_dir=None, chunk_lines=CHUNK_LINES):
  """`index_file_pair`, remembered in `record_path(cache_dir, ...)`.

  The record is reused while both files keep their path, size and
  modification time (and `chunk_lines` matches); otherwise the pair is
  validated again and the record rewritten (atomically; a cache dir that is
  not writable only costs a warning). cache_dir None: nothing is remembered.

  Returns / Raises: as `index_file_pair`.
  """
  for path in (source_path, target_path):
    if not os.path.exists(path):
      raise errors.MissingDataError(f"{path}: file does not exist")
  path = record_path(cache_dir, source_path, target_path) if cache_dir else None
  if path and os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      try:
        record = json.load(f)
      except ValueError:
        record = {}
    if (record.get("version") == RECORD_VERSION and record.get("chunk_lines") == chunk_lines
        and record.get("source") == _stat_key(source_path)
        and record.get("target") == _stat_key(target_path)):
      return record
  record = index_file_pair(source_path, target_path, chunk_lines)
  if path:
    try:
      fileio.write_atomic(path, json.dumps(record).encode())
    except OSError as e:
      logging.warning("could not remember the validation of %s + %s in %s: %s", source_path,
                      target_path, path, e)
  return record


class _Corpus:
  """What both corpus kinds share: their `num_lines` and `iter_chunk_lines()` (lists of lines per
  chunk) give `len` and `iter_pairs`."""

  num_lines = 0

  def __len__(self):
    """Line pairs (pairs with an empty side included; they are dropped when read)."""
    return self.num_lines

  def iter_pairs(self):
    """Yields the stripped, non-empty (source, target) str pairs in file order."""
    for sources, targets in self.iter_chunk_lines():
      yield from filter(None, map(text_files.strip_pair, sources, targets))


class ParallelCorpus(_Corpus):
  """Aligned text files read as a stream of chunks (see the module docstring).

  Attributes:
    file_pairs: list of (source path, target path).
    chunks: list of (pair index, source start, source end, target start,
      target end, lines) over all pairs, in file order.
    num_lines: line pairs in all files (before dropping empty ones).
    num_bytes: bytes of all files.
    origin: the files, for messages.
  """

  def __init__(self, file_pairs, cache_dir=None, chunk_lines=CHUNK_LINES):
    """Validates (or recalls the validation of) every file pair.

    Raises:
      the errors of `load_or_index`.
    """
    self.file_pairs = [tuple(pair) for pair in file_pairs]
    records = [load_or_index(src, tgt, cache_dir, chunk_lines) for src, tgt in self.file_pairs]
    self.chunks = [(i, *c) for i, r in enumerate(records) for c in r["chunks"]]
    self.num_lines = sum(r["lines"] for r in records)
    self.num_bytes = sum(r["source"]["size"] + r["target"]["size"] for r in records)
    self.origin = "; ".join(f"{s} + {t}" for s, t in self.file_pairs)

  def read_chunk(self, chunk):
    """(source bytes, target bytes) of one chunk, read with a seek."""
    pair, src_start, src_end, tgt_start, tgt_end, _ = chunk
    out = []
    for path, start, end in ((self.file_pairs[pair][0], src_start, src_end),
                             (self.file_pairs[pair][1], tgt_start, tgt_end)):
      with open(path, "rb") as f:
        f.seek(start)
        out.append(f.read(end - start))
    return out

  def iter_chunk_lines(self):
    """Yields (source lines, target lines) per chunk in file order: lists of str, not stripped."""
    for chunk in self.chunks:
      yield tuple(text.decode("utf-8").split("\n")[:chunk[-1]] for text in self.read_chunk(chunk))

  def dataset(self, *, training, seed=None, input_context=None):
    """The corpus as tf.data: stripped, non-empty (source, target) tf.string scalars.

    Args:
      training: False: one pass in file order. True: chunks in a seeded
        random order (a new order each time the dataset is iterated again,
        e.g. by `repeat`), `INTERLEAVE_CHUNKS` read at once, alternating lines.
      seed: chunk-order seed; None: not reproducible.
      input_context: tf.distribute.InputContext; pipeline i of n reads chunks
        i, i + n, ... (or, with fewer chunks than pipelines, every n-th pair).

    Returns:
      tf.data.Dataset of (tf.string [], tf.string []).
    """
    ids = np.arange(len(self.chunks))
    by_line = input_context is not None and len(ids) < input_context.num_input_pipelines
    if input_context is not None and not by_line:
      ids = ids[input_context.input_pipeline_id::input_context.num_input_pipelines]
    chunks = tf.data.Dataset.from_tensor_slices(ids)
    if training:  # a seeded new order every pass; its position is part of an iterator checkpoint
      chunks = chunks.shuffle(len(ids), seed=seed, reshuffle_each_iteration=True)
    chunks = chunks.map(self._read_chunk_in_graph, num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=True)
    pairs = chunks.interleave(lambda src, tgt: tf.data.Dataset.from_tensor_slices((src, tgt)),
                              cycle_length=INTERLEAVE_CHUNKS if training else 1)
    if by_line:
      pairs = pairs.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return pairs

  def _read_chunk_in_graph(self, k):
    """Chunk index (int64 scalar tensor) -> (source lines [n], target lines [n]) tf.string,
    stripped, pairs with an empty side dropped. The bytes are read with a seek in a
    `tf.py_function`, a pure function of `k` while the files are unchanged (so an iterator
    checkpoint that ignores its external state restores the same stream)."""
    def read(k):
      chunk = self.chunks[int(k)]
      return (*self.read_chunk(chunk), chunk[-1])

    src, tgt, lines = tf.py_function(read, [k], (tf.string, tf.string, tf.int64))
    return _chunk_pairs(tf.ensure_shape(src, []), tf.ensure_shape(tgt, []),
                        tf.ensure_shape(lines, []))


def _chunk_pairs(src, tgt, lines):
  """Chunk bytes -> (source lines [n], target lines [n]): split, strip, empty pairs dropped."""
  src = text_files.strip_in_graph(tf.strings.split(src, "\n")[:lines])
  tgt = text_files.strip_in_graph(tf.strings.split(tgt, "\n")[:lines])
  keep = tf.logical_and(tf.strings.length(src) > 0, tf.strings.length(tgt) > 0)
  return tf.boolean_mask(src, keep), tf.boolean_mask(tgt, keep)


class TfdsCorpus(_Corpus):
  """The "train" split of a prepared TFDS translation builder, with `ParallelCorpus`'s reading API.

  TFDS text features are UTF-8 by construction, so nothing is validated here.

  Attributes:
    num_lines: examples of the split (from the builder's metadata).
    num_bytes: the split's size on disk [bytes].
    origin: for messages.
  """

  def __init__(self, builder, source_lang, target_lang, origin):
    self.builder, self.source_lang, self.target_lang, self.origin = (builder, source_lang,
                                                                     target_lang, origin)
    split = builder.info.splits["train"]
    self.num_lines, self.num_bytes = split.num_examples, split.num_bytes

  def dataset(self, *, training, seed=None, input_context=None):
    """As `ParallelCorpus.dataset`; training shuffles the TFDS files (seeded), and input
    pipeline i of n reads only its files (`tfds.ReadConfig(input_context=...)`)."""
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
    config = tfds.ReadConfig(input_context=input_context, shuffle_seed=seed)
    examples = self.builder.as_dataset(split="train", shuffle_files=training, read_config=config)
    pairs = examples.map(lambda ex: (text_files.strip_in_graph(ex[self.source_lang]),
                                        text_files.strip_in_graph(ex[self.target_lang])),
                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return pairs.filter(lambda src, tgt: tf.logical_and(tf.strings.length(src) > 0,
                                                        tf.strings.length(tgt) > 0))

  def iter_chunk_lines(self):
    """Yields (source lines, target lines) per block of `CHUNK_LINES` examples, in file order."""
    blocks = self.builder.as_dataset(split="train", shuffle_files=False).batch(CHUNK_LINES)
    for block in blocks.as_numpy_iterator():
      yield ([s.decode("utf-8") for s in block[self.source_lang]],
             [t.decode("utf-8") for t in block[self.target_lang]])

