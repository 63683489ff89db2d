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

This command only defines the flags, generated from the fields of
`config.train.TrainConfig` (name, type, default, help and choices live there); the run
is `training.api.train_model(config)`, which a library caller uses directly.
"""

from absl import flags

from t2t_repro import errors
from t2t_repro.config import hparams as hparams_lib
from t2t_repro.commands import config_flags
from t2t_repro.data.problems import list_problems
from t2t_repro.training.api import train_model
from t2t_repro.config.train import TrainConfig

FLAGS = flags.FLAGS


def define_flags():
  """One flag per `TrainConfig` field, generated from it (`config_flags.define`: name, type,
  default, help, choices, range), --list_hparams and --describe."""
  config_flags.define(TrainConfig, extra_help={
      "hparams": f" Sets (configs/, --list_hparams describes them): "
                 f"{', '.join(hparams_lib.list_hparams())}.",
      "problem": f" One of: {', '.join(list_problems())}."})
  flags.DEFINE_bool("list_hparams", False, "Print every hparam set with its parent and "
                    "description, then exit.")
  flags.DEFINE_bool("describe", False, "Print every hparam of --hparams (with "
                    "--hparams_override, --train_steps, --batch_tokens, --average_last) with its "
                    "value, default, range and help, then exit (docs/CONFIG.md lists them all).")


def config_from_flags():
  """The `TrainConfig` of the parsed flags (one flag per field, same name)."""
  return TrainConfig(**config_flags.values(TrainConfig))


def registered_sets_text():
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
    print(registered_sets_text())
    return
  if FLAGS.describe:
    from t2t_repro.config import describe  # pylint: disable=import-outside-toplevel
    config = config_from_flags()
    hp = hparams_lib.get_hparams(config.hparams, config.hparams_override,
                                 train_steps=config.train_steps, batch_tokens=config.batch_tokens,
                                 average_last=config.average_last)
    print(describe.hparams_table(hp, config.hparams))
    return
  train_model(config_from_flags())
