"""The Table 3 report of `studies/table3/table3.py`, rewritten from the results file between
markers of docs/TABLE3.md, and a PNG of dev BLEU and PPL per row beside the paper's. The
current protocol is the newest one with a base run:

- `findings`: the paper's six findings, each answered by the current protocol;
- `sweep`: the base-only schedule sweep, with the acceptance rule of a trained base;
- `protocols`: one line per protocol that has run (schedule, trained base seeds, findings);
- `rows:<protocol>`: the current protocol's per-row table, in the paper's layout;
- `factor<F>:<protocol>`: its extra runs at another width factor F, each row's difference to
  that factor's base beside its difference at the protocol's own factor.

Noise: the base row's seeds give the sample standard deviation of dev PPL and dev BLEU; every
other row's difference to the base mean is also given in units of it. Our direction (row vs
base) counts only beyond NOISE_SIGMAS standard deviations ("~" within). The paper's own
direction is "~" (no change) where its difference to base is under PAPER_NO_CHANGE (0.05 PPL,
0.2 BLEU: A_h16, E_learned's PPL and BLEU, D_ls0.2's BLEU), and our row agrees with "no change"
when it is within NOISE_SIGMAS base-seed sd.
"""

import os
import statistics

import runlib

NOISE_SIGMAS = 2.0
PAPER_NO_CHANGE = {"dev_ppl": 0.05, "dev_bleu": 0.2}
ACCEPT_NLL_MOVE = 0.02  # nats per piece over the last ACCEPT_WINDOW updates before the cooldown
ACCEPT_WINDOW = 1000
ACCEPT_BLEU = 25.0
# The paper's six findings (§6.2), each with the rows that test it.
FINDINGS = [
    ("A", "a single head is worse, and too many heads hurt", ("A_h1", "A_h32")),
    ("B", "a smaller key size d_k hurts", ("B_dk16", "B_dk32")),
    ("C", "bigger models are better", ("C_N2", "C_N4", "C_N8", "C_dmodel256", "C_dmodel1024",
                                       "C_dff1024", "C_dff4096", "big")),
    ("D", "dropout helps", ("D_drop0",)),
    ("D", "label smoothing hurts perplexity but improves BLEU", ("D_ls0", "D_ls0.2")),
    ("E", "learned positions are as good as sinusoids", ("E_learned",)),
]
METRICS = (("dev_ppl", "paper_ppl", "PPL"), ("dev_bleu", "paper_bleu", "BLEU"))


def marker(name):
  """The (begin, end) markers of block `name` in the doc."""
  return (f"<!-- table3:{name}:begin (written by studies/table3/table3.py) -->",
          f"<!-- table3:{name}:end -->")


def _base_stats(results, key):
  values = [r[key] for r in results if r["row"] == "base"]
  mean = statistics.fmean(values)
  spread = statistics.stdev(values) if len(values) > 1 else None
  return mean, spread, len(values)


def our_direction(diff, spread):
  """'+', '-' or '~' (within NOISE_SIGMAS spreads); '?' with no spread known."""
  if spread is None:
    return "?"
  if abs(diff) <= NOISE_SIGMAS * spread:
    return "~"
  return "+" if diff > 0 else "-"


def paper_direction(value, base, key):
  """The paper's direction of a row against its base: '~' under PAPER_NO_CHANGE[key]."""
  diff = value - base
  if abs(diff) < PAPER_NO_CHANGE[key] - 1e-9:
    return "~"
  return "+" if diff > 0 else "-"


def agreement(ours, paper):
  """'yes' when our direction is the paper's (both '~' included), else why not (`paper`
  None: a row the paper does not have)."""
  if paper is None:
    return "extra run (not in the paper)"
  if ours == "?":
    return "no noise estimate yet"
  if ours == paper:
    return "yes"
  if ours == "~":
    return "within noise"
  return "no (paper: no change)" if paper == "~" else "no"


def _blank(value):
  """A paper value, or '' for a row the paper does not have."""
  return "" if value is None else value


def rows_in_order(results):
  """[(row name, its runs)] in the order the rows were first recorded (table3.py runs them
  in the paper's order)."""
  by_row = {}
  for r in results:
    by_row.setdefault(r["row"], []).append(r)
  return list(by_row.items())


def row_checks(results, name):
  """[(metric label, our value, difference to base, in sd, agreement)] of row `name`
  against the base of `results` (one protocol), or None if the row has not run."""
  runs = [r for r in results if r["row"] == name]
  base_runs = [r for r in results if r["row"] == "base"]
  if not runs or not base_runs:
    return None
  checks = []
  for key, paper_key, label in METRICS:
    mean, spread, _ = _base_stats(results, key)
    value = statistics.fmean(r[key] for r in runs)
    diff = value - mean
    paper = (None if runs[0][paper_key] is None
             else paper_direction(runs[0][paper_key], base_runs[0][paper_key], key))
    checks.append((label, value, diff, diff / spread if spread else None,
                   agreement(our_direction(diff, spread), paper)))
  return checks


def finding_verdict(results, rows):
  """(verdict, evidence) of one finding in one protocol: 'holds' when every check of its rows
  (PPL and BLEU each) agrees with the paper, 'does not hold' when none does, else 'mixed (k of
  n)'; 'not run' when no row has run; while only some of its rows have run, the verdict is
  marked '... so far (k of n rows run)'."""
  evidence, agree, total, ran = [], 0, 0, 0
  for name in rows:
    checks = row_checks(results, name)
    if checks is None:
      continue
    ran += 1
    cells = []
    for label, value, diff, sds, verdict in checks:
      total += 1
      agree += verdict == "yes"
      unit = f", {sds:+.1f} sd" if sds is not None else ""
      cells.append(f"{label} {value:.2f} ({diff:+.2f}{unit}: {verdict})")
    evidence.append(f"{name} " + ", ".join(cells))
  if not total:
    return "not run", ""
  if agree == total:
    verdict = "holds"
  elif agree == 0:
    verdict = "does not hold"
  else:
    verdict = f"mixed ({agree} of {total})"
  if ran < len(rows):
    verdict += f" so far ({ran} of {len(rows)} rows run)"
  return verdict, "; ".join(evidence)


def findings_table(by_protocol):
  """The markdown findings table: one column per protocol (newest first)."""
  names = list(by_protocol)
  lines = ["| group | the paper's finding | " + " | ".join(f"protocol {n}" for n in names) + " |",
           "|" + "---|" * (2 + len(names))]
  for group, text, rows in FINDINGS:
    cells = []
    for name in names:
      verdict, evidence = finding_verdict(by_protocol[name], rows)
      cells.append(f"**{verdict}**" + (f": {evidence}" if evidence else ""))
    lines.append(f"| {group} | {text} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def cooldown_start(result):
  """The update at which the rate starts its linear cooldown (the run's end without one)."""
  scale = result["train_steps"] // result["settings"]["train_steps"]
  return result["train_steps"] - result["settings"].get("cooldown_steps", 0) * scale


def acceptance(result):
  """(dev NLL move over the ACCEPT_WINDOW updates before the cooldown or None if the curve
  lacks those points, accepted: the move is under ACCEPT_NLL_MOVE and dev BLEU >= ACCEPT_BLEU)."""
  curve = dict((int(step), nll) for step, nll in result["dev_curve"])
  end = cooldown_start(result)
  if end not in curve or end - ACCEPT_WINDOW not in curve:
    return None, False
  move = curve[end] - curve[end - ACCEPT_WINDOW]
  return move, abs(move) < ACCEPT_NLL_MOVE and result["dev_bleu"] >= ACCEPT_BLEU


def sweep_table(runs):
  """The markdown table of the base schedule runs `runs` (dicts of table3.py)."""
  lines = ["| run | protocol | eq. 3 constant | warmup | cooldown | updates | tokens per update | "
           f"peak rate | dev NLL move over the {ACCEPT_WINDOW:,} updates before the cooldown | "
           "dev PPL | dev BLEU | a trained base? | train wall / CPU min |",
           "|" + "---|" * 13]
  for r in runs:
    s = r["settings"]
    rate = s.get("learning_rate_constant", 1.0)
    peak = rate * r["hparams"]["d_model"] ** -0.5 * s["warmup_steps"] ** -0.5
    move, accepted = acceptance(r)
    move_cell = "n/a" if move is None else f"{move:+.3f}"
    lines.append(
        f"| {r['row']} s{r['seed']} | {r['protocol']} | {rate:g} | {s['warmup_steps']} | "
        f"{s.get('cooldown_steps', 0)} | {r['train_steps']} | {s['batch_tokens']} | {peak:.2e} | "
        f"{move_cell} | "
        f"{r['dev_ppl']:.2f} | {r['dev_bleu']:.2f} | {'yes' if accepted else 'no'} | "
        f"{runlib.train_time_cell([r])} |")
  return "\n".join(lines)


def table(results):
  """The per-row markdown table (a str) of `results` (dicts written by table3.py, one
  protocol)."""
  ppl_mean, ppl_sd, seeds = _base_stats(results, "dev_ppl")
  bleu_mean, bleu_sd, _ = _base_stats(results, "dev_bleu")
  paper_base = next(r for r in results if r["row"] == "base")
  # Extra runs of base's settings with more updates ("base_x4"), by their number of updates.
  longer_bases = {r["train_steps"]: r["row"] for r in results
                  if r["row"].startswith("base_x") and r["train_steps"] != paper_base["train_steps"]}
  lines = [
      "| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls | steps | PPL (dev) | "
      "paper PPL | BLEU (dev) | paper BLEU | params x10^6 | paper params | PPL - base "
      "(sd) | BLEU - base (sd) | agrees with paper (PPL / BLEU) | train wall / CPU min |",
      "|" + "---|" * 20]
  for name, runs in rows_in_order(results):
    r = runs[0]
    h = r["hparams"]
    ppl = statistics.fmean(x["dev_ppl"] for x in runs)
    bleu = statistics.fmean(x["dev_bleu"] for x in runs)
    if name == "base":
      diffs = (f"sd {ppl_sd:.3f} ({seeds} seeds)" if ppl_sd else "", f"sd {bleu_sd:.2f}"
               if bleu_sd else "")
      agree = "reference"
      ppl_cell = f"{ppl:.2f} ({', '.join(format(x['dev_ppl'], '.2f') for x in runs)})"
      bleu_cell = f"{bleu:.2f} ({', '.join(format(x['dev_bleu'], '.2f') for x in runs)})"
    elif name in longer_bases.values() or r["train_steps"] in longer_bases:
      # A longer-budget extra run: against base at the same number of updates (one seed,
      # so no spread); the longer base itself against base.
      ref = [x for x in results if x["row"] == longer_bases.get(r["train_steps"])]
      if name in longer_bases.values() or not ref:
        ref_name, ref_ppl, ref_bleu = "base", ppl_mean, bleu_mean
      else:
        ref_name, ref_ppl, ref_bleu = ref[0]["row"], ref[0]["dev_ppl"], ref[0]["dev_bleu"]
      diffs = (f"{ppl - ref_ppl:+.3f}", f"{bleu - ref_bleu:+.2f}")
      agree = f"extra run (not in the paper); differences to {ref_name}"
      ppl_cell, bleu_cell = f"{ppl:.2f}", f"{bleu:.2f}"
    else:
      checks = row_checks(results, name)
      diffs = tuple(diff_cells(checks))
      agree = ("extra run (not in the paper)" if r["paper_ppl"] is None
               else " / ".join(check[4] for check in checks))
      ppl_cell, bleu_cell = f"{ppl:.2f}", f"{bleu:.2f}"
    lines.append(
        f"| {name} | {h['num_layers']} | {h['d_model']} | {h['d_ff']} | {h['num_heads']} | "
        f"{h['d_k']} | {h['d_v']} | {h['dropout']} | {h['label_smoothing']} | {r['train_steps']} | "
        f"{ppl_cell} | {_blank(r['paper_ppl'])} | {bleu_cell} | {_blank(r['paper_bleu'])} | "
        f"{r['params'] / 1e6:.2f} | {r['paper_params'] or ''} | {diffs[0]} | {diffs[1]} | {agree} | "
        f"{runlib.train_time_cell(runs)} |")
  return "\n".join(lines)


def diff_cells(checks, unit=""):
  """Each check's difference to base ('+0.300' PPL, '-1.50' BLEU), with its size in base-seed
  sd ('+0.300 (+2.1)', `unit` after the number) where the base has more than one seed."""
  return [f"{diff:+.{3 if label == 'PPL' else 2}f}"
          + (f" ({sds:+.1f}{unit})" if sds is not None else "")
          for label, _, diff, sds, _ in checks]


def factor_table(main, other, factor):
  """The markdown table of `other` (one protocol's runs at width factor `factor`, one seed,
  base among them) beside `main` (the same protocol at its own factor): per row, d_k at both
  factors and the difference of dev PPL and BLEU to each factor's base (in base-seed sd where
  the factor has more than one base seed); the base's row says whether it is a trained base
  by `acceptance`."""
  def diffs(results, name):
    checks = row_checks(results, name)
    return "not run" if checks is None else " / ".join(diff_cells(checks, " sd"))

  main_factor = main[0]["settings"]["factor"]
  main_dk = {r["row"]: r["hparams"]["d_k"] for r in main}
  lines = [f"| row | h | d_k at factor {main_factor} / {factor} | "
           "paper: PPL - base / BLEU - base | "
           f"factor {main_factor}: PPL - base / BLEU - base | factor {factor}: dev PPL / BLEU | "
           f"factor {factor}: PPL - base / BLEU - base | factor {factor}: train wall / CPU min |",
           "|" + "---|" * 8]
  base = next(r for r in other if r["row"] == "base")
  for name, runs in rows_in_order(other):
    r = runs[0]
    paper = ("reference" if name == "base" else "" if r["paper_ppl"] is None else
             f"{r['paper_ppl'] - base['paper_ppl']:+.2f} / "
             f"{r['paper_bleu'] - base['paper_bleu']:+.1f}")
    if name == "base":  # is the protocol's schedule a trained base at this factor too?
      move, accepted = acceptance(r)
      main_diffs = "reference"
      other_diffs = (f"reference; a trained base: {'yes' if accepted else 'no'}"
                     + (f" ({move:+.3f} nats)" if move is not None else ""))
    else:
      main_diffs, other_diffs = diffs(main, name), diffs(other, name)
    lines.append(
        f"| {name} | {r['hparams']['num_heads']} | "
        f"{main_dk.get(name, '')} / {r['hparams']['d_k']} | {paper} | {main_diffs} | "
        f"{statistics.fmean(x['dev_ppl'] for x in runs):.2f} / "
        f"{statistics.fmean(x['dev_bleu'] for x in runs):.2f} | "
        f"{other_diffs} | {runlib.train_time_cell(runs)} |")
  return "\n".join(lines)


def plot(by_protocol, path):
  """A PNG: dev PPL (ours on a log axis) and dev BLEU per row, each protocol's (left axis)
  beside the paper's (right axis)."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  names = []
  for results in by_protocol.values():
    names += [name for name, _ in rows_in_order(results) if name not in names]
  colors = ["tab:blue", "tab:gray", "tab:green", "tab:purple"]
  fig, axes = plt.subplots(2, 1, figsize=(max(8, 0.55 * len(names)), 7), sharex=True)
  for ax, key, paper_key, label in ((axes[0], "dev_ppl", "paper_ppl", "dev PPL per piece"),
                                    (axes[1], "dev_bleu", "paper_bleu", "dev BLEU")):
    paper = {}
    for (protocol, results), color in zip(by_protocol.items(), colors):
      rows = dict(rows_in_order(results))
      xs = [i for i, name in enumerate(names) if name in rows]
      ax.plot(xs, [statistics.fmean(x[key] for x in rows[names[i]]) for i in xs], "o",
              color=color, label=f"ours, protocol {protocol}")
      for i in xs:
        runs = rows[names[i]]
        paper[i] = runs[0][paper_key]
        if len(runs) > 1:
          ax.plot([i] * len(runs), [x[key] for x in runs], ".", color=color, alpha=0.5)
    ax.set_ylabel(f"ours: {label}")
    if key == "dev_ppl":  # rows that fail to train reach PPL 10^4 and more: a log axis
      ax.set_yscale("log")
    twin = ax.twinx()
    xs = [i for i in sorted(paper) if paper[i] is not None]
    twin.plot(xs, [paper[i] for i in xs], "s", color="tab:red", label="paper (newstest2013)")
    twin.set_ylabel(f"paper: {label}", color="tab:red")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
  axes[1].set_xticks(range(len(names)), names, rotation=60, ha="right")
  axes[0].set_title("Table 3 rows: ours (left axis, one colour per protocol), the paper's "
                    "(red, right axis)")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def protocols_table(by_protocol):
  """One markdown line per protocol of `by_protocol` (newest first): its schedule, the runs, how
  many base seeds are a trained base by `acceptance`, the base's mean dev PPL / BLEU and how
  the paper's findings fare under it."""
  lines = ["| protocol | updates / warmup / eq. 3 constant / cooldown | runs | trained base seeds | "
           "base dev PPL / BLEU (mean) | findings: hold / mixed / do not hold / not run |",
           "|" + "---|" * 6]
  for name, results in by_protocol.items():
    s = results[0]["settings"]
    bases = [r for r in results if r["row"] == "base"]
    verdicts = [finding_verdict(results, rows)[0] for _, _, rows in FINDINGS]
    counts = [sum(v.startswith(word) for v in verdicts)
              for word in ("holds", "mixed", "does not hold", "not run")]
    lines.append(
        f"| {name} | {s['train_steps']:,} / {s['warmup_steps']:,} / {s['learning_rate_constant']:g} / "
        f"{s['cooldown_steps']:,} | {len(results)} | "
        f"{sum(acceptance(r)[1] for r in bases)} of {len(bases)} | "
        f"{statistics.fmean(r['dev_ppl'] for r in bases):.2f} / "
        f"{statistics.fmean(r['dev_bleu'] for r in bases):.2f} | "
        f"{' / '.join(map(str, counts))} |")
  return "\n".join(lines)


def write(by_protocol, sweep_runs, doc_path, other_factors=None):
  """Rewrites the doc's blocks (each appended when the doc lacks its markers; the doc is
  created when absent) and writes `<doc stem>.png` beside it.

  Args:
    by_protocol: {protocol name: its runs (dicts of table3.py)}, newest protocol first; a
      protocol without a base run is left out, and the first with one is the current.
    sweep_runs: the base schedule runs of the `sweep` block, in order.
    doc_path: the markdown doc.
    other_factors: {(protocol name, factor): its runs at that width factor}, each written
      beside the current protocol's runs at its own factor.
  """
  by_protocol = {name: runs for name, runs in by_protocol.items()
                 if any(r["row"] == "base" for r in runs)}
  if sweep_runs:
    runlib.replace_block(doc_path, *marker("sweep"), sweep_table(sweep_runs))
  if not by_protocol:
    return
  name, runs = next(iter(by_protocol.items()))
  runlib.replace_block(doc_path, *marker("findings"), findings_table({name: runs}))
  runlib.replace_block(doc_path, *marker("protocols"), protocols_table(by_protocol))
  runlib.replace_block(doc_path, *marker(f"rows:{name}"), table(runs))
  for (protocol, factor), other in (other_factors or {}).items():
    if protocol == name and any(r["row"] == "base" for r in other):
      runlib.replace_block(doc_path, *marker(f"factor{factor}:{name}"),
                           factor_table(runs, other, factor))
  stem = os.path.splitext(os.path.basename(doc_path))[0].lower()
  plot({name: runs}, os.path.join(os.path.dirname(doc_path), stem + ".png"))
