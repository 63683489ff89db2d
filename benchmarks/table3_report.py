"""The Table 3 report of `benchmarks/table3.py`: the markdown table in the paper's layout
(rewritten between two markers of docs/TABLE3.md) and a PNG of dev BLEU and PPL per row
beside the paper's.

Noise: the base row's seeds give the sample standard deviation of dev PPL and dev BLEU;
every other row's difference to the base mean is also given in units of it. A direction
(row vs base) counts as measured only when the difference exceeds 2 standard deviations;
otherwise it is "~" (within the seed noise).
"""

import os
import statistics

BEGIN = "<!-- table3:begin (written by benchmarks/table3.py) -->"
END = "<!-- table3:end -->"
NOISE_SIGMAS = 2.0


def _base_stats(results, key):
  values = [r[key] for r in results if r["row"] == "base"]
  mean = statistics.fmean(values)
  spread = statistics.stdev(values) if len(values) > 1 else None
  return mean, spread, len(values)


def _direction(diff, spread):
  """'+', '-' or '~' (within NOISE_SIGMAS spreads, or no spread known: '?')."""
  if spread is None:
    return "?"
  if abs(diff) <= NOISE_SIGMAS * spread:
    return "~"
  return "+" if diff > 0 else "-"


def _paper_direction(value, base):
  return "~" if value == base else ("+" if value > base else "-")


def _agreement(ours, paper):
  if ours == "?":
    return "no noise estimate yet"
  if ours == paper:
    return "yes"
  if ours == "~":
    return "within noise" if paper != "~" else "yes"
  return "no" if paper != "~" else "paper: no change"


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


def table(results):
  """The markdown table (a str) of `results` (dicts written by table3.py, one settings)."""
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
      d_ppl, d_bleu = ppl - ppl_mean, bleu - bleu_mean
      unit = lambda d, sd: f" ({d / sd:+.1f})" if sd else ""  # noqa: E731
      diffs = (f"{d_ppl:+.3f}{unit(d_ppl, ppl_sd)}", f"{d_bleu:+.2f}{unit(d_bleu, bleu_sd)}")
      if r["paper_ppl"] is None:
        agree = "extra run (not in the paper)"
      else:
        agree = " / ".join(_agreement(_direction(d, sd), _paper_direction(p, pb))
                           for d, sd, p, pb in (
                               (d_ppl, ppl_sd, r["paper_ppl"], paper_base["paper_ppl"]),
                               (d_bleu, bleu_sd, r["paper_bleu"], paper_base["paper_bleu"])))
      ppl_cell, bleu_cell = f"{ppl:.2f}", f"{bleu:.2f}"
    wall = statistics.fmean(x["train_wall_s"] for x in runs) / 60
    cpu = statistics.fmean(x["train_cpu_s"] for x in runs) / 60
    lines.append(
        f"| {name} | {h['num_layers']} | {h['d_model']} | {h['d_ff']} | {h['num_heads']} | "
        f"{h['d_k']} | {h['d_v']} | {h['dropout']} | {h['label_smoothing']} | {r['train_steps']} | "
        f"{ppl_cell} | {_blank(r['paper_ppl'])} | {bleu_cell} | {_blank(r['paper_bleu'])} | "
        f"{r['params'] / 1e6:.2f} | {r['paper_params'] or ''} | {diffs[0]} | {diffs[1]} | {agree} | "
        f"{wall:.1f} / {cpu:.1f} |")
  return "\n".join(lines)


def plot(results, path):
  """A PNG: dev PPL (ours on a log axis) and dev BLEU per row, ours (left axis) beside the
  paper's (right axis)."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  rows = rows_in_order(results)
  names = [name for name, _ in rows]
  fig, axes = plt.subplots(2, 1, figsize=(max(8, 0.55 * len(names)), 7), sharex=True)
  for ax, key, paper_key, label in ((axes[0], "dev_ppl", "paper_ppl", "dev PPL per piece"),
                                    (axes[1], "dev_bleu", "paper_bleu", "dev BLEU")):
    ours = [statistics.fmean(x[key] for x in runs) for _, runs in rows]
    ax.plot(range(len(names)), ours, "o", color="tab:blue", label="ours (Multi30k, small)")
    for i, (_, runs) in enumerate(rows):
      if len(runs) > 1:
        ax.plot([i] * len(runs), [x[key] for x in runs], ".", color="tab:blue", alpha=0.5)
    ax.set_ylabel(f"ours: {label}", color="tab:blue")
    if key == "dev_ppl":  # rows that fail to train reach PPL 10^4 and more: a log axis
      ax.set_yscale("log")
    twin = ax.twinx()
    paper = [float("nan") if runs[0][paper_key] is None else runs[0][paper_key] for _, runs in rows]
    twin.plot(range(len(names)), paper, "s", color="tab:red",
              label="paper (WMT14 newstest2013)")
    twin.set_ylabel(f"paper: {label}", color="tab:red")
    ax.grid(alpha=0.3)
  axes[1].set_xticks(range(len(names)), names, rotation=60, ha="right")
  axes[0].set_title("Table 3 rows: ours (blue, left axis) and the paper's (red, right axis)")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write(results, doc_path):
  """Rewrites the table between BEGIN and END of `doc_path` (appended when the doc has no
  markers; the doc is created when absent) and writes `<doc stem>.png` beside it."""
  text = ""
  if os.path.exists(doc_path):
    with open(doc_path, encoding="utf-8") as f:
      text = f.read()
  block = f"{BEGIN}\n{table(results)}\n{END}"
  if BEGIN in text and END in text:
    text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
  else:
    text = (text + "\n\n" if text else "") + block + "\n"
  with open(doc_path, "w", encoding="utf-8") as f:
    f.write(text)
  stem = os.path.splitext(os.path.basename(doc_path))[0].lower()
  plot(results, os.path.join(os.path.dirname(doc_path), stem + ".png"))
