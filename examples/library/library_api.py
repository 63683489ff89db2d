"""The library API end to end (`t2t_repro.__all__` only, no command): train a `tiny` model for
a few updates, translate text with beam search, choose beam size and alpha on dev (recorded
in the model dir, as the tune command does), score a translation's log-probability, and
export the averaged checkpoints as a SavedModel that translates raw text.

  python examples/library/library_api.py --data_dir=../shared/data --work_dir=runs/library

It reads the first 2,000 training and 100 val pairs of Multi30k (the data folder is only
read) and writes everything under --work_dir.
"""

import argparse
import os

import t2t_repro as t


def write_slice(data_dir, work_dir):
  """The first lines of Multi30k's train and val, as text files in work_dir."""
  paths = {}
  for split, name, count in (("train", "train", 2000), ("dev", "val", 100)):
    for lang in ("en", "de"):
      with open(os.path.join(data_dir, "multi30k", f"{name}.{lang}"), encoding="utf-8") as f:
        lines = [next(f) for _ in range(count)]
      paths[split, lang] = os.path.join(work_dir, f"{split}.{lang}")
      with open(paths[split, lang], "w", encoding="utf-8") as f:
        f.writelines(lines)
  return paths


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data_dir", default="../shared/data")
  parser.add_argument("--work_dir", default="runs/library")
  parser.add_argument("--train_steps", type=int, default=60)
  args = parser.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  files = write_slice(args.data_dir, args.work_dir)
  model_dir = os.path.join(args.work_dir, "model")

  # 1. Train: the settings are a TrainConfig (the train command's flags), the model an hparam set.
  print("hparams:", t.get_hparams("tiny", vocab_size=500).d_model, "wide")
  result = t.train_model(t.TrainConfig(
      model_dir=model_dir, hparams="tiny", hparams_override={"vocab_size": 500},
      problem="parallel_text", train_src=files["train", "en"], train_tgt=files["train", "de"],
      dev_src=files["dev", "en"], dev_tgt=files["dev", "de"], train_steps=args.train_steps,
      save_checkpoints_steps=20, eval_every_steps=0, dev_bleu_lines=0, average_last=3))
  print(f"trained to update {result.step}; averaged model: {result.averaged}")

  # 2. Translate text with beam search (the other settings: the model dir's own).
  translator = t.Translator.from_model_dir(model_dir, beam_size=2)
  print("translation:", translator.translate(["A dog runs in the snow."])[0])

  # 3. Choose beam size and alpha on dev (written to the model dir's decoding.json, which
  #    Translator.from_model_dir and the commands then use), and the dev sacreBLEU.
  sources = open(files["dev", "en"], encoding="utf-8").read().splitlines()[:20]
  refs = open(files["dev", "de"], encoding="utf-8").read().splitlines()[:20]
  choice = t.tune_decoding(translator, sources, refs, beam_sizes=(1, 2), alphas=(0.6,))
  tuned = t.Translator.from_model_dir(model_dir)
  print(f"chosen on dev: beam {tuned.config.beam_size}, alpha {tuned.config.alpha:g}")
  scores = t.evaluate_translations(tuned.translate(sources), refs)
  print("dev sacreBLEU:", round(scores["sacrebleu"], 2))
  assert (tuned.config.beam_size, tuned.config.alpha) == (choice["beam_size"], choice["alpha"])

  # 4. The log-probability of a given translation (teacher forcing, natural log, EOS included).
  scorer = t.Scorer.from_model_dir(model_dir)
  print("log P(ref | src):", round(scorer.score(sources[:1], refs[:1])[0], 3))

  # 5. A SavedModel of the averaged checkpoints that translates raw text.
  export_dir = t.export_model(result.averaged_dir, os.path.join(args.work_dir, "export", "1"),
                              overwrite=True)
  print("exported:", export_dir)


if __name__ == "__main__":
  main()
