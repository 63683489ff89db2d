"""Training-throughput harness for two peer Transformer implementations.

Peers (both post-norm, label smoothing 0.1, Adam, shared embedding / softmax):
  * "model_garden": TF Model Garden
    ``official.nlp.modeling.models.Seq2SeqTransformer`` (tf-models-official
    2.20, built on ``tf_keras``), trained with a ``tf.function`` step and the
    loss of ``official.nlp.tasks.translation`` (re-implemented below: importing
    that module drags in tensorflow_hub via ``official.nlp.tasks``).
  * "torch": PyTorch ``torch.nn.Transformer`` (eager, CPU), with embedding,
    sinusoidal positions, tied output projection,
    ``CrossEntropyLoss(label_smoothing=0.1)`` and ``torch.optim.Adam``.

Model Garden imports ``tf_keras`` directly and does NOT need
``TF_USE_LEGACY_KERAS=1``; nothing here sets global Keras state, so keras 3
keeps working in the same process. Install with ``benchmarks/install_peers.sh``
(see benchmarks/README.md, section "peers").

A config is a plain dict (see ``SMALL_CONFIG``)::

  {num_layers, d_model, d_ff, num_heads, vocab_size, dropout, batch, src_len,
   tgt_len}  (+ optional attention_dropout, relu_dropout, label_smoothing,
   learning_rate; default 0.0, 0.0, 0.1, 1e-4)

``dropout`` is the residual / embedding dropout (paper P_drop);
``attention_dropout`` (on attention weights) and ``relu_dropout`` (after the
FFN ReLU) default to 0 as in the paper and in our ``small`` set.

APIs (times in seconds, rates in tokens/s, memory in bytes, FLOPs in FLOP):
  make_batch(config, seed)             -> {"inputs", "targets"} int32 numpy
  model_garden_step_fn(config, batch)  -> zero-arg callable, one training step
  torch_step_fn(config, batch)         -> zero-arg callable, one training step
  measure(step_fn, warmup, steps, config=None) -> dict (median_step_s, ...)
  matmul_peak_gflops_tf(n, repeats)    -> float GFLOP/s (dense float32)
  matmul_peak_gflops_torch(n, repeats) -> float GFLOP/s (dense float32)
  transformer_train_flops(config)      -> float FLOP per training step
  run_isolated(kind, config, onednn, steps, warmup) -> dict, in a subprocess
  run_table(config, rounds, steps, warmup) -> list of dicts + markdown

Command line (one measurement, prints one line ``PEERS_RESULT {json}``)::

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
import math
import os
import resource
import statistics
import subprocess
import sys
import time

RESULT_PREFIX = "PEERS_RESULT "

# The issue's setting: `small`-like model, 170 sentences x 24 tokens per side.
SMALL_CONFIG = {
    "num_layers": 3,
    "d_model": 256,
    "d_ff": 1024,
    "num_heads": 4,
    "vocab_size": 8000,
    "dropout": 0.1,
    "batch": 170,
    "src_len": 24,
    "tgt_len": 24,
}

_DEFAULTS = {
    "attention_dropout": 0.0,
    "relu_dropout": 0.0,
    "label_smoothing": 0.1,
    "learning_rate": 1e-4,
}

PAD_ID = 0
EOS_ID = 1


def full_config(config=None):
  """SMALL_CONFIG, then _DEFAULTS, overridden by `config` (a dict)."""
  cfg = dict(SMALL_CONFIG)
  cfg.update(_DEFAULTS)
  cfg.update(config or {})
  unknown = set(cfg) - set(SMALL_CONFIG) - set(_DEFAULTS)
  if unknown:
    raise ValueError(f"unknown config keys: {sorted(unknown)}")
  if cfg["d_model"] % cfg["num_heads"]:
    raise ValueError("d_model must be divisible by num_heads")
  return cfg


def make_batch(config=None, seed=0):
  """A synthetic batch with no padding (every position is a real token).

  Args:
    config: config dict (batch, src_len, tgt_len, vocab_size used).
    seed: numpy RNG seed.

  Returns:
    {"inputs": int32 [batch, src_len], "targets": int32 [batch, tgt_len]}
    numpy arrays; ids uniform in [3, vocab_size), last position EOS (=1),
    pad = 0 nowhere (the project's convention: pad 0, eos 1, unk 2).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  cfg = full_config(config)
  rng = np.random.default_rng(seed)
  batch = {}
  for key, length in (("inputs", cfg["src_len"]), ("targets", cfg["tgt_len"])):
    ids = rng.integers(3, cfg["vocab_size"], size=(cfg["batch"], length),
                       dtype=np.int32)
    ids[:, -1] = EOS_ID
    batch[key] = ids
  return batch


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


def peak_rss_bytes():
  """Peak resident set size of this process so far [bytes] (ru_maxrss)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


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


# ---------------------------------------------------------- Model Garden --


def _model_garden_loss(logits, labels, smoothing, vocab_size):
  """official.nlp.tasks.translation's loss (_padded_cross_entropy_loss).

  Smoothed one-hot (1 - eps on the label, eps / (V - 1) elsewhere), softmax
  cross-entropy minus its minimum, summed over non-pad tokens and divided by
  their count. Same code as Model Garden 2.20, minus the length padding (our
  logits and labels have the same length).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  confidence = 1.0 - smoothing
  low_confidence = (1.0 - confidence) / tf.cast(vocab_size - 1, tf.float32)
  soft_targets = tf.one_hot(tf.cast(labels, tf.int32), depth=vocab_size,
                            on_value=confidence, off_value=low_confidence)
  xentropy = tf.nn.softmax_cross_entropy_with_logits(
      logits=logits, labels=soft_targets)
  normalizing_constant = -(
      confidence * tf.math.log(confidence)
      + tf.cast(vocab_size - 1, tf.float32) * low_confidence
      * tf.math.log(low_confidence + 1e-20))
  xentropy -= normalizing_constant
  weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
  return tf.reduce_sum(xentropy * weights) / tf.reduce_sum(weights)


def model_garden_step_fn(config=None, batch=None, batches=None):
  """One Model Garden Seq2SeqTransformer training step as a callable.

  Builds ``TransformerEncoder`` / ``TransformerDecoder`` (norm_first=False,
  i.e. post-norm; use_bias=False as in Model Garden's translation config)
  and ``Seq2SeqTransformer`` (shared embedding / softmax, sinusoidal
  positions), ``tf_keras.optimizers.Adam(lr, 0.9, 0.98, 1e-9)`` and a
  ``tf.function`` step (not XLA-compiled, Model Garden's default) computing
  forward, the label-smoothed loss, gradients and the update.

  Args:
    config: config dict (see module docstring).
    batch: {"inputs", "targets"} int32 arrays; default make_batch(config).
    batches: instead of `batch`, a list of such dicts of varying shapes (padded
      real batches, pad id 0), taken in turn, one per call; the step then has a
      [None, None] input signature (one trace for all shapes).

  Returns:
    A zero-arg callable that runs one step, blocks until it is done (fetches
    the loss) and returns the loss (float). The model and optimizer are built
    eagerly here; the first call traces the tf.function (use warm-up calls).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top

  cfg = full_config(config)
  if batch is None:
    batch = make_batch(cfg)
  block_kwargs = dict(
      num_layers=cfg["num_layers"],
      num_attention_heads=cfg["num_heads"],
      intermediate_size=cfg["d_ff"],
      activation="relu",
      dropout_rate=cfg["dropout"],
      attention_dropout_rate=cfg["attention_dropout"],
      intermediate_dropout=cfg["relu_dropout"],
      use_bias=False,
      norm_first=False,
      norm_epsilon=1e-6)
  model = models.Seq2SeqTransformer(
      vocab_size=cfg["vocab_size"],
      embedding_width=cfg["d_model"],
      dropout_rate=cfg["dropout"],
      encoder_layer=models.TransformerEncoder(**block_kwargs),
      decoder_layer=models.TransformerDecoder(**block_kwargs),
      eos_id=EOS_ID)
  optimizer = tf_keras.optimizers.Adam(
      learning_rate=cfg["learning_rate"], beta_1=0.9, beta_2=0.98,
      epsilon=1e-9)
  smoothing = cfg["label_smoothing"]
  vocab_size = cfg["vocab_size"]

  signature = [tf.TensorSpec([None, None], tf.int32)] * 2 if batches else None

  @tf.function(input_signature=signature)
  def train_step(inputs, targets):
    with tf.GradientTape() as tape:
      logits = model({"inputs": inputs, "targets": targets}, training=True)
      loss = _model_garden_loss(logits, targets, smoothing, vocab_size)
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  feed = [(tf.constant(b["inputs"], tf.int32), tf.constant(b["targets"], tf.int32))
          for b in (batches or [batch])]
  calls = [0]

  def step():
    inputs, targets = feed[calls[0] % len(feed)]
    calls[0] += 1
    return float(train_step(inputs, targets).numpy())

  return step


def model_garden_decoder(config=None, beam_size=4, alpha=0.6, extra_decode_length=50,
                         eos_id=EOS_ID):
  """Model Garden's beam search (``Seq2SeqTransformer`` with no targets) as a callable.

  Same model as `model_garden_step_fn` (post-norm, no biases, shared embedding /
  softmax), randomly initialized, in one ``tf.function`` with a
  ``[None, None]`` int32 signature (as Model Garden's translation export module
  serves it): Model Garden's own ``sequence_beam_search``, a ``tf.while_loop`` with
  a K/V cache that grows by concatenation (non-padded decode, as on CPU).

  Args:
    config: config dict (see module docstring); dropout is irrelevant here.
    beam_size, alpha: beam width and GNMT length-penalty exponent.
    extra_decode_length: output steps = source length + this.
    eos_id: end id; an id outside [0, vocab_size) makes every beam run the full
      source length + extra_decode_length steps (equal work for a comparison).

  Returns:
    A callable int32 numpy [batch, source_length] -> int32 numpy
    [batch, output_length], the best beam per sentence.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top

  cfg = full_config(config)
  block_kwargs = dict(
      num_layers=cfg["num_layers"], num_attention_heads=cfg["num_heads"],
      intermediate_size=cfg["d_ff"], activation="relu", dropout_rate=0.0,
      attention_dropout_rate=0.0, intermediate_dropout=0.0, use_bias=False,
      norm_first=False, norm_epsilon=1e-6)
  model = models.Seq2SeqTransformer(
      vocab_size=cfg["vocab_size"], embedding_width=cfg["d_model"], dropout_rate=0.0,
      extra_decode_length=extra_decode_length, beam_size=beam_size, alpha=alpha,
      encoder_layer=models.TransformerEncoder(**block_kwargs),
      decoder_layer=models.TransformerDecoder(**block_kwargs), eos_id=eos_id)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
  def search(inputs):
    return model({"inputs": inputs})["outputs"]

  return lambda inputs: search(tf.constant(inputs, tf.int32)).numpy()


# ----------------------------------------------------------------- torch --


def torch_step_fn(config=None, batch=None):
  """One ``torch.nn.Transformer`` training step (eager, CPU) as a callable.

  Model: ``nn.Embedding`` (scaled by sqrt(d_model)) + sinusoidal positions +
  dropout, ``nn.Transformer(batch_first=True, norm_first=False)`` (post-norm;
  torch adds a final LayerNorm to both stacks), output projection tied to
  the embedding. Decoder input = targets shifted right with pad 0; causal
  mask and key-padding masks passed as float additive masks. Loss
  ``nn.CrossEntropyLoss(label_smoothing, ignore_index=0)``; optimizer
  ``torch.optim.Adam(lr, betas=(0.9, 0.98), eps=1e-9)`` with torch's
  default (for-loop) CPU implementation. nn.Transformer applies its one
  ``dropout`` to residuals, attention weights and the FFN inner activation;
  the attention / FFN-inner rates are then set to the config's
  attention_dropout / relu_dropout (0 by default), like the other models.

  Args:
    config: config dict (see module docstring).
    batch: {"inputs", "targets"} int32 arrays; default make_batch(config).
    batches: instead of `batch`, a list of such dicts of varying shapes (padded
      real batches, pad id 0), taken in turn, one per call; the step then has a
      [None, None] input signature (one trace for all shapes).

  Returns:
    A zero-arg callable running forward, loss, backward and the Adam update;
    it returns the loss (float) and, eager CPU torch being synchronous, has
    finished all work when it returns.
  """
  import torch  # pylint: disable=g-import-not-at-top
  from torch import nn  # pylint: disable=g-import-not-at-top

  cfg = full_config(config)
  if batch is None:
    batch = make_batch(cfg)
  d, v = cfg["d_model"], cfg["vocab_size"]
  max_len = max(cfg["src_len"], cfg["tgt_len"])

  class TorchSeq2Seq(nn.Module):
    """Embedding + nn.Transformer + tied pre-softmax projection."""

    def __init__(self):
      super().__init__()
      self.embedding = nn.Embedding(v, d, padding_idx=PAD_ID)
      nn.init.normal_(self.embedding.weight, 0.0, d ** -0.5)
      position = torch.arange(max_len, dtype=torch.float32)[:, None]
      inv_freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32)
                           * (-math.log(10000.0) / d))
      pe = torch.zeros(max_len, d)
      pe[:, 0::2] = torch.sin(position * inv_freq)
      pe[:, 1::2] = torch.cos(position * inv_freq)
      self.register_buffer("pe", pe)
      self.dropout = nn.Dropout(cfg["dropout"])
      self.transformer = nn.Transformer(
          d_model=d, nhead=cfg["num_heads"],
          num_encoder_layers=cfg["num_layers"],
          num_decoder_layers=cfg["num_layers"],
          dim_feedforward=cfg["d_ff"], dropout=cfg["dropout"],
          activation="relu", batch_first=True, norm_first=False)
      for layer in self.transformer.encoder.layers:
        layer.self_attn.dropout = cfg["attention_dropout"]
        layer.dropout.p = cfg["relu_dropout"]
      for layer in self.transformer.decoder.layers:
        layer.self_attn.dropout = cfg["attention_dropout"]
        layer.multihead_attn.dropout = cfg["attention_dropout"]
        layer.dropout.p = cfg["relu_dropout"]

    def embed(self, ids):
      x = self.embedding(ids) * math.sqrt(d) + self.pe[:ids.shape[1]]
      return self.dropout(x)

    def forward(self, src, tgt):
      tgt_in = nn.functional.pad(tgt, (1, 0), value=PAD_ID)[:, :-1]
      neg_inf = float("-inf")
      src_pad = torch.zeros(src.shape, dtype=torch.float32).masked_fill(
          src == PAD_ID, neg_inf)
      tgt_pad = torch.zeros(tgt_in.shape, dtype=torch.float32)
      tgt_pad[:, 1:] = tgt_pad[:, 1:].masked_fill(tgt_in[:, 1:] == PAD_ID,
                                                  neg_inf)
      causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
      out = self.transformer(
          self.embed(src), self.embed(tgt_in), tgt_mask=causal,
          src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
          memory_key_padding_mask=src_pad, tgt_is_causal=True)
      return nn.functional.linear(out, self.embedding.weight)

  model = TorchSeq2Seq()
  model.train()
  loss_fn = nn.CrossEntropyLoss(label_smoothing=cfg["label_smoothing"],
                                ignore_index=PAD_ID)
  optimizer = torch.optim.Adam(model.parameters(), lr=cfg["learning_rate"],
                               betas=(0.9, 0.98), eps=1e-9)
  src = torch.as_tensor(batch["inputs"], dtype=torch.long)
  tgt = torch.as_tensor(batch["targets"], dtype=torch.long)

  def step():
    optimizer.zero_grad(set_to_none=True)
    logits = model(src, tgt)
    loss = loss_fn(logits.reshape(-1, v), tgt.reshape(-1))
    loss.backward()
    optimizer.step()
    return float(loss.item())

  return step


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


def run_isolated(kind, config=None, onednn=True, steps=10, warmup=3,
                 timeout=900):
  """One measurement in a fresh ``python benchmarks/peers.py`` process.

  TF_ENABLE_ONEDNN_OPTS is set to "1"/"0" in the child's environment so it is
  in force when TensorFlow is imported there (it has no effect later).

  Args:
    kind: "model_garden", "torch", "matmul_tf" or "matmul_torch".
    config: config dict (see module docstring); None = SMALL_CONFIG.
    onednn: bool, TF_ENABLE_ONEDNN_OPTS (and torch.backends.mkldnn.enabled).
    steps, warmup: as in ``measure``.
    timeout: seconds before the child is killed.

  Returns:
    The child's result dict: ``measure`` keys plus kind, onednn, config,
    framework, build_s [s], matmul_peak_gflops [GFLOP/s], mfu (achieved /
    matmul peak, both float32), loss_after.

  Raises:
    RuntimeError: the child failed or printed no result line.
  """
  if kind not in KINDS:
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
  env = dict(os.environ)
  env["TF_ENABLE_ONEDNN_OPTS"] = "1" if onednn else "0"
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  cmd = [sys.executable, os.path.abspath(__file__), f"--kind={kind}",
         f"--config={json.dumps(config or {})}",
         f"--onednn={int(bool(onednn))}", f"--steps={steps}",
         f"--warmup={warmup}"]
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=timeout, check=False)
  for line in reversed(proc.stdout.splitlines()):
    if line.startswith(RESULT_PREFIX):
      return json.loads(line[len(RESULT_PREFIX):])
  raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} without a "
                     f"result line; stderr tail:\n{proc.stderr[-3000:]}")


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
  lines = [_HEADER] + [_row(r) for r in results]
  lines += ["", "| peer | oneDNN | runs | median target tok/s (min..max) | "
            "median step [s] | median MFU | best step [s] | best-step target "
            "tok/s |", "|---|---|---|---|---|---|---|---|"]
  groups = {}
  for r in results:
    groups.setdefault((r["kind"], r["onednn"]), []).append(r)
  for (kind, onednn), rs in groups.items():
    tps = [r["target_tokens_per_s"] for r in rs]
    lines.append(
        f"| {kind} | {'on' if onednn else 'off'} | {len(rs)} "
        f"| {statistics.median(tps):.0f} ({min(tps):.0f}..{max(tps):.0f}) "
        f"| {statistics.median(r['median_step_s'] for r in rs):.3f} "
        f"| {statistics.median(r['mfu'] for r in rs):.2f} "
        f"| {min(r['min_step_s'] for r in rs):.3f} "
        f"| {rs[0]['target_tokens_per_s'] * rs[0]['median_step_s'] / min(r['min_step_s'] for r in rs):.0f} |")
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--kind", choices=KINDS)
  parser.add_argument("--config", default="{}",
                      help="JSON dict overriding SMALL_CONFIG")
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
  if args.onednn is None:
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") not in ("0", "false")
  else:
    onednn = bool(args.onednn)
    if "tensorflow" in sys.modules:  # pragma: no cover - cannot happen here
      raise RuntimeError("TensorFlow imported before TF_ENABLE_ONEDNN_OPTS")
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = str(int(onednn))
  result = _run_kind(args.kind, config, onednn, args.steps, args.warmup)
  print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
  main()
