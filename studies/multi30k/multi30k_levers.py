"""Levers of the Multi30k recipe measured at one short, fixed update budget, on val only.

    python studies/multi30k/multi30k_levers.py --levers=all --train_steps=3000
    python studies/multi30k/multi30k_levers.py --report_only   # rewrite docs/RESULTS.md's table

Each lever is the recipe (--hparams, default `multi30k_cpu_hour`) with one change (an
hparams override, a training flag, or a model read at the end: the average of the last 5
checkpoints or the EMA weights). Every run trains --train_steps updates of the recipe's 2,048
target tokens on Multi30k's 29,000 pairs, seed fixed, then is scored on `val` (1,014 lines):
dev NLL per target piece without label smoothing (`t2t_repro.validate`) and BLEU with beam 4,
alpha 1.0 (the recipe's decoding), cased sacreBLEU and lowercased Moses-tokenized, for the last
checkpoint, the average of the last 5 and the EMA weights (decay 0.999). No test set is
decoded here: the test is scored once per final model.

Each finished lever is appended to --results (committed), a rerun skips the levers already
there with the same settings, and the table between the markers of --doc is rewritten from it.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # runlib

import runlib  # pylint: disable=wrong-import-position
from runlib import UsageError  # pylint: disable=wrong-import-position

# name: (hparams overrides, extra train flags, what it tests)
LEVERS = {
    "reference": ({}, [], "the recipe as registered"),
    "cooldown": ({"cooldown_steps": "0.3"}, [],
                 "linear cooldown to 0 over the last 30 % of the updates"),
    "wsd": ({"lr_schedule": "constant", "cooldown_steps": "0.3"}, [],
            "warmup-stable-decay: the peak rate held after the warmup, then the same cooldown "
            "(Hägele et al. 2024)"),
    "relative": ({"position_encoding": "relative", "max_relative_position": 16}, [],
                 "relative positions (Shaw et al. 2018) instead of sinusoids"),
    "dropout0.3": ({"dropout": 0.3}, [], "more dropout (the recipe overfits after 8,000 updates)"),
    "ls0.2": ({"label_smoothing": 0.2}, [], "more label smoothing"),
    "layers6": ({"num_layers": 6}, [], "6+6 layers instead of 3+3 (2x the time per update)"),
    "vocab8000": ({"vocab_size": 8000}, [], "an 8,000-piece BPE instead of 6,000"),
    "bpe_dropout0.1": ({"subword_alpha": 0.1}, [],
                       "BPE-dropout 0.1 on the training pairs (Provilkov et al. 2020)"),
    "word_dropout0.1": ({"word_dropout": 0.1}, [],
                        "word dropout 0.1 on source and decoder-input tokens (Sennrich & Zhang "
                        "2019)"),
    "rdrop5": ({"rdrop_alpha": 5}, [],
               "R-Drop, alpha 5 (Liang et al. 2021; 2x the computation per update)"),
}
# The models read from each run: the last checkpoint, and the two the trainer writes at the end.
VARIANTS = ("last", "averaged", "ema")
BEGIN = "<!-- multi30k_levers:begin (written by studies/multi30k/multi30k_levers.py) -->"
END = "<!-- multi30k_levers:end -->"


def settings(args):
  """What every lever of one table shares (a lever is skipped on rerun only when these match)."""
  return {"hparams": args.hparams, "train_steps": args.train_steps, "seed": args.seed,
          "mixed_precision": args.mixed_precision, "beam_size": 4, "alpha": 1.0,
          "problem": "translate_ende_multi30k"}


def overrides(name, args):
  """The lever's hparams overrides as one --hparams_override value (fractions of the budget,
  e.g. cooldown_steps 0.3, become updates)."""
  values = dict(LEVERS[name][0])
  if "cooldown_steps" in values:
    values["cooldown_steps"] = int(float(values["cooldown_steps"]) * args.train_steps)
  return ",".join(f"{k}={v}" for k, v in values.items())


def commands(name, args):
  """(model_dir, train argv, [(validate argv, translate argv) per variant]) of one lever."""
  model_dir = os.path.join(args.work_dir, name)
  train = runlib.python(
      "-m", "t2t_repro.train", f"--hparams={args.hparams}",
      f"--hparams_override={overrides(name, args)}", "--problem=translate_ende_multi30k",
      f"--data_dir={args.data_dir}", f"--model_dir={model_dir}",
      f"--vocab_dir={os.path.join(args.work_dir, 'vocab')}", f"--train_steps={args.train_steps}", f"--save_checkpoints_steps={args.train_steps // 10}",
      "--save_checkpoints_secs=0", "--keep_checkpoint_max=5", "--average_last=5",
      "--ema_decay=0.999", f"--eval_every_steps={args.train_steps // 10}", "--dev_bleu_lines=0",
      "--test_bleu_lines=0", "--best_metric=none", f"--seed={args.seed}",
      f"--mixed_precision={args.mixed_precision}", "--log_every_steps=100",
      *LEVERS[name][1])
  src = os.path.join(args.data_dir, "multi30k", "val.en")
  scoring = [(runlib.python("-m", "t2t_repro.validate", f"--model_dir={_variant_dir(model_dir, v)}",
                            f"--output_json={os.path.join(model_dir, f'validate_{v}.json')}"),
              runlib.python("-m", "t2t_repro.translate", f"--model_dir={_variant_dir(model_dir, v)}",
                            f"--input_file={src}",
                            f"--output_file={os.path.join(model_dir, f'val_{v}.hyp.de')}",
                            "--beam_size=4", "--alpha=1.0"))
             for v in VARIANTS]
  return model_dir, train, scoring


def _variant_dir(model_dir, variant):
  return model_dir if variant == "last" else os.path.join(model_dir, variant)


def run_lever(name, args):
  """Trains and scores one lever; returns its result object."""
  from t2t_repro import evaluation  # pylint: disable=import-outside-toplevel
  model_dir, train, scoring = commands(name, args)
  os.makedirs(args.work_dir, exist_ok=True)
  log = model_dir + ".log"
  load_before = os.getloadavg()[0]
  wall, cpu, first_step = runlib.train(train, log, model_dir, args.train_steps)
  load_after = os.getloadavg()[0]
  scores = {}
  ref = os.path.join(args.data_dir, "multi30k", "val.de")
  for variant, (validate, translate) in zip(VARIANTS, scoring):
    runlib.run(validate, log)
    runlib.run(translate, log)
    with open(os.path.join(model_dir, f"validate_{variant}.json"), encoding="utf-8") as f:
      nll = json.load(f)["nll"]
    bleu = evaluation.evaluate_files(os.path.join(model_dir, f"val_{variant}.hyp.de"), [ref])
    scores[variant] = {"dev_nll": round(nll, 4), "val_sacrebleu": round(bleu["sacrebleu"], 2),
                       "val_bleu_lc_tok": round(bleu["bleu_lc_tok"], 2)}
  return {"lever": name, "what": LEVERS[name][2], "settings": settings(args),
          "hparams_override": overrides(name, args), "scores": scores,
          "train_wall_s": round(wall, 1), "train_cpu_s": round(cpu, 1),
          "train_steps": args.train_steps, "train_first_step": first_step,
          "load_avg": [round(load_before, 2), round(load_after, 2)], "cpu": runlib.cpu_name(),
          "commands": [runlib.display(train)] + [runlib.display(c) for pair in scoring
                                                 for c in pair],
          "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def table(results):
  """The markdown table of `results` (one settings)."""
  lines = ["| lever | what | updates | dev NLL last / avg5 / EMA | val cased sacreBLEU last / "
           "avg5 / EMA | val lc-tok BLEU last / avg5 / EMA | train wall / CPU min (load) |",
           "|" + "---|" * 7]
  for r in results:
    s = r["scores"]
    cells = [" / ".join(f"{s[v][key]:.{digits}f}" for v in VARIANTS)
             for key, digits in (("dev_nll", 3), ("val_sacrebleu", 2), ("val_bleu_lc_tok", 2))]
    lines.append(f"| {r['lever']} | {r['what']} | {r['settings']['train_steps']} | "
                 f"{' | '.join(cells)} | {runlib.train_time_cell([r])} "
                 f"({r['load_avg'][0]}-{r['load_avg'][1]}) |")
  return "\n".join(lines)


def parse_args(argv):
  parser = runlib.lever_parser(__doc__, LEVERS, 3000, 1, os.path.join("runs", "levers"),
                               os.path.join("studies", "multi30k", "multi30k_levers.jsonl"))
  parser.add_argument("--hparams", default="multi30k_cpu_hour", help="The recipe varied.")
  parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data"))
  args = parser.parse_args(argv)
  names = runlib.lever_names(args.levers, LEVERS)
  if args.train_steps < 10:
    raise UsageError(f"--train_steps must be >= 10, got {args.train_steps}")
  if not args.report_only and not os.path.isdir(os.path.join(args.data_dir, "multi30k")):
    raise UsageError(f"--data_dir={args.data_dir}: no multi30k folder in it")
  args.names = names
  return args


def summary(result):
  """One line of a finished lever."""
  return "val cased BLEU last/avg5/EMA " + " / ".join(
      f"{result['scores'][v]['val_sacrebleu']:.2f}" for v in VARIANTS)


def main(argv):
  args = parse_args(argv)
  runlib.run_levers(args, settings(args), run_lever, summary, (BEGIN, END, table))


if __name__ == "__main__":
  runlib.cli("multi30k_levers", main)
