"""docs/BENCHMARKS.md section 0's small-batch table from a `decode_throughput.py --json_out`
file of the modes cached, cached_bfloat16, ctranslate2_float32 and ctranslate2_int8:

  python studies/small_batches/table.py studies/small_batches/small300.json

or from the before/after results of `run_idle.sh` (a .jsonl file): one table per variant, then
the after / before ratio of each mode's median tokens/CPU-s and the float32 outputs equal:

  python studies/small_batches/table.py studies/small_batches/step_cost.jsonl

One row per batching and --threads entry: the median over rounds of tokens/CPU-s of each
mode, ours float32 / CTranslate2 float32 per CPU-second (median of the rounds' ratios, each
round's in parentheses) and per wall second, ours bfloat16 / CTranslate2 float32, CTranslate2
int8 / float32, and the 1-minute load before the runs.
"""

import json
import statistics
import sys

BATCHINGS = {"sorted": "(a) sorted, 4,096 tokens", "unsorted": "(b) 64 unsorted rows",
             "one": "(c) one sentence"}


def table(results):
  """Markdown lines of the table of `results` (the list decode_throughput.py writes)."""
  runs = {}
  for r in results:
    runs.setdefault((r["batching"], r["threads"]), {}).setdefault(r["mode"], []).append(r)
  out = ["| batches | threads | tokens/CPU-s: ours f32 / bf16 / CT2 f32 / int8 | ours f32 / CT2 "
         "f32, CPU (rounds) | per wall s | ours bf16 / CT2 f32, CPU | CT2 int8 / f32, CPU | load |",
         "|---|---|---|---|---|---|---|---|"]
  for (batching, threads), modes in runs.items():
    med = {m: statistics.median(r["tokens_per_cpu_s"] for r in rs) for m, rs in modes.items()}
    ours, peer = modes["cached"], modes["ctranslate2_float32"]
    per_round = [a["tokens_per_cpu_s"] / b["tokens_per_cpu_s"] for a, b in zip(ours, peer)]
    wall = statistics.median(a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(ours, peer))
    loads = [r["loadavg_1min_before"] for rs in modes.values() for r in rs]
    out.append(
        f"| {BATCHINGS[batching]} | {threads} | " + " / ".join(
            f"{med[m]:,.0f}" for m in ("cached", "cached_bfloat16", "ctranslate2_float32",
                                       "ctranslate2_int8")) +
        f" | **{statistics.median(per_round):.2f}x** ("
        + ", ".join(f"{x:.2f}" for x in per_round) + f") | {wall:.2f}x | "
        f"{med['cached_bfloat16'] / med['ctranslate2_float32']:.2f}x | "
        f"{med['ctranslate2_int8'] / med['ctranslate2_float32']:.2f}x | "
        f"{min(loads):.1f}-{max(loads):.1f} |")
  return out + litert_table(runs)


def litert_table(runs):
  """Markdown lines of the LiteRT exports' rows when `runs` ({(batching, threads): {mode:
  [results]}}) holds the litert_* modes: medians of tokens/CPU-s and the ratios to
  CTranslate2 float32 and int8 per CPU-second."""
  modes = ("litert_float32", "litert_float16", "litert_dynamic_range")
  if not any(m in found for found in runs.values() for m in modes):
    return []
  out = ["", "| batches | threads | tokens/CPU-s: LiteRT f32 / f16 / int8 | LiteRT f32 / CT2 f32 "
         "| LiteRT int8 / CT2 int8 | LiteRT f32 / ours f32 |", "|---|---|---|---|---|---|"]
  for (batching, threads), found in runs.items():
    med = {m: statistics.median(r["tokens_per_cpu_s"] for r in rs) for m, rs in found.items()}
    out.append(f"| {BATCHINGS[batching]} | {threads} | "
               + " / ".join(f"{med[m]:,.0f}" for m in modes) + " | "
               f"{med['litert_float32'] / med['ctranslate2_float32']:.2f}x | "
               f"{med['litert_dynamic_range'] / med['ctranslate2_int8']:.2f}x | "
               f"{med['litert_float32'] / med['cached']:.2f}x |")
  return out


def before_after(records):
  """Markdown lines of `run_idle.sh`'s records: a table per variant, the ratios, equal ids."""
  runs = {}
  for record in records:
    for r in record["results"]:
      runs.setdefault(record["variant"], []).append(dict(r, round=record["round"]))
  out = []
  for variant, results in runs.items():
    cpus = sorted({record["cpu"] for record in records if record["variant"] == variant})
    out += ["", f"{variant} ({', '.join(cpus)}):", ""] + table(results)
  if {"before", "after"} <= set(runs):
    med = {v: {} for v in runs}
    for v, results in runs.items():
      for r in results:
        med[v].setdefault((r["batching"], r["threads"], r["mode"]), []).append(
            r["tokens_per_cpu_s"])
    out += ["", "| batches | threads | mode | after / before, tokens/CPU-s (medians) |",
            "|---|---|---|---|"]
    for key in sorted(set(med["before"]) & set(med["after"])):
      ratio = statistics.median(med["after"][key]) / statistics.median(med["before"][key])
      out.append(f"| {BATCHINGS[key[0]]} | {key[1]} | {key[2]} | {ratio:.2f}x |")
    ids = {v: [r for r in results if r["mode"] == "cached" and "outputs" in r]
           for v, results in runs.items()}
    pairs = [(a, b) for a in ids["before"] for b in ids["after"]
             if (a["round"], a["batching"], a["threads"]) == (b["round"], b["batching"],
                                                                b["threads"])]
    same = sum(x == y for a, b in pairs for x, y in zip(a["outputs"], b["outputs"]))
    out += ["", f"float32 outputs equal before and after: {same} of "
            f"{sum(len(a['outputs']) for a, _ in pairs)} ({len(pairs)} runs)"]
  return out


if __name__ == "__main__":
  with open(sys.argv[1], encoding="utf-8") as f:
    if sys.argv[1].endswith(".jsonl"):
      print("\n".join(before_after([json.loads(line) for line in f if line.strip()])))
    else:
      print("\n".join(table(json.load(f))))
