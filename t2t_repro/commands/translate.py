r"""Translate text with a trained model: `python -m t2t_repro.translate --model_dir=DIR`.

Reads one sentence per line (stdin or --input_file), writes one translation per
line (stdout or --output_file), in input order; an empty (or blank) input line
gives an empty output line, nothing is dropped. Lines are split on "\n" only
(`t2t_repro.fileio.read_lines`) and stripped of leading and trailing whitespace, as
the training text is. A line longer than --max_input_length tokens (default: what
the model's position table leaves after --decode_extra_length) is cut to it with a
logged warning that names the line, so no input line can exhaust memory. The
decoding is `t2t_repro.decoding.translator.Translator`:
sentences sorted by length, batched by --decode_batch_tokens (padded source tokens per
batch, rows x padded length), beam search, --num_batch_threads batches at the same time
(default: one per CPU core, at most 4, each with its share of the cores). Progress: on a
terminal a Keras progress bar on stderr, otherwise one plain closing line (`translated N
lines in H:MM:SS`).

Streaming: when stdin is a pipe or a terminal (no --input_file, or `-`) and the output is
stdout without --evaluate or --alignments, lines are translated as they arrive, in
batches of up to --buffer_size lines (a batch also starts when no new line came within
--buffer_seconds, fairseq-interactive's buffering), each batch's output flushed at once:
`producer | python -m t2t_repro.translate ... | consumer` works line by line. An invalid
line then stops the command after the earlier lines were written. A file (--input_file,
or `<` redirected) is read whole and decoded in length-sorted batches.

Decoding (§6.1): beam search with --beam_size and the GNMT length penalty
--alpha (defaults: the model's hparams, paper 4 and 0.6), maximum output length
= source length (tokens, EOS included) + --decode_extra_length (hparams
decode_extra_length, paper 50), early termination; see
`t2t_repro.decoding.beam_search`. Each sentence is decoded independently of
its batch, so batching does not change any translation.

--n_best=N writes N lines per input line, best first, tab separated:
`i<TAB>score<TAB>translation`, with i the 0-based input line number and score
log P(Y|X) / lp(Y) (%.4f); an empty input line gives one line `i<TAB>0.0000<TAB>`.

Ensembles: --model_dir=runs/a,runs/b (the latest checkpoint of each) and/or
--checkpoint_path=p1,p2 (with one --model_dir: checkpoints of that run; else one per
model dir) decode as one model: per step the log of the mean of the models'
probabilities, one beam search (`t2t_repro.decoding.ensemble`). The models must share
one vocabulary (the same vocab.model); the decoding defaults come from the first.

--alignments=hard|soft --alignment_file=FILE writes, for every output line, the
alignment between the source's and the output's sentencepiece pieces from the
cross-attention of decoder layer --alignment_layer (default the last, as fairseq),
averaged over heads: Pharaoh "i-j" pairs or a JSON object per line
(`t2t_repro.decoding.alignment`).

--sampling_topk=K, --sampling_topp=P and/or --sampling_temperature=T draw the outputs at
random instead (`t2t_repro.decoding.sampling`; --n_samples=N per line, as --n_best's lines
when N > 1; --sampling_seed): a line's samples depend only on --sampling_seed, its line number and the
sample's index, so neither --decode_batch_tokens nor reading a file or a pipe changes them, and
equal lines get independent samples. --target_prefix_file=F forces each line's output to
start with that line of F (an empty line: no prefix), then decoding continues
(`t2t_repro.decoding.prefix`); a prefix is never cut: a line's maximum output length is
max(source length, prefix length) + --decode_extra_length, with a warning naming the line
when the prefix is longer than source length + --decode_extra_length.

--evaluate --ref=FILE (repeatable) also scores the translations with
`t2t_repro.evaluation` (sacreBLEU primary, chrF, paper-comparable BLEU) and prints the
report to stdout after the translations (to stdout alone when --output_file is given).
"""

import os
import stat
import sys
import time

from absl import flags
from absl import logging

from t2t_repro import errors, evaluation, fileio, logs, streaming
from t2t_repro.commands import config_flags, shared_flags
from t2t_repro.config import decode as decode_config
from t2t_repro.config import serving as serving_config

FLAGS = flags.FLAGS


def define_flags():
  shared_flags.define_ensemble_flags("decode")
  flags.DEFINE_string("input_file", None, "Source sentences, one per line (default: stdin).")
  flags.DEFINE_string("output_file", None, "Translations (default: stdout).")
  config_flags.define(
      decode_config.DecodeConfig,
      names=(*decode_config.SEARCH_FIELDS, *decode_config.SAMPLING_FIELDS), none_defaults=True,
      help_overrides={
          "n_best": "Write the N best as 'i<TAB>score<TAB>translation' (default: just the best "
                    "translation per line); the beam is widened to N if smaller."})
  config_flags.define(serving_config.BatchingOptions, names=("num_batch_threads",))
  shared_flags.define_inference_dtype()
  flags.DEFINE_enum("alignments", None, list(decode_config.ALIGNMENT_KINDS),
                    "Write source-target alignments of the sentencepiece pieces (one line per "
                    "output line) to --alignment_file: hard = Pharaoh 'i-j' pairs, soft = one "
                    "JSON object per line (t2t_repro.decoding.alignment).")
  flags.DEFINE_integer("alignment_layer", -1, "Decoder layer whose cross-attention (averaged "
                       "over heads) gives --alignments; default -1 = the last, as fairseq's "
                       "default alignment_layer.")
  flags.DEFINE_string("alignment_file", None, "Output file of --alignments.")
  flags.DEFINE_bool("progress", True, "Progress on stderr (a bar on a terminal, else a "
                    "closing line).")
  flags.DEFINE_integer("buffer_size", 32, "Streaming input (stdin a pipe or terminal): translate "
                       "when this many lines are buffered or none came within --buffer_seconds.",
                       lower_bound=1)
  flags.DEFINE_float("buffer_seconds", 0.05, "Streaming input: how long to wait for another line "
                     "before translating the lines buffered [s].", lower_bound=0.0)
  flags.DEFINE_string("target_prefix_file", None, "One target prefix per input line: every output "
                      "of that line starts with it, then decoding continues (CTranslate2's "
                      "target_prefix); an empty line means none.")
  flags.DEFINE_bool("evaluate", False, "Score the translations against --ref.")
  flags.DEFINE_multi_string("ref", None, "Reference file for --evaluate (repeatable).")
  flags.DEFINE_string("tgt_lang", None, "Target language for --evaluate's paper BLEU "
                      "(default: the --ref file's extension if two letters, else 'de').")


def _target_lang(ref_path):
  if FLAGS.tgt_lang:
    return FLAGS.tgt_lang
  ext = ref_path.rsplit(".", 1)[-1] if "." in ref_path else ""
  return ext if len(ext) == 2 and ext.isalpha() else "de"


def _streaming():
  """Whether to translate stdin line by line as it arrives: a pipe or terminal on stdin
  (not a file redirected with `<`), output to stdout, no --evaluate, no --alignments."""
  return (FLAGS.input_file in (None, "-") and not FLAGS.output_file and not FLAGS.evaluate
          and not FLAGS.alignments and not FLAGS.target_prefix_file
          and not stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode))


def _decode_flags():
  """{field: value} of the decoding flags, after the checks that need no model
  (`DecodeConfig.check_given`: ranges, no --beam_size or --n_best with sampling)."""
  given = config_flags.values(decode_config.DecodeConfig)
  decode_config.DecodeConfig.check_given(**{k: v for k, v in given.items() if k in (
      "beam_size", "n_best", *decode_config.SAMPLING_FIELDS)})
  return given


def _translator(given):
  """The `Translator` of --model_dir / --checkpoint_path (one model or an ensemble) and
  the decoding flags `given` (`_decode_flags`); a bad setting is a `errors.UsageError`."""
  # TensorFlow is imported here, after the flags are checked: a usage error takes no import.
  # pylint: disable-next=import-outside-toplevel
  from t2t_repro.decoding import alignment, loading, translator as translator_lib
  threads = translator_lib.configure_threads(FLAGS.num_batch_threads)
  model, hparams, tokenizer, _ = loading.load_models(
      loading.split_names(FLAGS.model_dir), loading.split_names(FLAGS.checkpoint_path),
      inference_dtype=FLAGS.inference_dtype)
  try:
    config = decode_config.DecodeConfig.resolve(hparams, **given)
    logging.info("decoding with beam_size %d, alpha %g, decode_extra_length %d",
                 config.beam_size, config.alpha, config.decode_extra_length)
    translator = translator_lib.Translator(model, tokenizer, config, num_batch_threads=threads)
    alignment.check_layer(model, FLAGS.alignment_layer)
  except errors.UsageError:
    raise
  except ValueError as e:
    raise errors.UsageError(str(e)) from None
  return translator


def _output_lines(nbest, first_line=0):
  """The lines to write for `nbest` (input lines first_line, first_line + 1, ...)."""
  if not FLAGS.n_best and (FLAGS.n_samples or 1) == 1:
    return [hyps[0][1] for hyps in nbest]
  from t2t_repro.decoding.translator import format_nbest  # pylint: disable=import-outside-toplevel
  # format_nbest numbers from 0: shift to the input line numbers.
  return [f"{int(i) + first_line}\t{rest}" for i, rest in
          (line.split("\t", 1) for line in format_nbest(nbest))]


def _lines(count):
  return f"{count} line" if count == 1 else f"{count} lines"


def _translate_stream(translator):
  """Translates stdin in small batches (`streaming.line_batches`), flushing each batch's
  output at once, so `producer | translate | consumer` runs line by line."""
  started, done = time.monotonic(), 0
  for batch in streaming.line_batches(sys.stdin.fileno(), FLAGS.buffer_size, FLAGS.buffer_seconds):
    nbest = translator.nbest(batch, first_line=done)  # samples drawn as for a file
    sys.stdout.writelines(line + "\n" for line in _output_lines(nbest, done))
    sys.stdout.flush()
    done += len(batch)
  if FLAGS.progress:
    logging.info("translated %s in %s", _lines(done), logs.hms(time.monotonic() - started))


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.evaluate and not FLAGS.ref:
    raise errors.UsageError("--evaluate needs --ref")
  if bool(FLAGS.alignments) != bool(FLAGS.alignment_file):
    raise errors.UsageError("--alignments and --alignment_file go together")
  given = _decode_flags()
  for path in (FLAGS.output_file, FLAGS.alignment_file):
    if path:
      fileio.check_writable(path)
  if _streaming():
    _translate_stream(_translator(given))
    return
  refs = [fileio.read_lines(path) for path in FLAGS.ref or []] if FLAGS.evaluate else []
  lines = fileio.read_lines(FLAGS.input_file or "-")
  for path, ref in zip(FLAGS.ref or [], refs):
    if len(ref) != len(lines):
      raise errors.UsageError(f"{path} has {len(ref)} lines, the input has {len(lines)}")
  prefixes = None
  if FLAGS.target_prefix_file:
    prefixes = fileio.read_lines(FLAGS.target_prefix_file)
    if len(prefixes) != len(lines):
      raise errors.DataError(f"--target_prefix_file={FLAGS.target_prefix_file} has {len(prefixes)} "
                             f"lines, the input has {len(lines)}")
  translator = _translator(given)
  started = time.monotonic()
  # Keras's Progbar always redraws with "\r" and colour codes: on a terminal only.
  progress = FLAGS.progress and logs.stderr_is_terminal()
  nbest = translator.nbest(lines, progress, return_ids=bool(FLAGS.alignments), prefixes=prefixes)
  if FLAGS.progress and not progress:
    logging.info("translated %s in %s", _lines(len(lines)), logs.hms(time.monotonic() - started))
  if FLAGS.alignments:
    from t2t_repro.decoding import alignment  # pylint: disable=import-outside-toplevel
    fileio.write_lines(FLAGS.alignment_file, alignment.alignment_lines(
        translator, nbest, FLAGS.alignments, FLAGS.alignment_layer))
  out = _output_lines(nbest)
  if FLAGS.output_file:
    fileio.write_lines(FLAGS.output_file, out)
  else:
    sys.stdout.writelines(line + "\n" for line in out)
  if FLAGS.evaluate:
    hyps = [hyps[0][1] for hyps in nbest]
    scores = evaluation.evaluate_translations(hyps, refs, tgt_lang=_target_lang(FLAGS.ref[0]))
    print(evaluation.format_scores(scores))
  sys.stdout.flush()
