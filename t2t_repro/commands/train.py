r"""Train a Transformer: `python -m t2t_repro.train --hparams=big --problem=translate_ende_wmt14`.

The same command runs on 1..8 GPUs (MirroredStrategy), several machines
(--distribution=multi_worker with TF_CONFIG) or this CPU. Everything decoding and
export need is written to --model_dir: hparams.json, flags.json, vocab.model and
checkpoints. Running the command again with the same --model_dir resumes from the
latest checkpoint (same step, same learning rate). SIGINT/SIGTERM saves a
checkpoint before exiting.

Every flag, hparam and data file is checked before anything is written
(docs/RELIABILITY.md): a failed command leaves --model_dir as it was, or absent.
A resume must keep the hparams and the update settings (accum_steps,
batch_tokens per replica, replicas, mixed_precision; --allow_update_change
overrides the latter).

The log goes to stderr: a startup block (data sizes, vocabulary, hparams,
parameters, devices, tokens per update, precision, model dir, resumed step),
progress (a bar on a terminal; plain lines every --log_every_steps otherwise),
dev results, and a closing block (steps, wall time, last checkpoint, scores).
`--verbosity=1` also shows TensorFlow's own logs.

Smoke-test a big set on a CPU in about a minute: no dev evaluation, two steps,
a small batch (the first run also learns the vocabulary, a few minutes; --vocab_dir
keeps it for the next runs):

  python -m t2t_repro.train --hparams=big --problem=translate_ende_wmt_news \
      --data_dir=DATA --model_dir=/tmp/smoke --vocab_dir=/tmp/vocab --train_steps=2 \
      --batch_tokens=256 --eval_every_steps=0 --save_checkpoints_steps=0

Dev evaluation runs every --eval_every_steps updates and at the end, never
before the first update unless --eval_at_start. Each one that improves --best_metric
(default: dev loss) writes model_dir/best/, a complete model dir; --early_stopping=N
stops after N evaluations without an improvement. --average_last=N averages the last
N checkpoints into model_dir/averaged/ at the end, and the test BLEU is the averaged
model's.

This command only defines the flags: one per field of `training.config.TrainConfig`,
same name and default; the run is `training.api.train(config)`, which a library
caller uses directly.
"""

import dataclasses

from absl import flags

from t2t_repro import errors
from t2t_repro import hparams as hparams_lib
from t2t_repro.data.problems import list_problems
from t2t_repro.training.api import train
from t2t_repro.training.config import (
    BEST_METRICS, DISTRIBUTIONS, MIXED_PRECISIONS, TrainConfig)

FLAGS = flags.FLAGS
_DEFAULT = TrainConfig()


def define_flags():
  """One flag per `TrainConfig` field (same name and default), and --list_hparams."""
  _define_model_and_data_flags()
  _define_run_flags()
  _define_selection_flags()


def _define_model_and_data_flags():
  flags.DEFINE_string("hparams", _DEFAULT.hparams,
                      "Hparam set name or path to a .json file; sets (configs/, "
                      f"--list_hparams describes them): {', '.join(hparams_lib.list_hparams())}.")
  flags.DEFINE_string("hparams_override", _DEFAULT.hparams_override,
                      "Comma-separated key=value overrides, e.g. dropout=0.3.")
  flags.DEFINE_bool("list_hparams", False, "Print every hparam set with its parent and description, "
                    "then exit.")
  flags.DEFINE_string("problem", _DEFAULT.problem, "Named data source: "
                      f"{', '.join(list_problems())}.")
  flags.DEFINE_string("data_dir", _DEFAULT.data_dir, "Local data folder (default: $T2T_DATA_DIR).")
  flags.DEFINE_string("vocab_dir", _DEFAULT.vocab_dir,
                      "Cache of learned BPE vocabularies, keyed by problem and "
                      "size, and of the training text's validation records (default: --model_dir). "
                      "Point runs of one problem at one cache.")
  flags.DEFINE_integer("cache_examples_mb", _DEFAULT.cache_examples_mb,
                       "Keep the tokenized training examples in memory "
                       "after the first pass only if they are estimated to fit in this many MiB "
                       "(0: never). A WMT-sized corpus is streamed from disk.")


def _define_run_flags():
  """Where the run writes, how long it runs, on which devices, and what it logs."""
  flags.DEFINE_string("model_dir", _DEFAULT.model_dir,
                      "Output folder: checkpoints, hparams, vocab, TensorBoard.")
  flags.DEFINE_integer("train_steps", _DEFAULT.train_steps,
                       "Optimizer updates (default: the hparam set's).")
  flags.DEFINE_integer("batch_tokens", _DEFAULT.batch_tokens,
                       "Token budget per replica per micro-batch "
                       "(default: the hparam set's).")
  flags.DEFINE_enum("distribution", _DEFAULT.distribution,
                    list(DISTRIBUTIONS),
                    "tf.distribute strategy.")
  flags.DEFINE_integer("num_gpus", _DEFAULT.num_gpus, "GPUs to use (default: all visible).")
  flags.DEFINE_integer("num_cpu_replicas", _DEFAULT.num_cpu_replicas,
                       "Split the CPU into this many logical devices and "
                       "mirror over them (tests and CPU-only emulation of several replicas).")
  flags.DEFINE_integer("accum_steps", _DEFAULT.accum_steps, "Micro-batches accumulated per update.")
  flags.DEFINE_enum("mixed_precision", _DEFAULT.mixed_precision,
                    list(MIXED_PRECISIONS),
                    "Keras mixed-precision policy.")
  flags.DEFINE_bool("jit_compile", _DEFAULT.jit_compile,
                    "XLA-compile the forward/backward computation.")
  flags.DEFINE_integer("save_checkpoints_steps", _DEFAULT.save_checkpoints_steps,
                       "Save every N updates (0: off).")
  flags.DEFINE_integer("save_checkpoints_secs", _DEFAULT.save_checkpoints_secs,
                       "Save every N seconds (0: off); the paper "
                       "wrote checkpoints at 10-minute intervals (§6.1).")
  flags.DEFINE_integer("keep_checkpoint_max", _DEFAULT.keep_checkpoint_max, "Checkpoints kept.")
  flags.DEFINE_integer("eval_every_steps", _DEFAULT.eval_every_steps,
                       "Dev loss (and dev BLEU) every N updates and at "
                       "the end (0: off).")
  flags.DEFINE_bool("eval_at_start", _DEFAULT.eval_at_start,
                    "Also evaluate dev before the first update (the start "
                    "of the dev curve; a full dev pass, slow for big models on a CPU).")
  flags.DEFINE_integer("dev_bleu_lines", _DEFAULT.dev_bleu_lines,
                       "Dev lines decoded for the periodic dev BLEU (0: off).")
  flags.DEFINE_integer("test_bleu_lines", _DEFAULT.test_bleu_lines,
                       "After training, translate this many lines of the "
                       "test split with beam search and print sacreBLEU (-1: all, 0: off).")
  flags.DEFINE_float("train_minutes", _DEFAULT.train_minutes,
                     "Stop (and save) after this much wall time even if "
                     "train_steps is not reached (0: no limit) [minutes].")
  flags.DEFINE_integer("log_every_steps", _DEFAULT.log_every_steps,
                       "TensorBoard summaries, and a log line when stderr "
                       "is not a terminal, every N updates.")
  flags.DEFINE_integer("seed", _DEFAULT.seed, "Seed for initialization, dropout and data shuffling.")
  for split in ("train", "dev", "test"):
    flags.DEFINE_string(f"{split}_src", None, f"Source file of the {split} split (parallel_text); "
                        "comma-separated files or glob patterns for aligned shards.")
    flags.DEFINE_string(f"{split}_tgt", None, f"Target file(s) of the {split} split, in the order "
                        f"of --{split}_src.")
  flags.DEFINE_string("init_from", _DEFAULT.init_from,
                      "Fine-tune: start from the weights of this model dir (its latest "
                      "checkpoint) or checkpoint prefix, at step 0 with a new optimizer and "
                      "schedule, with its vocabulary; the hparams must give the same model "
                      "shape (e.g. --hparams=DIR/hparams.json). Ignored when --model_dir "
                      "already has checkpoints (the run resumes).")
  flags.DEFINE_bool("allow_update_change", _DEFAULT.allow_update_change,
                    "Resume although accum_steps, batch_tokens, the "
                    "number of replicas or mixed_precision differ from the run in --model_dir "
                    "(the change is logged).")


def _define_selection_flags():
  """The best checkpoint, early stopping and averaging at the end."""
  flags.DEFINE_enum("best_metric", _DEFAULT.best_metric, list(BEST_METRICS),
                    "Dev metric of the best checkpoint: after each dev evaluation that improves it, "
                    "model_dir/best/ is a complete model dir of that step (best.json: metric, value, "
                    "step, bleu_lines). loss: dev loss (lower is better, as fairseq's default); "
                    "bleu: dev sacreBLEU on --dev_bleu_lines; none: no best/.")
  flags.DEFINE_integer("early_stopping", _DEFAULT.early_stopping, "Stop after this many dev "
                       "evaluations in a row without an improvement of --best_metric by more than "
                       "--min_improvement (0: off).")
  flags.DEFINE_float("min_improvement", _DEFAULT.min_improvement, "Smallest change of "
                     "--best_metric that counts as an improvement (its units: loss or BLEU points).")
  flags.DEFINE_float("ema_decay", _DEFAULT.ema_decay, "Keep an exponential moving average of the "
                     "weights with this decay per update (e.g. 0.999; 0: off); at the end it is "
                     "evaluated on dev and written to model_dir/ema/ (a complete model dir).")
  flags.DEFINE_integer("average_last", _DEFAULT.average_last, "At the end of training, average the "
                       "last N checkpoints into model_dir/averaged/ (a complete model dir); the test "
                       "BLEU is then the averaged model's (0: off; paper: 5 base, 20 big).")


def config_from_flags():
  """The `TrainConfig` of the parsed flags (one flag per field, same name)."""
  return TrainConfig(**{f.name: getattr(FLAGS, f.name) for f in dataclasses.fields(TrainConfig)})


def describe_hparams():
  """One line per registered set: name, parent and description (--list_hparams)."""
  lines = []
  for name in hparams_lib.list_hparams():
    raw = hparams_lib.read_set(name)
    parent = f" (parent {raw['parent']})" if raw.get("parent") else ""
    lines.append(f"{name}{parent}: {raw.get('description', '')}")
  return "\n".join(lines)


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.list_hparams:
    print(describe_hparams())
    return
  train(config_from_flags())
