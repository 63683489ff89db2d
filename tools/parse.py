r"""English constituency parsing data and scoring (Vaswani et al. 2017 §6.3).

Three modes:

  # (a) Penn Treebank sample -> parallel text for the `parallel_text` problem
  python tools/parse.py --mode=prepare \
      --ptb_dir=/work/shared/data/ptb_sample/combined --output_dir=/tmp/ptb

  writes, for each split (train wsj_0001-0159, dev 0160-0179, test
  0180-0199): {split}.src (words, one sentence a line), {split}.tgt
  (linearized trees, Vinyals et al. 2015), {split}.tree (cleaned gold trees,
  one a line, POS tags kept: the gold file for --mode=evaluate); plus
  symbols.txt (bracket tokens of the train split, one a line: sentencepiece
  user_defined_symbols) and stats.json (the statistics printed).

  # (c) model outputs -> trees
  python tools/parse.py --mode=delinearize --source=/tmp/ptb/test.src \
      --predictions=pred.tgt --output=trees.txt

  # (b) EVALB scores of bracketed trees (one a line)
  python tools/parse.py --mode=evaluate --gold=/tmp/ptb/test.tree \
      --test=trees.txt [--prm=.../evalb/COLLINS.prm]

Training and decoding are not part of this tool yet. The §6.3 pipeline is:
prepare -> train on {train,dev}.{src,tgt} with the project's trainer ->
decode test.src (beam 21, alpha 0.3) into pred.tgt -> delinearize ->
evaluate. The decode step only has to produce one target line per source
line; ``delinearize_files`` and ``evaluate_files`` below are the functions
to call after it.
"""

import json
import os
import sys

from absl import app
from absl import flags

from t2t_repro.parsing import evalb
from t2t_repro.parsing import trees as trees_lib

FLAGS = flags.FLAGS

flags.DEFINE_enum("mode", None, ["prepare", "evaluate", "delinearize"],
                  "What to do.")
flags.DEFINE_string("ptb_dir", None,
                    "prepare: folder with the wsj_NNNN.mrg files.")
flags.DEFINE_string("output_dir", None, "prepare: folder for the outputs.")
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


# ---------------------------------------------------------------- prepare


def _split_stats(cleaned, file_ids):
  """Statistics of one split: counts, lengths, symbols."""
  src_lengths, tgt_lengths, symbols = [], [], set()
  for tree in cleaned:
    source, target = trees_lib.linearize(tree)
    src_lengths.append(len(source.split()))
    tokens = target.split()
    tgt_lengths.append(len(tokens))
    symbols.update(t for t in tokens if t != trees_lib.PLACEHOLDER_TAG)
  n = len(cleaned)
  return {
      "files": len(file_ids),
      "sentences": n,
      "source_tokens": sum(src_lengths),
      "target_tokens": sum(tgt_lengths),
      "avg_source_len": sum(src_lengths) / n if n else 0.0,
      "avg_target_len": sum(tgt_lengths) / n if n else 0.0,
      "max_source_len": max(src_lengths, default=0),
      "max_target_len": max(tgt_lengths, default=0),
      "sentences_len_le_40": sum(1 for x in src_lengths if x <= 40),
      "distinct_target_symbols": len(symbols),
  }, symbols


def prepare(ptb_dir, output_dir, splits=None):
  """Writes {split}.src/.tgt/.tree, symbols.txt and stats.json.

  Args:
    ptb_dir: str, folder with wsj_NNNN.mrg files.
    output_dir: str, created if missing.
    splits: dict name -> (first, last) file numbers; default
      ``trees.PTB_SAMPLE_SPLITS``.

  Returns:
    dict, the statistics (also written to stats.json).

  Raises:
    FileNotFoundError: ptb_dir does not exist.
    ValueError: a split gets no file.
  """
  os.makedirs(output_dir, exist_ok=True)
  by_split = trees_lib.split_file_ids(trees_lib.treebank_file_ids(ptb_dir),
                                      splits)
  stats = {"splits": {}}
  all_symbols = {}
  for name, file_ids in by_split.items():
    if not file_ids:
      raise ValueError(f"split {name!r} has no file in {ptb_dir}")
    cleaned = [trees_lib.clean(t)
               for t in trees_lib.read_treebank(ptb_dir, file_ids)]
    with open(os.path.join(output_dir, name + ".src"), "w",
              encoding="utf-8") as src, open(
                  os.path.join(output_dir, name + ".tgt"), "w",
                  encoding="utf-8") as tgt:
      for tree in cleaned:
        source, target = trees_lib.linearize(tree)
        src.write(source + "\n")
        tgt.write(target + "\n")
    trees_lib.write_tree_lines(os.path.join(output_dir, name + ".tree"),
                               cleaned)
    stats["splits"][name], all_symbols[name] = _split_stats(cleaned, file_ids)
    stats["splits"][name]["first_file"] = file_ids[0]
    stats["splits"][name]["last_file"] = file_ids[-1]
  train_symbols = all_symbols.get("train", set())
  union = set().union(*all_symbols.values())
  stats["distinct_target_symbols_all"] = len(union)
  stats["distinct_target_symbols_train"] = len(train_symbols)
  stats["symbols_not_in_train"] = sorted(union - train_symbols)
  stats["phrase_labels_all"] = len({s[1:] for s in union})
  with open(os.path.join(output_dir, "symbols.txt"), "w",
            encoding="utf-8") as f:
    f.writelines(s + "\n" for s in sorted(train_symbols))
  with open(os.path.join(output_dir, "stats.json"), "w",
            encoding="utf-8") as f:
    json.dump(stats, f, indent=2)
  return stats


def format_stats(stats):
  """Human-readable table of ``prepare``'s statistics."""
  lines = ["split  files  sentences  avg_src  avg_tgt  max_src  max_tgt  "
           "len<=40  symbols"]
  for name, s in stats["splits"].items():
    lines.append(
        f"{name:<6} {s['files']:5d}  {s['sentences']:9d}  "
        f"{s['avg_source_len']:7.2f}  {s['avg_target_len']:7.2f}  "
        f"{s['max_source_len']:7d}  {s['max_target_len']:7d}  "
        f"{s['sentences_len_le_40']:7d}  {s['distinct_target_symbols']:7d}")
  lines.append(
      f"distinct target symbols (bracket tokens, XX not counted): "
      f"{stats['distinct_target_symbols_all']} in all splits, "
      f"{stats['distinct_target_symbols_train']} in train "
      f"({stats['phrase_labels_all']} phrase labels); not in train: "
      f"{' '.join(stats['symbols_not_in_train']) or '-'}")
  return "\n".join(lines)


# ---------------------------------------------------------------- delinearize


def _read_lines(path):
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def delinearize_files(source_path, predictions_path, output_path):
  """Turns predicted target sequences into trees (``sequence_to_tree``).

  Args:
    source_path: str, words, one sentence a line.
    predictions_path: str, target sequences, one a line, same line count.
    output_path: str, written with one tree a line (POS tags ``XX``).

  Returns:
    dict: ``sentences`` and ``well_formed`` (predictions that needed no
    repair, ``trees.is_well_formed``).

  Raises:
    ValueError: the two inputs differ in line count.
  """
  sources = _read_lines(source_path)
  predictions = _read_lines(predictions_path)
  if len(sources) != len(predictions):
    raise ValueError(f"{len(sources)} source lines but {len(predictions)} "
                     "prediction lines")
  well_formed = 0
  result = []
  for words, target in zip(sources, predictions):
    tree = trees_lib.sequence_to_tree(target, words)
    well_formed += trees_lib.linearize(tree)[1].split() == target.split()
    result.append(tree)
  trees_lib.write_tree_lines(output_path, result)
  return {"sentences": len(result), "well_formed": well_formed}


# ---------------------------------------------------------------- evaluate


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
    ValueError: different line counts or unreadable trees.
    evalb.EvalbAbort: more than MAX_ERROR error sentences.
  """
  gold = trees_lib.read_tree_lines(gold_path)
  test = trees_lib.read_tree_lines(test_path)
  if len(gold) != len(test):
    raise ValueError(f"{len(gold)} gold lines but {len(test)} test lines")
  if xx_tags == "gold":
    test = fill_placeholder_tags(gold, test)
  return evalb.evaluate(gold, test, params)


# ---------------------------------------------------------------- main


def _require(*names):
  missing = [n for n in names if not getattr(FLAGS, n)]
  if missing:
    raise app.UsageError(f"--mode={FLAGS.mode} needs " +
                         ", ".join("--" + n for n in missing))


def run_prepare():
  _require("ptb_dir", "output_dir")
  stats = prepare(FLAGS.ptb_dir, FLAGS.output_dir)
  print(format_stats(stats))
  print(f"wrote {FLAGS.output_dir}/{{train,dev,test}}.{{src,tgt,tree}}, "
        "symbols.txt, stats.json")


def run_delinearize():
  _require("source", "predictions", "output")
  counts = delinearize_files(FLAGS.source, FLAGS.predictions, FLAGS.output)
  print(f"{counts['sentences']} trees written to {FLAGS.output}; "
        f"{counts['well_formed']} predictions were well-formed, "
        f"{counts['sentences'] - counts['well_formed']} repaired")


def run_evaluate():
  _require("gold", "test")
  params = evalb.load_prm(FLAGS.prm) if FLAGS.prm else evalb.COLLINS
  try:
    result = evaluate_files(FLAGS.gold, FLAGS.test, params, FLAGS.xx_tags)
  except evalb.EvalbAbort as e:
    hint = (" (test trees with XX tags keep their punctuation: try "
            "--xx_tags=gold)" if FLAGS.xx_tags == "keep" else "")
    sys.exit(f"EVALB stopped: {e}{hint}")
  sys.stdout.write(evalb.format_report(result,
                                       per_sentence=FLAGS.per_sentence))
  if FLAGS.output_json:
    with open(FLAGS.output_json, "w", encoding="utf-8") as f:
      json.dump(evalb.as_dict(result), f, indent=2)


_MODES = {
    "prepare": run_prepare,
    "evaluate": run_evaluate,
    "delinearize": run_delinearize,
}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  _MODES[FLAGS.mode]()


if __name__ == "__main__":
  flags.mark_flag_as_required("mode")
  app.run(main)
