r"""Right-branching baseline F1 on the PTB sample's parsing split, for context next to the
parser's F1 (examples/parsing/README.md).

Reads the gold trees of each split (`treebank.split_file_ids`: train wsj_0001-0159, dev
0160-0179, test 0180-0199), cleans them as the parser's data is cleaned (`trees.clean`),
builds `trees.right_branching` over each sentence's words and gold POS tags, and scores with
the project's EVALB under COLLINS.prm, labeled (every bracket labelled S) and unlabeled.

  python studies/parsing/parse_baseline.py --ptb_dir=../shared/data/ptb_sample/combined
"""

import argparse
import dataclasses

from t2t_repro.parsing import evalb, treebank, trees


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--ptb_dir", default="../shared/data/ptb_sample/combined")
  parser.add_argument("--splits", default="dev,test")
  args = parser.parse_args()
  files = treebank.split_file_ids(treebank.treebank_file_ids(args.ptb_dir))
  unlabeled = dataclasses.replace(evalb.COLLINS, labeled=False)
  print("| split | sentences | labeled F1 (all / len <= 40) | unlabeled F1 (all / len <= 40) |")
  print("|---|---|---|---|")
  for split in args.splits.split(","):
    gold = [trees.clean(t) for t in treebank.read_treebank(args.ptb_dir, files[split])]
    test = [trees.right_branching(t) for t in gold]
    scores = [evalb.evaluate(gold, test, params) for params in (evalb.COLLINS, unlabeled)]
    cells = [f"{r.all.f1:.2f} / {r.cutoff.f1:.2f}" for r in scores]
    print(f"| {split} | {len(gold)} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
  main()
