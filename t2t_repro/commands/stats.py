r"""Data statistics and input-pipeline throughput of a problem (`t2t_repro.data.stats`).

  python -m t2t_repro.stats --problem=translate_ende_wmt_news \
      --data_dir=../shared/data --batch_tokens=4096 [--vocab_dir=runs/vocab]

Prints, per split: sentence pairs, pairs dropped as empty, source and target tokens (BPE,
EOS included), examples longer than --max_length, batches in one pass and the padding
efficiency; then the training pipeline's throughput in real tokens/s (not with
--throughput_epochs=0). The data folder is only read: the vocabulary and the corpus
validation records are cached in --vocab_dir.
"""

from absl import flags

from t2t_repro import errors
from t2t_repro.data import problems
from t2t_repro.config.hparams import HParams
from t2t_repro.config.train import TrainConfig

FLAGS = flags.FLAGS
SPLIT_FILE_FLAGS = tuple(f"{split}_{side}" for split in ("train", "dev", "test")
                         for side in ("src", "tgt"))


def define_flags():
  flags.DEFINE_string("problem", None, "Data source, one of: " + ", ".join(problems.list_problems())
                      + " (data/problems.py).")
  flags.DEFINE_string("data_dir", None, f"Local data folder (default: ${problems.DATA_DIR_ENV}).")
  for name in SPLIT_FILE_FLAGS:
    flags.DEFINE_string(name, None, f"File(s) of {name} (parallel_text, or to replace a split's "
                        "files); comma-separated files or globs for aligned shards.")
  flags.DEFINE_integer("batch_tokens", HParams.batch_tokens, "Token budget of one replica's "
                       "training batch, as the hparam batch_tokens [tokens] (default: base's).",
                       lower_bound=1)
  flags.DEFINE_integer("max_length", 256, "Longest training example [tokens, EOS included].")
  flags.DEFINE_integer("vocab_size", None, "BPE pieces (default: the problem's).")
  flags.DEFINE_string("vocab_dir", None, "Cache folder of the vocabulary and the corpus "
                      "validation records (default: $XDG_CACHE_HOME/t2t_repro, else "
                      "~/.cache/t2t_repro; never the data folder).")
  flags.DEFINE_list("splits", None, "Splits to report (default: all of the problem's).")
  flags.DEFINE_integer("seed", 1, "Shuffle seed.")
  flags.DEFINE_integer("throughput_epochs", 3, "Epochs timed after the first one (0: no "
                       "throughput measurement).", lower_bound=0)
  flags.DEFINE_integer("cache_examples_mb", TrainConfig.cache_examples_mb, "Cache budget of the "
                       "tokenized training examples [MiB] (as t2t_repro.train).")
  flags.mark_flag_as_required("problem")


def main(argv):
  """Prints the statistics of the flags' problem."""
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  # pylint: disable-next=import-outside-toplevel
  from t2t_repro.data import batching, stats as stats_lib, vocab
  if FLAGS.problem not in problems.list_problems():
    raise errors.UsageError("`problem`: " + errors.unknown(
        "problem", FLAGS.problem, problems.list_problems(), "registered problems are"))
  problem = problems.get_problem(FLAGS.problem, FLAGS.data_dir,
                                 **{name: FLAGS[name].value for name in SPLIT_FILE_FLAGS})
  vocab_size = FLAGS.vocab_size or problem.vocab_size_default
  cache_dir = FLAGS.vocab_dir or vocab.default_cache_dir()
  path = vocab.get_or_learn_vocab(problem, vocab_size, cache_dir)
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
  for split in FLAGS.splits or problem.splits:
    s = stats[split] = stats_lib.split_stats(problem, split, tokenizer, FLAGS.batch_tokens, FLAGS.max_length,
                                   FLAGS.seed, cache_dir)
    print(row.format(s.split, s.pairs, s.dropped_empty, s.source_tokens, s.target_tokens, s.too_long,
                     s.batches, s.padded_tokens, f"{s.efficiency:.3f}"))
  if "train" in stats and FLAGS.throughput_epochs:
    train = problem.corpus("train", cache_dir)
    cached = batching.cache_bytes(train) <= FLAGS.cache_examples_mb * 2**20
    (first, first_target), (later, later_target) = stats_lib.throughput(
        train, tokenizer, FLAGS.batch_tokens, FLAGS.max_length, stats["train"].batches,
        FLAGS.throughput_epochs, FLAGS.seed, FLAGS.cache_examples_mb)
    print(f"throughput, training pipeline: first epoch {first:,.0f} tokens/s "
          f"({first_target:,.0f} target tokens/s); next {FLAGS.throughput_epochs} epochs "
          f"({'cached' if cached else 'streamed'}) {later:,.0f} tokens/s "
          f"({later_target:,.0f} target tokens/s)")
