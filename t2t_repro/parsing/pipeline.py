"""The parsing pipeline (Vaswani et al. 2017 §6.3) behind tools/parse.py: train a parser,
decode with the well-formed-tree constraint, delinearize, score with EVALB.

Data preparation is `t2t_repro.parsing.prepare`, the bracket-aware vocabulary and the
decoding constraint `t2t_repro.parsing.bracket_vocab`, the decoding itself the
project's one path, `t2t_repro.decoding.translator.Translator`. Outputs of
`decode_model_dir` in a model dir: decode/{split}.pred.tgt (model outputs),
decode/{split}.pred.tree (delinearized, repaired trees) and parse_scores.json (EVALB
summaries per split, well-formed counts, decoding settings and wall times; `train_parser`
adds the training settings and wall time).
"""

import dataclasses
import json
import os
import shutil
import sys
import time

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.data import text_files
from t2t_repro import hparams as hparams_lib
from t2t_repro.model_dir import ModelDir
from t2t_repro.parsing import augment, evalb
from t2t_repro.parsing import prepare as prepare_lib
from t2t_repro.parsing import treebank
from t2t_repro.parsing import trees as trees_lib
from t2t_repro.parsing.prepare import read_data_stats
from t2t_repro.training.api import train
from t2t_repro.training.config import TrainConfig, with_args

# Padded source pieces per decoding batch (each row decodes beam_size = 21 hypotheses).
DEFAULT_BATCH_TOKENS = 1024


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
                 eval_every_steps=500, seed=1234, train_split="train", extra=()):
  """The `TrainConfig` of --mode=train.

  Args:
    model_dir: str, the trainer's model dir (also its vocab_dir).
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
    extra: more settings as the train command's flags ("--name=value"),
      applied last (`training.config.with_args`).

  Returns:
    A `training.config.TrainConfig`.

  Raises:
    errors.UsageError: `extra` names an unknown setting or a value of the wrong type.
  """
  config = TrainConfig(
      model_dir=model_dir, vocab_dir=model_dir, hparams=hparams, hparams_override=hparams_override,
      problem="parallel_text", train_minutes=train_minutes, train_steps=train_steps,
      eval_every_steps=eval_every_steps, dev_bleu_lines=0, test_bleu_lines=0, seed=seed,
      **{f"{split}_{side}": os.path.join(data_dir, f"{name}.{side}")
         for split, name in (("train", train_split), ("dev", "dev"))
         for side in ("src", "tgt")})
  try:
    return with_args(config, extra)
  except ValueError as e:
    raise errors.UsageError(f"`train_flags`: {e}") from None


def update_json(path, values):
  """Merges ``values`` into the JSON object in ``path`` (created if absent), atomically."""
  data = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  data.update(values)
  fileio.write_json(path, data)
  return data


def train_parser(ptb_dir, model_dir, data_dir, *, splits=None, leaves="word",
                 hparams="parsing_small", hparams_override="", bracket_vocab=True,
                 train_minutes=0.0, train_steps=None, eval_every_steps=500, seed=1234,
                 train_flags=(), augment_copies=0, augment_rate=0.1):
  """prepare -> bracket-aware vocabulary -> the trainer (`training.api.train`, in-process).

  Writes ``data_dir`` (``prepare``), ``{model_dir}/vocab.model``
  (``learn_bracket_vocab``, unless ``bracket_vocab`` is False or it exists), the
  trainer's files, and the ``train`` entry of ``{model_dir}/parse_scores.json``.

  Args:
    ptb_dir, splits, leaves: see ``prepare.prepare``.
    model_dir, data_dir: str folders (created).
    hparams, hparams_override, train_minutes, train_steps, eval_every_steps, seed:
      see ``train_config``; train_flags: more trainer settings as flags
      ("--save_checkpoints_secs=0").
    bracket_vocab: learn the vocabulary here (every bracket token one piece).
    augment_copies, augment_rate: SUB2 pairs per train tree and the substitution
      rate (``prepare.prepare``; seed 1); with copies > 0 the trainer reads
      train_aug.src/.tgt, while the vocabulary is still learned on the gold train
      pairs.

  Returns:
    (seconds: float, the trainer's wall time; result: its `training.config.TrainResult`).

  Raises:
    errors.UsageError, errors.DataError: a bad setting or unusable data (``train``).
    the errors of ``prepare.prepare`` and ``hparams.get_hparams``.
  """
  # The hparams as the trainer resolves them, checked before anything is written (and
  # before TensorFlow is imported).
  hp = hparams_lib.get_hparams(hparams, hparams_override, train_steps=train_steps)
  augment.check_settings(augment_copies, augment_rate)
  from t2t_repro.parsing import bracket_vocab as bracket_vocab_lib  # pylint: disable=import-outside-toplevel
  os.makedirs(model_dir, exist_ok=True)
  stats = prepare_lib.prepare(ptb_dir, data_dir, splits, leaves,
                              augment_copies=augment_copies, augment_rate=augment_rate)
  print(prepare_lib.format_stats(stats), flush=True)
  vocab_path = ModelDir(model_dir).vocab_path
  train_src = fileio.read_lines(os.path.join(data_dir, "train.src"))
  train_tgt = fileio.read_lines(os.path.join(data_dir, "train.tgt"))
  if bracket_vocab and not os.path.exists(vocab_path):
    symbols = fileio.read_lines(os.path.join(data_dir, "symbols.txt"))
    if leaves == "xx":
      symbols.append(trees_lib.PLACEHOLDER_TAG)
    bracket_vocab_lib.learn_bracket_vocab(
        (text for pair in zip(train_src, train_tgt) for text in pair), symbols, hp.vocab_size,
        vocab_path)
    print(f"learned {vocab_path}: {hp.vocab_size} pieces, {len(symbols)} "
          "symbols as single pieces", flush=True)
  config = train_config(model_dir, data_dir, hparams=hparams, hparams_override=hparams_override,
                        train_minutes=train_minutes, train_steps=train_steps,
                        eval_every_steps=eval_every_steps, seed=seed, extra=train_flags,
                        train_split=prepare_lib.AUGMENTED_SPLIT if augment_copies else "train")
  print(f"training: {config}", flush=True)
  start = time.monotonic()
  result = train(config)
  seconds = time.monotonic() - start
  per_line = None
  if os.path.exists(vocab_path):
    per_line, per_token = bracket_vocab_lib.piece_stats(vocab_path, train_tgt)
    print(f"\nvocabulary {vocab_path}: first train target as pieces:\n"
          f"  {' '.join(bracket_vocab_lib.pieces(vocab_path, train_tgt[0]))}\n"
          f"  train targets: {per_line:.1f} pieces a line, {per_token:.3f} "
          "pieces a token", flush=True)
  print(f"training: {seconds / 60:.1f} min, step {result.step}", flush=True)
  update_json(os.path.join(model_dir, "parse_scores.json"), {"train": {
      "config": dataclasses.asdict(config), "seconds": round(seconds, 1), "step": result.step,
      "hparams": hparams, "hparams_override": hparams_override,
      "bracket_vocab": bracket_vocab, "augment": stats.get("augment"),
      "target_pieces_per_line": None if per_line is None else round(per_line, 2),
  }})
  return seconds, result


def decode_split(translator, data_dir, split, output_dir, *, max_sentences=0,
                 progress=True, leaves="word"):
  """Parses one prepared split with beam search and scores it with EVALB.

  Reads ``{data_dir}/{split}.src`` (words) and ``.tree`` (gold trees);
  writes ``{output_dir}/{split}.pred.tgt`` (raw model outputs, one a line)
  and ``{split}.pred.tree`` (delinearized trees, repaired where needed, POS
  tags XX: the test file for --mode=evaluate with the gold ``.tree``).
  EVALB runs with COLLINS.prm and ``--xx_tags=gold`` semantics
  (``fill_placeholder_tags``).

  Args:
    translator: a ``decoding.translator.Translator`` (model, tokenizer, its
      ``DecodeConfig``: §6.3 beam 21, alpha 0.3, input length + 300 [pieces]; the
      ``constraint``: None for plain beam search, or a ``TreeConstraint``).
    data_dir: str, prepare's output folder.
    split: str, e.g. "test".
    output_dir: str, created if missing.
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
  tgt_path = os.path.join(output_dir, f"{split}.pred.tgt")
  tree_path = os.path.join(output_dir, f"{split}.pred.tree")
  fileio.write_lines(tgt_path, predictions)
  test, well_formed = delinearize(sources, predictions, leaves)
  treebank.write_tree_lines(tree_path, test)
  result = evalb.evaluate(gold, fill_placeholder_tags(gold, test))
  info = {
      "sentences": len(sources), "well_formed": well_formed,
      "decode_seconds": round(seconds, 1),
      "sentences_per_second": round(len(sources) / max(seconds, 1e-9), 3),
      "beam_size": config.beam_size, "alpha": config.alpha,
      "decode_extra_length": config.decode_extra_length,
      "constrained": translator.constraint is not None,
      "predictions": tgt_path, "trees": tree_path,
  }
  return result, info


def choose_alpha(translator, data_dir, output_dir, alphas, *, max_sentences=0, leaves="word"):
  """The length-penalty exponent with the best dev F1: decodes ``dev`` once per value.

  The outputs of each value go to ``{output_dir}/alpha_{value}/``, and those of the
  chosen value are also copied to ``{output_dir}/dev.pred.{tgt,tree}`` (the files
  ``decode_split`` writes). Ties go to the value listed first.

  Args:
    translator: a ``Translator``; its config's alpha is replaced by each value.
    data_dir, max_sentences, leaves: see ``decode_split``.
    output_dir: str, the parent of the per-value folders.
    alphas: list[float], the values (each >= 0).

  Returns:
    (alpha: float, (result, info) of ``decode_split`` on dev with it,
     sweep: dict "alpha" -> dev F1 (all lengths) of every value).

  Raises:
    the errors of ``decode_split`` (e.g. FileNotFoundError: no dev split).
  """
  best, sweep = None, {}
  for alpha in alphas:
    translator.config = dataclasses.replace(translator.config, alpha=alpha)
    result, info = decode_split(translator, data_dir, "dev",
                                os.path.join(output_dir, f"alpha_{alpha:g}"),
                                max_sentences=max_sentences, leaves=leaves)
    sweep[f"{alpha:g}"] = f1 = result.all.f1
    print(f"dev F1 with alpha {alpha:g}: {f1:.2f}", flush=True)
    if best is None or f1 > best[0]:
      best = (f1, alpha, (result, info))
  _, alpha, (result, info) = best
  for key, suffix in (("predictions", "tgt"), ("trees", "tree")):
    info[key] = shutil.copyfile(info[key], os.path.join(output_dir, f"dev.pred.{suffix}"))
  return alpha, (result, info), sweep


def decode_model_dir(model_dir, data_dir, splits, *, beam_size=None,
                     alpha=None, alphas=(), decode_extra_length=None, batch_tokens=None,
                     max_sentences=0, checkpoint_path=None, constrained=True):
  """Decodes and scores ``splits`` with the latest (or given) checkpoint.

  Prints, per split, the well-formed count, the decoding time and EVALB's
  report (all sentences and length <= 40); merges the numbers into
  ``{model_dir}/parse_scores.json`` under ``decode`` ->
  split -> {``evalb``: ``evalb.as_dict``, ...}, plus ``checkpoint``,
  ``step`` and, with ``alphas``, ``alpha_sweep`` (alpha -> dev F1).

  Args:
    model_dir: str, a trained model dir.
    data_dir: str, prepare's output folder.
    splits: list[str], e.g. ["dev", "test"].
    beam_size, alpha, decode_extra_length: None means the model's hparams
      (``DecodeConfig.resolve``).
    alphas: empty, or alpha values to choose from on dev (``choose_alpha``); every
      split is then scored with the chosen one (dev is not decoded twice).
    batch_tokens: padded source pieces per batch (None: DEFAULT_BATCH_TOKENS;
      each row decodes beam_size hypotheses).
    max_sentences: see ``decode_split``.
    checkpoint_path: None (latest) or a checkpoint prefix.
      Ensembles (`decoding.loading.load_models`): model_dir and/or checkpoint_path may
      be comma-separated lists; the outputs then go to the first model dir, and the
      entry's "step" is the list of the checkpoints' steps.
    constrained: decode with ``TreeConstraint`` (well-formed trees only).

  Returns:
    dict, the ``decode`` entry written.

  Raises:
    FileNotFoundError: no model / checkpoint in model_dir (see
      ``load_models``), or a split's files or stats.json are missing.
    ValueError: stats.json from an older prepare (``read_data_stats``), a
      decoding setting out of range, or models that do not form an ensemble
      (``loading.EnsembleError``).
  """
  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_models, split_names
  from t2t_repro.decoding.translator import DecodeConfig, Translator
  from t2t_repro.parsing import bracket_vocab as bracket_vocab_lib
  model_dirs = split_names(model_dir)
  model, hparams, tokenizer, paths = load_models(model_dirs, split_names(checkpoint_path))
  model_dir, checkpoint_path = model_dirs[0], ",".join(paths)
  config = DecodeConfig.resolve(hparams, beam_size=beam_size, alpha=alpha,
                                decode_extra_length=decode_extra_length,
                                batch_tokens=batch_tokens or DEFAULT_BATCH_TOKENS)
  steps = [int(path.rsplit("-", 1)[1]) for path in paths]
  step = steps[0] if len(steps) == 1 else steps
  print(f"decoding with {checkpoint_path} (step {step}): beam "
        f"{config.beam_size}, alpha {config.alpha}, max length "
        f"input + {config.decode_extra_length}", flush=True)
  entry = {"checkpoint": checkpoint_path, "step": step}
  stats = read_data_stats(data_dir)
  leaves = stats["leaves"]
  constraint = bracket_vocab_lib.tree_constraint(tokenizer, stats) if constrained else None
  translator = Translator(model, tokenizer, config, constraint)
  output_dir, done = os.path.join(model_dir, "decode"), {}
  if alphas:
    alpha, done["dev"], entry["alpha_sweep"] = choose_alpha(
        translator, data_dir, output_dir, alphas, max_sentences=max_sentences, leaves=leaves)
    translator.config = dataclasses.replace(config, alpha=alpha)
    print(f"alpha {alpha:g} chosen on dev", flush=True)
  for split in splits:
    result, info = done.get(split) or decode_split(
        translator, data_dir, split, output_dir, max_sentences=max_sentences, leaves=leaves)
    print(f"\n=== {split}: {info['sentences']} sentences decoded in "
          f"{info['decode_seconds']:.1f} s ({info['sentences_per_second']:.2f} "
          f"sent/s); {info['well_formed']} outputs well formed, "
          f"{info['sentences'] - info['well_formed']} repaired", flush=True)
    sys.stdout.write(evalb.format_report(result))
    sys.stdout.flush()
    entry[split] = {**info, "evalb": evalb.as_dict(result)}
  update_json(os.path.join(model_dir, "parse_scores.json"), {"decode": entry})
  return entry
