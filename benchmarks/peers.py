"""Training-throughput harness for the peer Transformer implementations.

The peers themselves (TF Model Garden's ``Seq2SeqTransformer`` and PyTorch's
``nn.Transformer``), the config dict and the synthetic batch are in
``benchmarks/peer_models.py``; this module counts FLOPs, times steps, measures
the matmul peak, and runs each (framework, oneDNN) measurement in a fresh
process.

APIs (times in seconds, rates in tokens/s, memory in bytes, FLOPs in FLOP):
  measure(step_fn, warmup, steps, config=None) -> dict (median_step_s, ...)
  matmul_peak_gflops_tf(n, repeats)    -> float GFLOP/s (dense float32)
  matmul_peak_gflops_torch(n, repeats) -> float GFLOP/s (dense float32)
  transformer_train_flops(config)      -> float FLOP per training step
  run_isolated(kind, config, onednn, steps, warmup) -> dict, in a subprocess
  run_table(config, rounds, steps, warmup) -> list of dicts + markdown

Command line (one measurement, prints one line ``BENCH_RESULT {json}``)::

  python benchmarks/peers.py --kind=torch --config='{"batch": 170}' \
      --onednn=1 --steps=10 --warmup=3
  python benchmarks/peers.py --table --rounds=3 --steps=10 --warmup=3 \
      --min_idle=0.85 --json_out=/tmp/peers.json

``--min_idle`` waits before each run until the (shared) machine's CPUs are
that idle; every result also records ``process_cpu_per_wall`` and the load
average, so runs that shared the cores with other processes show up.

``TF_ENABLE_ONEDNN_OPTS`` is read when TensorFlow is imported, so every
(framework, oneDNN) measurement runs in a fresh process: ``run_isolated`` sets
the variable in the child's environment before anything imports TF. For the
torch peer the flag also sets ``torch.backends.mkldnn.enabled``; torch's
float32 ``Linear`` / ``bmm`` go to MKL sgemm either way, so expect no change.
"""

import argparse
import json
import os
import statistics
import sys
import time

import benchlib
from benchlib import peak_rss_bytes
from peer_models import (full_config, make_batch, model_garden_step_fn,
                         torch_step_fn)


# ----------------------------------------------------------------- FLOPs --


def transformer_forward_flops(config=None):
  """Forward-pass matmul FLOPs of one batch, by component (dict, FLOP).

  Counts 2 FLOP per multiply-add of every dense matmul the model computes,
  with B = batch, S = src_len, T = tgt_len, d = d_model, f = d_ff,
  V = vocab_size, N = num_layers (encoder = decoder layers), d_k = d_v =
  d / h (so heads do not change the count):

    encoder, per layer:   B*S*(8 d^2)      Q, K, V, output projections
                          B*S*(4 S d)      Q K^T (2 S d) and A V (2 S d)
                          B*S*(4 d f)      FFN, two matmuls
    decoder, per layer:   B*T*(8 d^2)      self-attention projections
                          B*T*(4 T d)      self-attention Q K^T and A V
                          B*T*(4 d^2)      cross-attention Q and output proj.
                          B*S*(4 d^2)      cross-attention K, V of the memory
                          B*T*(4 S d)      cross-attention Q K^T and A V
                          B*T*(4 d f)      FFN
    output projection:    B*T*(2 d V)      pre-softmax linear over the vocab

  Not counted: embedding lookups (gathers), softmax, LayerNorm, dropout,
  residual adds, the loss, the optimizer update (all O(B*L*d) or
  O(params), a few % at most). The causal self-attention is counted as the
  full T x T product because the implementations compute it densely.
  """
  cfg = full_config(config)
  b, s, t = cfg["batch"], cfg["src_len"], cfg["tgt_len"]
  d, f, v, n = cfg["d_model"], cfg["d_ff"], cfg["vocab_size"], cfg["num_layers"]
  return {
      "encoder": n * b * s * (8 * d * d + 4 * s * d + 4 * d * f),
      "decoder": n * (b * t * (8 * d * d + 4 * t * d + 4 * d * d + 4 * s * d
                               + 4 * d * f)
                      + b * s * 4 * d * d),
      "output_projection": b * t * 2 * d * v,
  }


def transformer_train_flops(config=None):
  """Matmul FLOPs of one training step (forward + backward) [FLOP].

  = 3 x the forward matmul FLOPs of ``transformer_forward_flops``: the
  backward pass computes, for every matmul Y = X W, both dL/dX = dL/dY W^T
  and dL/dW = X^T dL/dY, each as costly as the forward product (for the
  attention products Q K^T and A V both operands are activations, same 2x).
  For SMALL_CONFIG: 187.6e9 FLOP per step (encoder 19.6e9, decoder 26.3e9,
  output projection 16.7e9 forward).

  Cross-check: without the attention-score terms (the 4 S d and 4 T d per
  token) this is the usual 6 x params x tokens rule, with matmul weights
  (biases, LayerNorm and the embedding gather excluded) counted against the
  tokens they are applied to: per source token the encoder's 4d^2 + 2df per
  layer plus the decoder's cross-attention K, V (2d^2 per layer); per target
  token the decoder's 6d^2 + 2df per layer plus the d x V softmax matrix.
  SMALL_CONFIG: 6 x params x tokens = 184.9e9, attention scores 2.7e9
  (0.9e9 each for encoder self-, decoder self- and cross-attention).
  """
  return 3.0 * float(sum(transformer_forward_flops(config).values()))


# --------------------------------------------------------------- measure --


def measure(step_fn, warmup, steps, config=None):
  """Times a zero-arg, blocking training-step callable.

  Args:
    step_fn: runs ONE training step and returns when it is done.
    warmup: untimed calls first (tracing, allocator warm-up).
    steps: timed calls, each timed separately with time.perf_counter.
    config: optional config dict; adds token rates and FLOP rates.

  Returns:
    dict with median_step_s, mean_step_s, min_step_s, max_step_s [s],
    step_times_s (list) [s], warmup, steps, peak_rss_bytes (process peak
    since start, includes the framework import) [bytes],
    process_cpu_per_wall (CPU s of this process per wall s while timing;
    ~2.0 when it had both cores), loadavg_1min_before / _after (machine load,
    a noise indicator); with config also
    target_tokens_per_s, total_tokens_per_s (source + target) [tokens/s]
    from the median step, train_flops_per_step [FLOP], achieved_gflops
    [GFLOP/s].
  """
  for _ in range(warmup):
    step_fn()
  load_before = os.getloadavg()[0]
  cpu_start, wall_start = time.process_time(), time.perf_counter()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step_fn()
    times.append(time.perf_counter() - start)
  cpu_s = time.process_time() - cpu_start
  wall_s = time.perf_counter() - wall_start
  median = statistics.median(times)
  result = {
      "median_step_s": median,
      "mean_step_s": statistics.fmean(times),
      "min_step_s": min(times),
      "max_step_s": max(times),
      "step_times_s": times,
      "warmup": warmup,
      "steps": steps,
      "peak_rss_bytes": peak_rss_bytes(),
      # CPU seconds of all this process's threads per wall second of the
      # timed steps (2.0 = both cores busy with us); < ~1.8 on a 2-core
      # machine usually means other processes took cores.
      "process_cpu_per_wall": cpu_s / wall_s,
      "loadavg_1min_before": load_before,
      "loadavg_1min_after": os.getloadavg()[0],
  }
  if config is not None:
    cfg = full_config(config)
    tgt_tokens = cfg["batch"] * cfg["tgt_len"]
    src_tokens = cfg["batch"] * cfg["src_len"]
    flops = transformer_train_flops(cfg)
    result.update({
        "target_tokens_per_s": tgt_tokens / median,
        "total_tokens_per_s": (tgt_tokens + src_tokens) / median,
        "train_flops_per_step": flops,
        "achieved_gflops": flops / median / 1e9,
    })
  return result


# ----------------------------------------------------------- matmul peak --


def matmul_peak_gflops_tf(n=2048, repeats=10):
  """Dense float32 n x n matmul rate of TensorFlow on this machine [GFLOP/s].

  Median over `repeats` eager ``tf.linalg.matmul`` calls (2 n^3 FLOP each)
  after 2 warm-up calls. Respects TF_ENABLE_ONEDNN_OPTS as set at TF import.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  a = tf.random.uniform((n, n), dtype=tf.float32)
  b = tf.random.uniform((n, n), dtype=tf.float32)
  times = []
  for i in range(repeats + 2):
    start = time.perf_counter()
    c = tf.linalg.matmul(a, b)
    _ = c[0, 0].numpy()  # blocks (eager CPU ops are synchronous anyway)
    if i >= 2:
      times.append(time.perf_counter() - start)
  return 2.0 * n ** 3 / statistics.median(times) / 1e9


def matmul_peak_gflops_torch(n=2048, repeats=10):
  """Dense float32 n x n matmul rate of PyTorch on this machine [GFLOP/s].

  Median over `repeats` ``torch.mm`` calls (2 n^3 FLOP each) after 2
  warm-up calls, with torch's default thread count.
  """
  import torch  # pylint: disable=g-import-not-at-top
  a = torch.rand(n, n, dtype=torch.float32)
  b = torch.rand(n, n, dtype=torch.float32)
  c = torch.empty(n, n, dtype=torch.float32)
  times = []
  with torch.no_grad():
    for i in range(repeats + 2):
      start = time.perf_counter()
      torch.mm(a, b, out=c)
      if i >= 2:
        times.append(time.perf_counter() - start)
  return 2.0 * n ** 3 / statistics.median(times) / 1e9


# ------------------------------------------------------------- isolation --

KINDS = ("model_garden", "torch", "matmul_tf", "matmul_torch")


def _run_kind(kind, config, onednn, steps, warmup, with_peak=True):
  """Runs one measurement in THIS process (TF must not be imported yet)."""
  cfg = full_config(config)
  info = {"kind": kind, "onednn": bool(onednn), "config": cfg,
          "env_TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
          "cpu_count": os.cpu_count()}
  start = time.perf_counter()
  if kind in ("torch", "matmul_torch"):
    import torch  # pylint: disable=g-import-not-at-top
    torch.backends.mkldnn.enabled = bool(onednn)
    info.update(framework="torch " + torch.__version__,
                threads=torch.get_num_threads())
  else:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    info.update(framework="tensorflow " + tf.__version__)
    if kind == "model_garden":
      import tf_keras  # pylint: disable=g-import-not-at-top
      info["framework"] += ", tf_keras " + tf_keras.__version__

  if kind in ("matmul_tf", "matmul_torch"):
    fn = matmul_peak_gflops_tf if kind == "matmul_tf" else (
        matmul_peak_gflops_torch)
    info["matmul_peak_gflops"] = fn()
    info["peak_rss_bytes"] = peak_rss_bytes()
    return info

  make = model_garden_step_fn if kind == "model_garden" else torch_step_fn
  step_fn = make(cfg, make_batch(cfg))
  info["build_s"] = time.perf_counter() - start
  info.update(measure(step_fn, warmup, steps, cfg))
  info["loss_after"] = step_fn()
  if with_peak:
    fn = matmul_peak_gflops_tf if kind == "model_garden" else (
        matmul_peak_gflops_torch)
    info["matmul_peak_gflops"] = fn()
    info["mfu"] = info["achieved_gflops"] / info["matmul_peak_gflops"]
  return info


def peer_of(kind):
  """The peer ("model_garden" or "torch") a kind needs, None for matmul_tf."""
  return {"model_garden": "model_garden", "torch": "torch", "matmul_torch": "torch"}.get(kind)


def run_isolated(kind, config=None, onednn=True, steps=10, warmup=3,
                 timeout=900):
  """One measurement in a fresh ``python benchmarks/peers.py`` process
  (``benchlib.run_isolated``: TF_ENABLE_ONEDNN_OPTS set in the child's environment, so it is
  in force when TensorFlow is imported there).

  Args:
    kind: "model_garden", "torch", "matmul_tf" or "matmul_torch".
    config: config dict (``peer_models``); None = ``peer_models.SMALL_CONFIG``.
    onednn: bool, TF_ENABLE_ONEDNN_OPTS (and torch.backends.mkldnn.enabled).
    steps, warmup: as in ``measure``.
    timeout: seconds before the child is killed.

  Returns:
    The child's result dict: ``measure`` keys plus kind, onednn, config,
    framework, build_s [s], matmul_peak_gflops [GFLOP/s], mfu (achieved /
    matmul peak, both float32), loss_after.

  Raises:
    ValueError: an unknown kind.
    RuntimeError: the child failed or printed no result line.
  """
  if kind not in KINDS:
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
  return benchlib.run_isolated(
      __file__, [f"--kind={kind}", f"--config={json.dumps(config or {})}",
                 f"--onednn={int(bool(onednn))}", f"--steps={steps}", f"--warmup={warmup}"],
      onednn, timeout)


def cpu_idle_fraction(interval=2.0):
  """Fraction of all cores' time idle over `interval` seconds (/proc/stat)."""
  def read():
    with open("/proc/stat") as f:
      values = [int(x) for x in f.readline().split()[1:]]
    return values[3] + values[4], sum(values[:8])  # idle + iowait, total
  idle0, total0 = read()
  time.sleep(interval)
  idle1, total1 = read()
  return (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(min_idle=0.9, max_wait_s=900.0, interval=2.0):
  """Sleeps until the machine is at least `min_idle` idle (shared machine).

  Returns:
    (waited_s [s], last idle fraction); gives up after max_wait_s.
  """
  start = time.perf_counter()
  while True:
    idle = cpu_idle_fraction(interval)
    waited = time.perf_counter() - start
    if idle >= min_idle or waited >= max_wait_s:
      return waited, idle


def run_table(config=None, rounds=3, steps=10, warmup=3,
              kinds=("model_garden", "torch"), log=None, min_idle=None,
              max_wait_s=900.0):
  """Alternates peers x oneDNN settings for `rounds` rounds, each isolated.

  Args:
    min_idle: if set, before each run wait (up to max_wait_s) until the
      machine's CPUs are at least this idle (e.g. 0.9), to dodge other users
      of a shared machine; the wait and idle fraction go in the result.

  Returns:
    list of result dicts (``run_isolated``), in run order, with "round".
  """
  results = []
  for kind in kinds:
    skipped = benchlib.missing_peer(peer_of(kind)) if peer_of(kind) else None
    if skipped:
      print(skipped, flush=True)
  kinds = [k for k in kinds if not peer_of(k) or not benchlib.missing_peer(peer_of(k))]
  for r in range(rounds):
    for kind in kinds:
      for onednn in (False, True):
        gate = {}
        if min_idle is not None:
          waited, idle = wait_for_idle(min_idle, max_wait_s)
          gate = {"waited_for_idle_s": waited, "idle_before": idle}
        res = run_isolated(kind, config, onednn, steps, warmup)
        res.update(gate)
        res["round"] = r
        results.append(res)
        if log:
          log(_row(res))
  return results


_HEADER = ("| peer | oneDNN | round | median step [s] | target tok/s | "
           "src+tgt tok/s | min..max step [s] | peak RSS [MiB] | "
           "achieved GFLOP/s | matmul peak GFLOP/s | MFU | CPU/wall | load | "
           "idle before |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _row(r):
  return (f"| {r['kind']} | {'on' if r['onednn'] else 'off'} | {r['round']} "
          f"| {r['median_step_s']:.3f} | {r['target_tokens_per_s']:.0f} "
          f"| {r['total_tokens_per_s']:.0f} "
          f"| {r['min_step_s']:.3f}..{r['max_step_s']:.3f} "
          f"| {r['peak_rss_bytes'] / 2**20:.0f} | {r['achieved_gflops']:.1f} "
          f"| {r['matmul_peak_gflops']:.1f} | {r['mfu']:.2f} "
          f"| {r['process_cpu_per_wall']:.2f} "
          f"| {r['loadavg_1min_before']:.1f} "
          f"| {r.get('idle_before', float('nan')):.2f} |")


def summarize(results):
  """Markdown: every run, then per (peer, oneDNN) medians over the rounds.

  The last two columns use the fastest single step of all rounds: on a
  shared machine it is the best estimate of the uncontended step time.
  """
  for r in results:
    r["best_step_target_tokens_per_s"] = (r["target_tokens_per_s"] * r["median_step_s"]
                                          / r["min_step_s"])
  return "\n".join([_HEADER] + [_row(r) for r in results]) + "\n\n" + benchlib.summarize(
      results, ("kind", "onednn"),
      [("median target tok/s", "target_tokens_per_s", "{:.0f}"),
       ("median step [s]", "median_step_s", "{:.3f}"), ("median MFU", "mfu", "{:.2f}"),
       ("best step [s]", "min_step_s", "{:.3f}", min),
       ("best-step target tok/s", "best_step_target_tokens_per_s", "{:.0f}", max)])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--kind", choices=KINDS)
  parser.add_argument("--config", default="{}",
                      help="JSON dict overriding peer_models.SMALL_CONFIG")
  parser.add_argument("--onednn", type=int, choices=(0, 1), default=None,
                      help="TF_ENABLE_ONEDNN_OPTS; must match the environment "
                      "(run_isolated sets it); default: the environment's")
  parser.add_argument("--steps", type=int, default=10)
  parser.add_argument("--warmup", type=int, default=3)
  parser.add_argument("--table", action="store_true",
                      help="alternate both peers x oneDNN off/on, isolated")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--min_idle", type=float, default=None,
                      help="with --table: wait before each run until the "
                      "CPUs are this idle (0..1), at most --max_wait_s")
  parser.add_argument("--max_wait_s", type=float, default=900.0)
  parser.add_argument("--json_out", default=None,
                      help="with --table: also write all result dicts here")
  args = parser.parse_args(argv)
  config = json.loads(args.config)

  if args.table:
    print(f"config: {json.dumps(full_config(config))}")
    print(f"train FLOPs per step: {transformer_train_flops(config):.4e}")
    print(_HEADER, flush=True)
    results = run_table(config, args.rounds, args.steps, args.warmup,
                        log=lambda row: print(row, flush=True),
                        min_idle=args.min_idle, max_wait_s=args.max_wait_s)
    print()
    print(summarize(results))
    if args.json_out:
      with open(args.json_out, "w") as f:
        json.dump(results, f, indent=1)
    return
  if not args.kind:
    parser.error("--kind or --table is required")
  skipped = benchlib.missing_peer(peer_of(args.kind)) if peer_of(args.kind) else None
  if skipped:
    print(skipped, flush=True)
    return
  if args.onednn is None:
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") not in ("0", "false")
  else:
    onednn = bool(args.onednn)
    if "tensorflow" in sys.modules:  # pragma: no cover - cannot happen here
      raise RuntimeError("TensorFlow imported before TF_ENABLE_ONEDNN_OPTS")
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = str(int(onednn))
  benchlib.print_result(_run_kind(args.kind, config, onednn, args.steps, args.warmup))


if __name__ == "__main__":
  main()
