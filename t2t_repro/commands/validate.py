"""Perplexity of a trained model: `python -m t2t_repro.validate --model_dir=DIR` (`t2t-validate`).

Teacher-forced NLL and perplexity per target word piece, without label smoothing (the unit
of the paper's Table 3, "PPL (dev)"), of the latest checkpoint of --model_dir (a run, its
`best/` or `averaged/`) or of --checkpoint_path, as fairseq-validate, OpenNMT-tf `eval` and
t2t-eval do. The data is one of

* --src/--tgt: two aligned text files;
* --problem (with --data_dir) and --split (default dev): a named data source's split;
* neither: the --split of the problem and files the run was trained on (its flags.json).

Pairs with an empty side are skipped (as in training); a side longer than the model's
max_length is cut to it, and a run trained with --mixed_precision=mixed_bfloat16 (its
flags.json) is scored in that precision, as the trainer's dev loss is, so on the same
checkpoint the result equals the dev `nll`/`ppl` the trainer logged (`training.perplexity`).
A mixed_float16 run is scored in float32, which the trainer's float16 value may differ from
in its last digits. Prints one
line on stdout; --output_json also writes {"nll", "ppl", "target_pieces", "pairs",
"checkpoint", "data"}.
"""


from absl import flags
from absl import logging

from t2t_repro import errors, fileio
from t2t_repro.commands import config_flags
from t2t_repro.commands import shared_flags
from t2t_repro.commands import split_flags
from t2t_repro.config.hparams import HParams
from t2t_repro.model_dir import ModelDir

FLAGS = flags.FLAGS


def define_flags():
  shared_flags.define_model_dir()
  shared_flags.define_checkpoint_path()
  split_flags.define()
  config_flags.define(HParams, names=["batch_tokens"], none_defaults=True, help_overrides={
      "batch_tokens": "Padded tokens per batch and side (default: the model's hparams "
                      "batch_tokens)."})
  flags.DEFINE_string("output_json", None, "Also write the result as JSON to this file.")


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.output_json:
    fileio.check_writable(FLAGS.output_json)
  pairs, data, _ = split_flags.corpus(FLAGS.model_dir)
  from t2t_repro.decoding import loading  # pylint: disable=import-outside-toplevel
  from t2t_repro.training.perplexity import perplexity  # pylint: disable=import-outside-toplevel
  model_dir = ModelDir(FLAGS.model_dir)
  checkpoint = model_dir.resolve_checkpoint(FLAGS.checkpoint_path)
  # The run's precision, as the trainer's dev loss (a mixed_float16 run: float32).
  dtype = ("bfloat16" if model_dir.read_flags().get("mixed_precision") == "mixed_bfloat16"
           else "float32")
  logging.info("loading %s (computing in %s)", checkpoint, dtype)
  model, hparams, tokenizer = loading.load_for_inference(FLAGS.model_dir, checkpoint,
                                                         inference_dtype=dtype)
  logging.info("computing the perplexity on %s (one pass over the pairs)", data)
  try:
    result = perplexity(model, tokenizer, pairs,
                        batch_tokens=FLAGS.batch_tokens or hparams.batch_tokens,
                        max_length=hparams.max_length)
  except ValueError as e:
    raise errors.DataError(f"{data}: {e}") from None
  result.update(checkpoint=checkpoint, data=data)
  if FLAGS.output_json:
    fileio.write_json(FLAGS.output_json, result)
  print(f"nll {result['nll']:.4f} ppl {result['ppl']:.3f} | {result['target_pieces']:,} target "
        f"pieces, {result['pairs']:,} pairs | {checkpoint} on {data}", flush=True)
