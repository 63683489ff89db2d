r"""`t2t-average` / `python -m t2t_repro.average` / `python tools/average_checkpoints.py`: checkpoint averaging
(Vaswani et al. 2017, §6.1: the base models average the last 5 checkpoints, written
at 10-minute intervals; the big models the last 20).

  t2t-average --model_dir=runs/base --output_dir=runs/base_avg5
  t2t-average --model_dir=runs/big --average_last=20 --output_dir=runs/big_avg
  t2t-average --checkpoints=runs/base/ckpt-99000,runs/base/ckpt-100000 \
      --output_dir=runs/base_avg2

--model_dir takes the last N checkpoints listed in its `checkpoint` state file (N
= --average_last, default the hparam average_last; --num_last is its deprecated alias). --checkpoints gives them
explicitly (prefixes, or names relative to --model_dir; the model dir defaults to
the first checkpoint's folder).

The averaging itself is `t2t_repro.training.averaging` (also used by
`train --average_last=N`). --output_dir becomes a model dir for translate / export;
it must be new or empty and differ from the source folder. Writing it holds the lock of
the model dir it is in (`writer_lock`: refused while another command writes there, e.g. a
training of that model dir), or else its own.
"""

import os

from absl import flags

from t2t_repro import errors, writer_lock
from t2t_repro.commands import config_flags
from t2t_repro.commands import shared_flags
from t2t_repro.config.train import TrainConfig
from t2t_repro.model_dir import ModelDir

FLAGS = flags.FLAGS


def define_flags():
  shared_flags.define_model_dir("Model directory whose last checkpoints are averaged.",
                                 required=False)
  flags.DEFINE_list("checkpoints", None, "Explicit checkpoint prefixes (or names relative to "
                    "--model_dir), comma separated.")
  config_flags.define(TrainConfig, names=["average_last"], none_defaults=True, help_overrides={
      "average_last": "How many of the last checkpoints (default: the hparam average_last of "
                      "the model dir; paper 5 base, 20 big)."})  # and its old name --num_last
  flags.register_validator("average_last", lambda n: n is None or n >= 1, "must be >= 1")
  flags.DEFINE_string("output_dir", None, "New folder for the averaged model dir.")


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.output_dir or not (FLAGS.model_dir or FLAGS.checkpoints):
    raise errors.UsageError("--output_dir and one of --model_dir / --checkpoints are required")
  model_dir = ModelDir(FLAGS.model_dir) if FLAGS.model_dir else None
  from t2t_repro.training import averaging  # pylint: disable=import-outside-toplevel
  try:
    if FLAGS.checkpoints:
      checkpoints = [p if (model_dir is None or os.path.dirname(p)) else model_dir.file(p)
                     for p in FLAGS.checkpoints]
    else:
      count = FLAGS.average_last or model_dir.read_hparams().average_last
      if not count:
        raise errors.UsageError(f"`model_dir`={model_dir.path}: its hparam average_last is 0 "
                                "(off): give --average_last")
      checkpoints = averaging.last_checkpoints(model_dir, count)
    with writer_lock.hold(FLAGS.output_dir, "average"):  # a model dir's when inside one
      path, _ = averaging.average_checkpoints(checkpoints, ModelDir(FLAGS.output_dir), model_dir)
  except (errors.UsageError, errors.DataError):  # already a user error (exit 2 or 1)
    raise
  except FileNotFoundError as e:  # a checkpoint or hparams.json that is not there: data
    raise errors.MissingDataError(str(e)) from None
  except ValueError as e:  # too few checkpoints, a non-empty --output_dir: usage
    raise errors.UsageError(str(e)) from None
  print(f"averaged {len(checkpoints)} checkpoints into {path}")
