"""Score given translations: `python -m t2t_repro.score --model_dir=DIR --src=F --tgt=F` (`t2t-score`).

Writes one line per pair, in input order: the sentence log-probability log P(Y | X)
under the model (sum over the target's sentencepiece pieces, EOS included, natural
log; `t2t_repro.decoding.scoring`), then, tab-separated, with --normalized the
length-normalized score log P(Y | X) / lp(|Y|) (the beam search's score; --alpha,
default the model's) and with --per_piece the space-separated log-probability of every
piece. Lines are stripped as `translate` strips them; an empty line is scored as the
empty sentence (EOS alone). On stderr: one closing line with the pairs, pieces and the
mean NLL per piece.

Ensembles (--model_dir=runs/a,runs/b and/or --checkpoint_path=p1,p2) score with the log
of the mean of the members' probabilities, as they decode. A pair longer than the
model's max_positions is a data error naming its line (its score would need positions
the model never learned).
"""

import sys
import time

import numpy as np
from absl import app
from absl import flags
from absl import logging

from t2t_repro import cli, command_flags, fileio, logs
from t2t_repro.decoding import config as decode_config

FLAGS = flags.FLAGS


def _define_flags():
  command_flags.define_ensemble_flags("score")
  flags.DEFINE_string("src", None, "Source sentences, one per line.")
  flags.DEFINE_string("tgt", None, "Target sentences (the translations to score), aligned with --src.")
  flags.DEFINE_string("output_file", None, "Scores (default: stdout).")
  flags.DEFINE_bool("normalized", False, "Also write log P(Y|X) / lp(|Y|) (GNMT length penalty "
                    "with --alpha).")
  flags.DEFINE_bool("per_piece", False, "Also write the log-probability of every target piece.")
  decode_config.define_flags(names=("alpha", "batch_tokens"))
  flags.mark_flags_as_required(["src", "tgt"])


def _lines():
  sources, targets = fileio.read_lines(FLAGS.src), fileio.read_lines(FLAGS.tgt)
  if len(sources) != len(targets):
    raise cli.DataError(f"--src={FLAGS.src} has {len(sources)} lines, --tgt={FLAGS.tgt} "
                        f"{len(targets)}")
  return [s.strip() for s in sources], [t.strip() for t in targets]


def _encode(tokenizer, lines):
  return [np.asarray(row, np.int32) for row in tokenizer.encode(lines).to_list()] if lines else []


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  sources, targets = _lines()
  from t2t_repro.decoding import loading, scoring  # pylint: disable=import-outside-toplevel
  try:
    model, hparams, tokenizer, _ = loading.load_models(
        loading.split_names(FLAGS.model_dir), loading.split_names(FLAGS.checkpoint_path))
  except loading.EnsembleError as e:
    raise cli.UsageError(str(e)) from None
  config = decode_config.DecodeConfig.from_flags(hparams, FLAGS)
  started = time.monotonic()
  scorer = scoring.Scorer(model, config.batch_tokens)
  src_ids, tgt_ids = _encode(tokenizer, sources), _encode(tokenizer, targets)
  try:
    scorer.check_lengths(src_ids, tgt_ids, range(1, len(sources) + 1))
  except ValueError as e:
    raise cli.DataError(f"{FLAGS.src}, {FLAGS.tgt}: {e}") from None
  pieces = scorer.score_ids(src_ids, tgt_ids)
  out = []
  for log_probs in pieces:
    total = float(np.sum(log_probs, dtype=np.float64))
    fields = [f"{total:.4f}"]
    if FLAGS.normalized:
      fields.append(f"{scoring.normalized(total, len(log_probs), config.alpha):.4f}")
    if FLAGS.per_piece:
      fields.append(" ".join(f"{x:.4f}" for x in log_probs))
    out.append("\t".join(fields))
  if FLAGS.output_file:
    fileio.write_lines(FLAGS.output_file, out)
  else:
    sys.stdout.writelines(line + "\n" for line in out)
    sys.stdout.flush()
  count = sum(len(p) for p in pieces)
  nll = -sum(float(np.sum(p, dtype=np.float64)) for p in pieces) / max(count, 1)
  logging.info("scored %d pairs (%d target pieces, mean NLL %.4f per piece) in %s", len(pieces),
               count, nll, logs.hms(time.monotonic() - started))


if __name__ == "__main__":
  _define_flags()
  cli.run(main)
