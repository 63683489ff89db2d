"""The parsing pipeline (Vaswani et al. 2017 §6.3) behind tools/parse.py: train a parser,
decode with the well-formed-tree constraint, delinearize, score with EVALB.

Data preparation is `t2t_repro.parsing.prepare`, the bracket-aware vocabulary and the
decoding constraint `t2t_repro.parsing.bracket_vocab`, the decoding itself the
project's one path, `t2t_repro.decoding.translator.Translator`, the training
`training.api.train_model` on a `TrainConfig` (`train_config`).

Each step returns its results and prints nothing; the parse command
(`t2t_repro.commands.parse`) runs the steps, prints them and records them in the model
dir's parse_scores.json. Files written into a model dir go through its `ModelDir`:
vocab.model (`learn_vocab`), decode/{split}.pred.tgt (model outputs) and
decode/{split}.pred.tree (delinearized, repaired trees) (`decode_split`).
"""

import dataclasses
import os
import tempfile
import time
from typing import Union

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.data import text_files
from t2t_repro.config import hparams as hparams_lib
from t2t_repro.model_dir import ModelDir
from t2t_repro.parsing import augment, evalb
from t2t_repro.parsing import treebank
from t2t_repro.decoding import tuning
from t2t_repro.parsing import trees as trees_lib
from t2t_repro.parsing.prepare import read_data_stats
from t2t_repro.config.train import TrainConfig

# Padded source pieces per decoding batch (each row decodes beam_size = 21 hypotheses).
DEFAULT_DECODE_BATCH_TOKENS = 1024


def delinearize_files(source_path, predictions_path, output_path, leaves="word"):
  """Turns predicted target sequences into trees (``sequence_to_tree``).

  Args:
    source_path: str, words, one sentence a line.
    predictions_path: str, target sequences, one a line, same line count.
    output_path: str, written with one tree a line (POS tags ``XX``).
    leaves: the predictions' leaf token, "word" or "xx" (for the
      well-formed count only: any non-bracket token is a leaf).

  Returns:
    dict: ``sentences`` and ``well_formed`` (predictions that needed no
    repair, ``trees.is_well_formed``).

  Raises:
    ValueError: the two inputs differ in line count.
  """
  sources = fileio.read_lines(source_path)
  predictions = fileio.read_lines(predictions_path)
  result, well_formed = delinearize(sources, predictions, leaves)
  treebank.write_tree_lines(output_path, result)
  return {"sentences": len(result), "well_formed": well_formed}


def delinearize(sources, predictions, leaves="word"):
  """``sequence_to_tree`` over lists (the in-memory ``delinearize_files``).

  Args:
    sources: list[str], space-separated words, one sentence each.
    predictions: list[str], target sequences, same length.
    leaves: "word" or "xx", see ``delinearize_files``.

  Returns:
    (trees: list[nltk.Tree] with root TOP, leaves == the words, tags XX;
     well_formed: int, predictions that needed no repair).

  Raises:
    ValueError: the two lists differ in length.
  """
  if len(sources) != len(predictions):
    raise ValueError(f"{len(sources)} source lines but {len(predictions)} "
                     "prediction lines")
  well_formed = 0
  result = []
  for words, target in zip(sources, predictions):
    tree = trees_lib.sequence_to_tree(target, words)
    well_formed += trees_lib.linearize(tree, leaves)[1].split() == target.split()
    result.append(tree)
  return result, well_formed


def fill_placeholder_tags(gold_trees, test_trees):
  """Copies gold POS tags into the ``XX`` slots of test trees.

  Only trees with as many words as their gold tree are changed; the others
  are left for EVALB to report as errors.

  Args:
    gold_trees: list[nltk.Tree].
    test_trees: list[nltk.Tree], same length.

  Returns:
    list[nltk.Tree], new test trees.
  """
  result = []
  for gold, test in zip(gold_trees, test_trees):
    tags = trees_lib.pos_tags(gold)
    if len(tags) == len(test.leaves()):
      test = trees_lib.restore_tags(test, tags,
                                    only=trees_lib.PLACEHOLDER_TAG)
    result.append(test)
  return result


def evaluate_files(gold_path, test_path, params=evalb.COLLINS,
                   xx_tags="gold"):
  """EVALB scores of two files of trees, one tree a line.

  Args:
    gold_path: str.
    test_path: str.
    params: evalb.EvalbParams.
    xx_tags: "gold" (fill XX slots with gold tags) or "keep".

  Returns:
    evalb.EvalbResult.

  Raises:
    errors.DataError: unreadable trees (file and line named), different line
      counts (text_files.LineCountError), or EVALB's abort after more than
      MAX_ERROR error sentences.
  """
  gold = treebank.read_tree_lines(gold_path)
  test = treebank.read_tree_lines(test_path)
  if len(gold) != len(test):
    raise text_files.LineCountError(f"{gold_path} has {len(gold)} lines but {test_path} has "
                                    f"{len(test)} lines; EVALB needs one tree per line in both")
  if xx_tags == "gold":
    test = fill_placeholder_tags(gold, test)
  try:
    return evalb.evaluate(gold, test, params)
  except evalb.EvalbAbort as e:
    raise errors.DataError(f"{test_path}: {e}") from None


def train_config(model_dir, data_dir, *, hparams="parsing_small",
                 hparams_override="", train_minutes=0.0, train_steps=None,
                 eval_every_steps=500, seed=1234, train_split="train", changes=None):
  """The `TrainConfig` of --mode=train.

  Args:
    model_dir: the trainer's `ModelDir` (also its vocab_dir).
    data_dir: str, prepare's output folder ({train,dev}.{src,tgt}).
    hparams, hparams_override: the hparam set and its overrides.
    train_minutes: wall-time budget [minutes] (0: none).
    train_steps: None (the hparam set's) or an int.
    eval_every_steps: dev loss every N updates (0: off). The periodic dev
      BLEU and the test BLEU are always off (meaningless for trees, and
      beam-21 decoding is slow), and so is a best checkpoint on dev BLEU.
    seed: the trainer's seed.
    train_split: the files the trainer learns from, {data_dir}/{train_split}.src/.tgt
      ("train", or prepare's "train_aug" with SUB2 pairs).
    changes: None, or a dict of more `TrainConfig` fields, applied last.

  Returns:
    A `config.train.TrainConfig`.

  Raises:
    TypeError: `changes` names a field `TrainConfig` does not have.
  """
  path = ModelDir(model_dir).path
  config = TrainConfig(
      model_dir=path, vocab_dir=path, hparams=hparams, hparams_override=hparams_override,
      problem="parallel_text", train_minutes=train_minutes, train_steps=train_steps,
      eval_every_steps=eval_every_steps, dev_bleu_lines=0, test_bleu_lines=0, seed=seed,
      dev_samples=0,  # an unconstrained decoding of trees, at beam 21: costly and not the parse
      **{f"{split}_{side}": os.path.join(data_dir, f"{name}.{side}")
         for split, name in (("train", train_split), ("dev", "dev"))
         for side in ("src", "tgt")})
  return dataclasses.replace(config, **(changes or {}))


def check_train_settings(hparams, hparams_override, train_steps, augment_copies, augment_rate):
  """The hparams as the trainer resolves them and the SUB2 settings, checked before anything
  is written (and before TensorFlow is imported).

  Returns:
    The `HParams`.

  Raises:
    ValueError: a bad hparam set, override or augmentation setting (`hparams.get_hparams`,
      `augment.check_settings`).
  """
  hp = hparams_lib.get_hparams(hparams, hparams_override, train_steps=train_steps)
  augment.check_settings(augment_copies, augment_rate)
  return hp


def learn_vocab(model_dir, data_dir, leaves, vocab_size):
  """Learns `{model_dir}/vocab.model` on prepare's gold train pairs with every bracket
  symbol of the train split (and XX for `leaves`="xx") as one piece
  (`bracket_vocab.learn_bracket_vocab`); a model dir that has one keeps it.

  Args:
    model_dir: a `ModelDir` (the file is written staged, `ModelDir.copy_file`).
    data_dir: str, prepare's output folder (train.src/.tgt, symbols.txt).
    leaves: "word" or "xx".
    vocab_size: pieces.

  Returns:
    The number of symbols kept as single pieces, or None when the vocabulary was kept.

  Raises:
    ValueError: sentencepiece cannot learn `vocab_size` pieces from the text.
  """
  from t2t_repro.parsing import bracket_vocab as bracket_vocab_lib  # pylint: disable=import-outside-toplevel
  model_dir = ModelDir(model_dir)
  if model_dir.has(model_dir_lib.VOCAB_FILE):
    return None
  train_src = fileio.read_lines(os.path.join(data_dir, "train.src"))
  train_tgt = fileio.read_lines(os.path.join(data_dir, "train.tgt"))
  symbols = fileio.read_lines(os.path.join(data_dir, "symbols.txt"))
  if leaves == "xx":
    symbols.append(trees_lib.PLACEHOLDER_TAG)
  with tempfile.TemporaryDirectory(prefix="t2t_parse_vocab_") as tmp:
    path = bracket_vocab_lib.learn_bracket_vocab(
        (text for pair in zip(train_src, train_tgt) for text in pair), symbols, vocab_size,
        os.path.join(tmp, model_dir_lib.VOCAB_FILE))
    model_dir.copy_file(path, model_dir_lib.VOCAB_FILE)
  return len(symbols)


def train_parser(config):
  """Trains the parser in this process (`training.api.train_model`).

  Returns:
    (seconds: float, the trainer's wall time; result: its `config.train.TrainResult`).

  Raises:
    errors.UsageError, errors.DataError: a bad setting or unusable data (``train``).
  """
  from t2t_repro.training.api import train_model  # pylint: disable=import-outside-toplevel
  start = time.monotonic()
  result = train_model(config)
  return time.monotonic() - start, result


def vocab_stats(model_dir, data_dir):
  """How the model dir's vocabulary pieces the train targets.

  Returns:
    None without a vocab.model; else a dict: "vocab" (its path), "first_target_pieces"
    (list[str], the first train target as pieces), "pieces_per_line",
    "pieces_per_token" (floats, over train.tgt).
  """
  from t2t_repro.parsing import bracket_vocab as bracket_vocab_lib  # pylint: disable=import-outside-toplevel
  model_dir = ModelDir(model_dir)
  if not model_dir.has(model_dir_lib.VOCAB_FILE):
    return None
  train_tgt = fileio.read_lines(os.path.join(data_dir, "train.tgt"))
  per_line, per_token = bracket_vocab_lib.piece_stats(model_dir.vocab_path, train_tgt)
  return {"vocab": model_dir.vocab_path,
          "first_target_pieces": bracket_vocab_lib.pieces(model_dir.vocab_path, train_tgt[0]),
          "pieces_per_line": per_line, "pieces_per_token": per_token}


def decode_split(translator, data_dir, split, output_dir, *, max_sentences=0,
                 progress=True, leaves="word"):
  """Parses one prepared split with beam search and scores it with EVALB.

  Reads ``{data_dir}/{split}.src`` (words) and ``.tree`` (gold trees);
  writes ``{output_dir}/{split}.pred.tgt`` (raw model outputs, one a line)
  and ``{split}.pred.tree`` (delinearized trees, repaired where needed, POS
  tags XX: the test file for --mode=evaluate with the gold ``.tree``), each staged
  (`ModelDir.write_bytes`).
  EVALB runs with COLLINS.prm and ``--xx_tags=gold`` semantics
  (``fill_placeholder_tags``).

  Args:
    translator: a ``decoding.translator.Translator`` (model, tokenizer, its
      ``DecodeConfig``: §6.3 beam 21, alpha 0.3, input length + 300 [pieces]; the
      ``constraint``: None for plain beam search, or a ``TreeConstraint``).
    data_dir: str, prepare's output folder.
    split: str, e.g. "test".
    output_dir: a `ModelDir` (the model dir's decode/), created if missing.
    max_sentences: only the first N sentences (0: all).
    progress: progress bar on stderr.
    leaves: the model's leaf token, "word" or "xx" (prepare's ``leaves``).

  Returns:
    (result: evalb.EvalbResult, info: dict with ``sentences``,
     ``well_formed`` (outputs that needed no repair), ``decode_seconds``,
     ``sentences_per_second``, the settings and output paths).

  Raises:
    ValueError: the source and gold files differ in line count.
    evalb.EvalbAbort: more than MAX_ERROR error sentences (cannot happen
      with delinearized outputs: their words are the gold words).
  """
  sources = fileio.read_lines(os.path.join(data_dir, f"{split}.src"))
  gold = treebank.read_tree_lines(os.path.join(data_dir, f"{split}.tree"))
  if len(sources) != len(gold):
    raise ValueError(f"{data_dir}/{split}: {len(sources)} source lines but "
                     f"{len(gold)} gold trees")
  if max_sentences:
    sources, gold = sources[:max_sentences], gold[:max_sentences]
  start = time.monotonic()
  predictions = translator.translate(sources, progress)
  seconds = time.monotonic() - start
  config = translator.config
  output_dir = ModelDir(output_dir)
  tgt_name = model_dir_lib.PARSE_PREDICTIONS_FILE.format(split=split)
  tree_name = model_dir_lib.PARSE_TREES_FILE.format(split=split)
  output_dir.write_bytes(tgt_name, _lines_text(predictions))
  test, well_formed = delinearize(sources, predictions, leaves)
  output_dir.write_bytes(tree_name, _lines_text(treebank.tree_to_line(tree) for tree in test))
  result = evalb.evaluate(gold, fill_placeholder_tags(gold, test))
  info = {
      "sentences": len(sources), "well_formed": well_formed,
      "decode_seconds": round(seconds, 1),
      "sentences_per_second": round(len(sources) / max(seconds, 1e-9), 3),
      "beam_size": config.beam_size, "alpha": config.alpha,
      "decode_extra_length": config.decode_extra_length,
      "constrained": translator.constraint is not None,
      "predictions": output_dir.file(tgt_name), "trees": output_dir.file(tree_name),
  }
  return result, info


def _lines_text(lines):
  """The text of a file of `lines`, each ended by "\\n" (as `fileio.write_lines`)."""
  return "".join(line + "\n" for line in lines)


def choose_alpha(translator, data_dir, output_dir, alphas, *, max_sentences=0, leaves="word"):
  """The length-penalty exponent with the best dev F1: decodes ``dev`` once per value
  (`decoding.tuning.grid_search`, as translation's `tune` does over beam sizes too).

  The outputs of each value go to ``{output_dir}/alpha_{value}/``, and those of the
  chosen value are also copied to ``{output_dir}/dev.pred.{tgt,tree}`` (the files
  ``decode_split`` writes). Ties go to the value listed first. The translator is left
  with the chosen value.

  Args:
    translator: a ``Translator``; its config's alpha is replaced by each value.
    data_dir, max_sentences, leaves: see ``decode_split``.
    output_dir: a `ModelDir`, the parent of the per-value folders.
    alphas: list[float], the values (each >= 0).

  Returns:
    (alpha: float, (result, info) of ``decode_split`` on dev with it,
     sweep: dict "alpha" (formatted "%g") -> dev F1 (all lengths) of every value, in the
     order of ``alphas``).

  Raises:
    the errors of ``decode_split`` (e.g. FileNotFoundError: no dev split).
  """
  output_dir = ModelDir(output_dir)

  def evaluate(current):
    alpha = current.config.alpha
    result, info = decode_split(
        current, data_dir, "dev",
        output_dir.subdir(model_dir_lib.PARSE_ALPHA_DIR.format(alpha=alpha)),
        max_sentences=max_sentences, leaves=leaves)
    return result.all.f1, (result, info)

  beam_size = translator.config.beam_size
  best, (result, info), rows = tuning.grid_search(
      translator, [(beam_size, alpha) for alpha in alphas], evaluate)
  alpha = best["alpha"]
  sweep = {f"{row['alpha']:g}": row["value"] for row in rows}
  for key, name in (("predictions", model_dir_lib.PARSE_PREDICTIONS_FILE),
                    ("trees", model_dir_lib.PARSE_TREES_FILE)):
    name = name.format(split="dev")
    output_dir.copy_file(info[key], name)
    info[key] = output_dir.file(name)
  return alpha, (result, info), sweep


@dataclasses.dataclass
class Parser:
  """A loaded parser (`load_parser`).

  Attributes:
    translator: the `Translator` (model or ensemble, tokenizer, `DecodeConfig`, constraint).
    leaves: the leaf token of the targets, "word" or "xx" (prepare's stats.json).
    model_dir: the first model dir (`ModelDir`); the outputs go to its decode/
      (`output_dir`) and its parse_scores.json.
    checkpoint: the checkpoint prefix, or the comma-separated prefixes of an ensemble.
    step: the checkpoint's step (int), or the list of steps of an ensemble.
  """
  translator: object
  leaves: str
  model_dir: ModelDir
  checkpoint: str
  step: Union[int, list]

  @property
  def output_dir(self):
    """`{model_dir}/decode/`, where `decode_split` and `choose_alpha` write."""
    return self.model_dir.subdir(model_dir_lib.PARSE_DECODE_DIR)


def load_parser(model_dirs, data_dir, checkpoint_paths=(), *, beam_size=None, alpha=None,
                decode_extra_length=None, decode_batch_tokens=None, constrained=True):
  """Loads a trained parser (or an ensemble of several) for ``decode_split``.

  Args:
    model_dirs: list of `ModelDir`s (several: one ensemble, `decoding.loading.load_models`).
    data_dir: str, prepare's output folder (its stats.json gives the constraint's bounds).
    checkpoint_paths: empty (the latest of each) or checkpoint prefixes.
    beam_size, alpha, decode_extra_length: None means the model's hparams
      (``DecodeConfig.resolve``).
    decode_batch_tokens: padded source pieces per batch (None: DEFAULT_DECODE_BATCH_TOKENS;
      each row decodes beam_size hypotheses).
    constrained: decode with ``TreeConstraint`` (well-formed trees only).

  Returns:
    A `Parser`.

  Raises:
    FileNotFoundError: no model / checkpoint in a model dir (see ``load_models``), or
      stats.json is missing.
    ValueError: stats.json from an older prepare (``read_data_stats``), a decoding setting
      out of range, or models that do not form an ensemble (``loading.EnsembleError``).
  """
  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_models
  from t2t_repro.decoding.translator import DecodeConfig, Translator
  from t2t_repro.parsing import bracket_vocab as bracket_vocab_lib
  model_dirs = [ModelDir(m) for m in model_dirs]
  model, hparams, tokenizer, paths = load_models([m.path for m in model_dirs],
                                                 list(checkpoint_paths))
  config = DecodeConfig.resolve(hparams, beam_size=beam_size, alpha=alpha,
                                decode_extra_length=decode_extra_length,
                                decode_batch_tokens=(decode_batch_tokens
                                                     or DEFAULT_DECODE_BATCH_TOKENS))
  steps = [int(path.rsplit("-", 1)[1]) for path in paths]
  stats = read_data_stats(data_dir)
  constraint = bracket_vocab_lib.tree_constraint(tokenizer, stats) if constrained else None
  return Parser(translator=Translator(model, tokenizer, config, constraint),
                leaves=stats["leaves"], model_dir=model_dirs[0], checkpoint=",".join(paths),
                step=steps[0] if len(steps) == 1 else steps)
