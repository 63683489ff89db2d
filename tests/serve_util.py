"""Helpers of the server tests: an in-process server on a free loopback port, a servable
whose decoding waits at a gate, one whose decoding calls are timed, and the server as a
subprocess."""

import contextlib
import os
import re
import subprocess
import sys
import threading
import time

import uvicorn

from t2t_repro.serving import batcher, http_app

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def running(servable, max_request_bytes=http_app.DEFAULT_MAX_REQUEST_BYTES, service=None,
            grpc=False, **options):
  """(base URL, app) of `servable` (or the models of a `service.Service`) served by uvicorn
  in a thread of this process on 127.0.0.1 (any free port), with the given
  `BatchingOptions` fields (num_batch_threads 1 unless given: `Gated` holds that one thread);
  with `grpc`, the gRPC API too, on `app.state.grpc_port`."""
  options.setdefault("num_batch_threads", 1)
  app = http_app.create_app(servable, batcher.BatchingOptions(**options), max_request_bytes,
                            service, grpc_address=("127.0.0.1", 0) if grpc else None)
  server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None,
                                         access_log=False))
  thread = threading.Thread(target=server.run, daemon=True)
  thread.start()
  deadline = time.monotonic() + 30
  while not server.started:
    assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
    time.sleep(0.02)
  port = server.servers[0].sockets[0].getsockname()[1]
  try:
    yield f"http://127.0.0.1:{port}", app
  finally:
    server.should_exit = True
    thread.join(60)


class _Wrapped:
  """`servable` (under the model name `name`, default its own) with its `run` wrapped."""

  def __init__(self, servable, name=None):
    self._servable = servable
    self.name, self.version = name or servable.name, servable.version
    self.signatures = servable.signatures

  def __getattr__(self, name):
    return getattr(self._servable, name)


class Gated(_Wrapped):
  """`servable` whose decoding calls wait until `gate` is set (to hold the decoding thread
  busy while a test fills the queue)."""

  def __init__(self, servable, name=None):
    super().__init__(servable, name)
    self.gate = threading.Event()

  def run(self, signature_name, columns):
    assert self.gate.wait(120), "the gate was never opened"
    return self._servable.run(signature_name, columns)


class Timed(_Wrapped):
  """`servable` served as the model `name` (a second model of the same export) that records
  the seconds of each decoding call (of each batch) in `seconds`."""

  def __init__(self, servable, name):
    super().__init__(servable, name)
    self.seconds = []

  def run(self, signature_name, columns):
    started = time.perf_counter()
    try:
      return self._servable.run(signature_name, columns)
    finally:
      self.seconds.append(time.perf_counter() - started)


def start_server(model_base_path, *flags):
  """(process, base URL): `python -m t2t_repro.serve` on free ports, once it serves; its
  first line ("serving ... (REST API: ...; gRPC: 127.0.0.1:PORT)") is `process.stdout_line`."""
  process = subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.serve", f"--model_base_path={model_base_path}",
       "--model_name=transformer", "--rest_api_port=0", "--port=0", *flags],
      cwd=_REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  line = process.stdout.readline()  # "serving model ... at http://127.0.0.1:PORT/ ..."
  match = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
  if not match:
    process.kill()
    raise AssertionError(f"the server did not start: {line}{process.stderr.read()[-3000:]}")
  process.stdout_line = line
  return process, match[1]


def metric(text, name, **labels):
  """The value of a sample of the Prometheus text `text` (0.0 if absent)."""
  wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
  for line in text.splitlines():
    if line.startswith("#"):
      continue
    sample, _, value = line.rpartition(" ")
    sample_name, _, sample_labels = sample.partition("{")
    found = ",".join(sorted(sample_labels.rstrip("}").split(","))) if sample_labels else ""
    if sample_name == name and found == wanted:
      return float(value)
  return 0.0
