"""The flags that name a data split to score a model on, defined here once (validate, tune):

* --src/--tgt: two aligned text files;
* --problem (with --data_dir) and --split: a named data source's split;
* neither: the --split of the problem and files the run of --model_dir was trained on (its
  flags.json).
"""

import os

from absl import flags

from t2t_repro import errors
from t2t_repro.commands import config_flags
from t2t_repro.config.train import TrainConfig
from t2t_repro.data import problems
from t2t_repro.model_dir import ModelDir

FLAGS = flags.FLAGS


def define(split_default="dev"):
  """Defines --src, --tgt, --problem, --data_dir and --split."""
  flags.DEFINE_string("src", None, "Source file, one sentence per line (with --tgt).")
  flags.DEFINE_string("tgt", None, "Target file aligned with --src.")
  config_flags.define(TrainConfig, names=["problem", "data_dir"], none_defaults=True,
                      help_overrides={
                          "problem": "Named data source (default: the run's, from its "
                                     "flags.json); see `python -m t2t_repro.stats --help`.",
                          "data_dir": "Data folder of --problem (default: the run's, else "
                                      "$T2T_DATA_DIR)."})
  flags.DEFINE_string("split", split_default, "Split of the problem to use (train, dev, test, ...).")


def corpus(model_dir):
  """(corpus, description, target language) of the data the flags name: a streamed
  `data.corpus.ParallelCorpus` of --src/--tgt, or the problem's own corpus of --split
  (`Problem.corpus`: text files or TFDS), read in bounded memory whatever its size.

  Raises:
    errors.UsageError: --src without --tgt (or the reverse), both forms given, no problem
      known, an unknown problem or split.
  """
  if FLAGS.src or FLAGS.tgt:
    if not (FLAGS.src and FLAGS.tgt):
      raise errors.UsageError("--src and --tgt go together")
    if FLAGS.problem:
      raise errors.UsageError("give either --src/--tgt or --problem, not both")
    from t2t_repro.data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
    ext = os.path.splitext(FLAGS.tgt)[1][1:]
    return (corpus_lib.ParallelCorpus([(FLAGS.src, FLAGS.tgt)]), f"{FLAGS.src}, {FLAGS.tgt}",
            ext if len(ext) == 2 and ext.isalpha() else "de")
  run = ModelDir(model_dir).read_flags()
  name = FLAGS.problem or run.get("problem")
  if not name:
    raise errors.UsageError(f"--model_dir={model_dir} has no flags.json naming its problem: "
                            "give --problem or --src/--tgt")
  same_run = name == run.get("problem")
  files = {k: run.get(k) for k in ("train_src", "train_tgt", "dev_src", "dev_tgt", "test_src",
                                   "test_tgt")} if same_run else {}
  try:
    problem = problems.get_problem(
        name, FLAGS.data_dir or (run.get("data_dir") if same_run else None), **files)
  except ValueError as e:
    raise errors.UsageError(f"--problem={name}: {e}") from None
  if FLAGS.split not in problem.splits:
    raise errors.UsageError(f"--split={FLAGS.split}: {name} has the splits "
                            f"{', '.join(problem.splits)}")
  return problem.corpus(FLAGS.split), f"{name} {FLAGS.split}", problem.target_lang
