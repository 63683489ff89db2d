r"""Data statistics and input-pipeline throughput of a problem.

  python -m t2t_repro.data.stats --problem=translate_ende_wmt_news \
      --data_dir=../shared/data --batch_tokens=4096 [--vocab_dir=/tmp/vocab]

Prints, per split: sentence pairs, pairs dropped as empty, source and target
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
import sys
import time

import numpy as np
from absl import flags

from t2t_repro import cli
from t2t_repro.data import batching, problems, text_files, vocab

FLAGS = flags.FLAGS
SPLIT_FILE_FLAGS = tuple(f"{split}_{side}" for split in ("train", "dev", "test")
                         for side in ("src", "tgt"))


def define_flags():
  """The command's flags (defined only when run as a program, so importing this
  module next to t2t_repro.train defines nothing twice)."""
  flags.DEFINE_enum("problem", None, problems.list_problems(), "Data source (data/problems.py).")
  flags.DEFINE_string("data_dir", None, f"Local data folder (default: ${problems.DATA_DIR_ENV}).")
  for name in SPLIT_FILE_FLAGS:
    flags.DEFINE_string(name, None, f"File(s) of {name} (parallel_text, or to replace a split's "
                        "files); comma-separated files or globs for aligned shards.")
  flags.DEFINE_integer("batch_tokens", 4096, "Padded tokens per batch and side, per replica.")
  flags.DEFINE_integer("max_length", 256, "Longest training example [tokens, EOS included].")
  flags.DEFINE_integer("vocab_size", None, "BPE pieces (default: the problem's).")
  flags.DEFINE_string("vocab_dir", None, "Vocabulary cache folder (default: --data_dir).")
  flags.DEFINE_list("splits", None, "Splits to report (default: all of the problem's).")
  flags.DEFINE_integer("seed", 1, "Shuffle seed.")
  flags.DEFINE_integer("throughput_epochs", 3, "Epochs timed after the first one.")
  flags.DEFINE_integer("cache_examples_mb", batching.DEFAULT_CACHE_MB, "Cache budget of the "
                       "tokenized training examples [MiB] (as t2t_repro.train).")
  flags.mark_flag_as_required("problem")


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

  Returns:
    [(real tokens/s, real target tokens/s) over the first `batches_per_epoch`
    batches (read, tokenize, shuffle, bucket, pad), the same over the next
    `epochs x batches_per_epoch` batches (from the cache when `pairs` fits
    `cache_mb`, see batching.make_dataset)].
  """
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


def main(argv):
  del argv
  try:
    report()
  except text_files.DataError as e:
    sys.exit(f"error: {e}")


def report():
  """Prints the statistics for the flags' problem."""
  problem = problems.get_problem(FLAGS.problem, FLAGS.data_dir,
                                 **{name: FLAGS[name].value for name in SPLIT_FILE_FLAGS})
  vocab_size = FLAGS.vocab_size or problem.vocab_size_default
  path = vocab.get_or_learn_vocab(problem, vocab_size, FLAGS.vocab_dir)
  tokenizer = vocab.Tokenizer.from_file(path)
  lengths = batching.bucket_lengths(FLAGS.max_length)
  print(f"problem {problem.name} ({problem.source_lang}->{problem.target_lang}): {problem.description}")
  print(f"data_dir {problem.data_dir}")
  print(f"vocab {path} ({tokenizer.vocab_size} pieces)")
  print(f"batch_tokens {FLAGS.batch_tokens} per replica, max_length {FLAGS.max_length}, "
        f"{len(lengths)} buckets ({lengths[0]}..{lengths[-1]})")
  row = "{:<18}{:>8}{:>7}{:>12}{:>12}{:>10}{:>9}{:>15}{:>12}"
  print(row.format("split", "pairs", "empty", "src_tokens", "tgt_tokens", "too_long", "batches",
                   "padded_tokens", "efficiency"))
  stats = {}
  cache_dir = FLAGS.vocab_dir or problem.data_dir
  for split in FLAGS.splits or problem.splits:
    s = stats[split] = split_stats(problem, split, tokenizer, FLAGS.batch_tokens, FLAGS.max_length,
                                   FLAGS.seed, cache_dir)
    print(row.format(s.split, s.pairs, s.dropped_empty, s.source_tokens, s.target_tokens, s.too_long,
                     s.batches, s.padded_tokens, f"{s.efficiency:.3f}"))
  if "train" in stats:
    train = problem.corpus("train", cache_dir)
    cached = batching.cache_bytes(train) <= FLAGS.cache_examples_mb * 2**20
    (first, first_target), (later, later_target) = throughput(
        train, tokenizer, FLAGS.batch_tokens, FLAGS.max_length, stats["train"].batches,
        FLAGS.throughput_epochs, FLAGS.seed, FLAGS.cache_examples_mb)
    print(f"throughput, training pipeline: first epoch {first:,.0f} tokens/s "
          f"({first_target:,.0f} target tokens/s); next {FLAGS.throughput_epochs} epochs "
          f"({'cached' if cached else 'streamed'}) {later:,.0f} tokens/s "
          f"({later_target:,.0f} target tokens/s)")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
