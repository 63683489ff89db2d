r"""English constituency parsing (Vaswani et al. 2017 §6.3): data, training, decoding, EVALB.

Five modes:

  # (a) Penn Treebank sample -> parallel text for the `parallel_text` problem
  python tools/parse.py --mode=prepare \
      --ptb_dir=../shared/data/ptb_sample/combined --output_dir=/tmp/ptb

  writes {split}.src/.tgt/.tree, symbols.txt and stats.json for each split
  (see t2t_repro.parsing.prepare; {split}.tree is the gold file for
  --mode=evaluate; --leaves=xx for XX leaves).

  # (b) EVALB scores of bracketed trees (one a line)
  python tools/parse.py --mode=evaluate --gold=/tmp/ptb/test.tree \
      --test=trees.txt [--prm=.../evalb/COLLINS.prm]

  # (c) model outputs -> trees
  python tools/parse.py --mode=delinearize --source=/tmp/ptb/test.src \
      --predictions=pred.tgt --output=trees.txt

  # (d) everything, end to end: prepare -> bracket-aware vocabulary ->
  #     train (training.api.train_model, in this process) -> decode test and
  #     dev (beam 21, alpha 0.3, input + 300; constrained to well-formed
  #     trees over the input words, t2t_repro.parsing.constraint) ->
  #     delinearize -> EVALB. With --train_flags=--average_last=N the averaged
  #     model is decoded; with --alphas=a,b,... alpha is chosen on dev.
  python tools/parse.py --mode=train \
      --ptb_dir=../shared/data/ptb_sample/combined --model_dir=runs/parse \
      [--hparams=parsing_small] [--hparams_override=k=v,...] \
      [--train_minutes=0] [--train_steps=N] [--alphas=0,0.3,0.6] \
      [--augment_copies=N --augment_rate=0.1]

  # (e) decode and score an existing model dir (data from --mode=train)
  python tools/parse.py --mode=decode --model_dir=runs/parse \
      [--decode_splits=dev,test] [--beam_size=21] [--alpha=0.3] \
      [--decode_extra_length=300] [--decode_batch_tokens=1024]

--mode=train writes into --model_dir: data/ (the output of prepare),
vocab.model (see `learn_bracket_vocab`: every bracket token of the train split
and XX is one piece), the trainer's files, and decode/{split}.pred.tgt
(model outputs), decode/{split}.pred.tree (delinearized, repaired trees), and
parse_scores.json (EVALB summaries per split, well-formed counts, decoding
settings and wall times, the training command and its wall time).

The command line (`t2t-parse`, `python -m t2t_repro.parse`, `python tools/parse.py`); the
library is t2t_repro.parsing (prepare, bracket_vocab, pipeline).
"""

import dataclasses
import sys
import time

from absl import flags

from t2t_repro import errors, fileio, writer_lock
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.commands import config_flags, shared_flags
from t2t_repro.config import decode as decode_config
from t2t_repro.model_dir import ModelDir
from t2t_repro.parsing import evalb, pipeline, prepare
from t2t_repro.config.settings import field_kind
from t2t_repro.config.train import TrainConfig

FLAGS = flags.FLAGS


def _field_help(name):
  return next(f.metadata["help"] for f in dataclasses.fields(TrainConfig) if f.name == name)


def define_flags():
  _define_mode_flags()
  _define_decode_flags()
  flags.mark_flag_as_required("mode")


def _define_mode_flags():
  """Defines the command-line flags (only when run as a script, so that tests
  can import this file more than once without duplicate-flag errors)."""
  flags.DEFINE_enum("mode", None,
                    ["prepare", "evaluate", "delinearize", "train", "decode"],
                    "What to do.")
  flags.DEFINE_string("ptb_dir", None,
                      "prepare: folder with the wsj_NNNN.mrg files.")
  flags.DEFINE_string("output_dir", None, "prepare: folder for the outputs.")
  flags.DEFINE_enum("leaves", "word", ["word", "xx"],
                    "prepare, train: the leaf token of the target sequences: "
                    "'word' (the word itself) or 'xx' (the XX placeholder of "
                    "Vinyals et al. 2015); see t2t_repro.parsing.trees.")
  flags.DEFINE_list("splits", [],
                    "prepare, train: file ranges of the splits as NAME=FIRST-LAST "
                    "file numbers, e.g. train=1-4,dev=160-160,test=180-180 "
                    "(default: train 1-159, dev 160-179, test 180-199).")
  flags.DEFINE_integer("augment_copies", 0,
                       "prepare, train: SUB2 training pairs per train tree (Shi et al. "
                       "2021: subtrees replaced by same-label subtrees of the train "
                       "split, t2t_repro.parsing.augment), written with the gold pairs "
                       "to train_aug.src/.tgt, which train then learns from; 0: none.",
                       lower_bound=0)
  flags.DEFINE_float("augment_rate", 0.1,
                     "prepare, train: probability that a node of the SUB2 walk is "
                     "replaced, in (0, 1].")
  flags.register_validator("augment_rate", lambda rate: 0 < rate <= 1,
                           message="--augment_rate must be in (0, 1]")
  flags.DEFINE_string("gold", None, "evaluate: gold trees, one per line.")
  flags.DEFINE_string("test", None, "evaluate: test trees, one per line.")
  flags.DEFINE_string("prm", None,
                      "evaluate: EVALB parameter file; default: the values of "
                      "COLLINS.prm built into t2t_repro.parsing.evalb.")
  flags.DEFINE_enum("xx_tags", "gold", ["gold", "keep"],
                    "evaluate: what to do with XX placeholder POS tags in test "
                    "trees. 'gold' copies the gold tag of the same word into "
                    "each XX slot (where the word counts agree), so EVALB drops "
                    "the same punctuation from both trees (tagging accuracy is "
                    "then not meaningful); 'keep' scores the trees as they are.")
  flags.DEFINE_bool("per_sentence", False,
                    "evaluate: also print EVALB's per-sentence table.")
  flags.DEFINE_string("output_json", None,
                      "evaluate: also write the summary numbers to this file.")
  flags.DEFINE_string("source", None, "delinearize: words, one sentence a line.")
  flags.DEFINE_string("predictions", None,
                      "delinearize: target sequences, one a line.")
  flags.DEFINE_string("output", None, "delinearize: output trees, one a line.")
  shared_flags.define_model_dir(
      "train, decode: the model directory (created by train); decode: several, "
      "comma-separated, decode as one ensemble (outputs go to the first).", required=False)
  # The trainer's settings, from `TrainConfig`'s fields ("train: " and the field's help).
  trainer = ("hparams", "hparams_override", "train_minutes", "train_steps", "eval_every_steps",
             "seed")
  config_flags.define(
      TrainConfig, names=["data_dir", *trainer],
      defaults={"hparams": "parsing_small", "eval_every_steps": 500},
      help_overrides={
          "data_dir": "train, decode: folder of prepare's outputs (default: MODEL_DIR/data; "
                      "train runs prepare into it).",
          **{name: "train: " + _field_help(name) for name in trainer}})
  flags.DEFINE_list("train_flags", [],
                    "train: more trainer flags (as python -m t2t_repro.train takes them), e.g. "
                    "--train_flags=--save_checkpoints_steps=500.")
  flags.DEFINE_bool("bracket_vocab", True,
                    "train: learn vocab.model here with every train bracket token "
                    "(and XX) as one piece (learn_bracket_vocab); false: let the "
                    "trainer learn a plain BPE vocabulary (brackets split in two).")


def _define_decode_flags():
  """The flags of --mode=decode (and of train's decoding at the end)."""
  flags.DEFINE_list("decode_splits", ["test", "dev"],
                    "train, decode: splits of DATA_DIR to decode and score.")
  config_flags.define(
      decode_config.DecodeConfig,
      names=("beam_size", "alpha", "decode_extra_length", "decode_batch_tokens"),
      none_defaults=True, help_overrides={
          "beam_size": "decode: beam width (default: hparams, 21 in parsing*).",
          "alpha": "decode: length-penalty exponent (default: hparams, 0.3).",
          "decode_extra_length": "decode: max output length = input length + this "
                                 "[pieces] (default: hparams, 300).",
          "decode_batch_tokens": "decode: padded source pieces per beam-search batch, rows x "
                          "padded length (default 1024; each row has beam_size "
                          "hypotheses)."})
  flags.DEFINE_list("alphas", [],
                    "train, decode: alpha values to choose from on dev (dev is decoded once "
                    "per value, every split is scored with the best dev F1); empty: --alpha.")
  flags.register_validator(
      "alphas", _valid_alphas, message="--alphas: numbers >= 0, comma-separated")
  flags.DEFINE_bool("constrained", True,
                    "decode: constrained beam search (t2t_repro.parsing."
                    "constraint): only well-formed trees over the source words.")
  flags.DEFINE_integer("max_sentences", 0,
                       "decode: only the first N sentences of each split (0: all).")
  shared_flags.define_checkpoint_path(
      "decode: checkpoint prefix (default: the latest); several, comma-separated, decode "
      "as one ensemble.")


def _valid_alphas(values):
  try:
    return all(float(v) >= 0 for v in values)
  except ValueError:
    return False


def _splits():
  try:
    splits = prepare.parse_splits(FLAGS.splits)
  except ValueError as e:
    raise errors.UsageError(str(e)) from None
  if FLAGS.augment_copies and splits and "train" not in splits:
    raise errors.UsageError("--augment_copies needs a 'train' split in --splits")
  return splits


def _require(*names):
  missing = [n for n in names if not getattr(FLAGS, n)]
  if missing:
    raise errors.UsageError(f"--mode={FLAGS.mode} needs " +
                         ", ".join("--" + n for n in missing))


def run_prepare():
  _require("ptb_dir", "output_dir")
  stats = prepare.prepare(FLAGS.ptb_dir, FLAGS.output_dir, _splits(), FLAGS.leaves,
                          augment_copies=FLAGS.augment_copies,
                          augment_rate=FLAGS.augment_rate)
  print(prepare.format_stats(stats))
  print(f"wrote {FLAGS.output_dir}/{{train,dev,test}}.{{src,tgt,tree}}, "
        f"{'train_aug.{src,tgt}, ' if FLAGS.augment_copies else ''}symbols.txt, stats.json")


def run_delinearize():
  _require("source", "predictions", "output")
  counts = pipeline.delinearize_files(FLAGS.source, FLAGS.predictions, FLAGS.output,
                                      FLAGS.leaves)
  print(f"{counts['sentences']} trees written to {FLAGS.output}; "
        f"{counts['well_formed']} predictions were well-formed, "
        f"{counts['sentences'] - counts['well_formed']} repaired")


def run_evaluate():
  _require("gold", "test")
  params = evalb.load_prm(FLAGS.prm) if FLAGS.prm else evalb.COLLINS
  try:
    result = pipeline.evaluate_files(FLAGS.gold, FLAGS.test, params, FLAGS.xx_tags)
  except evalb.EvalbAbort as e:
    hint = (" (test trees with XX tags keep their punctuation: try "
            "--xx_tags=gold)" if FLAGS.xx_tags == "keep" else "")
    raise errors.DataError(f"EVALB stopped: {e}{hint}") from None
  sys.stdout.write(evalb.format_report(result, per_sentence=FLAGS.per_sentence))
  if FLAGS.output_json:
    fileio.write_json(FLAGS.output_json, evalb.as_dict(result))


def _data_dir():
  return FLAGS.data_dir or ModelDir(FLAGS.model_dir.split(",")[0]).file(
      model_dir_lib.PARSE_DATA_DIR)


def _flag_value(field, arg, text):
  """The value of one --train_flags setting for `field` (a `TrainConfig` field)."""
  kind = field_kind(field)
  if text.lower() in ("none", "") and field.default is None:
    return None
  if kind is bool:
    if text.lower() not in ("true", "false", "1", "0"):
      raise errors.UsageError(f"--train_flags: {arg}: expected true or false")
    return text.lower() in ("true", "1")
  try:
    return kind(text)
  except ValueError:
    raise errors.UsageError(f"--train_flags: {arg}: expected {kind.__name__}") from None


def train_flag_changes(args):
  """The `TrainConfig` fields that --train_flags sets.

  Args:
    args: strings "--name=value", "--name" (true) or "--noname" (false), as the train
      command takes them.

  Returns:
    dict: field name -> value (of the field's type; None for "none" where None is allowed).

  Raises:
    errors.UsageError: an unknown setting or a value of the wrong type (names --train_flags
      and the setting).
  """
  fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
  changes = {}
  for arg in args:
    name, _, value = arg.lstrip("-").partition("=")
    if "=" not in arg and name.startswith("no") and name[2:] in fields:
      name, value = name[2:], "false"
    elif "=" not in arg:
      value = "true"
    if name not in fields:
      raise errors.UsageError(f"--train_flags: {arg}: not a setting of the train command")
    changes[name] = _flag_value(fields[name], arg, value)
  return changes


def run_train():
  """prepare -> vocabulary -> the trainer (in this process) -> decode + EVALB; each step is
  printed when done and recorded in parse_scores.json. SIGINT/SIGTERM during the updates save
  a checkpoint and end the command there (no decoding); rerun, it resumes."""
  _require("ptb_dir", "model_dir")
  _check_alpha_flags()
  changes = train_flag_changes(FLAGS.train_flags)
  with writer_lock.hold(FLAGS.model_dir, "parse"):  # its own writes and its training's
    _train_and_decode(changes)


def _train_and_decode(changes):
  """`run_train` after its flag checks, holding the model dir's lock."""
  model_dir, data_dir = ModelDir(FLAGS.model_dir), _data_dir()
  start = time.monotonic()
  hp = pipeline.check_train_settings(FLAGS.hparams, FLAGS.hparams_override, FLAGS.train_steps,
                                     FLAGS.augment_copies, FLAGS.augment_rate)
  stats = prepare.prepare(FLAGS.ptb_dir, data_dir, _splits(), FLAGS.leaves,
                          augment_copies=FLAGS.augment_copies, augment_rate=FLAGS.augment_rate)
  print(prepare.format_stats(stats), flush=True)
  if FLAGS.bracket_vocab:
    symbols = pipeline.learn_vocab(model_dir, data_dir, FLAGS.leaves, hp.vocab_size)
    if symbols is not None:
      print(f"learned {model_dir.vocab_path}: {hp.vocab_size} pieces, {symbols} "
            "symbols as single pieces", flush=True)
  config = pipeline.train_config(
      model_dir, data_dir, hparams=FLAGS.hparams, hparams_override=FLAGS.hparams_override,
      train_minutes=FLAGS.train_minutes, train_steps=FLAGS.train_steps,
      eval_every_steps=FLAGS.eval_every_steps, seed=FLAGS.seed, changes=changes,
      train_split=prepare.AUGMENTED_SPLIT if FLAGS.augment_copies else "train")
  print(f"training: {config}", flush=True)
  train_seconds, result = pipeline.train_parser(config)
  vocab = pipeline.vocab_stats(model_dir, data_dir)
  if vocab is not None:
    print(f"\nvocabulary {vocab['vocab']}: first train target as pieces:\n"
          f"  {' '.join(vocab['first_target_pieces'])}\n"
          f"  train targets: {vocab['pieces_per_line']:.1f} pieces a line, "
          f"{vocab['pieces_per_token']:.3f} pieces a token", flush=True)
  print(f"training: {train_seconds / 60:.1f} min, step {result.step}", flush=True)
  model_dir.update_json(model_dir_lib.PARSE_SCORES_FILE, {"train": {
      "config": dataclasses.asdict(config), "seconds": round(train_seconds, 1),
      "step": result.step, "hparams": FLAGS.hparams, "hparams_override": FLAGS.hparams_override,
      "bracket_vocab": FLAGS.bracket_vocab, "augment": stats.get("augment"),
      "target_pieces_per_line": None if vocab is None else round(vocab["pieces_per_line"], 2),
  }})
  if result.stopped:
    print(f"stopped by {result.stopped} at step {result.step}: nothing decoded; the same command "
          "resumes training", flush=True)
    return
  decode_start = time.monotonic()
  _run_decode([model_dir], data_dir, result.averaged or FLAGS.checkpoint_path)
  decode_seconds = time.monotonic() - decode_start
  total = time.monotonic() - start
  model_dir.update_json(model_dir_lib.PARSE_SCORES_FILE, {"wall_seconds": {
      "train": round(train_seconds, 1), "decode_and_score": round(decode_seconds, 1),
      "total": round(total, 1)}})
  print(f"\nwall time: train {train_seconds / 60:.1f} min, decode + EVALB "
        f"{decode_seconds / 60:.1f} min, total {total / 60:.1f} min; scores "
        f"in {model_dir.file(model_dir_lib.PARSE_SCORES_FILE)}", flush=True)


def _check_alpha_flags():
  """Before anything is written (train: before training)."""
  if FLAGS.alphas and FLAGS["alpha"].present:
    raise errors.UsageError("--alpha and --alphas: give one")


def _run_decode(model_dirs, data_dir, checkpoint_path):
  """Decodes and scores --decode_splits (with --alphas: alpha chosen on dev first), prints
  each split's well-formed count, time and EVALB report, and merges the numbers into the
  first model dir's parse_scores.json under "decode": split -> {"evalb": ..., ...},
  "checkpoint", "step" and, with --alphas, "alpha_sweep" (alpha -> dev F1)."""
  from t2t_repro.decoding.loading import split_names  # pylint: disable=import-outside-toplevel
  parser = pipeline.load_parser(
      model_dirs, data_dir, split_names(checkpoint_path), beam_size=FLAGS.beam_size,
      alpha=FLAGS.alpha, decode_extra_length=FLAGS.decode_extra_length,
      decode_batch_tokens=FLAGS.decode_batch_tokens, constrained=FLAGS.constrained)
  config = parser.translator.config
  print(f"decoding with {parser.checkpoint} (step {parser.step}): beam "
        f"{config.beam_size}, alpha {config.alpha}, max length "
        f"input + {config.decode_extra_length}", flush=True)
  entry, done = {"checkpoint": parser.checkpoint, "step": parser.step}, {}
  if FLAGS.alphas:
    alpha, done["dev"], entry["alpha_sweep"] = pipeline.choose_alpha(
        parser.translator, data_dir, parser.output_dir, [float(a) for a in FLAGS.alphas],
        max_sentences=FLAGS.max_sentences, leaves=parser.leaves)
    for value, f1 in entry["alpha_sweep"].items():
      print(f"dev F1 with alpha {value}: {f1:.2f}", flush=True)
    print(f"alpha {alpha:g} chosen on dev", flush=True)
  for split in FLAGS.decode_splits:
    result, info = done.get(split) or pipeline.decode_split(
        parser.translator, data_dir, split, parser.output_dir,
        max_sentences=FLAGS.max_sentences, leaves=parser.leaves)
    print(f"\n=== {split}: {info['sentences']} sentences decoded in "
          f"{info['decode_seconds']:.1f} s ({info['sentences_per_second']:.2f} "
          f"sent/s); {info['well_formed']} outputs well formed, "
          f"{info['sentences'] - info['well_formed']} repaired", flush=True)
    sys.stdout.write(evalb.format_report(result))
    sys.stdout.flush()
    entry[split] = {**info, "evalb": evalb.as_dict(result)}
  parser.model_dir.update_json(model_dir_lib.PARSE_SCORES_FILE, {"decode": entry})


def run_decode():
  _require("model_dir")
  _check_alpha_flags()
  from t2t_repro.decoding.loading import split_names  # pylint: disable=import-outside-toplevel
  _run_decode(split_names(FLAGS.model_dir), _data_dir(), FLAGS.checkpoint_path)


_MODES = {
    "prepare": run_prepare,
    "evaluate": run_evaluate,
    "delinearize": run_delinearize,
    "train": run_train,
    "decode": run_decode,
}


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  for name in ("output_dir", "output", "output_json"):  # before any work
    if FLAGS[name].value:
      fileio.check_writable(FLAGS[name].value)
  _MODES[FLAGS.mode]()
