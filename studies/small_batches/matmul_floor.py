"""The floor under a float32 decoding step of a few rows: its matmuls alone, in TensorFlow.

A `small` step at one sentence (beam 4: 4 rows) reads every decoder weight once: 3 layers of
Q/K/V [256, 768], the self-attention output [256, 256], the encoder-decoder query and output
[256, 256] each, the FFN [256, 1024] and [1024, 256] (4.2 MB per layer), then the output
projection [256, 8000] (8.2 MB): 20.8 MB of float32 per step. This script times that chain of
matmuls alone, in one `tf.while_loop` (1 intra-op and 1 inter-op thread, as
`decode_throughput.py --threads=1`), and the same chain with every layer reading the first
layer's weights (4.2 + 8.2 MB: more of it stays in the caches), and the output projection
alone as E with transpose_b and as a stored E^T, with the matrix in the caches or after 16 MB
of other data were streamed through them (the rest of a step does that):

  python studies/small_batches/matmul_floor.py

Prints milliseconds per step (median of 5 repeats of `--iterations` iterations, process CPU
time).
"""

import argparse
import time

import numpy as np
import tensorflow as tf

D_MODEL, D_FF, VOCAB, ROWS, LAYERS = 256, 1024, 8000, 4, 3


def _constant(*shape):
  return tf.constant(np.random.default_rng(len(shape) + sum(shape)).standard_normal(
      shape, dtype=np.float32) * 0.05)


def _layer_weights():
  d, f = D_MODEL, D_FF
  return [_constant(d, 3 * d), _constant(d, d), _constant(d, d), _constant(d, d),
          _constant(d, f), _constant(f, d)]


def _step(x, layers, kernel):
  """The matmuls of one step on x [ROWS, D_MODEL]: -> [ROWS, VOCAB]."""
  for w in layers:
    q = tf.matmul(x, w[0])[:, :D_MODEL]
    x = x + tf.matmul(q, w[1]) * 0.1
    x = x + tf.matmul(tf.matmul(x, w[2]), w[3]) * 0.1
    x = x + tf.matmul(tf.nn.relu(tf.matmul(x, w[4])), w[5]) * 0.1
  return tf.matmul(x, kernel)


def _loop(body_fn, iterations):
  @tf.function
  def run(x):
    def body(i, x):
      return i + 1, x + body_fn(x)[:, :D_MODEL] * 0.0
    return tf.while_loop(lambda i, x: i < iterations, body, (0, x))[1]
  return run


def _ms_per_iteration(run, x, iterations):
  run(x)
  times = []
  for _ in range(5):
    start = time.process_time()
    run(x)
    times.append((time.process_time() - start) / iterations * 1e3)
  return sorted(times)[2]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--iterations", type=int, default=300)
  iterations = parser.parse_args().iterations
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  distinct = [_layer_weights() for _ in range(LAYERS)]
  embeddings = _constant(VOCAB, D_MODEL)
  kernel = tf.constant(np.ascontiguousarray(embeddings.numpy().T))
  other = _constant(4096, 1024)  # 16 MB streamed through the caches
  x = _constant(ROWS, D_MODEL)

  def streamed(y):
    return y + tf.reduce_sum(other + y[0, 0]) * 0.0

  rows = [
      ("step's matmuls, each layer its own weights (20.8 MB)",
       lambda y: _step(y, distinct, kernel)),
      ("step's matmuls, every layer the first layer's weights (12.4 MB)",
       lambda y: _step(y, [distinct[0]] * LAYERS, kernel)),
      ("output projection, E with transpose_b, in cache",
       lambda y: tf.matmul(y, embeddings, transpose_b=True)),
      ("output projection, stored E^T, in cache", lambda y: tf.matmul(y, kernel)),
      ("16 MB streamed alone", lambda y: tf.tile(streamed(y), [1, 2])),
      ("16 MB streamed, then E with transpose_b",
       lambda y: tf.matmul(streamed(y), embeddings, transpose_b=True)),
      ("16 MB streamed, then stored E^T", lambda y: tf.matmul(streamed(y), kernel)),
  ]
  print(f"| matmuls ({ROWS} rows, float32, 1 thread) | ms per iteration |")
  print("|---|---|")
  for name, fn in rows:
    print(f"| {name} | {_ms_per_iteration(_loop(fn, iterations), x, iterations):.3f} |",
          flush=True)


if __name__ == "__main__":
  main()
