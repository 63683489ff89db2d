"""The server's settings, declared once (`t2t_repro.config.settings.setting`: help, default, range):
`BatchingOptions` (the batching of `batcher`) and `ServerConfig` (ports, host, request size,
version polling). `num_batch_threads` is also the translate command's (one decoding
thread per core beats one thread with every core on the small matrices of decoding:
docs/SERVER_LOAD.md). `python -m t2t_repro.serve` generates its flags from these fields
(`t2t_repro.commands.config_flags`), docs/CONFIG.md lists them (tools/config_doc.py). No
TensorFlow here, so the command's --help stays instant.

The names and meanings are tensorflow_model_server's (--port, --rest_api_port,
--file_system_poll_wait_seconds; the batching parameters of tensorflow_serving/batching/
README.md), plus max_batch_tokens (a token budget per batch) and max_request_bytes.
"""

import dataclasses
import os

from t2t_repro.config import settings
from t2t_repro.config.settings import setting

# num_batch_threads=0: one decoding thread per core, at most this many.
MAX_AUTO_BATCH_THREADS = 4


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
  """How requests are merged into decoding calls (`batcher.Batcher`).

  Raises:
    errors.UsageError (a ValueError): a field outside its range, named.
  """

  max_batch_size: int = setting(
      64, "Most sentences (rows) decoded in one call; a larger request is split over several "
      "calls (TensorFlow Serving's enable_large_batch_splitting).", min_value=1)
  max_batch_tokens: int = setting(
      4096, "Most source tokens (EOS included) decoded in one call; a longer single sentence is "
      "decoded alone. The one token budget: also written into each SavedModel loaded as its "
      "graph's chunk budget (`decode_batch_tokens`, padding included), and CTranslate2's "
      "max_batch_size with batch_type=tokens.", min_value=1)
  batch_timeout_micros: int = setting(
      2000, "Longest wait of a batch for more requests [microseconds], from the arrival of its "
      "first row or, if every decoding thread was busy then, from the moment one became free "
      "(so that the clients just answered can still join it).", min_value=0)
  num_batch_threads: int = setting(
      0, "Batches decoded at the same time, each in its own thread; the CPU cores are split "
      "between them (each gets cores / num_batch_threads intra-op threads, at least 1). 0: one "
      f"thread per core, at most {MAX_AUTO_BATCH_THREADS} (TensorFlow Serving's default is one "
      "per core; each batch in flight holds its own decoder cache).", min_value=0, max_value=64)
  max_enqueued_batches: int = setting(
      16, "Batches each model's queue holds; a request that would need more gets 503 with "
      "Retry-After (gRPC: UNAVAILABLE).", min_value=1)

  def __post_init__(self):
    settings.check(self)


@dataclasses.dataclass(frozen=True)
class ServerConfig:
  """Where the server listens and what it accepts, besides the batching.

  Raises:
    errors.UsageError (a ValueError): a field outside its range, named.
  """

  port: int = setting(
      8500, "gRPC port (TensorFlow Serving's PredictionService and ModelService); 0: any free "
      "port, printed at start.", min_value=0, max_value=65535)
  rest_api_port: int = setting(
      8501, "HTTP port of the REST API; 0: any free port, printed at start.", min_value=0,
      max_value=65535)
  rest_api_host: str = setting(
      "127.0.0.1", "Address the REST and gRPC servers listen on (0.0.0.0: every interface).")
  max_request_bytes: int = setting(
      1 << 20, "Largest request body (REST) or message (gRPC) [bytes]; a larger one gets 413 "
      "(gRPC: RESOURCE_EXHAUSTED).", min_value=1)
  file_system_poll_wait_seconds: int = setting(
      1, "Seconds between two looks at each model base path for new or removed versions; 0: "
      "the versions found at start are served until the end.", min_value=0)
  tensorflow_inter_op_parallelism: int = setting(
      0, "TensorFlow's inter-op threads, which run the ops of a decoding call "
      "(tensorflow_model_server's flag); 0: TensorFlow's default, one per core. 1 runs a call's "
      "ops on one thread without handing them between threads, but every decoding thread then "
      "shares it: on `tiny` 1.15-1.21x the answers per second at 1-16 clients and 0.67x at 64; "
      "on `small` no gain (docs/SERVER_LOAD.md).", min_value=0, max_value=256)
  model_config_file_poll_wait_seconds: int = setting(
      0, "Seconds between two readings of --model_config_file; a changed config is served "
      "without a restart (models added, removed, or given another base_path: loaded and "
      "warmed up first); 0: read at start only.", min_value=0)

  def __post_init__(self):
    settings.check(self)


def batch_threads(num_batch_threads, cores=None):
  """The decoding threads of the setting `num_batch_threads`: itself, or for 0 one per core
  (`cores`; None: os.cpu_count()), at most MAX_AUTO_BATCH_THREADS."""
  if num_batch_threads:
    return num_batch_threads
  return max(1, min(cores or os.cpu_count() or 1, MAX_AUTO_BATCH_THREADS))


def intra_op_threads(num_batch_threads, cores=None):
  """TensorFlow's (or CTranslate2's) intra-op threads of each decoding thread: the cores
  (None: os.cpu_count()) split between `batch_threads(num_batch_threads)`, at least 1."""
  cores = cores or os.cpu_count() or 1
  return max(1, cores // batch_threads(num_batch_threads, cores))
