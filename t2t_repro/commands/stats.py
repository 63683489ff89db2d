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
from t2t_repro.commands import config_flags
from t2t_repro.data import problems
from t2t_repro.config.hparams import HParams
from t2t_repro.config.train import TrainConfig

FLAGS = flags.FLAGS
SPLIT_FILE_FLAGS = tuple(f"{split}_{side}" for split in ("train", "dev", "test")
                         for side in ("src", "tgt"))


def define_flags():
  # The settings a training run would use, from their fields: the data source and files,
  # vocabulary, seed and cache as `TrainConfig` declares them, batching as the hparams do
  # (defaults: base's).
  config_flags.define(TrainConfig, names=["problem", "data_dir", *SPLIT_FILE_FLAGS, "vocab_dir",
                                          "seed", "cache_examples_mb"],
                      defaults={"problem": None},
                      help_overrides={"seed": "Shuffle seed of the training batches (as train's)."},
                      extra_help={
                          "problem": " One of: " + ", ".join(problems.list_problems()) + "."})
  config_flags.define(HParams, names=["batch_tokens", "max_length", "vocab_size"],
                      defaults={"vocab_size": None},
                      extra_help={"vocab_size": " Default: the problem's."})
  flags.DEFINE_list("splits", None, "Splits to report (default: all of the problem's).")
  flags.DEFINE_integer("throughput_epochs", 3, "Epochs timed after the first one (0: no "
                       "throughput measurement).", lower_bound=0)
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
  for split in FLAGS.splits or ():  # before the vocabulary is learnt
    if split not in problem.splits:
      raise errors.UsageError("`splits`: " + errors.unknown(
          "split", split, problem.splits, f"the splits of {problem.name} are"))
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
