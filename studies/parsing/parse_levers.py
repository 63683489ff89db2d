"""Levers of the parsing recipe measured at one fixed update budget, on dev only.

    python studies/parsing/parse_levers.py --levers=all --train_steps=2600
    python studies/parsing/parse_levers.py --recipe=sinusoid_layers3_copies9 --report_only

Each lever is a reference recipe with one change: an hparams override or a flag of
`python -m t2t_repro.parse --mode=train`, at a quarter of the recipe's budget (about 40 minutes a
lever on one core). `--recipe` names the reference, and each has its own table: `registered` is
`parsing_small` as registered (4 layers, relative positions) with 19 SUB2 trees per train tree,
`layers3` the same with 3 layers, `layers3_copies9` with 3 layers and 9 SUB2 trees, and
`sinusoid_layers3_copies9` that with sinusoids instead of relative positions (the table where
relative positions won). All average the last 5 checkpoints and train in bfloat16. The cooldown
is scaled with the budget (the recipe's 2,000 of 10,400 updates: 500 of 2,600). Every run is
seed-fixed and scored on the dev split (wsj 0160-0179, 273 trees) only: labeled F1 of EVALB under
COLLINS.prm, all lengths, with alpha chosen among 0, 0.3 and 0.6, and the dev NLL per target piece
of the trainer's last dev evaluation. The test split is decoded once per final model, not here.

Each finished lever is appended to --results (committed), a rerun skips the levers already
there with the same settings, and the table between the markers of --doc is rewritten from it.
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # runlib

import runlib  # pylint: disable=wrong-import-position
from runlib import UsageError  # pylint: disable=wrong-import-position

RECIPE_STEPS, RECIPE_COOLDOWN = 10400, 2000  # parsing_small's budget and cooldown
# name: (hparams overrides that make `parsing_small` that recipe, its SUB2 trees per train tree,
#        the levers it already holds)
RECIPES = {"sinusoid_layers3_copies9": ({"position_encoding": "sinusoid", "num_layers": 3}, 9, []),
           "layers3_copies9": ({"num_layers": 3}, 9, ["relative"]),
           "layers3": ({"num_layers": 3}, 19, ["relative", "augment19"]),
           "registered": ({}, 19, ["relative", "augment19", "layers4"])}
# name: (hparams overrides, extra tools/parse.py flags, what it tests)
LEVERS = {
    "reference": ({}, [], "the recipe at this budget"),
    "augment19": ({}, ["--augment_copies=19"], "19 SUB2 trees per train tree instead of 9"),
    "relative": ({"position_encoding": "relative", "max_relative_position": 16}, [],
                 "relative positions (Shaw et al. 2018) instead of sinusoids"),
    "layers4": ({"num_layers": 4}, [], "4+4 layers instead of 3+3"),
    "dropout0.1": ({"dropout": 0.1}, [], "less dropout (SUB2 data regularizes)"),
    "dropout0.3": ({"dropout": 0.3}, [], "more dropout"),
    "ls0": ({"label_smoothing": 0.0}, [], "no label smoothing"),
}
MARKERS = ("<!-- parse_levers:{}:begin (written by studies/parsing/parse_levers.py) -->",
           "<!-- parse_levers:{}:end -->")
ALPHAS = "0,0.3,0.6"


def settings(args):
  """What every lever of one table shares (a lever is skipped on rerun only when these match)."""
  return {"hparams": "parsing_small", "recipe": args.recipe, "train_steps": args.train_steps,
          "seed": args.seed,
          "augment_copies": RECIPES[args.recipe][1], "augment_rate": 0.1, "average_last": 5,
          "mixed_precision": args.mixed_precision, "alphas": ALPHAS}


def overrides(name, args):
  """The lever's hparams overrides as one --hparams_override value (the cooldown scaled)."""
  values = {"cooldown_steps": args.train_steps * RECIPE_COOLDOWN // RECIPE_STEPS,
            **RECIPES[args.recipe][0], **LEVERS[name][0]}
  return ",".join(f"{k}={v}" for k, v in values.items())


def command(name, args):
  """(model_dir, argv of `python -m t2t_repro.parse --mode=train`) of one lever."""
  model_dir = os.path.join(args.work_dir, args.recipe, name)
  flags = list(LEVERS[name][1])
  if not any(f.startswith("--augment_copies=") for f in flags):
    flags.append(f"--augment_copies={RECIPES[args.recipe][1]}")
  save_every = max(args.train_steps // 35, 1)  # the recipe: every 300 of 10,400
  return model_dir, runlib.python(
      "-m", "t2t_repro.parse", "--mode=train", f"--ptb_dir={args.ptb_dir}", f"--model_dir={model_dir}",
      "--hparams=parsing_small", f"--hparams_override={overrides(name, args)}", *flags,
      "--augment_rate=0.1", f"--train_steps={args.train_steps}", "--train_minutes=0",
      f"--seed={args.seed}", f"--alphas={ALPHAS}", "--decode_splits=dev",
      f"--train_flags=--mixed_precision={args.mixed_precision},--average_last=5,"
      f"--save_checkpoints_steps={save_every},--keep_checkpoint_max=5")


def run_lever(name, args):
  """Trains, decodes and scores one lever on dev; returns its result object."""
  model_dir, argv = command(name, args)
  os.makedirs(os.path.dirname(model_dir), exist_ok=True)
  log = model_dir + ".log"
  load_before = os.getloadavg()[0]
  wall, cpu = runlib.run(argv, log)
  load_after = os.getloadavg()[0]
  with open(os.path.join(model_dir, "parse_scores.json"), encoding="utf-8") as f:
    scores = json.load(f)
  if scores["train"]["step"] != args.train_steps:
    raise RuntimeError(f"{model_dir}: training stopped at update {scores['train']['step']} of "
                       f"{args.train_steps} (log: {log})")
  with open(log, encoding="utf-8") as f:
    nll = float(re.findall(r"dev step \d+: loss \S+ nll (\S+)", f.read())[-1])
  dev = scores["decode"]["dev"]["evalb"]
  return {"lever": name, "what": LEVERS[name][2], "settings": settings(args),
          "hparams_override": overrides(name, args), "flags": LEVERS[name][1],
          "dev_nll": nll, "dev_f1": dev["all"]["f1"], "dev_f1_len40": dev["len<=40"]["f1"],
          "alpha_sweep": scores["decode"]["alpha_sweep"],
          "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
          "load_avg": [round(load_before, 2), round(load_after, 2)], "cpu": runlib.cpu_name(),
          "command": runlib.display(argv),
          "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def table(results):
  """The markdown table of `results` (one settings)."""
  lines = ["| lever | what | updates | dev NLL | dev F1 (all / len <= 40) | alpha chosen | "
           "wall / CPU min, everything (load) |", "|" + "---|" * 7]
  for r in results:
    alpha = max(r["alpha_sweep"], key=r["alpha_sweep"].get)
    cpu = f", {r['cpu']}" if "cpu" in r else ""
    lines.append(f"| {r['lever']} | {r['what']} | {r['settings']['train_steps']} | "
                 f"{r['dev_nll']:.3f} | {r['dev_f1']:.2f} / {r['dev_f1_len40']:.2f} | {alpha} | "
                 f"{r['wall_s'] / 60:.1f} / {r['cpu_s'] / 60:.1f} "
                 f"({r['load_avg'][0]}-{r['load_avg'][1]}){cpu} |")
  return "\n".join(lines)


def parse_args(argv):
  parser = runlib.lever_parser(__doc__, LEVERS, 2600, 1234,
                               os.path.join("runs", "parse_levers"),
                               os.path.join("studies", "parsing", "parse_levers.jsonl"))
  parser.add_argument("--recipe", default="registered", choices=sorted(RECIPES),
                      help="The reference the levers change: registered = parsing_small as "
                      "registered (4 layers) with 19 SUB2 trees per train tree, layers3 = with 3 "
                      "layers, layers3_copies9 = with 3 layers and 9 trees, "
                      "sinusoid_layers3_copies9 = that with sinusoids instead of relative "
                      "positions.")
  parser.add_argument("--ptb_dir",
                      default=os.path.join("..", "shared", "data", "ptb_sample", "combined"))
  args = parser.parse_args(argv)
  names = runlib.lever_names(
      args.levers, {k: v for k, v in LEVERS.items() if k not in RECIPES[args.recipe][2]})
  if args.train_steps < 100:
    raise UsageError(f"--train_steps must be >= 100, got {args.train_steps}")
  if not args.report_only and not os.path.isdir(args.ptb_dir):
    raise UsageError(f"--ptb_dir={args.ptb_dir}: not a folder")
  args.names = names
  return args


def summary(result):
  """One line of a finished lever."""
  return f"dev F1 {result['dev_f1']:.2f}, dev NLL {result['dev_nll']:.3f}"


def main(argv):
  args = parse_args(argv)
  begin, end = (marker.format(args.recipe) for marker in MARKERS)
  runlib.run_levers(args, settings(args), run_lever, summary, (begin, end, table))


if __name__ == "__main__":
  runlib.cli("parse_levers", main)
