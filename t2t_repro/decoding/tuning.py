"""Decoding settings chosen on a dev set: beam size and length penalty over a grid.

Vaswani et al. 2017 §6.1: "We set the maximum output length during inference to input
length + 50 ... These hyperparameters were chosen after experimentation on the development
set" (beam 4, alpha 0.6); §6.3 chose the parser's on Section 22 the same way. `grid_search`
decodes once per point of the grid and keeps the best by any metric (ties: the first point
in grid order); `tune_decoding` does it for translation with sacreBLEU (cased, 13a) or
chrF, and the parser (`parsing.pipeline.choose_alpha`) with EVALB's F1.

The choice is recorded in the model dir as `decoding.json` (`write_choice`), so that
`translate`, `score`, `export` and the other decoding commands use it by default, a flag
still overriding it (`decoding.loading.load_for_inference`).
"""

import dataclasses
import time

from t2t_repro import evaluation
from t2t_repro.model_dir import DECODING_FILE, ModelDir

METRICS = ("sacrebleu", "chrf", "bleu_lc_tok")


def grid_search(translator, grid, evaluate):
  """Decodes at every (beam_size, alpha) of `grid`; the best by `evaluate`'s value.

  Args:
    translator: a `Translator`; its config's beam_size and alpha are set to each point,
      and left at the chosen one.
    grid: list of (beam_size: int >= 1, alpha: float >= 0), in the order of preference
      for ties.
    evaluate: function(translator) -> (value: float, details), higher is better.

  Returns:
    (best row, details of the best, rows): each row a dict {"beam_size", "alpha",
    "value", "seconds"} (wall time of `evaluate`) in grid order.

  Raises:
    ValueError: an empty grid.
  """
  if not grid:
    raise ValueError("the grid of beam sizes and alphas is empty")
  rows, best, best_details = [], None, None
  for beam_size, alpha in grid:
    translator.config = dataclasses.replace(translator.config, beam_size=beam_size,
                                            alpha=float(alpha))
    started = time.monotonic()
    value, details = evaluate(translator)
    rows.append({"beam_size": beam_size, "alpha": float(alpha), "value": float(value),
                 "seconds": round(time.monotonic() - started, 1)})
    if best is None or value > best["value"]:
      best, best_details = rows[-1], details
  translator.config = dataclasses.replace(translator.config, beam_size=best["beam_size"],
                                          alpha=best["alpha"])
  return best, best_details, rows


def tune_decoding(translator, sources, references, beam_sizes=(4, 5), alphas=(0.6, 1.0),
                  metric="sacrebleu", tgt_lang="de", model_dir=None, dev="dev", checkpoint=None):
  """Translates `sources` at every beam size x alpha, scores them against `references` and
  records the choice in the model dir as the `tune` command does.

  Args:
    translator: a `Translator` (left at the chosen settings).
    sources, references: list[str] of the dev set, line-aligned.
    beam_sizes: ints >= 1; alphas: floats >= 0 (the GNMT length penalty, Wu et al. 2016).
    metric: the key of `evaluation.evaluate_translations` maximized: "sacrebleu" (cased,
      13a), "chrf" or "bleu_lc_tok" (lowercased Moses-tokenized BLEU).
    tgt_lang: the target language of the tokenized BLEU.
    model_dir: the model dir whose `decoding.json` records the choice (`write_choice`), which
      `translate`, `Translator.from_model_dir` and the other decoding commands then use by
      default; default: the translator's own (`Translator.from_model_dir`); None with a
      translator built otherwise: nothing is written.
    dev, checkpoint: what the choice was made on, recorded with it ("dev" and None: not
      named).

  Returns:
    dict: "beam_size", "alpha" (the choice), "metric", "value", "lines" (dev lines) and
    "grid": one row per point, {"beam_size", "alpha", "value", "seconds", "sacrebleu",
    "chrf", "bleu_lc_tok"}, beam sizes outer, alphas inner; "dev" and "checkpoint" as
    recorded.

  Raises:
    ValueError: an unknown metric, an empty grid, or sources and references of different
      lengths.
  """
  if metric not in METRICS:
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
  if len(sources) != len(references):
    raise ValueError(f"{len(sources)} source lines but {len(references)} references")
  scores = []

  def evaluate(current):
    hyps = [hyps[0][1] for hyps in current.nbest(sources)]
    scores.append(evaluation.evaluate_translations(hyps, references, tgt_lang=tgt_lang))
    return scores[-1][metric], None

  best, _, rows = grid_search(translator, [(b, a) for b in beam_sizes for a in alphas], evaluate)
  for row, score in zip(rows, scores):
    row.update({key: round(score[key], 2) for key in METRICS})
  choice = {"beam_size": best["beam_size"], "alpha": best["alpha"], "metric": metric,
            "value": round(best["value"], 2), "lines": len(sources), "grid": rows, "dev": dev,
            "checkpoint": checkpoint}
  model_dir = model_dir or getattr(translator, "model_dir", None)
  if model_dir:
    write_choice(model_dir, choice)
  return choice


def format_grid(choice):
  """The grid of a `tune_decoding` result as an aligned text table, the choice marked."""
  lines = [f"{'beam':>4} {'alpha':>6} {'sacrebleu':>9} {'bleu_lc_tok':>11} {'chrf':>6} "
           f"{'seconds':>8}"]
  for row in choice["grid"]:
    chosen = (row["beam_size"], row["alpha"]) == (choice["beam_size"], choice["alpha"])
    lines.append(f"{row['beam_size']:>4} {row['alpha']:>6g} {row['sacrebleu']:>9.2f} "
                 f"{row['bleu_lc_tok']:>11.2f} {row['chrf']:>6.2f} {row['seconds']:>8.1f}"
                 + ("  <- chosen" if chosen else ""))
  return "\n".join(lines)


def write_choice(model_dir, choice):
  """Writes `choice` (a `tune_decoding` result plus what it was tuned on) as
  `{model_dir}/decoding.json`, atomically."""
  ModelDir(model_dir).write_json(DECODING_FILE, choice)

