"""Training throughput of t2t_repro against two peers, on this machine.

For each model size (`tiny`, `small`, `base` from t2t_repro.config.hparams) the same
configuration is trained on the SAME synthetic batch (``peer_models.make_batch``: a
fixed token budget, `--batch` sentences x `--length` tokens per side, no
padding) by

  * ours        t2t_repro.training.Trainer.train_step (tf.function, no XLA),
  * ours_xla    the same with jit_compile=True (XLA per-replica forward/backward),
  * model_garden, torch   the peers of benchmarks/peer_models.py,

each (kind, oneDNN) measurement in a fresh subprocess (TF_ENABLE_ONEDNN_OPTS is
read at TensorFlow import), alternated over `--rounds` rounds because the
machine is shared and noisy. Reported per run: median step time [s], target
and source+target tokens/s, peak RSS [MiB] (process peak, framework import
included), achieved GFLOP/s (``peers.transformer_train_flops``: matmul FLOPs,
forward x 3), the same framework's dense float32 matmul peak measured in the
same process right after the timed steps, and MFU = achieved / peak. The
summary gives medians over rounds and the ratios ours / Model Garden and
ours / PyTorch.

``--real_steps`` compares ours and Model Garden on the SAME real bucketed batches
(kinds ``ours_real`` / ``model_garden_real``, alternated over ``--real_rounds``):
each child builds the first warm-up + steps batches of Multi30k train with the
project's tokenizer and ``batching.make_dataset`` (seeded shuffle, so both kinds
get identical padded batches; a checksum of the ids is reported and compared),
then trains on them in order. Real (non-pad) target tokens/s of the whole run,
input pipeline excluded. Unlike the synthetic batch, these have padding, which
Model Garden projects to the vocabulary and ours does not.

``--e2e_steps`` also measures ours end to end on real bucketed Multi30k data
(the project's tokenizer + ``batching.make_dataset``, the same
input `python -m t2t_repro.train` uses): real (non-pad) tokens/s including the
input pipeline, and the input pipeline alone (batches/s with no training), so
the pipeline can be checked not to be the bottleneck.

Commands (see docs/BENCHMARKS.md for the measured tables)::

  python benchmarks/train_throughput.py --sizes=small --rounds=3 --steps=5
  python benchmarks/train_throughput.py --sizes=base --onednn=on --rounds=1 \
      --steps=2 --warmup=1
  # only the end-to-end rate on Multi30k (no synthetic rounds):
  python benchmarks/train_throughput.py --rounds=0 --onednn=on --e2e_steps=20 \
      --model_dir=runs/m30k_b
  # ours vs Model Garden on identical real Multi30k batches:
  python benchmarks/train_throughput.py --rounds=0 --onednn=on --real_steps=20 \
      --real_rounds=2 --model_dir=runs/m30k_b
  # one measurement (what the subprocesses run):
  python benchmarks/train_throughput.py --child=ours --size=small --onednn=1
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # pylint: disable=wrong-import-position
import peer_models  # pylint: disable=wrong-import-position
import peers  # pylint: disable=wrong-import-position
OURS_KINDS = ("ours", "ours_xla", "ours_bf16")
ALL_KINDS = OURS_KINDS + ("model_garden", "torch")
E2E_KIND = "ours_e2e"
REAL_KINDS = ("ours_real", "model_garden_real")
DEFAULT_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                "data")


def peer_config(size, batch, length):
  """The peers' config dict for an hparams set at a fixed token budget.

  Args:
    size: hparams set name ("tiny", "small", "base", ...).
    batch: sentences per step.
    length: tokens per sentence, source and target.

  Returns:
    dict for ``peer_models.full_config`` (layers, widths, heads, vocab, dropouts,
    label smoothing from the hparams set; batch x length x length).
  """
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  hp = get_hparams(size)
  return {"num_layers": hp.num_layers, "d_model": hp.d_model, "d_ff": hp.d_ff,
          "num_heads": hp.num_heads, "vocab_size": hp.vocab_size, "dropout": hp.dropout,
          "attention_dropout": hp.attention_dropout, "relu_dropout": hp.relu_dropout,
          "label_smoothing": hp.label_smoothing, "batch": batch, "src_len": length,
          "tgt_len": length}


def _make_trainer(size, jit_compile, mixed_precision, vocab_size=None):
  """A fresh Trainer for hparams `size` on one CPU device, in a scratch model dir."""
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.training.trainer import Trainer, make_strategy  # pylint: disable=import-outside-toplevel
  hp = get_hparams(size)
  if vocab_size is not None:
    hp = hp.replace(vocab_size=vocab_size)
  return Trainer(hp, make_strategy("one_device"), tempfile.mkdtemp(prefix="t2t_bench_"),
                 jit_compile=jit_compile, mixed_precision=mixed_precision)


def ours_step_fn(size, config, jit_compile=False, mixed_precision="none"):
  """One `Trainer.train_step` on a fixed synthetic batch, as a zero-arg callable.

  The batch (``peer_models.make_batch(config)``) is repeated by a tf.data pipeline whose
  iterator the step reads, as in real training; the
  callable returns when the step's stats have been fetched (``.numpy()``).
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  trainer = _make_trainer(size, jit_compile, mixed_precision)
  batch = peer_models.make_batch(config)
  ds = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()}).repeat()
  iterator = iter(ds)
  step = lambda: trainer.train_step(iterator)
  step.trainer = trainer
  return step


def e2e_measure(size, model_dir, data_dir, steps, warmup, jit_compile=False):
  """Ours on real bucketed Multi30k batches, input pipeline included.

  Args:
    size: hparams set; its batch_tokens gives the buckets' token budget.
    model_dir: a model dir with `vocab.model` (the tokenizer; e.g. runs/m30k_b).
    data_dir: folder holding multi30k/ (default: the project's data dir).
    steps, warmup: timed / untimed training steps.

  Returns:
    dict: e2e_target_tokens_per_s, e2e_total_tokens_per_s (real, non-pad
    tokens per wall second of `steps` consecutive steps), e2e_padded_tokens_per_s
    (padded source+target positions), e2e_step_s (mean), pipeline_batches_per_s
    and pipeline_padded_tokens_per_s (a fresh copy of the pipeline iterated
    alone for the same number of batches), peak_rss_bytes.
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.data import batching, problems  # pylint: disable=import-outside-toplevel
  from t2t_repro.data.vocab import Tokenizer  # pylint: disable=import-outside-toplevel
  tokenizer = Tokenizer.from_file(os.path.join(model_dir, "vocab.model"))
  problem = problems.get_problem("translate_ende_multi30k", data_dir)
  pairs = problem.text_pairs("train").pairs
  trainer = _make_trainer(size, jit_compile, "none", vocab_size=tokenizer.vocab_size)
  hp = trainer.hparams

  def pipeline():
    return batching.make_dataset(
        pairs, tokenizer, batch_tokens=hp.batch_tokens, max_length=hp.max_length,
        training=True, seed=1, input_context=trainer.input_context())

  # Input pipeline alone (tokenize + cache on the first pass, shuffle, bucket, pad).
  it = iter(pipeline())
  for _ in range(warmup):
    next(it)
  start = time.perf_counter()
  padded = 0
  for _ in range(steps):
    b = next(it)
    padded += int(tf.size(b["inputs"])) + int(tf.size(b["targets"]))
  pipe_s = time.perf_counter() - start

  it = iter(pipeline())
  for _ in range(warmup):
    trainer.train_step(it)
  load_before = os.getloadavg()[0]
  cpu0, start = time.process_time(), time.perf_counter()
  tgt = src = 0.0
  for _ in range(steps):
    stats = trainer.train_step(it)
    tgt += stats["target_tokens"]
    src += stats["source_tokens"]
  wall = time.perf_counter() - start
  cpu = time.process_time() - cpu0
  return {"e2e_target_tokens_per_s": tgt / wall, "e2e_total_tokens_per_s": (tgt + src) / wall,
          "e2e_step_s": wall / steps, "pipeline_batches_per_s": steps / pipe_s,
          "pipeline_padded_tokens_per_s": padded / pipe_s, "steps": steps, "warmup": warmup,
          "process_cpu_per_wall": cpu / wall, "loadavg_1min_before": load_before,
          "retraces": trainer._train_step.experimental_get_tracing_count(),  # pylint: disable=protected-access
          "peak_rss_bytes": benchlib.peak_rss_bytes()}


def real_batches(size, model_dir, data_dir, count):
  """The first `count` padded batches of Multi30k train, as `python -m t2t_repro.train`
  would feed them (size's batch_tokens and max_length, shuffle seed 1).

  Returns:
    (batches, vocab_size): list of {"inputs", "targets"} int32 numpy arrays
    [batch, length] (pad 0), and the tokenizer's vocabulary size.

  Raises:
    tf.errors.NotFoundError: no vocab.model in model_dir (names the path).
    errors.MissingDataError: no Multi30k train files under data_dir (names them).
  """
  from t2t_repro.data import batching, problems  # pylint: disable=import-outside-toplevel
  from t2t_repro.data.vocab import Tokenizer  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  hp = get_hparams(size)
  tokenizer = Tokenizer.from_file(os.path.join(model_dir, "vocab.model"))
  pairs = problems.get_problem("translate_ende_multi30k", data_dir).text_pairs("train").pairs
  ds = batching.make_dataset(pairs, tokenizer, batch_tokens=hp.batch_tokens,
                             max_length=hp.max_length, training=True, seed=1)
  return [{k: v.numpy() for k, v in b.items()} for b in ds.take(count)], tokenizer.vocab_size


def real_measure(kind, size, model_dir, data_dir, steps, warmup):
  """`ours_real` or `model_garden_real`: training on the same real batches, in order.

  Returns:
    dict: real_target_tokens_per_s, real_total_tokens_per_s (non-pad tokens of the
    `steps` timed batches per wall second), padded_fraction_target (pad share of
    the target positions), step_s (mean), batches_checksum, steps, warmup,
    process_cpu_per_wall, loadavg_1min_before, peak_rss_bytes.
  """
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  batches, vocab_size = real_batches(size, model_dir, data_dir, warmup + steps)
  if kind == "ours_real":
    trainer = _make_trainer(size, False, "none", vocab_size=vocab_size)
    spec = tf.TensorSpec([None, None], tf.int32)
    ds = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature={
        "inputs": spec, "targets": spec})
    iterator = iter(ds)
    step = lambda: trainer.train_step(iterator)
  else:
    config = dict(peer_config(size, 1, 1), vocab_size=vocab_size)
    step = peer_models.model_garden_step_fn(config, batches=batches)
  for _ in range(warmup):
    step()
  timed = batches[warmup:]
  load_before = os.getloadavg()[0]
  cpu0, start = time.process_time(), time.perf_counter()
  for _ in timed:
    step()
  wall = time.perf_counter() - start
  cpu = time.process_time() - cpu0
  tgt = sum(int(np.count_nonzero(b["targets"])) for b in timed)
  src = sum(int(np.count_nonzero(b["inputs"])) for b in timed)
  padded_tgt = sum(b["targets"].size for b in timed)
  return {"real_target_tokens_per_s": tgt / wall, "real_total_tokens_per_s": (tgt + src) / wall,
          "padded_fraction_target": 1.0 - tgt / padded_tgt, "step_s": wall / steps,
          "batches_checksum": int(sum(int(b["inputs"].sum()) + 7 * int(b["targets"].sum())
                                      for b in batches)),
          "steps": steps, "warmup": warmup, "process_cpu_per_wall": cpu / wall,
          "loadavg_1min_before": load_before, "peak_rss_bytes": benchlib.peak_rss_bytes()}


def matmul_peak_gflops_tf_bf16(n=2048, repeats=10):
  """Dense bfloat16 n x n matmul rate of TensorFlow (AVX512_BF16 via oneDNN) [GFLOP/s].

  As ``peers.matmul_peak_gflops_tf`` (median of `repeats` eager calls after 2
  warm-up calls, 2 n^3 FLOP each) with bfloat16 operands.
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  a = tf.random.uniform((n, n), dtype=tf.float32)
  a, b = tf.cast(a, tf.bfloat16), tf.cast(tf.transpose(a), tf.bfloat16)
  times = []
  for i in range(repeats + 2):
    start = time.perf_counter()
    _ = tf.linalg.matmul(a, b)[0, 0].numpy()
    if i >= 2:
      times.append(time.perf_counter() - start)
  return 2.0 * n ** 3 / statistics.median(times) / 1e9


def _run_child(kind, size, config, steps, warmup, model_dir, data_dir):
  """One measurement in THIS process (TF must not be imported yet)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  info = {"kind": kind, "size": size, "framework": "tensorflow " + tf.__version__,
          "onednn": benchlib.onednn_enabled(),
          "config": peer_models.full_config(config)}
  start = time.perf_counter()
  if kind == E2E_KIND:
    info.update(e2e_measure(size, model_dir, data_dir, steps, warmup))
    return info
  if kind in REAL_KINDS:
    info.update(real_measure(kind, size, model_dir, data_dir, steps, warmup))
    return info
  step = ours_step_fn(size, config, jit_compile=kind == "ours_xla",
                      mixed_precision="mixed_bfloat16" if kind == "ours_bf16" else "none")
  info["build_s"] = time.perf_counter() - start
  info.update(peers.measure(step, warmup, steps, config))
  info["loss_after"] = step()["loss"]
  info["retraces"] = step.trainer._train_step.experimental_get_tracing_count()  # pylint: disable=protected-access
  info["matmul_peak_gflops"] = peers.matmul_peak_gflops_tf()
  info["mfu"] = info["achieved_gflops"] / info["matmul_peak_gflops"]
  if kind == "ours_bf16":  # also against the peak of the precision it runs in
    info["matmul_peak_gflops_bf16"] = matmul_peak_gflops_tf_bf16()
    info["mfu_bf16"] = info["achieved_gflops"] / info["matmul_peak_gflops_bf16"]
  return info


def run_isolated(kind, size, config, onednn, steps, warmup, model_dir=None, data_dir=None,
                 timeout=1200):
  """One measurement in a fresh process with TF_ENABLE_ONEDNN_OPTS set
  (`benchlib.run_isolated`); the peers' via `peers.run_isolated`."""
  if kind in ("model_garden", "torch"):
    res = peers.run_isolated(kind, config, onednn, steps, warmup, timeout)
    res["size"] = size
    return res
  flags = [f"--child={kind}", f"--size={size}", f"--config={json.dumps(config)}",
           f"--steps={steps}", f"--warmup={warmup}"]
  flags += [f"--model_dir={model_dir}"] if model_dir else []
  flags += [f"--data_dir={data_dir}"] if data_dir else []
  return benchlib.run_isolated(__file__, flags, onednn, timeout)


_HEADER = ("| size | kind | oneDNN | round | median step [s] | target tok/s | src+tgt tok/s | "
           "peak RSS [MiB] | GFLOP/s | matmul peak GFLOP/s | MFU | CPU/wall | load |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _row(r):
  return (f"| {r['size']} | {r['kind']} | {'on' if r['onednn'] else 'off'} | {r['round']} "
          f"| {r['median_step_s']:.3f} | {r['target_tokens_per_s']:.0f} "
          f"| {r['total_tokens_per_s']:.0f} | {r['peak_rss_bytes'] / 2**20:.0f} "
          f"| {r['achieved_gflops']:.1f} | {r['matmul_peak_gflops']:.1f} | {r['mfu']:.2f}{_bf16(r)} "
          f"| {r['process_cpu_per_wall']:.2f} | {r['loadavg_1min_before']:.1f} |")


def _bf16(r):
  """` (bf16 peak P: MFU m)` for a mixed_bfloat16 run, else ''."""
  if "mfu_bf16" not in r:
    return ""
  return f" (bf16 peak {r['matmul_peak_gflops_bf16']:.0f}: {r['mfu_bf16']:.2f})"


def summarize(results):
  """Markdown: per (size, oneDNN, kind) medians over rounds, and ratios of ours to the peers.

  Ratios are of the medians of target tokens/s (identical batches, so the same
  as src+tgt ratios).
  """
  synthetic = [r for r in results if r["kind"] != E2E_KIND and r["kind"] not in REAL_KINDS]
  med = {}
  for r in synthetic:
    med.setdefault((r["size"], r["onednn"], r["kind"]), []).append(r["target_tokens_per_s"])
  med = {key: statistics.median(values) for key, values in med.items()}
  for r in synthetic:
    for peer in ("model_garden", "torch"):
      if r["kind"] in OURS_KINDS and (r["size"], r["onednn"], peer) in med:
        r[f"vs_{peer}"] = (med[(r["size"], r["onednn"], r["kind"])]
                           / med[(r["size"], r["onednn"], peer)])
    r["peak_rss_mib"] = r["peak_rss_bytes"] / 2**20
  lines = [benchlib.summarize(
      synthetic, ("size", "onednn", "kind"),
      [("median target tok/s", "target_tokens_per_s", "{:.0f}"),
       ("min", "target_tokens_per_s", "{:.0f}", min), ("max", "target_tokens_per_s", "{:.0f}", max),
       ("median src+tgt tok/s", "total_tokens_per_s", "{:.0f}"),
       ("median step [s]", "median_step_s", "{:.3f}"), ("median MFU", "mfu", "{:.2f}"),
       ("median MFU of the bf16 peak", "mfu_bf16", "{:.2f}"),
       ("peak RSS [MiB]", "peak_rss_mib", "{:.0f}", max),
       ("/ Model Garden", "vs_model_garden", "{:.2f}"), ("/ PyTorch", "vs_torch", "{:.2f}")])
           ] if synthetic else []
  real = [r for r in results if r["kind"] in REAL_KINDS]
  if real:
    lines += ["", "| size | kind | round | real target tok/s | real src+tgt tok/s | step [s] | "
              "target pad share | batches checksum | CPU/wall | load | peak RSS [MiB] |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in real:
      lines.append(
          f"| {r['size']} | {r['kind']} | {r['round']} | {r['real_target_tokens_per_s']:.0f} "
          f"| {r['real_total_tokens_per_s']:.0f} | {r['step_s']:.3f} "
          f"| {r['padded_fraction_target']:.3f} | {r['batches_checksum']} "
          f"| {r['process_cpu_per_wall']:.2f} | {r['loadavg_1min_before']:.1f} "
          f"| {r['peak_rss_bytes'] / 2**20:.0f} |")
    ours, garden = ([r["real_target_tokens_per_s"] for r in real if r["kind"] == k]
                    for k in REAL_KINDS)
    if ours and garden:
      lines.append(f"\nours_real / model_garden_real (medians): "
                   f"{statistics.median(ours) / statistics.median(garden):.2f}x real target "
                   f"tokens/s; identical batches: "
                   f"{len({r['batches_checksum'] for r in real}) == 1}")
  e2e = [r for r in results if r["kind"] == E2E_KIND]
  if e2e:
    lines += ["", "| size | oneDNN | real target tok/s | real src+tgt tok/s | step [s] | "
              "pipeline alone [batches/s] | pipeline / train steps per s | CPU/wall | load | "
              "retraces | peak RSS [MiB] |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in e2e:
      lines.append(
          f"| {r['size']} | {'on' if r['onednn'] else 'off'} | {r['e2e_target_tokens_per_s']:.0f} "
          f"| {r['e2e_total_tokens_per_s']:.0f} | {r['e2e_step_s']:.3f} "
          f"| {r['pipeline_batches_per_s']:.1f} "
          f"| {r['pipeline_batches_per_s'] * r['e2e_step_s']:.0f}x "
          f"| {r['process_cpu_per_wall']:.2f} | {r['loadavg_1min_before']:.1f} "
          f"| {r['retraces']} | {r['peak_rss_bytes'] / 2**20:.0f} |")
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sizes", default="tiny,small,base")
  parser.add_argument("--kinds", default="ours,ours_xla,model_garden,torch",
                      help=f"comma list of {ALL_KINDS}")
  parser.add_argument("--onednn", choices=("on", "off", "both"), default="both")
  parser.add_argument("--batch", type=int, default=170, help="sentences per step")
  parser.add_argument("--length", type=int, default=24, help="tokens per sentence and side")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--base_steps", type=int, default=None,
                      help="--steps for `base` (its steps are ~10x longer); default --steps")
  parser.add_argument("--e2e_steps", type=int, default=0,
                      help="also ours on real Multi30k batches for this many steps (0: skip)")
  parser.add_argument("--real_steps", type=int, default=0,
                      help="also ours vs Model Garden on the same real Multi30k batches for "
                      "this many steps (0: skip)")
  parser.add_argument("--real_rounds", type=int, default=2)
  parser.add_argument("--real_size", default="small", help="hparams set of the real-batch runs")
  parser.add_argument("--model_dir", default=None,
                      help="model dir with vocab.model (e2e and real-batch runs)")
  parser.add_argument("--data_dir", default=os.environ.get("T2T_DATA_DIR", DEFAULT_DATA_DIR),
                      help="data dir with multi30k/ (e2e); default $T2T_DATA_DIR or "
                      "<repo>/../shared/data")
  parser.add_argument("--json_out", default=None)
  parser.add_argument("--child", choices=OURS_KINDS + (E2E_KIND,) + REAL_KINDS, default=None,
                      help=argparse.SUPPRESS)
  parser.add_argument("--size", default="small", help=argparse.SUPPRESS)
  parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)

  if args.child:
    config = json.loads(args.config) if args.config else peer_config(args.size, args.batch,
                                                                      args.length)
    benchlib.print_result(_run_child(args.child, args.size, config, args.steps, args.warmup,
                                     args.model_dir, args.data_dir))
    return

  onednn = {"on": (True,), "off": (False,), "both": (True, False)}[args.onednn]
  kinds = args.kinds.split(",")
  if set(kinds) - set(ALL_KINDS):
    parser.error(f"--kinds: unknown {sorted(set(kinds) - set(ALL_KINDS))}")
  for peer in ("model_garden", "torch"):
    skipped = benchlib.missing_peer(peer) if peer in kinds or (
        peer == "model_garden" and args.real_steps) else None
    if skipped:
      print(skipped, flush=True)
      kinds = [k for k in kinds if k != peer]
  print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {os.cpu_count()} CPUs; "
        f"token budget {args.batch} x {args.length} per side", flush=True)
  print(_HEADER, flush=True)
  results = []
  for r in range(args.rounds):
    for size in args.sizes.split(","):
      config = peer_config(size, args.batch, args.length)
      steps = args.base_steps if size == "base" and args.base_steps else args.steps
      for on in onednn:
        for kind in kinds:
          res = run_isolated(kind, size, config, on, steps, args.warmup)
          res["round"] = r
          results.append(res)
          print(_row(res), flush=True)
  if args.real_steps:
    if not args.model_dir:
      parser.error("--real_steps needs --model_dir (for vocab.model)")
    skipped = benchlib.missing_peer("model_garden")
    if skipped:
      print(skipped, flush=True)
    for r in range(args.real_rounds):
      for kind in REAL_KINDS[:1] if skipped else REAL_KINDS:
        res = run_isolated(kind, args.real_size, None, onednn[0], args.real_steps, args.warmup,
                           os.path.abspath(args.model_dir), args.data_dir)
        res["round"] = r
        results.append(res)
        print(f"{kind} round {r}: {res['real_target_tokens_per_s']:.0f} real target tok/s",
              flush=True)
  if args.e2e_steps:
    if not args.model_dir:
      parser.error("--e2e_steps needs --model_dir (for vocab.model)")
    for on in onednn:
      res = run_isolated(E2E_KIND, "small", None, on, args.e2e_steps, args.warmup,
                         os.path.abspath(args.model_dir), args.data_dir)
      res["round"] = 0
      results.append(res)
  print()
  print(summarize(results), flush=True)
  if args.json_out:
    from t2t_repro import fileio  # pylint: disable=import-outside-toplevel
    fileio.write_json(args.json_out, results)


if __name__ == "__main__":
  main()
