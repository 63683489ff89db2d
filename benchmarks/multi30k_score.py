r"""Multi30k En-De scores of a trained model (or an ensemble), settings chosen on the dev set.

Decodes `val` (the dev split, 1,014 lines) with every beam size x alpha given, keeps the
setting with the best cased sacreBLEU on val (the best lowercased Moses-tokenized BLEU for a
model trained with `lowercase=true`, whose output is lowercase), then decodes test_2016_flickr,
test_2017_flickr and test_2017_mscoco once each with it. Every score is
`t2t_repro.evaluation.score`'s: cased sacreBLEU (13a, the primary score), chrF, and the
lowercased Moses-tokenized BLEU the Multi30k papers print. Each row also has the wall and
process CPU seconds of its decoding and the 1-minute load average.

  python benchmarks/multi30k_score.py --model_dir=runs/m30k/averaged \
      --data_dir=../shared/data --beam_sizes=4,5 --alphas=0.6,1.0 --out=runs/m30k/scores.json

--model_dir takes a comma-separated list for an ensemble (one vocabulary), as `translate`.
"""

import argparse
import json
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up lines off stderr

from t2t_repro import evaluation  # noqa: E402  pylint: disable=wrong-import-position
from t2t_repro import fileio  # noqa: E402  pylint: disable=wrong-import-position
from t2t_repro.decoding.config import DecodeConfig  # noqa: E402  pylint: disable=wrong-import-position
from t2t_repro.decoding.loading import load_models, split_names  # noqa: E402  pylint: disable=wrong-import-position
from t2t_repro.decoding.translator import Translator  # noqa: E402  pylint: disable=wrong-import-position

TEST_SETS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")


def decode_and_score(loaded, src, ref, beam_size, alpha):
  """Translates file `src`, scores against `ref`: a row dict (scores, seconds, load)."""
  config = DecodeConfig.resolve(loaded.hparams, beam_size=beam_size, alpha=alpha)
  lines = fileio.read_lines(src)
  wall, cpu = time.time(), time.process_time()
  hyps = Translator(loaded.model, loaded.tokenizer, config).translate(lines)
  wall, cpu = time.time() - wall, time.process_time() - cpu
  scores = evaluation.score(hyps, [fileio.read_lines(ref)])
  return {"beam_size": beam_size, "alpha": alpha, "sacrebleu": round(scores["sacrebleu"], 2),
          "bleu_lc_tok": round(scores["bleu_lc_tok"], 2), "chrf": round(scores["chrf"], 2),
          "lines": len(lines), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
          "load": round(os.getloadavg()[0], 2), "hyps": hyps}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("--model_dir", required=True, help="model dir(s), comma-separated")
  parser.add_argument("--data_dir", default=os.environ.get("T2T_DATA_DIR", "../shared/data"))
  parser.add_argument("--beam_sizes", default="4,5")
  parser.add_argument("--alphas", default="0.6,1.0")
  parser.add_argument("--out", help="JSON file of every row (and the test hypotheses)")
  args = parser.parse_args()
  loaded = load_models(split_names(args.model_dir))
  data = os.path.join(args.data_dir, "multi30k")

  def files(name):
    return os.path.join(data, f"{name}.en"), os.path.join(data, f"{name}.de")

  dev = [decode_and_score(loaded, *files("val"), int(b), float(a))
         for b in args.beam_sizes.split(",") for a in args.alphas.split(",")]
  metric = "bleu_lc_tok" if loaded.tokenizer.lowercase else "sacrebleu"
  best = max(dev, key=lambda row: row[metric])
  test = {name: decode_and_score(loaded, *files(name), best["beam_size"], best["alpha"])
          for name in TEST_SETS}
  print(f"model: {args.model_dir} (beam and alpha chosen on val by {metric})")
  print("| split | beam | alpha | cased sacreBLEU | lc-tok BLEU | chrF | wall s | CPU s | load |")
  print("|---|---|---|---|---|---|---|---|---|")
  for name, row in [("val", r) for r in dev] + list(test.items()):
    print(f"| {name} | {row['beam_size']} | {row['alpha']} | {row['sacrebleu']:.2f} | "
          f"{row['bleu_lc_tok']:.2f} | {row['chrf']:.2f} | {row['wall_s']} | {row['cpu_s']} | "
          f"{row['load']} |")
  if args.out:
    for row in dev:
      row.pop("hyps")
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump({"model_dir": args.model_dir, "dev": dev, "chosen": {
          "beam_size": best["beam_size"], "alpha": best["alpha"], "by": metric}, "test": test},
                f, indent=1)


if __name__ == "__main__":
  main()
