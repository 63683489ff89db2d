"""Penn Treebank -> parallel text for parsing (Vaswani et al. 2017 §6.3), with statistics.

`prepare` writes, for each split (default: train wsj_0001-0159, dev 0160-0179, test
0180-0199): {split}.src (words, one sentence a line), {split}.tgt (linearized trees,
Vinyals et al. 2015, leaves = the words or XX), {split}.tree (cleaned gold trees, one
a line, POS tags kept); plus symbols.txt (the train split's bracket tokens,
`trees.target_symbols`) and stats.json (counts and lengths, the leaf kind, and the
train targets' deepest nesting and longest run of opening brackets, which bound the
decoding constraint; read back by `read_data_stats`). With ``augment_copies`` > 0
it also writes train_aug.src/.tgt: the train pairs followed by that many SUB2 pairs
per train tree (`augment`, Shi et al. 2021), the trainer's input for the augmented
recipe; train.src/.tgt/.tree stay the gold data.
"""

import json
import os

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.parsing import augment
from t2t_repro.parsing import treebank
from t2t_repro.parsing import trees as trees_lib


def bracket_shape(tokens):
  """(deepest nesting, longest run of opening brackets) of one target."""
  depth = deepest = run = longest = 0
  for token in tokens:
    bracket = trees_lib.is_bracket(token)
    opens, closes = bracket and token[0] == "(", bracket and token[0] == ")"
    depth += opens - closes
    run = run + 1 if opens else 0
    deepest, longest = max(deepest, depth), max(longest, run)
  return deepest, longest


def _split_stats(cleaned, file_ids):
  """Statistics of one split: counts, lengths, symbols (bracket tokens,
  `trees.target_symbols`), deepest nesting and longest run of opening brackets."""
  src_lengths, tgt_lengths = [], []
  max_depth = max_open_run = 0
  for tree in cleaned:
    source, target = trees_lib.linearize(tree)
    src_lengths.append(len(source.split()))
    tokens = target.split()
    tgt_lengths.append(len(tokens))
    depth, run = bracket_shape(tokens)
    max_depth, max_open_run = max(max_depth, depth), max(max_open_run, run)
  n = len(cleaned)
  symbols = set(trees_lib.target_symbols(cleaned))
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
      "max_depth": max_depth,
      "max_open_run": max_open_run,
  }, symbols


AUGMENTED_SPLIT = "train_aug"


def _write_augmented(output_dir, train_trees, pairs, leaves, copies, rate, seed):
  """Writes train_aug.src/.tgt (gold pairs, then the SUB2 pairs); returns its stats.

  The pairs are held as text until written: copies x the train split (9 copies of
  the sample: 33,960 pairs, 14 MB; of the full WSJ, 12 times that).
  """
  paths = [os.path.join(output_dir, f"{AUGMENTED_SPLIT}.{side}") for side in ("src", "tgt")]
  if not copies:
    for path in paths:
      if os.path.exists(path):
        os.remove(path)
    return None
  new = [trees_lib.linearize(tree, leaves)
         for tree in augment.augment(train_trees, copies, rate, seed)]
  for path, side in zip(paths, (0, 1)):
    fileio.write_lines(path, [pair[side] for pair in pairs + new])
  return {"copies": copies, "rate": rate, "seed": seed, "gold_pairs": len(pairs),
          "new_pairs": len(new),
          "changed_pairs": sum(new[k] != pairs[k // copies] for k in range(len(new))),
          "avg_source_len": sum(len(s.split()) for s, _ in new) / max(1, len(new))}


def prepare(ptb_dir, output_dir, splits=None, leaves="word", *, augment_copies=0,
            augment_rate=0.1, augment_seed=1):
  """Writes {split}.src/.tgt/.tree, symbols.txt and stats.json.

  Args:
    ptb_dir: str, folder with wsj_NNNN.mrg files.
    output_dir: str, created if missing.
    splits: dict name -> (first, last) file numbers; default
      ``treebank.PTB_SAMPLE_SPLITS``.
    leaves: the targets' leaf token, "word" or "xx" (``trees.linearize``);
      recorded in stats.json for decoding.
    augment_copies, augment_rate, augment_seed: SUB2 pairs per train tree (0:
      none, and a stale train_aug.src/.tgt is removed), the substitution rate
      and seed (``augment.augment``); their counts go to stats.json "augment".

  Returns:
    dict, the statistics (also written to stats.json).

  Raises:
    FileNotFoundError: ptb_dir does not exist.
    errors.UsageError (a ValueError): a split gets no file.
    ValueError: augment_copies > 0 without a
      "train" split, or augment_copies / augment_rate out of range.
  """
  augment.check_settings(augment_copies, augment_rate)
  if augment_copies and "train" not in (splits or treebank.PTB_SAMPLE_SPLITS):
    raise ValueError("augment_copies needs a 'train' split")
  by_split = treebank.split_file_ids(treebank.treebank_file_ids(ptb_dir),
                                      splits)
  for name, file_ids in by_split.items():  # before output_dir is made: a refusal leaves none
    if not file_ids:
      raise errors.UsageError(f"`splits`: split {name!r} has no file in {ptb_dir}; give "
                              "each split a range of the files there")
  os.makedirs(output_dir, exist_ok=True)
  stats = {"leaves": leaves, "splits": {}}
  all_symbols = {}
  for name, file_ids in by_split.items():
    cleaned = [trees_lib.clean(t)
               for t in treebank.read_treebank(ptb_dir, file_ids)]
    pairs = [trees_lib.linearize(tree, leaves) for tree in cleaned]
    fileio.write_lines(os.path.join(output_dir, name + ".src"), [s for s, _ in pairs])
    fileio.write_lines(os.path.join(output_dir, name + ".tgt"), [t for _, t in pairs])
    treebank.write_tree_lines(os.path.join(output_dir, name + ".tree"),
                               cleaned)
    stats["splits"][name], all_symbols[name] = _split_stats(cleaned, file_ids)
    stats["splits"][name]["first_file"] = file_ids[0]
    stats["splits"][name]["last_file"] = file_ids[-1]
    if name == "train":
      stats["augment"] = _write_augmented(output_dir, cleaned, pairs, leaves,
                                          augment_copies, augment_rate, augment_seed)
  train_symbols = all_symbols.get("train", set())
  union = set().union(*all_symbols.values())
  stats["distinct_target_symbols_all"] = len(union)
  stats["distinct_target_symbols_train"] = len(train_symbols)
  stats["symbols_not_in_train"] = sorted(union - train_symbols)
  stats["phrase_labels_all"] = len({s[1:] for s in union})
  fileio.write_lines(os.path.join(output_dir, "symbols.txt"), sorted(train_symbols))
  fileio.write_json(os.path.join(output_dir, "stats.json"), stats)
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


def parse_splits(items):
  """``["train=1-159", ...]`` -> ``{"train": (1, 159), ...}`` (None if empty).

  Raises:
    ValueError: an item is not NAME=FIRST-LAST with FIRST <= LAST (names --splits).
  """
  if not items:
    return None
  splits = {}
  for item in items:
    try:
      name, span = item.split("=")
      first, last = (int(x) for x in span.split("-"))
    except ValueError:
      raise ValueError(f"`splits`: {item!r} is not NAME=FIRST-LAST") from None
    if first > last:
      raise ValueError(f"`splits`: {item!r}: FIRST > LAST")
    splits[name] = (first, last)
  return splits


def read_data_stats(data_dir):
  """prepare's ``{data_dir}/stats.json``, checked for what decoding needs.

  Returns:
    dict with ``leaves`` and ``splits`` -> ``train`` -> ``max_depth`` /
    ``max_open_run``.

  Raises:
    FileNotFoundError: no stats.json (run --mode=prepare or --mode=train).
    ValueError: stats.json lacks those keys (written by an older prepare; run
      prepare again into that folder).
  """
  path = os.path.join(data_dir, "stats.json")
  if not os.path.exists(path):
    raise errors.MissingDataError(f"{path}: file does not exist (run tools/parse.py "
                                  "`mode`=prepare or `mode`=train)")
  with open(path, encoding="utf-8") as f:
    stats = json.load(f)
  train = stats.get("splits", {}).get("train", {})
  missing = [k for k in ("leaves",) if k not in stats] + [
      "splits.train." + k for k in ("max_depth", "max_open_run") if k not in train]
  if missing:
    raise ValueError(f"{path} lacks {', '.join(missing)}: written by an older "
                     "prepare; run tools/parse.py with `mode`=prepare into that folder again")
  return stats
