"""Where the time of one float32 beam-search decode goes on CPU (profile and ablations).

Decodes the first `--lines` lines of `--input_file` as `python -m t2t_repro.translate` does
(strip, tokenize, sort by length, `--decode_batch_tokens` padded source tokens per batch,
`beam_search.beam_search` with the model's alpha and decode_extra_length, n_best 1,
float32, growing cache) and reports:

  whole decode  median over `--rounds` untimed-warm passes: output tokens/s (best
                hypothesis, EOS included) and output tokens per process CPU-second
                (`time.process_time`), wall, CPU, CPU/wall, the 1-minute load;
                plus the work done: loop iterations (decoder steps) and
                hypothesis rows decoded (from `beam_search.search(..., return_steps=True)`,
                an extra untimed pass).
  profile       one more pass under `tf.profiler.experimental` (the trace is written
                to `--logdir`, viewable in TensorBoard's profile plugin); the op events of
                the trace's `tf_Compute` (inter-op) threads are summed into the BUCKETS
                below by scoped op name and op type: encoder; decoder init (the
                encoder-decoder K/V projected once per sentence, once per batch); per
                decoder part (self-attention projections / cache append / attend,
                cross-attention, FFN, LayerNorm + residual, embedding); output projection
                (the logits matmul over the vocabulary); log-softmax; top-k; candidate
                scores; cache reorder (tf.gather of the self-attention K/V every step, and
                of the encoder-decoder K/V and source bias when sentences leave the batch);
                the rest of the search. An op's event spans its wall time (its intra-op
                work included). With 2 inter-op threads independent ops overlap and the
                sum exceeds the wall; `--inter_op=1` runs one op at a time, so that it adds
                up. Ops run inline by the executor (Switch, Merge, Identity, ... of the
                while loop and cond) have no event: "executor outside traced ops" is the
                ExecutorState time not covered by an op event.
  ablations     (`--ablation=1`) each component timed alone in its own tf.function at
                the shapes of a typical step (rows = the decode's mean hypothesis rows per
                loop iteration, cache length = the mean position, source width = the mean
                padded width), `--ablation_calls` calls each, median of 5 repeats; the empty
                tf.function call is timed too (its dispatch is in every row). The rows
                named "lever:" time an alternative formulation of the same result at the
                same shapes (fused Q/K/V, a stored E^T, top-k per beam row, top-k of raw
                logits before normalization, the step compiled with XLA); nothing in the
                model or the search is changed.

To name the parts, the search's and the model's methods are wrapped in `tf.name_scope`s
at run time (`_add_name_scopes`: op names only, the same ops; `--name_scopes=0` runs
without them to check that the speed is unchanged). Keras layers name their own ops
(`decoder_0/self_attention/...`).

`--random_hparams=base` builds that hparams set with random weights (its own vocabulary
size: 37,000 for `base`) instead of restoring `--model_dir`; the sources are still
tokenized with `--model_dir`'s vocabulary (valid ids of the larger vocabulary). A random
model almost never ends a hypothesis, so every sentence runs source length +
`--decode_extra_length` steps: choose it to match the trained model's step count.

The runs of docs/BENCHMARKS.md section 9 (`--inter_op=1`: one op at a time, so that the op
times add up to the wall; the default inter-op pool is what `translate` uses):

  python benchmarks/profile_decode.py --model_dir=runs/m30k_sw0/averaged \\
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=500 --beam_size=4 \\
      --inter_op=1 --rounds=2 --logdir=runs/prof_decode/m30k_beam4_interop1
  python benchmarks/profile_decode.py --model_dir=runs/m30k_sw0/averaged \\
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=500 --beam_size=4 \\
      --ablation=1 --logdir=runs/prof_decode/m30k_beam4b
  python benchmarks/profile_decode.py --model_dir=runs/m30k_sw0/averaged \\
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=500 --beam_size=5 \\
      --inter_op=1 --logdir=runs/prof_decode/m30k_beam5_interop1
  python benchmarks/profile_decode.py --model_dir=runs/m30k_sw0/averaged --random_hparams=base \\
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=500 --beam_size=4 \\
      --decode_extra_length=0 --inter_op=1 --rounds=2 --ablation=1 --ablation_calls=5 \\
      --logdir=runs/prof_decode/base_random_beam4
  python benchmarks/profile_decode.py --model_dir=runs/m30k_sw0/averaged \\
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=500 --beam_size=4 \\
      --rounds=1 --profile=0 --ablation=1 --ablation_calls=30
"""

import argparse
import collections
import functools
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from decode_ablations import ablations  # noqa: E402  pylint: disable=wrong-import-position
from decode_throughput import load_model  # noqa: E402  pylint: disable=wrong-import-position
from traces import busy_ps, trace_events  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_INPUT = "../shared/data/multi30k/test_2016_flickr.en"

# Buckets of the profile, in table order: (bucket, description).
BUCKETS = (
    ("encoder", "encoder stack and source embedding, once per batch (outside the loop)"),
    ("decoder_init", "once per batch: the encoder-decoder K/V of every decoder layer, one "
                     "row per sentence, and the empty self-attention cache (init_cache)"),
    ("self_attn.qkv_out_proj", "decoder self-attention: Q, K, V and output projections (MatMul)"),
    ("self_attn.cache_concat", "decoder self-attention: appending this step's K, V to the "
                               "cache (ConcatV2)"),
    ("self_attn.attend", "decoder self-attention: QK^T, softmax, weights x V (BatchMatMul, "
                         "Softmax)"),
    ("self_attn.other", "decoder self-attention: reshapes, transposes, scaling"),
    ("cross_attn.q_out_proj", "cross-attention: Q and output projections (MatMul)"),
    ("cross_attn.attend", "cross-attention: QK^T over the source, bias, softmax, x V"),
    ("cross_attn.other", "cross-attention: reshapes, transposes, scaling"),
    ("ffn", "decoder FFN (two MatMuls, bias, ReLU)"),
    ("layer_norm_residual", "decoder LayerNorms (incl. the final one) and residual adds"),
    ("embedding", "target embedding lookup, scale, sinusoid position"),
    ("output_projection", "logits: hidden x embedding^T over the vocabulary (MatMul)"),
    ("log_softmax", "log-softmax over the vocabulary"),
    ("top_k", "TopKV2: best 2k of k x V candidates, then the finished / alive merges"),
    ("candidate_scores", "alive log-prob + log-softmax (k x V add), index // V, % V"),
    ("cache_reorder", "tf.gather of the cache (self K/V every step; cross K/V and src bias "
                      "when sentences leave)"),
    ("search_other", "the rest of the search: finished/alive sequences, done flags, "
                     "results scatter, leaving the batch"),
    ("control_flow", "while loop / cond ops that have a trace event of their own (most run "
                     "inline: see the executor time outside ops)"),
    ("other", "anything else"),
)
CONTROL_FLOW = {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond", "Identity",
                "RefEnter", "RefExit", "RefMerge", "RefSwitch", "RefNextIteration",
                "_SwitchN", "ControlTrigger", "NoOp", "_Retval", "_Arg", "Const",
                "_HostRecv", "_HostSend", "_Recv", "_Send"}
MATMUL = {"MatMul", "_MklMatMul", "_FusedMatMul", "_MklFusedMatMul", "_MklNativeMatMul",
          "_MklNativeFusedMatMul"}
BATCH_MATMUL = {"BatchMatMulV2", "BatchMatMul", "BatchMatMulV3", "_MklBatchMatMulV2",
                "_MklBatchMatMul", "_MklNativeBatchMatMulV2"}


# --- name scopes --------------------------------------------------------------------------

def _scoped(name, method):
  @functools.wraps(method)
  def wrapper(*args, **kwargs):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    with tf.name_scope(name):
      return method(*args, **kwargs)
  return wrapper


def _add_name_scopes():
  """Wraps the search's steps and the model's decoding methods in name scopes (op names
  only). Must run before the decode function is traced."""
  from t2t_repro.decoding import beam_search, model_interface  # pylint: disable=import-outside-toplevel
  from t2t_repro.model import embedding, transformer  # pylint: disable=import-outside-toplevel
  search = beam_search._Search  # pylint: disable=protected-access
  for attr, name in (("grow_alive", "p_grow_alive"), ("new_finished", "p_new_finished"),
                     ("new_alive", "p_new_alive"), ("advance", "p_advance"),
                     ("leave_batch", "p_leave_batch"), ("n_best_lists", "p_n_best")):
    setattr(search, attr, _scoped(name, getattr(search, attr)))
  cached = model_interface.CachedDecoder
  for attr, name in (("start", "p_start"), ("step", "p_model_step"), ("reorder", "p_reorder")):
    setattr(cached, attr, _scoped(name, getattr(cached, attr)))
  model = transformer.Transformer
  for attr, name in (("encode", "p_encode"), ("init_cache", "p_init_cache"),
                     ("decode_step", "p_decode_step"), ("_embed", "p_embed"),
                     ("_step_embed", "p_embed"),
                     ("reorder_cache", "p_reorder_cache")):
    setattr(model, attr, _scoped(name, getattr(model, attr)))
  emb = embedding.SharedEmbedding
  emb.logits = _scoped("p_output_projection", emb.logits)


def bucket_of(op_name, op_type):
  """The bucket (see BUCKETS) of one op of the trace, from its scoped name and type."""
  # Keras suffixes a layer's scope when its name is reused ("decoder_0_1/self_attention_1").
  parts = {re.sub(r"(_\d+)+$", "", part) for part in op_name.split("/")}
  has = lambda scope: scope in parts  # noqa: E731
  if op_type in CONTROL_FLOW:
    return "control_flow"
  if has("p_encode"):
    return "encoder"
  if has("p_start"):
    return "decoder_init"
  if has("p_output_projection"):
    return "output_projection"
  if has("p_embed"):
    return "embedding"
  if has("p_decode_step"):
    if has("self_attention"):
      if op_type in MATMUL:
        return "self_attn.qkv_out_proj"
      if op_type == "ConcatV2":
        return "self_attn.cache_concat"
      if op_type in BATCH_MATMUL or op_type == "Softmax":
        return "self_attn.attend"
      return "self_attn.other"
    if has("memory_attention"):
      if op_type in MATMUL:
        return "cross_attn.q_out_proj"
      if op_type in BATCH_MATMUL or op_type in ("Softmax", "AddV2", "Add", "Cast"):
        return "cross_attn.attend"
      return "cross_attn.other"
    if has("ffn"):
      return "ffn"
    return "layer_norm_residual"  # layer_norm_i, decoder_norm, residual AddV2
  if has("p_model_step"):
    return "log_softmax"
  if has("p_reorder") or has("p_reorder_cache"):
    return "cache_reorder"
  if op_type == "TopKV2":
    return "top_k"
  if has("p_grow_alive"):
    return "candidate_scores"
  if has("p_new_finished") or has("p_new_alive") or has("p_advance") or has("p_leave_batch") \
      or has("p_n_best") or "while" in parts or op_name.startswith("while"):
    return "search_other"
  return "other"


# --- trace parsing ------------------------------------------------------------------------

def summarize_trace(events, executor):
  """Bucket seconds, op-type seconds per bucket, thread stats."""
  by_bucket, by_type, by_op = collections.Counter(), collections.Counter(), collections.Counter()
  counts = collections.Counter()
  per_thread = collections.defaultdict(list)
  for thread, op_name, op_type, start, dur in events:
    bucket = bucket_of(op_name, op_type)
    seconds = dur / 1e12
    by_bucket[bucket] += seconds
    by_type[(bucket, op_type)] += seconds
    by_op[op_name + ":" + op_type] += seconds
    counts[bucket] += 1
    per_thread[thread].append((start, start + dur))
  threads = {t: busy_ps(iv) / 1e12 for t, iv in per_thread.items()}
  per_thread_exec = collections.defaultdict(list)
  for thread, start, end in executor:
    per_thread_exec[thread].append((start, end))
  # Executor time outside any traced op: scheduling, inline ops (control flow), bookkeeping.
  outside_ops = sum(busy_ps(iv + per_thread[t]) - busy_ps(per_thread[t])
                    for t, iv in per_thread_exec.items()) / 1e12
  all_busy = busy_ps([iv for ivs in per_thread.values() for iv in ivs]) / 1e12
  span = (max(s + d for *_, s, d in events) - min(s for *_, s, d in events)) / 1e12
  return {"by_bucket": dict(by_bucket), "counts": dict(counts),
          "by_type": {f"{b}|{t}": s for (b, t), s in by_type.items()},
          "top_ops": by_op.most_common(40), "thread_busy_s": threads,
          "any_thread_busy_s": all_busy, "op_span_s": span, "ops": len(events),
          "executor_outside_ops_s": outside_ops,
          "any_thread_executor_s": busy_ps([(s, e) for _, s, e in executor]
                                           + [iv for ivs in per_thread.values() for iv in ivs])
                                   / 1e12}


# --- decoding -----------------------------------------------------------------------------

def _read_lines(path, n):
  from t2t_repro import fileio  # pylint: disable=import-outside-toplevel
  lines = [line.strip() for line in fileio.read_lines(path)[:n]]
  return [line for line in lines if line]


def load(args):
  """(model, hparams of the decode, tokenizer): `decode_throughput.load_model`'s."""
  return load_model(args.model_dir, args.random_hparams,
                    bfloat16=args.inference_dtype == "bfloat16")


def make_batches(model, tokenizer, lines, decode_batch_tokens):
  """translate's padded batches: [(indices, int32 [rows, width])]."""
  from t2t_repro.decoding import translator  # pylint: disable=import-outside-toplevel
  t = translator.Translator(model, tokenizer, translator.DecodeConfig(
      decode_batch_tokens=decode_batch_tokens))
  return list(t.padded_batches(t.bound_lengths(t.encode(lines), range(1, len(lines) + 1))))


def timed_pass(decode, batches):
  """(wall s, process CPU s, output tokens, load before) of one pass over the batches."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  load_before = os.getloadavg()[0]
  cpu0, start = time.process_time(), time.perf_counter()
  tokens = 0
  for _, inputs in batches:
    ids = np.asarray(decode(inputs))
    tokens += int(np.count_nonzero(ids))
  return time.perf_counter() - start, time.process_time() - cpu0, tokens, load_before


def step_stats(model, batches, beam, alpha, extra):
  """Work of the decode: loop iterations, hypothesis rows decoded, mean position, rows per
  iteration (from `search(..., return_steps=True)`, one untimed pass)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import beam_search as bs  # pylint: disable=import-outside-toplevel

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
  def run(inputs):
    return bs.search(model, inputs, bs.default_max_decode_length(inputs, extra), alpha,
                     beam_size=beam, n_best=1, return_steps=True)[2]

  iterations, row_steps, position_rows, src_rows, widths = 0, 0, 0, 0, []
  sentences, src_tokens = 0, 0
  for _, inputs in batches:
    steps = np.asarray(run(inputs))
    sentences += len(steps)
    src_tokens += int(np.count_nonzero(inputs))
    iterations += int(steps.max())
    # Position 0 is decoded once per sentence, every later one once per beam.
    started = int(np.count_nonzero(steps))
    row_steps += beam * int(steps.sum()) - (beam - 1) * started
    # A sentence with s steps is a row at positions 0 .. s - 1 (cache lengths 0 .. s - 1).
    position_rows += beam * int((steps * (steps - 1) // 2).sum())
    src_rows += (beam * int(steps.sum()) - (beam - 1) * started) * inputs.shape[1]
    widths.append(inputs.shape[1])
  return {"batches": len(batches), "loop_iterations": iterations, "hypothesis_steps": row_steps,
          "rows_per_iteration": row_steps / iterations,
          "mean_cache_length": position_rows / row_steps,
          "mean_source_width": src_rows / row_steps,
          "mean_steps_per_sentence": row_steps / beam / sentences,
          "mean_source_length": src_tokens / sentences,
          "batch_widths": widths, "batch_rows": [len(b) for b, _ in batches]}


# --- report -------------------------------------------------------------------------------

def report(res):
  """Markdown tables of one run."""
  out = []
  w = res["whole"]
  out.append(f"{res['name']}: {res['lines']} lines, beam {res['beam_size']}, alpha "
             f"{res['alpha']}, extra {res['decode_extra_length']}, decode_batch_tokens "
             f"{res['decode_batch_tokens']}, {res['threads']} intra-op threads, inter-op "
             f"{res['inter_op'] or 'default'}, name scopes {res['name_scopes']}")
  out.append("\n| pass | wall [s] | CPU [s] | CPU/wall | output tokens | tokens/s | tokens/CPU-s "
             "| load |\n|---|---|---|---|---|---|---|---|")
  for i, (wall, cpu, tokens, load_) in enumerate(w["passes"], 1):
    out.append(f"| {i} | {wall:.2f} | {cpu:.2f} | {cpu / wall:.2f} | {tokens} "
               f"| {tokens / wall:.0f} | {tokens / cpu:.0f} | {load_:.2f} |")
  out.append(f"| median | {w['wall_s']:.2f} | {w['cpu_s']:.2f} | {w['cpu_s'] / w['wall_s']:.2f} "
             f"| {w['tokens']} | {w['tokens_per_s']:.0f} | {w['tokens_per_cpu_s']:.0f} | |")
  s = res["steps"]
  out.append(f"\nwork: {s['batches']} batches, {s['loop_iterations']} loop iterations, "
             f"{s['hypothesis_steps']} hypothesis rows decoded ({s['rows_per_iteration']:.0f} "
             f"per iteration), mean cache length {s['mean_cache_length']:.1f}, mean padded "
             f"source width {s['mean_source_width']:.1f}; per sentence "
             f"{s['mean_steps_per_sentence']:.2f} steps for {s['mean_source_length']:.2f} source "
             f"tokens (EOS included); per iteration "
             f"{1e3 * w['wall_s'] / s['loop_iterations']:.2f} ms wall")
  if "profile" in res:
    p = res["profile"]
    total = sum(p["by_bucket"].values())
    out.append(f"\nprofiled pass: wall {p['wall_s']:.2f} s, CPU {p['cpu_s']:.2f} s (unprofiled "
               f"median {w['wall_s']:.2f} / {w['cpu_s']:.2f}); {p['ops']} op events, op time "
               f"{total:.2f} s summed over threads; busy per thread "
               + ", ".join(f"{v:.2f}" for v in sorted(p["thread_busy_s"].values(), reverse=True))
               + f" s; some op running {p['any_thread_busy_s']:.2f} s of the wall "
               f"({100 * p['any_thread_busy_s'] / p['wall_s']:.0f} %), the executor (ops "
               f"included) {p['any_thread_executor_s']:.2f} s "
               f"({100 * p['any_thread_executor_s'] / p['wall_s']:.0f} %); executor time "
               f"outside traced ops (inline control flow, scheduling) "
               f"{p['executor_outside_ops_s']:.2f} s summed over threads")
    out.append("\n| bucket | ms | % of op time | ms per iteration | op events |\n"
               "|---|---|---|---|---|")
    for bucket, _ in BUCKETS:
      sec = p["by_bucket"].get(bucket, 0.0)
      if not sec:
        continue
      out.append(f"| {bucket} | {1e3 * sec:.0f} | {100 * sec / total:.1f} | "
                 f"{1e3 * sec / s['loop_iterations']:.3f} | {p['counts'].get(bucket, 0)} |")
    out.append(f"| total | {1e3 * total:.0f} | 100 | {1e3 * total / s['loop_iterations']:.3f} "
               f"| {p['ops']} |")
    out.append(f"| (executor outside traced ops, not in the total) "
               f"| {1e3 * p['executor_outside_ops_s']:.0f} "
               f"| {100 * p['executor_outside_ops_s'] / total:.1f} "
               f"| {1e3 * p['executor_outside_ops_s'] / s['loop_iterations']:.3f} | |")
    out.append("\n| bucket | op type | ms |\n|---|---|---|")
    for key, sec in sorted(p["by_type"].items(), key=lambda kv: -kv[1])[:30]:
      b, t = key.split("|")
      out.append(f"| {b} | {t} | {1e3 * sec:.0f} |")
    out.append("\n| op (top 25) | ms |\n|---|---|")
    for name, sec in p["top_ops"][:25]:
      out.append(f"| {name[-110:]} | {1e3 * sec:.0f} |")
  if "ablation" in res:
    a = res["ablation"]
    out.append(f"\nablations at rows {a['rows']}, cache length {a['cache_len']}, source width "
               f"{a['src_len']} ({a['calls']} calls, median of 5):\n\n| component | ms per call |"
               "\n|---|---|")
    for name, sec in a["ms"].items():
      out.append(f"| {name} | {sec:.3f} |")
  return "\n".join(out)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument("--model_dir", required=True,
                      help="trained model dir (weights and vocabulary; only the vocabulary "
                           "with --random_hparams)")
  parser.add_argument("--random_hparams", default="",
                      help="an hparams set (e.g. base) with random weights instead of the "
                           "model dir's")
  parser.add_argument("--input_file", default=DEFAULT_INPUT)
  parser.add_argument("--lines", type=int, default=500)
  parser.add_argument("--beam_size", type=int, default=0, help="0: the hparams'")
  parser.add_argument("--alpha", type=float, default=None, help="default: the hparams'")
  parser.add_argument("--decode_extra_length", type=int, default=None,
                      help="default: the hparams'")
  parser.add_argument("--decode_batch_tokens", type=int, default=4096, help="translate's default")
  parser.add_argument("--rounds", type=int, default=3, help="timed passes (after one warm-up)")
  parser.add_argument("--threads", type=int, default=2, help="intra-op threads")
  parser.add_argument("--inference_dtype", choices=("float32", "bfloat16"), default="float32",
                      help="the model's matmul dtype (bfloat16: translate's --inference_dtype)")
  parser.add_argument("--inter_op", type=int, default=0, help="inter-op threads (0: TF default)")
  parser.add_argument("--profile", type=int, choices=(0, 1), default=1)
  parser.add_argument("--name_scopes", type=int, choices=(0, 1), default=1)
  parser.add_argument("--ablation", type=int, choices=(0, 1), default=0)
  parser.add_argument("--ablation_calls", type=int, default=20)
  parser.add_argument("--logdir", default="runs/prof_decode/trace")
  parser.add_argument("--json_out", default=None)
  args = parser.parse_args(argv)

  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  if args.inter_op:
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  if args.name_scopes:
    _add_name_scopes()
  from t2t_repro.decoding import beam_search as bs  # pylint: disable=import-outside-toplevel

  model, hp, tokenizer = load(args)
  beam = args.beam_size or hp.beam_size
  alpha = hp.alpha if args.alpha is None else args.alpha
  extra = hp.decode_extra_length if args.decode_extra_length is None else args.decode_extra_length
  lines = _read_lines(args.input_file, args.lines)
  batches = make_batches(model, tokenizer, lines, args.decode_batch_tokens)
  name = (f"{args.random_hparams} (random weights)" if args.random_hparams
          else os.path.normpath(os.path.relpath(args.model_dir)))
  res = {"name": name, "lines": len(lines), "beam_size": beam, "alpha": alpha,
         "decode_extra_length": extra, "decode_batch_tokens": args.decode_batch_tokens,
         "threads": args.threads, "inter_op": args.inter_op, "name_scopes": args.name_scopes,
         "vocab_size": model.vocab_size, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
  print(f"{res['date']}; {name}; {len(lines)} lines in {len(batches)} batches; load "
        f"{os.getloadavg()[0]:.2f}", flush=True)

  def decode(inputs):
    return bs.beam_search(model, inputs, beam_size=beam, alpha=alpha, n_best=1,
                          decode_extra_length=extra)[0][:, 0]

  start = time.perf_counter()
  decode(batches[0][1][:1])
  res["trace_s"] = time.perf_counter() - start
  timed_pass(decode, batches)  # warm-up pass (oneDNN primitives of the shapes seen)
  passes = []
  for r in range(args.rounds):
    passes.append(timed_pass(decode, batches))
    print(f"pass {r + 1}: wall {passes[-1][0]:.2f} s, CPU {passes[-1][1]:.2f} s, "
          f"load {passes[-1][3]:.2f}", flush=True)
  wall = statistics.median(p[0] for p in passes)
  cpu = statistics.median(p[1] for p in passes)
  tokens = passes[0][2]
  res["whole"] = {"passes": passes, "wall_s": wall, "cpu_s": cpu, "tokens": tokens,
                  "tokens_per_s": tokens / wall, "tokens_per_cpu_s": tokens / cpu}
  res["steps"] = step_stats(model, batches, beam, alpha, extra)

  if args.profile:
    tf.profiler.experimental.start(args.logdir)
    wall_p, cpu_p, _, load_p = timed_pass(decode, batches)
    tf.profiler.experimental.stop()
    events, executor, path = trace_events(args.logdir)
    res["profile"] = dict(summarize_trace(events, executor), wall_s=wall_p, cpu_s=cpu_p,
                          load=load_p, trace=os.path.relpath(path))
  if args.ablation:
    s = res["steps"]
    rows = int(round(s["rows_per_iteration"]))
    cache_len, src_len = int(round(s["mean_cache_length"])), int(round(s["mean_source_width"]))
    ms = ablations(model, rows, cache_len, src_len, beam, args.ablation_calls)
    res["ablation"] = {"rows": rows - rows % beam, "cache_len": cache_len, "src_len": src_len,
                       "calls": args.ablation_calls, "ms": {k: 1e3 * v for k, v in ms.items()}}
  res["load_end"] = os.getloadavg()[0]
  print()
  print(report(res), flush=True)
  print(f"\nload at the end {res['load_end']:.2f}")
  if args.json_out:
    with open(args.json_out, "w", encoding="utf-8") as f:
      json.dump(res, f, indent=1,
                default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o))


if __name__ == "__main__":
  main()
