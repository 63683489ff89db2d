"""`python -m t2t_repro.evaluate --hyp=FILE --ref=FILE [--ref=FILE2 ...] [--tgt_lang=de]`:
the scores of `t2t_repro.evaluation` (sacreBLEU, chrF, the paper's tokenized BLEU, the
Multi30k papers' lowercased BLEU) of a hypothesis file against its references."""

from absl import flags

from t2t_repro import errors
from t2t_repro import evaluation

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("hyp", None, "Detokenized hypotheses, one per line.")
  flags.DEFINE_multi_string(
      "ref", None, "Detokenized reference file; repeat for several references.")
  flags.DEFINE_string("tgt_lang", "de",
                      "Target language (Moses tokenizer of the tokenized BLEUs).")


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.hyp or not FLAGS.ref:
    raise errors.UsageError("--hyp and at least one --ref are required")
  scores = evaluation.evaluate_files(FLAGS.hyp, FLAGS.ref, tgt_lang=FLAGS.tgt_lang)
  print(evaluation.format_scores(scores))
