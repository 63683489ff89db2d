r"""Choose beam size and length penalty on a dev set: `python -m t2t_repro.tune` (`t2t-tune`).

  python -m t2t_repro.tune --model_dir=runs/m30k/averaged --beam_sizes=4,5 --alphas=0.6,1.0,1.4

Translates the dev split (by default the `dev` split of the run's problem, from its
flags.json; or --problem/--data_dir/--split, or --src/--tgt files) once per beam size x
alpha, scores each with cased sacreBLEU (13a), lowercased tokenized BLEU and chrF
(`t2t_repro.evaluation`), prints the table and writes the best by --metric to
`{model_dir}/decoding.json` and, for TensorBoard, the grid's scores to `{model_dir}/dev`
(tune/{metric}_beam{b}_alpha{a} at the checkpoint's step). `translate`, `score`, `export`
and the other decoding commands then use that beam size and alpha by default; a flag still
overrides them. Vaswani et al.
2017 chose theirs the same way (§6.1: "chosen after experimentation on the development
set"); the decoding is `decoding.tuning.tune_decoding`. It holds the model dir's lock
(`writer_lock`) from before the first decoding: refused at once on a read-only model dir or
while another command writes there (a training of it, or of the run whose best/ it is).
"""

import os
import re

from absl import flags
from absl import logging

from t2t_repro import errors, writer_lock
from t2t_repro.commands import config_flags
from t2t_repro.commands import shared_flags
from t2t_repro.commands import split_flags
from t2t_repro.config import decode as decode_config
from t2t_repro.config import serving as serving_config
from t2t_repro.decoding.tuning import METRICS
from t2t_repro.model_dir import DECODING_FILE

FLAGS = flags.FLAGS


def define_flags():
  shared_flags.define_model_dir("Model directory to tune (a run, its best/ or averaged/); "
                                "decoding.json is written there.")
  shared_flags.define_checkpoint_path()
  split_flags.define()
  flags.DEFINE_list("beam_sizes", ["4", "5"], "Beam sizes of the grid.")
  flags.DEFINE_list("alphas", ["0.6", "1.0"], "Length-penalty exponents (alpha) of the grid.")
  flags.DEFINE_enum("metric", "sacrebleu", list(METRICS), "The score maximized: cased "
                    "sacreBLEU (13a), chrF, or lowercased Moses-tokenized BLEU.")
  flags.DEFINE_string("tgt_lang", None, "Target language of the tokenized BLEU (default: the "
                      "problem's, or --tgt's extension if two letters, else 'de').")
  config_flags.define(decode_config.DecodeConfig,
                      names=("decode_extra_length", "decode_batch_tokens", "max_input_length"),
                      none_defaults=True)
  config_flags.define(serving_config.BatchingOptions, names=("num_batch_threads",))


def _numbers(flag, values, kind, low):
  try:
    numbers = [kind(v) for v in values]
  except ValueError:
    raise errors.UsageError(f"--{flag}={','.join(values)}: not a list of {kind.__name__}s") from None
  if not numbers or min(numbers) < low:
    raise errors.UsageError(f"--{flag}={','.join(values)}: give values >= {low}")
  return numbers


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  beam_sizes = _numbers("beam_sizes", FLAGS.beam_sizes, int, 1)
  alphas = _numbers("alphas", FLAGS.alphas, float, 0)
  dev, data, tgt_lang = split_flags.corpus(FLAGS.model_dir)
  # A dev set is decoded once per grid point, so it is held in memory: a few thousand lines.
  pairs = list(dev.iter_pairs())
  if not pairs:
    raise errors.DataError(f"{data}: no sentence pair to tune on")
  sources, references = (list(side) for side in zip(*pairs))
  tgt_lang = FLAGS.tgt_lang or tgt_lang
  with writer_lock.hold(FLAGS.model_dir, "tune"):  # before the grid is decoded
    _tune(sources, references, beam_sizes, alphas, data, tgt_lang)


def _tune(sources, references, beam_sizes, alphas, data, tgt_lang):
  """Decodes the grid and writes its best point (main, holding the model dir's lock)."""
  # pylint: disable-next=import-outside-toplevel
  from t2t_repro.decoding import loading, translator as translator_lib, tuning
  threads = translator_lib.configure_threads(FLAGS.num_batch_threads)
  model, hparams, tokenizer, paths = loading.load_models(
      loading.split_names(FLAGS.model_dir), loading.split_names(FLAGS.checkpoint_path))
  config = decode_config.DecodeConfig.resolve(hparams, **config_flags.values(
      decode_config.DecodeConfig))
  translator = translator_lib.Translator(model, tokenizer, config, num_batch_threads=threads)
  logging.info("tuning on %s (%d lines): beam sizes %s x alphas %s, %s", data, len(sources),
               beam_sizes, alphas, FLAGS.metric)
  choice = tuning.tune_decoding(translator, sources, references, beam_sizes, alphas,
                                FLAGS.metric, tgt_lang, FLAGS.model_dir, data, paths[0])
  from t2t_repro.training import summaries  # pylint: disable=import-outside-toplevel
  step = re.search(r"-(\d+)$", paths[0])
  summaries.write_scalars(FLAGS.model_dir, int(step.group(1)) if step else 0,
                          summaries.tune_scalars(choice))
  print(tuning.format_grid(choice))
  print(f"chose beam_size {choice['beam_size']}, alpha {choice['alpha']:g} ({FLAGS.metric} "
        f"{choice['value']:.2f} on {data}); wrote {os.path.join(FLAGS.model_dir, DECODING_FILE)}")
