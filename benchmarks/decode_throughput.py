"""Beam-search translation throughput of a trained model: cached, uncached, SavedModel.

Translates the first `--lines` lines of `--input_file` (default: newstest2014
English) with beam size `--beam_size` (default: the model's hparams, 4) and the
model's alpha, batched like `python -m t2t_repro.translate` (sorted by length,
`--decode_batch_tokens` padded source tokens per batch, max output length = source length +
hparams.decode_extra_length; `--batchings` adds `unsorted`: `--unsorted_rows` lines per batch in
input order, as a server's batch of one-sentence requests, and `one`: one line at a time), in
modes, each in a fresh subprocess (so
that peak RSS is per mode and TF_ENABLE_ONEDNN_OPTS is applied at import):

  cached      `beam_search.beam_search` (incremental decoding with the K/V cache)
  cached_bfloat16  the same with `load_for_inference(..., inference_dtype="bfloat16")`
  uncached    `beam_search.beam_search(cached=False)` (the full decoder over the whole prefix
              at every step, O(T^2)); on the first `--uncached_lines` lines only,
              since it is much slower; `cached` is also timed on that subset so
              the speed-up is on identical sentences
  savedmodel  `t2t_repro.serving.saved_model.export_model` written to a temporary folder, then
              `tf.saved_model.load(...).signatures["translate_ids"]` (ids in,
              ids out; the same search graph as the text `serving_default`)

Against Model Garden's beam search (same shapes, equal work):

  ours_fixed          `cached` with an end id outside the vocabulary, so that no
                      beam ever finishes, and one budget per batch (its longest
                      source + decode_extra_length, as Model Garden's and
                      CTranslate2's): every sentence of a batch runs exactly that
                      many steps
  ours_bfloat16_fixed the same in bfloat16 (`cached_bfloat16`'s policy: bfloat16
                      matmuls on the same float32 weights)
  model_garden_fixed  `peer_models.model_garden_decoder`: Model Garden's
                      Seq2SeqTransformer with this model's shapes (layers,
                      d_model, d_ff, heads, vocabulary; random weights, since its
                      layers cannot hold ours), the same beam, alpha, batches and
                      end id, hence the same number of steps
  Their output tokens are all decoded positions (sentences x steps).

LiteRT (`python -m t2t_repro.export --format=tflite`, written once per run; `engines.py`):

  litert_float32 / litert_float16 / litert_dynamic_range
                      the export's beam_search signature (the search inside the model) with
                      `LiteRtTranslator.search`, one interpreter per decoding thread on
                      --threads' intra-op threads, ids in, ids out.

Against CTranslate2 on the same weights (`python -m t2t_repro.export
--format=ctranslate2`, written once per run to a temporary folder):

  ctranslate2_float32 / ctranslate2_int8
                      `ctranslate2.Translator(...)` with --threads' inter_threads and
                      intra_threads,
                      `translate_batch` on the same batches (pieces in, pieces out),
                      the same beam size, length_penalty = the model's alpha (CTranslate2
                      divides by length^alpha, we by the GNMT ((5 + length) / 6)^alpha:
                      outputs may differ, see docs/SERVING.md), max_decoding_length =
                      the batch's longest source + decode_extra_length. Output tokens:
                      hypothesis pieces + 1 (EOS).
  ctranslate2_float32_fixed
                      the same with min_decoding_length = max_decoding_length, so that
                      every hypothesis runs the batch's whole budget (equal work with
                      ours_fixed); output tokens: decoded positions.

`--random_hparams=base` (with the *_fixed modes only) decodes an hparams set's model with
random weights (`keras.utils.set_random_seed(1)`, the same weights in every process: the
results carry a checksum) instead of `--model_dir`'s, whose vocabulary then only encodes
the sources; the CTranslate2 vocabulary is that vocabulary's pieces padded with filler
pieces to the random model's size. A random model almost never ends a hypothesis, which is
why only equal-work modes make sense for it:

  python benchmarks/decode_throughput.py --model_dir=runs/m30k_sw0/averaged \
      --random_hparams=base --input_file=../shared/data/multi30k/test_2016_flickr.en \
      --lines=200 --uncached_lines=0 --beam_size=4 --decode_extra_length=0 \
      --modes=ours_fixed,ctranslate2_float32_fixed --rounds=3

--threads=2 decodes one batch at a time on 2 intra-op threads; --threads=2x1 two batches at
once, each in its own thread on one intra-op thread, as translate's and the server's
--num_batch_threads=2 do (CTranslate2: inter_threads=2, intra_threads=1, two calls at once).

With --rounds=N the modes run round-robin N times (each run a fresh process), so that
load from other jobs hits every mode alike; the table has one row per run, and a
summary of medians with the ratios to ctranslate2_float32 per wall second and per CPU
second.

Reported: sentences/s, output tokens/s (tokens of the best hypothesis, EOS
included, padding excluded), wall seconds, the first-call (trace) seconds
(excluded from the rates), peak RSS [MiB] (process peak: framework import and
the model included), and whether the outputs equal the cached decoder's.

  python benchmarks/decode_throughput.py --model_dir=runs/m30k_b --lines=500 \
      --uncached_lines=100
  python benchmarks/decode_throughput.py --model_dir=runs/m30k_b --lines=500 --uncached_lines=0 \
      --input_file=../shared/data/multi30k/test_2016_flickr.en --rounds=3 --threads=2 \
      --modes=cached,savedmodel,ctranslate2_float32,ctranslate2_int8
"""

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # pylint: disable=wrong-import-position
import engines  # pylint: disable=wrong-import-position
import peer_models  # pylint: disable=wrong-import-position

DEFAULT_INPUT = "../shared/data/wmt14/newstest2014-full.en-de.en"
MODES = ("cached", "cached_bfloat16", "uncached", "savedmodel", "ours_fixed", "ours_bfloat16_fixed",
         "model_garden_fixed",
         "ctranslate2_float32", "ctranslate2_int8", "ctranslate2_float32_fixed",
         *engines.LITERT_QUANTIZATION)
FIXED_MODES = tuple(m for m in MODES if m.endswith("_fixed"))
CT2_QUANTIZATION = {"ctranslate2_float32": None, "ctranslate2_int8": "int8",
                    "ctranslate2_float32_fixed": None}
BATCHINGS = ("sorted", "unsorted", "one")


def _read_lines(path, n):
  """The first n lines of `path`, stripped, blank ones dropped (`fileio.read_lines`)."""
  from t2t_repro import fileio  # pylint: disable=import-outside-toplevel
  lines = [line.strip() for line in fileio.read_lines(path)[:n]]
  return [line for line in lines if line]


def make_batches(model, tokenizer, lines, decode_batch_tokens, batching="sorted", rows=64):
  """[(line indices, int32 numpy [rows, width] 0-padded ids)] of `lines`:

  sorted    the translate command's (`Translator.padded_batches`: sorted by length,
            `decode_batch_tokens` padded source tokens per batch)
  unsorted  `rows` lines per batch in input order (what a server's batch of one-sentence
            requests holds), padded to the batch's longest
  one       each line alone
  """
  from t2t_repro.data import batching as batching_lib  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import translator  # pylint: disable=import-outside-toplevel
  t = translator.Translator(model, tokenizer, translator.DecodeConfig(
      decode_batch_tokens=decode_batch_tokens))
  ids = t.encode(lines)
  if batching == "sorted":
    return list(t.padded_batches(ids))
  size = rows if batching == "unsorted" else 1
  return [(list(range(i, min(i + size, len(ids)))),
           batching_lib.pad_rows(ids[i:i + size])) for i in range(0, len(ids), size)]


def parse_threads(spec):
  """(batches decoded at once, intra-op threads of each) of a --threads entry: "N" is one
  batch at a time on N intra-op threads, "BxI" B batches at once (each in its own thread, as
  translate's and the server's num_batch_threads) on I intra-op threads each."""
  batches, _, intra = spec.rpartition("x")
  return int(batches or 1), int(intra)


def _timed_pass(decode, batches, count_all=False, workers=1):
  """Decodes every batch (`workers` at once, each in its own thread); returns (wall s,
  output tokens, {line index: token tuple}).

  Output tokens are the non-pad ids, or with `count_all` every decoded position.
  """
  import concurrent.futures  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  tokens, outputs = 0, {}
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    decoded = list(pool.map(lambda item: decode(item[1]), batches))
  for (batch, _), ids in zip(batches, decoded):
    ids = ids if isinstance(ids, list) else np.asarray(ids)
    for row, j in enumerate(batch):
      hyp = tuple(int(t) for t in ids[row] if t != 0 or count_all)
      outputs[j] = hyp
      tokens += len(hyp)
  return time.perf_counter() - start, tokens, outputs


def load_model(model_dir, random_hparams="", bfloat16=False):
  """(model, hparams, tokenizer): model_dir's, or `random_hparams`' model with random
  weights (`keras.utils.set_random_seed(1)`: the same in every process) and model_dir's
  tokenizer; with `bfloat16`, bfloat16 matmuls on the same float32 weights (the
  "mixed_bfloat16" policy of `load_for_inference(..., inference_dtype="bfloat16")`)."""
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  if not random_hparams:
    return load_for_inference(model_dir, inference_dtype="bfloat16" if bfloat16 else "float32")
  import keras  # pylint: disable=import-outside-toplevel
  from t2t_repro.config import hparams as hparams_lib  # pylint: disable=import-outside-toplevel
  from t2t_repro.data.vocab import Tokenizer  # pylint: disable=import-outside-toplevel
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(1)
  hp = hparams_lib.get_hparams(random_hparams)
  policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy("mixed_bfloat16" if bfloat16 else "float32")
  try:  # as load_for_inference: layers take the policy when they are built
    model = Transformer.from_hparams(hp)
  finally:
    keras.mixed_precision.set_global_policy(policy)
  return model, hp, Tokenizer.from_file(os.path.join(model_dir, "vocab.model"))


def _load(mode, args):
  return load_model(args.model_dir, args.random_hparams,
                    bfloat16=mode in ("cached_bfloat16", "ours_bfloat16_fixed"))


def _checksum(model):
  """Sum of |w| over the model's weights: equal in every process for the same weights."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  return float(sum(np.abs(w.numpy()).astype(np.float64).sum() for w in model.weights))


def _run_child(mode, args):
  """One mode in THIS process; returns the result dict."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  workers, intra = parse_threads(args.threads)
  tf.config.threading.set_intra_op_parallelism_threads(intra)
  tf.config.threading.set_inter_op_parallelism_threads(workers * intra)
  from t2t_repro.decoding import beam_search as bs  # pylint: disable=import-outside-toplevel
  model, hp, tokenizer = _load(mode, args)
  beam = args.beam_size or hp.beam_size
  extra = hp.decode_extra_length if args.decode_extra_length is None else args.decode_extra_length
  n = args.uncached_lines if mode == "uncached" else args.lines
  text = _read_lines(args.input_file, n)
  batches = make_batches(model, tokenizer, text, args.decode_batch_tokens, args.child_batching,
                     args.unsorted_rows)
  never_eos = hp.vocab_size  # no beam ever ends: fixed, equal work (see module docstring)
  if mode == "savedmodel":
    loaded = tf.saved_model.load(os.path.join(args.export_dir, "savedmodel"))
    fn = loaded.signatures["translate_ids"]
    decode = lambda x: fn(inputs=tf.constant(x))["ids"]
  elif mode in ("ours_fixed", "ours_bfloat16_fixed"):
    decode = lambda x: bs.beam_search(
        model, x, beam_size=beam, alpha=hp.alpha, n_best=1, eos_id=never_eos,
        max_decode_length=np.full([len(x)], (x > 0).sum(1).max() + extra, np.int32))[0][:, 0]
  elif mode in CT2_QUANTIZATION:
    decode = engines.ctranslate2_decoder(os.path.join(args.export_dir, mode),
                                         engines.pieces(tokenizer, hp.vocab_size), beam, hp.alpha,
                                         extra, workers, intra, fixed=mode in FIXED_MODES)
  elif mode in engines.LITERT_QUANTIZATION:
    decode = engines.litert_decoder(os.path.join(args.export_dir, mode), intra)
  elif mode == "model_garden_fixed":
    config = dict(num_layers=hp.num_layers, d_model=hp.d_model, d_ff=hp.d_ff,
                  num_heads=hp.num_heads, vocab_size=hp.vocab_size)
    decode = peer_models.model_garden_decoder(config, beam_size=beam, alpha=hp.alpha,
                                              decode_extra_length=extra, eos_id=never_eos)
  else:
    decode = lambda x: bs.beam_search(model, x, beam_size=beam, alpha=hp.alpha, n_best=1,
                                      decode_extra_length=extra,
                                      cached=mode != "uncached")[0][:, 0]
  start = time.perf_counter()
  decode(batches[0][1][:1])  # first call: trace (and, for the SavedModel, restore functions)
  trace_s = time.perf_counter() - start
  load_before = os.getloadavg()[0]
  cpu0 = time.process_time()
  wall, tokens, outputs = _timed_pass(decode, batches, count_all=mode in FIXED_MODES,
                                      workers=workers)
  cpu = time.process_time() - cpu0
  result = {"mode": mode, "batching": args.child_batching, "threads": args.threads,
            "lines": len(text), "beam_size": beam, "alpha": hp.alpha,
            "trace_s": trace_s, "wall_s": wall, "cpu_s": cpu, "output_tokens": tokens,
            "sentences_per_s": len(text) / wall, "tokens_per_s": tokens / wall,
            "tokens_per_cpu_s": tokens / cpu, "process_cpu_per_wall": cpu / wall,
            "loadavg_1min_before": load_before,
            "onednn": benchlib.onednn_enabled(),
            "outputs": [list(outputs[j]) for j in range(len(text))],
            "weights_checksum": _checksum(model) if args.random_hparams else None}
  if mode == "cached" and args.uncached_lines:  # the same subset as `uncached`, for the speed-up
    subset = make_batches(model, tokenizer, text[:args.uncached_lines], args.decode_batch_tokens,
                      args.child_batching, args.unsorted_rows)
    wall, tokens, _ = _timed_pass(decode, subset, workers=workers)
    lines = min(args.uncached_lines, len(text))
    result.update(subset_lines=lines, subset_wall_s=wall, subset_sentences_per_s=lines / wall,
                  subset_tokens_per_s=tokens / wall)
  result["peak_rss_bytes"] = benchlib.peak_rss_bytes()
  return result


def _export(mode, args):
  """Writes the SavedModel (mode "savedmodel", its search at --beam_size, 0: the
  hparams') or a CTranslate2 dir (the beam is a decoding option there) into
  --export_dir; with --random_hparams the CTranslate2 dir of the random model."""
  from t2t_repro.serving import ctranslate2 as ct2_export  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving.saved_model import export_model  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  output_dir = os.path.join(args.export_dir, mode)
  if args.random_hparams:
    model, hp, tokenizer = _load(mode, args)
    ct2_export.save_spec(ct2_export.build_spec(model, engines.pieces(tokenizer, hp.vocab_size)),
                         output_dir, CT2_QUANTIZATION[mode])
  elif mode in CT2_QUANTIZATION:
    ct2_export.export_ctranslate2(args.model_dir, output_dir,
                                  quantization=CT2_QUANTIZATION[mode], overwrite=True)
  elif mode in engines.LITERT_QUANTIZATION:
    engines.export_litert(args, output_dir, mode)
  else:
    export_model(args.model_dir, output_dir, overwrite=True, beam_size=args.beam_size or None)
  return {"mode": "export", "export_s": time.perf_counter() - start}


def run_isolated(mode, args, export_dir, onednn, export=False, batching="sorted", threads=2):
  """One mode (or its export, with `export`) in a fresh process (`benchlib.run_isolated`)."""
  flags = [f"--child={mode}", f"--child_batching={batching}", f"--threads={threads}",
           f"--export_only={int(export)}",
           f"--model_dir={os.path.abspath(args.model_dir)}", f"--input_file={args.input_file}",
           f"--lines={args.lines}", f"--uncached_lines={args.uncached_lines}",
           f"--decode_batch_tokens={args.decode_batch_tokens}",
           f"--unsorted_rows={args.unsorted_rows}", f"--beam_size={args.beam_size}",
           f"--export_dir={export_dir}", f"--random_hparams={args.random_hparams}"]
  if args.decode_extra_length is not None:
    flags.append(f"--decode_extra_length={args.decode_extra_length}")
  return benchlib.run_isolated(__file__, flags, onednn)


def summarize(results):
  """Markdown table of the runs, with speed-ups and output agreement vs cached."""
  cached = next((r for r in results if r["mode"] == "cached"), None)
  lines = ["| round | batching | threads | mode | lines | sentences/s | output tokens/s "
           "| tokens/CPU-s | wall [s] | CPU [s] | first call [s] | peak RSS [MiB] | CPU/wall "
           "| load | same output as cached |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    same = "-"
    if cached is not None and r["mode"] != "cached" and r["mode"] not in FIXED_MODES:
      n = r["lines"]
      same = f"{sum(a == b for a, b in zip(r['outputs'], cached['outputs'][:n]))}/{n}"
    lines.append(
        f"| {r.get('round', 1)} | {r['batching']} | {r['threads']} | {r['mode']} | {r['lines']} "
        f"| {r['sentences_per_s']:.2f} | {r['tokens_per_s']:.1f} | {r['tokens_per_cpu_s']:.1f} "
        f"| {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['trace_s']:.1f} "
        f"| {r['peak_rss_bytes'] / 2**20:.0f} "
        f"| {r['process_cpu_per_wall']:.2f} | {r['loadavg_1min_before']:.1f} | {same} |")
    if r["mode"] == "cached" and "subset_lines" in r:
      lines.append(
          f"| {r.get('round', 1)} | {r['batching']} | {r['threads']} | cached (uncached's subset) "
          f"| {r['subset_lines']} | {r['subset_sentences_per_s']:.2f} "
          f"| {r['subset_tokens_per_s']:.1f} | - | {r['subset_wall_s']:.1f} "
          "| - | - | - | - | - | - |")
  lines += ["", _medians(results)]
  uncached = next((r for r in results if r["mode"] == "uncached"), None)
  if cached and uncached and "subset_sentences_per_s" in cached:
    lines.append(f"\ncached / uncached on the same {uncached['lines']} lines: "
                 f"{cached['subset_sentences_per_s'] / uncached['sentences_per_s']:.1f}x "
                 "sentences/s")
  for mine, peer in itertools.product(("ours_fixed", "ours_bfloat16_fixed"),
                                      ("model_garden_fixed", "ctranslate2_float32_fixed")):
    ours = [r for r in results if r["mode"] == mine]
    other = [r for r in results if r["mode"] == peer]
    if ours and other:
      ratio = (statistics.median(r["sentences_per_s"] for r in ours)
               / statistics.median(r["sentences_per_s"] for r in other))
      lines.append(f"\n{mine} / {peer}: {ratio:.2f}x sentences/s, medians (decoded "
                   f"positions per pass: {ours[0]['output_tokens']} vs {other[0]['output_tokens']}; "
                   f"weights checksum {ours[0]['weights_checksum']} vs "
                   f"{other[0]['weights_checksum']})")
  return "\n".join(lines)


def _medians(results):
  """Median output tokens per wall and per CPU second of each (batching, threads, mode) over
  the rounds, and their ratio to ctranslate2_float32 (or _fixed) at the same batching and
  threads: the median over rounds of each round's ratio (alternating runs)."""
  peer = {}
  for r in results:
    if r["mode"] in ("ctranslate2_float32", "ctranslate2_float32_fixed"):
      peer[(r.get("round", 1), r["batching"], r["threads"])] = r
  for r in results:
    other = peer.get((r.get("round", 1), r["batching"], r["threads"]))
    if other is not None:
      r["vs_ct2_wall"] = r["tokens_per_s"] / other["tokens_per_s"]
      r["vs_ct2_cpu"] = r["tokens_per_cpu_s"] / other["tokens_per_cpu_s"]
  return benchlib.summarize(
      results, ("batching", "threads", "mode"),
      [("tokens/s", "tokens_per_s", "{:.1f}"), ("tokens/CPU-s", "tokens_per_cpu_s", "{:.1f}"),
       ("CPU/wall", "process_cpu_per_wall", "{:.2f}"), ("load", "loadavg_1min_before", "{:.1f}"),
       ("vs CT2 float32 (wall)", "vs_ct2_wall", "{:.2f}x"),
       ("vs CT2 float32 (CPU)", "vs_ct2_cpu", "{:.2f}x")])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True, help="trained model dir (e.g. runs/m30k_b)")
  parser.add_argument("--input_file", default=DEFAULT_INPUT)
  parser.add_argument("--lines", type=int, default=500)
  parser.add_argument("--uncached_lines", type=int, default=100,
                      help="lines for the uncached decoder (0: skip it)")
  parser.add_argument("--decode_batch_tokens", type=int, default=4096,
                      help="padded source tokens per batch of the sorted batching")
  parser.add_argument("--batchings", default="sorted",
                      help=f"comma list of {', '.join(BATCHINGS)}: translate's sorted batches, "
                      "--unsorted_rows lines per batch in input order, or one line at a time")
  parser.add_argument("--unsorted_rows", type=int, default=64)
  parser.add_argument("--beam_size", type=int, default=0, help="0: the model's hparams")
  parser.add_argument("--modes", default=",".join(MODES))
  parser.add_argument("--onednn", type=int, choices=(0, 1), default=1)
  parser.add_argument("--json_out", default=None)
  parser.add_argument("--rounds", type=int, default=1,
                      help="run the modes round-robin this many times")
  parser.add_argument("--threads", default="2",
                      help="a comma list of N (one batch at a time on N intra-op threads of "
                      "TensorFlow and CTranslate2) or BxI (B batches at once, each in its own "
                      "thread on I intra-op threads: translate's --num_batch_threads=B; "
                      "CTranslate2's inter_threads=B, intra_threads=I)")
  parser.add_argument("--random_hparams", default="",
                      help="an hparams set (e.g. base) with random weights instead of the model "
                           "dir's (whose vocabulary then encodes the sources); *_fixed modes only")
  parser.add_argument("--decode_extra_length", type=int, default=None,
                      help="output budget = source length + this [tokens]; default: the hparams'")
  parser.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
  parser.add_argument("--child_batching", choices=BATCHINGS, default="sorted",
                      help=argparse.SUPPRESS)
  parser.add_argument("--export_only", type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument("--export_dir", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)

  if args.child:
    benchlib.print_result(_export(args.child, args) if args.export_only
                          else _run_child(args.child, args))
    return

  unknown = set(args.modes.split(",")) - set(MODES)
  if unknown:
    parser.error(f"--modes: unknown {sorted(unknown)}; choose from {', '.join(MODES)}")
  batchings = args.batchings.split(",")
  if set(batchings) - set(BATCHINGS):
    parser.error(f"--batchings: unknown {sorted(set(batchings) - set(BATCHINGS))}; choose from "
                 f"{', '.join(BATCHINGS)}")
  threads = args.threads.split(",")
  for spec in threads:
    try:
      parse_threads(spec)
    except ValueError:
      parser.error(f"--threads: {spec!r} is neither N nor BxI")
  if args.random_hparams:
    if set(args.modes.split(",")) - set(FIXED_MODES):
      parser.error(f"--random_hparams: only the equal-work modes {', '.join(FIXED_MODES)}")
    from t2t_repro.config import hparams as hparams_lib  # pylint: disable=import-outside-toplevel
    if args.random_hparams not in hparams_lib.list_hparams():
      parser.error(f"--random_hparams: unknown hparams set {args.random_hparams!r}; "
                   f"registered sets are: {', '.join(hparams_lib.list_hparams())}")
    from t2t_repro.data.vocab import Tokenizer  # pylint: disable=import-outside-toplevel
    pieces = Tokenizer.from_file(os.path.join(args.model_dir, "vocab.model")).vocab_size
    if hparams_lib.get_hparams(args.random_hparams).vocab_size < pieces:
      parser.error(f"--random_hparams={args.random_hparams}: its vocabulary is smaller than the "
                   f"{pieces} pieces of {args.model_dir}/vocab.model, which encodes the sources")
  modes = [m for m in args.modes.split(",") if m != "uncached" or args.uncached_lines]
  for peer, needs in (("model_garden", ("model_garden_fixed",)),
                      ("ctranslate2", tuple(CT2_QUANTIZATION)),
                      ("litert", tuple(engines.LITERT_QUANTIZATION))):
    skipped = benchlib.missing_peer(peer) if set(modes) & set(needs) else None
    if skipped:
      print(skipped, flush=True)
      modes = [m for m in modes if m not in needs]
  print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {os.cpu_count()} CPUs; {args.input_file}, "
        f"first {args.lines} lines (uncached: {args.uncached_lines}); {args.threads} threads; "
        f"{benchlib.cpu_name()}; "
        f"{args.rounds} rounds; load {os.getloadavg()[0]:.1f}", flush=True)
  results = []
  with tempfile.TemporaryDirectory(prefix="t2t_export_") as export_dir:
    for mode in modes:
      if mode in ("savedmodel", *CT2_QUANTIZATION, *engines.LITERT_QUANTIZATION):
        exp = run_isolated(mode, args, export_dir, args.onednn, export=True)
        print(f"export for {mode}: {exp['export_s']:.1f} s", flush=True)
    for round_ in range(1, args.rounds + 1):
      for batching, count, mode in itertools.product(batchings, threads, modes):
        res = run_isolated(mode, args, export_dir, args.onednn, batching=batching,
                           threads=count)
        res["round"] = round_
        print(f"round {round_} {batching} {count} threads {mode}: "
              f"{res['sentences_per_s']:.2f} sentences/s, {res['tokens_per_s']:.1f} tokens/s, "
              f"{res['tokens_per_cpu_s']:.1f} tokens/CPU-s, {res['wall_s']:.1f} s, "
              f"load {res['loadavg_1min_before']:.1f}", flush=True)
        results.append(res)
  print()
  print(summarize(results), flush=True)
  if args.json_out:
    from t2t_repro import fileio  # pylint: disable=import-outside-toplevel
    fileio.write_json(args.json_out, results)


if __name__ == "__main__":
  main()
