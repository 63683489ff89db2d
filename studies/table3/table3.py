"""The paper's Table 3 (Vaswani et al. 2017, §6.2), every row trained at small scale on Multi30k.

    python studies/table3/table3.py                    # protocol p3: all 20 rows, 3 base seeds
    python studies/table3/table3.py --rows=A           # the A rows (and base, their reference)
    python studies/table3/table3.py --report_only      # rewrite docs/TABLE3.md's tables and PNG

One "small base" divides every width of the paper's base (d_model, d_ff, d_k, d_v) by
--factor and keeps N = 6, h = 8, P_drop = 0.1, eps_ls = 0.1, post-norm and the paper's
optimizer (Adam 0.9/0.98/1e-9, eq. 3 with --warmup_steps); each row applies the paper's
change with its widths divided by the same factor (heads and layers unscaled); `big` keeps
the paper's ratios to base (2x widths, 16 heads, P_drop 0.3, 3x the updates). Every row
trains on Multi30k's 29,000 training pairs with one joint BPE vocabulary learned once
(--vocab_size, in {work_dir}/vocab) and shared by every row, the same tokens per update
(--batch_tokens) and the same number of updates (--train_steps; big 3x), seed fixed; dev =
Multi30k `val` (newstest2013's role in the paper).

Per row: parameters, dev perplexity per word piece (`t2t_repro.validate`), dev BLEU with beam
4, alpha 0.6 on the last checkpoint, no averaging (Table 3's protocol), as cased sacreBLEU,
as the paper's tokenized BLEU with compound splitting and as lowercased tokenized BLEU,
train CPU and wall time with the load average, the dev curve and the exact commands. Each
finished row is appended as one JSON object to --results (committed), and a rerun skips the
rows already there with the same settings and resumes an interrupted one. The base row runs
with --base_seeds seeds: their spread is the noise unit of every other row's difference to
base. After the runs, the tables between the markers of --doc and the PNG beside it are
rewritten from --results.
"""
import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # table3_report, and runlib in studies/

import runlib  # pylint: disable=wrong-import-position
from runlib import UsageError  # pylint: disable=wrong-import-position
import table3_report  # pylint: disable=wrong-import-position

# The paper's base (Table 3, first row), in its units.
PAPER_BASE = {"num_layers": 6, "d_model": 512, "d_ff": 2048, "num_heads": 8, "d_k": 64, "d_v": 64,
              "dropout": 0.1, "label_smoothing": 0.1, "position_encoding": "sinusoid",
              "norm_type": "post"}
WIDTHS = ("d_model", "d_ff", "d_k", "d_v")


@dataclasses.dataclass(frozen=True)
class Row:
  """One row of Table 3: its name, group, the paper's change from base (paper units) and
  the paper's dev PPL, BLEU and parameters [x 10^6] (None where the paper leaves it blank)."""
  name: str
  group: str
  change: dict
  paper_ppl: float
  paper_bleu: float
  paper_params: float = None
  steps_factor: int = 1


ROWS = [
    Row("base", "base", {}, 4.92, 25.8, 65),
    Row("A_h1", "A", {"num_heads": 1, "d_k": 512, "d_v": 512}, 5.29, 24.9),
    Row("A_h4", "A", {"num_heads": 4, "d_k": 128, "d_v": 128}, 5.00, 25.5),
    Row("A_h16", "A", {"num_heads": 16, "d_k": 32, "d_v": 32}, 4.91, 25.8),
    Row("A_h32", "A", {"num_heads": 32, "d_k": 16, "d_v": 16}, 5.01, 25.4),
    Row("B_dk16", "B", {"d_k": 16}, 5.16, 25.1, 58),
    Row("B_dk32", "B", {"d_k": 32}, 5.01, 25.4, 60),
    Row("C_N2", "C", {"num_layers": 2}, 6.11, 23.7, 36),
    Row("C_N4", "C", {"num_layers": 4}, 5.19, 25.3, 50),
    Row("C_N8", "C", {"num_layers": 8}, 4.88, 25.5, 80),
    Row("C_dmodel256", "C", {"d_model": 256, "d_k": 32, "d_v": 32}, 5.75, 24.5, 28),
    Row("C_dmodel1024", "C", {"d_model": 1024, "d_k": 128, "d_v": 128}, 4.66, 26.0, 168),
    Row("C_dff1024", "C", {"d_ff": 1024}, 5.12, 25.4, 53),
    Row("C_dff4096", "C", {"d_ff": 4096}, 4.75, 26.2, 90),
    Row("D_drop0", "D", {"dropout": 0.0}, 5.77, 24.6),
    Row("D_drop0.2", "D", {"dropout": 0.2}, 4.95, 25.5),
    Row("D_ls0", "D", {"label_smoothing": 0.0}, 4.67, 25.3),
    Row("D_ls0.2", "D", {"label_smoothing": 0.2}, 5.47, 25.7),
    Row("E_learned", "E", {"position_encoding": "learned"}, 4.92, 25.7),
    Row("big", "big", {"d_model": 1024, "d_ff": 4096, "num_heads": 16, "dropout": 0.3},
        4.33, 26.4, 213, steps_factor=3),
]
# Runs that are not in the paper: each tests an explanation given in docs/TABLE3.md.
EXTRA_ROWS = [
    # A: 8 heads each as wide as the single head of A_h1 (d_k = d_v = d_model, paper units),
    # to tell the number of heads from their width (the low-rank bottleneck of narrow heads).
    Row("A_h8_wide", "extra", {"d_k": 512, "d_v": 512}, None, None),
    # A and D: the early-budget explanation (rows that fit faster per update win at 2,000
    # updates). Base, one head and no dropout trained 4x longer: does the order reverse once
    # base's dev perplexity flattens, and does the no-dropout dev NLL turn up?
    Row("base_x4", "extra", {}, None, None, steps_factor=4),
    Row("A_h1_x4", "extra", {"num_heads": 1, "d_k": 512, "d_v": 512}, None, None,
        steps_factor=4),
    Row("D_drop0_x4", "extra", {"dropout": 0.0}, None, None, steps_factor=4),
    # C: N = 8 (and big) did not train: post-norm at eq. 3's peak rate, which a width divided
    # by the factor raises by its square root. The same 8 layers pre-norm: does it train?
    Row("C_N8_pre", "extra", {"num_layers": 8, "norm_type": "pre"}, None, None),
    # big: the same question for the paper's best row (post-norm big did not train either).
    Row("big_pre", "extra", {"d_model": 1024, "d_ff": 4096, "num_heads": 16, "dropout": 0.3,
                             "norm_type": "pre"}, None, None, steps_factor=3),
]
ROW_BY_NAME = {row.name: row for row in ROWS + EXTRA_ROWS}
ROW_NAMES = list(ROW_BY_NAME)
GROUPS = sorted({row.group for row in ROWS + EXTRA_ROWS})


def paper_hparams(row):
  """The row's settings in the paper's units (base + the row's change)."""
  return {**PAPER_BASE, **row.change}


def scaled_hparams(row, factor):
  """The row's settings with every width divided by `factor`.

  Raises:
    UsageError: a width that `factor` does not divide.
  """
  values = paper_hparams(row)
  for key in WIDTHS:
    if values[key] % factor:
      raise UsageError(f"--factor={factor} does not divide {key}={values[key]} of row {row.name}")
    values[key] //= factor
  return values


def select_rows(spec):
  """Row names of --rows: 'all', group letters (A..E, big) and/or row names, comma-separated;
  base is always included (the reference of every difference).

  Raises:
    UsageError: an unknown name (the message lists the valid ones).
  """
  chosen = []
  for name in (s.strip() for s in spec.split(",") if s.strip()):
    if name == "all":
      chosen += ROW_NAMES
    elif name in GROUPS:
      chosen += [row.name for row in ROWS + EXTRA_ROWS if row.group == name]
    elif name in ROW_NAMES:
      chosen.append(name)
    else:
      raise UsageError(f"--rows: unknown row or group {name!r}; rows: {', '.join(ROW_NAMES)}; "
                       f"groups: all, {', '.join(GROUPS)}")
  return [n for n in ROW_NAMES if n in set(chosen) | {"base"}]


# Named protocols: the settings every row of one table shares. "p3" is the protocol of the
# table: the schedule of the base-only sweep (docs/TABLE3.md) under which all three base seeds
# are a trained base. "p1" (2,000 updates of eq. 3, no cooldown) and "p2" (eq. 3's constant 1,
# under which one base seed is not a trained base) are its predecessors, whose runs the results
# file keeps; "sweep" takes the schedule from the flags.
PROTOCOLS = {
    "p1": {"train_steps": 2000, "warmup_steps": 1000, "learning_rate_constant": 1.0, "cooldown_steps": 0},
    "sweep": None,
    "p2": {"train_steps": 20000, "warmup_steps": 4000, "learning_rate_constant": 1.0,
           "cooldown_steps": 5000},
    # Eq. 3's constant 0.7 (peak rate 1.38e-3 at update 4,000), a linear cooldown to 0 over
    # the last quarter.
    "p3": {"train_steps": 20000, "warmup_steps": 4000, "learning_rate_constant": 0.7,
           "cooldown_steps": 5000},
}
CURRENT_PROTOCOL = "p3"
SCHEDULE_KEYS = ("train_steps", "warmup_steps", "learning_rate_constant", "cooldown_steps")


def settings(args):
  """The settings every row of one table shares (a row is skipped on rerun only when these
  and its seed match; the protocol label is not one of them)."""
  return {"factor": args.factor, "train_steps": args.train_steps, "batch_tokens": args.batch_tokens,
          "warmup_steps": args.warmup_steps, "vocab_size": args.vocab_size,
          "learning_rate_constant": args.learning_rate_constant, "cooldown_steps": args.cooldown_steps,
          "mixed_precision": args.mixed_precision, "problem": "translate_ende_multi30k"}


def run_tag(args):
  """The model-dir suffix of a protocol's runs ('' for p1 at factor 8); a factor other than 8
  is part of it, so its rows never resume factor 8's."""
  factor = "" if args.factor == 8 else f"_f{args.factor}"
  if args.protocol == "p1":
    return factor
  batch = "" if args.batch_tokens == 2048 else f"_b{args.batch_tokens}"
  return (f"_lr{args.learning_rate_constant:g}_w{args.warmup_steps}_cd{args.cooldown_steps}"
          f"_n{args.train_steps}{batch}{factor}")


def is_done(results, name, seed, shared):
  return any(r["row"] == name and r["seed"] == seed and r["settings"] == shared for r in results)


def _override(values, args, steps_factor):
  keys = ("num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v", "dropout", "label_smoothing",
          "position_encoding", "norm_type")
  extra = {"vocab_size": args.vocab_size, "warmup_steps": args.warmup_steps,
           "learning_rate_constant": args.learning_rate_constant,
           "cooldown_steps": args.cooldown_steps * steps_factor}
  return ",".join(f"{k}={v}" for k, v in [*((k, values[k]) for k in keys), *extra.items()])


def commands(row, seed, args):
  """(model_dir, [train, validate, translate] argv lists) of one row and seed."""
  model_dir = os.path.join(args.work_dir, f"{row.name}_s{seed}{run_tag(args)}")
  values = scaled_hparams(row, args.factor)
  steps = args.train_steps * row.steps_factor
  # Default: a tenth of the run, at most every 500 updates (the acceptance rule reads the
  # dev NLL 1,000 updates before the cooldown); big: 3x.
  every = (args.eval_every_steps or max(min(args.train_steps // 10, 500), 1)) * row.steps_factor
  train = [sys.executable, "-m", "t2t_repro.train", "--hparams=base",
           f"--hparams_override={_override(values, args, row.steps_factor)}", "--problem=translate_ende_multi30k",
           f"--data_dir={args.data_dir}", f"--model_dir={model_dir}",
           f"--vocab_dir={os.path.join(args.work_dir, 'vocab')}", f"--train_steps={steps}",
           f"--batch_tokens={args.batch_tokens}", f"--eval_every_steps={every}",
           f"--save_checkpoints_steps={every}", "--save_checkpoints_secs=0",
           "--keep_checkpoint_max=2", "--dev_bleu_lines=0", "--test_bleu_lines=0",
           "--best_metric=none", f"--seed={seed}", f"--mixed_precision={args.mixed_precision}",
           "--log_every_steps=100"]
  validate = [sys.executable, "-m", "t2t_repro.validate", f"--model_dir={model_dir}",
              "--split=dev", f"--output_json={os.path.join(model_dir, 'validate_dev.json')}"]
  translate = [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
               f"--input_file={os.path.join(args.data_dir, 'multi30k', 'val.en')}",
               f"--output_file={os.path.join(model_dir, 'val.hyp.de')}", "--beam_size=4",
               "--alpha=0.6"]
  return model_dir, [train, validate, translate]


def _sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def run_row(row, seed, args):
  """Trains, validates and decodes one row; returns its result object."""
  from t2t_repro import evaluation  # pylint: disable=import-outside-toplevel
  model_dir, (train, validate, translate) = commands(row, seed, args)
  if os.path.exists(model_dir):  # an interrupted row resumes
    print(f"{row.name} seed {seed}: resuming {model_dir}", flush=True)
  os.makedirs(args.work_dir, exist_ok=True)
  log = model_dir + ".log"
  load_before = os.getloadavg()[0]
  train_wall, train_cpu, first_step = runlib.train(train, log, model_dir,
                                                   args.train_steps * row.steps_factor)
  load_after = os.getloadavg()[0]
  runlib.run(validate, log)
  runlib.run(translate, log)
  with open(os.path.join(model_dir, "validate_dev.json"), encoding="utf-8") as f:
    dev = json.load(f)
  with open(log, encoding="utf-8") as f:
    text = f.read()
  params = int(re.findall(r"parameters\s+([\d,]+)", text)[-1].replace(",", ""))
  curve = [[int(s), float(n)] for s, n in re.findall(r"dev step (\d+): loss \S+ nll (\S+)", text)]
  with open(os.path.join(model_dir, "val.hyp.de"), encoding="utf-8") as f:
    hyps = f.read().split("\n")[:-1]
  with open(os.path.join(args.data_dir, "multi30k", "val.de"), encoding="utf-8") as f:
    refs = f.read().split("\n")[:-1]
  scores = evaluation.evaluate_translations(hyps, [refs], tgt_lang="de")
  return {
      "row": row.name, "group": row.group, "seed": seed, "protocol": args.protocol,
      "settings": settings(args),
      "hparams": scaled_hparams(row, args.factor), "paper_hparams": paper_hparams(row),
      "train_steps": args.train_steps * row.steps_factor, "params": params,
      "dev_nll": dev["nll"], "dev_ppl": dev["ppl"], "dev_target_pieces": dev["target_pieces"],
      "dev_bleu": scores["sacrebleu"], "dev_bleu_tok_compound": scores["bleu_tok_compound"],
      "dev_bleu_lc_tok": scores["bleu_lc_tok"], "sacrebleu_signature": scores["sacrebleu_signature"],
      "train_wall_s": round(train_wall, 1), "train_cpu_s": round(train_cpu, 1),
      "train_first_step": first_step,
      "load_avg": [round(load_before, 2), round(load_after, 2)], "cpu": runlib.cpu_name(),
      "dev_curve": curve,
      "vocab_sha256": _sha256(os.path.join(model_dir, "vocab.model")),
      "paper_ppl": row.paper_ppl, "paper_bleu": row.paper_bleu, "paper_params": row.paper_params,
      "commands": [runlib.display(c) for c in (train, validate, translate)],
      "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
  }


def plan(args):
  """(row, seed) pairs to run, in order: base seeds first (the noise unit), then the rest."""
  names = select_rows(args.rows)
  seeds = [args.seed + i for i in range(args.base_seeds)]
  todo = [(ROW_BY_NAME["base"], s) for s in seeds]
  todo += [(ROW_BY_NAME[n], args.seed) for n in names if n != "base"]
  for row, _ in todo:
    scaled_hparams(row, args.factor)  # every row's widths checked before anything runs
  return todo


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--rows", default="all", help="'all', groups (A, B, C, D, E, big, "
                      "extra) and/or row names, comma-separated; base always runs.")
  parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data"))
  parser.add_argument("--work_dir", default=os.path.join("runs", "table3"),
                      help="Model dirs, logs and the shared vocabulary.")
  parser.add_argument("--results", default=os.path.join("studies", "table3", "results.jsonl"))
  parser.add_argument("--doc", default=os.path.join("docs", "TABLE3.md"),
                      help="The doc whose table (between its markers) and PNG are rewritten.")
  parser.add_argument("--factor", type=int, default=8, help="Every width of the paper's rows "
                      "is divided by this.")
  parser.add_argument("--protocol", default=CURRENT_PROTOCOL, choices=sorted(PROTOCOLS),
                      help="A named schedule (train_steps, warmup_steps, learning_rate_constant, "
                      "cooldown_steps); 'sweep' takes them from the flags below.")
  parser.add_argument("--train_steps", type=int, default=20000,
                      help="Updates per row (big: 3x); --protocol=sweep only.")
  parser.add_argument("--batch_tokens", type=int, default=2048, help="Tokens per update.")
  parser.add_argument("--warmup_steps", type=int, default=4000, help="--protocol=sweep only.")
  parser.add_argument("--learning_rate_constant", type=float, default=0.7,
                      help="Eq. 3's constant factor; --protocol=sweep only.")
  parser.add_argument("--cooldown_steps", type=int, default=5000,
                      help="The last updates that take the rate linearly to 0 (big: 3x); "
                      "--protocol=sweep only.")
  parser.add_argument("--eval_every_steps", type=int, default=0,
                      help="Dev evaluations every this many updates (big: 3x); 0: a tenth of "
                      "the run, at most 500.")
  parser.add_argument("--vocab_size", type=int, default=4000)
  parser.add_argument("--mixed_precision", default="none",
                      choices=["none", "mixed_bfloat16"])
  parser.add_argument("--seed", type=int, default=1234)
  parser.add_argument("--base_seeds", type=int, default=3, help="Seeds of the base row.")
  parser.add_argument("--report_only", action="store_true",
                      help="Only rewrite the tables and PNG (always at the default --factor, "
                      "--batch_tokens, --vocab_size and --mixed_precision; runs at another "
                      "factor beside them).")
  args = parser.parse_args(argv)
  select_rows(args.rows)
  if PROTOCOLS[args.protocol] is not None:
    given = [f"--{k}" for k in SCHEDULE_KEYS if f"--{k}" in " ".join(argv)]
    if given:
      raise UsageError(f"{', '.join(given)}: --protocol={args.protocol} fixes the schedule; "
                       "use --protocol=sweep to set it")
    for key, value in PROTOCOLS[args.protocol].items():
      setattr(args, key, value)
  if not args.learning_rate_constant > 0 or args.cooldown_steps < 0 or args.eval_every_steps < 0:
    raise UsageError("--learning_rate_constant must be > 0, --cooldown_steps and --eval_every_steps >= 0")
  if args.cooldown_steps >= args.train_steps:
    raise UsageError(f"--cooldown_steps={args.cooldown_steps} must be below --train_steps="
                     f"{args.train_steps}")
  for name in ("factor", "train_steps", "batch_tokens", "warmup_steps", "vocab_size", "base_seeds"):
    if getattr(args, name) < 1:
      raise UsageError(f"--{name} must be >= 1, got {getattr(args, name)}")
  if not args.report_only and not os.path.isdir(os.path.join(args.data_dir, "multi30k")):
    raise UsageError(f"--data_dir={args.data_dir}: no multi30k folder in it")
  return args


def main(argv):
  args = parse_args(argv)
  shared = settings(args)
  if not args.report_only:
    todo = plan(args)
    for row, seed in todo:
      results = runlib.read_results(args.results)
      if is_done(results, row.name, seed, shared):
        print(f"{row.name} seed {seed}: done ({args.results})", flush=True)
        continue
      print(f"{row.name} seed {seed}: training {args.train_steps * row.steps_factor} updates "
            f"(load {os.getloadavg()[0]:.2f})", flush=True)
      result = run_row(row, seed, args)
      vocabs = {r["vocab_sha256"] for r in results
                if r["settings"]["vocab_size"] == args.vocab_size}
      if vocabs and result["vocab_sha256"] not in vocabs:
        raise RuntimeError(f"{row.name}: its vocabulary differs from the one of the rows in "
                           f"{args.results}; every row must share one")
      runlib.append_result(args.results, result)
      print(f"{row.name} seed {seed}: dev ppl {result['dev_ppl']:.3f}, BLEU {result['dev_bleu']:.2f} "
            f"in {result['train_wall_s'] / 60:.1f} min ({result['train_cpu_s'] / 60:.1f} CPU-min, "
            f"load {result['load_avg']})", flush=True)
  report(args)


def report(args):
  """Rewrites the doc's findings, sweep and per-protocol tables and the PNG from --results.

  The tables are at the default settings (factor 8, 2,048 tokens per update, a 4,000-piece
  vocabulary) whatever the command trained, so a run at --factor=4 ends by rewriting them, not
  by replacing them with its own; runs at another width factor get a block of their own."""
  args = parse_args(["--report_only", f"--results={args.results}", f"--doc={args.doc}"])
  results = runlib.read_results(args.results)
  order = {name: i for i, name in enumerate(ROW_NAMES)}
  by_protocol = {}
  for name in reversed(list(PROTOCOLS)):  # the newest protocol first
    if PROTOCOLS[name] is not None:
      wanted = {**settings(args), **PROTOCOLS[name]}
      runs = [r for r in results if r["settings"] == wanted]
      by_protocol[name] = sorted(runs, key=lambda r: (order[r["row"]], r["seed"]))
  # Extra runs of a protocol at another width factor (the width reading of docs/TABLE3.md),
  # each beside the same rows at --factor.
  other_factors = {}
  for name in by_protocol:
    for factor in sorted({r["settings"]["factor"] for r in results} - {args.factor}):
      wanted = {**settings(args), **PROTOCOLS[name], "factor": factor}
      runs = [r for r in results if r["settings"] == wanted]
      if runs:
        other_factors[(name, factor)] = sorted(runs, key=lambda r: (order[r["row"]], r["seed"]))
  # The sweep's runs, after the first protocol's longer base (eq. 3 alone, its reference).
  sweep = [r for r in results if r["row"] == "base_x4" and r["protocol"] == "p1"]
  sweep += [r for r in results if r["protocol"] == "sweep"]
  table3_report.write(by_protocol, sweep, args.doc, other_factors)
  print(f"wrote the tables of {sum(map(len, by_protocol.values()))} runs and {len(sweep)} "
        f"schedule runs into {args.doc}", flush=True)


if __name__ == "__main__":
  runlib.cli("table3", main)
