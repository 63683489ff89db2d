"""Score given translations: `python -m t2t_repro.score --model_dir=DIR --src=F --tgt=F` (`t2t-score`).

Writes one line per pair, in input order: the sentence log-probability log P(Y | X)
under the model (sum over the target's sentencepiece pieces, EOS included, natural
log; `t2t_repro.decoding.scoring`), then, tab-separated, with --normalized the
length-normalized score log P(Y | X) / lp(|Y|) (the beam search's score; --alpha,
default the model's) and with --per_piece the space-separated log-probability of every
piece. With --header the first line names the written columns (`COLUMNS`: log_prob,
normalized, piece_log_probs). Lines are stripped as `translate` strips them; an empty line
is scored as the empty sentence (EOS alone). On stderr: a line as each chunk starts and one
closing line with the pairs, pieces and the mean NLL per piece.

The files are streamed: `CHUNK_PAIRS` pairs at a time are read, scored (length-sorted
token-budget batches within the chunk) and written, so memory does not grow with the files
(a 4.5M-pair corpus can be scored, e.g. to filter it). With --output_file the scores go
to a temporary name that replaces the file only when every pair is scored, so the file is
never seen half-written; a data error (different line counts, a pair too long) then leaves no
output. On stdout the chunks before the error have been written.

Ensembles (--model_dir=runs/a,runs/b and/or --checkpoint_path=p1,p2) score with the log
of the mean of the members' probabilities, as they decode. A pair longer than the
model's max_positions is a data error naming its line (its score would need positions
the model never learned).
"""

import contextlib
import itertools
import sys
import time

import numpy as np
from absl import flags
from absl import logging

from t2t_repro import errors, fileio, logs, streaming
from t2t_repro.commands import config_flags, shared_flags
from t2t_repro.config import decode as decode_config

FLAGS = flags.FLAGS
CHUNK_PAIRS = 10_000  # pairs read, scored and written at a time: bounds the memory
# The column names of --header: flag (None: always written) -> name.
COLUMNS = {None: "log_prob", "normalized": "normalized", "per_piece": "piece_log_probs"}


def define_flags():
  shared_flags.define_ensemble_flags("score")
  flags.DEFINE_string("src", None, "Source sentences, one per line.")
  flags.DEFINE_string("tgt", None, "Target sentences (the translations to score), aligned with --src.")
  flags.DEFINE_string("output_file", None, "Scores (default: stdout).")
  flags.DEFINE_bool("normalized", False, "Also write log P(Y|X) / lp(|Y|) (GNMT length penalty "
                    "with --alpha).")
  flags.DEFINE_bool("per_piece", False, "Also write the log-probability of every target piece.")
  flags.DEFINE_bool("header", False, "Write a first line naming the tab-separated columns: "
                    "log_prob (log P(Y|X), natural log, EOS included), normalized (with "
                    "--normalized), piece_log_probs (with --per_piece).")
  config_flags.define(decode_config.DecodeConfig, names=("alpha", "decode_batch_tokens"),
                      none_defaults=True)
  flags.mark_flags_as_required(["src", "tgt"])


def _open(path):
  try:
    return open(path, "rb")  # pylint: disable=consider-using-with
  except FileNotFoundError:
    raise errors.MissingDataError(f"{path}: file does not exist") from None
  except IsADirectoryError:
    raise errors.MissingDataError(f"{path}: is a directory, not a text file") from None


def _pair_chunks(src_path, tgt_path):
  """Yields (number of the first line, stripped sources, stripped targets) for each
  CHUNK_PAIRS lines of the two files, read as a stream (`streaming.line_batches`).

  Raises:
    errors.DataError: the files have different line counts (both named, both counted).
    errors.MissingDataError, errors.EncodingError: as `fileio.read_lines`.
  """
  with _open(src_path) as src, _open(tgt_path) as tgt:
    sources = streaming.line_batches(src.fileno(), CHUNK_PAIRS, None, src_path)
    targets = streaming.line_batches(tgt.fileno(), CHUNK_PAIRS, None, tgt_path)
    first = 1
    for src_lines, tgt_lines in itertools.zip_longest(sources, targets, fillvalue=[]):
      if len(src_lines) != len(tgt_lines):
        raise errors.DataError(
            f"--src={src_path} has {first - 1 + len(src_lines) + sum(map(len, sources))} lines, "
            f"--tgt={tgt_path} {first - 1 + len(tgt_lines) + sum(map(len, targets))}")
      yield first, [s.strip() for s in src_lines], [t.strip() for t in tgt_lines]
      first += len(src_lines)


def _output():
  """The binary stream the scores go to: --output_file (atomically) or stdout."""
  if FLAGS.output_file:
    return fileio.atomic_writer(FLAGS.output_file)
  return contextlib.nullcontext(sys.stdout.buffer)


def _line(log_probs, normalize):
  """One output line: the total, with --normalized `normalize(total, pieces)`, with
  --per_piece every piece's log-probability; tab-separated, ending in "\\n"."""
  total = float(np.sum(log_probs, dtype=np.float64))
  fields = [f"{total:.4f}"]
  if FLAGS.normalized:
    fields.append(f"{normalize(total, len(log_probs)):.4f}")
  if FLAGS.per_piece:
    fields.append(" ".join(f"{x:.4f}" for x in log_probs))
  return "\t".join(fields) + "\n"


def header():
  """The --header line: the names of the columns the flags write, tab-separated, "\n"-ended."""
  return "\t".join(name for flag, name in COLUMNS.items()
                   if flag is None or getattr(FLAGS, flag)) + "\n"


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  for path in (FLAGS.src, FLAGS.tgt):
    _open(path).close()
  if FLAGS.output_file:
    fileio.check_writable(FLAGS.output_file)
  from t2t_repro.decoding import loading, scoring  # pylint: disable=import-outside-toplevel
  model, hparams, tokenizer, _ = loading.load_models(  # tune's alpha; scoring has no beam
      loading.split_names(FLAGS.model_dir), loading.split_names(FLAGS.checkpoint_path),
      tuned=("alpha",))
  config = decode_config.DecodeConfig.resolve(
      hparams, **config_flags.values(decode_config.DecodeConfig))
  started = time.monotonic()
  scorer = scoring.Scorer(model, config.decode_batch_tokens, tokenizer)
  normalize = lambda total, length: scoring.normalized(total, length, config.alpha)
  pairs = pieces = 0
  nll = 0.0
  with _output() as out:
    if FLAGS.header:
      out.write(header().encode("utf-8"))
    for first, sources, targets in _pair_chunks(FLAGS.src, FLAGS.tgt):
      logging.info("scoring pairs %s-%s", f"{first:,}", f"{first + len(sources) - 1:,}")
      src_ids, tgt_ids = scorer.encode(sources), scorer.encode(targets)
      try:
        scorer.check_lengths(src_ids, tgt_ids, range(first, first + len(sources)))
      except ValueError as e:
        raise errors.DataError(f"{FLAGS.src}, {FLAGS.tgt}: {e}") from None
      scores = scorer.score_ids(src_ids, tgt_ids)
      out.write("".join(_line(p, normalize) for p in scores).encode("utf-8"))
      out.flush()
      pairs += len(scores)
      pieces += sum(len(p) for p in scores)
      nll -= sum(float(np.sum(p, dtype=np.float64)) for p in scores)
  logging.info("scored %d pairs (%d target pieces, mean NLL %.4f per piece) in %s", pairs,
               pieces, nll / max(pieces, 1), logs.hms(time.monotonic() - started))
