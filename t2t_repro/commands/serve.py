r"""Serves an exported SavedModel over HTTP with TensorFlow Serving's REST API.

  python -m t2t_repro.serve --model_base_path=runs/export --model_name=transformer \
      --rest_api_port=8501

Flags named as tensorflow_model_server's: --model_base_path (a folder of numbered versions,
each a SavedModel of `python -m t2t_repro.export`; the highest is served), --model_name,
--rest_api_port, or --model_config_file for several models; the batching settings keep
TensorFlow Serving's names and meanings (`t2t_repro.serving.batcher`). Binds 127.0.0.1
unless --rest_api_host says otherwise.
SIGTERM or Ctrl-C: stops accepting connections, answers the requests under way, exits 0
(130 for Ctrl-C). The API, the page at / and the metrics: docs/SERVING.md,
`t2t_repro.serving.http_app`. Needs the serve extra: pip install "t2t_repro[serve]".
"""

import signal
import socket

from absl import flags

from t2t_repro import errors
from t2t_repro.serving.batcher import BatchingOptions

FLAGS = flags.FLAGS
_BATCHING_HELP = {
    "max_batch_size": "Most sentences decoded in one call (a larger request is split over "
                      "several calls).",
    "max_batch_tokens": "Most source tokens (EOS included) decoded in one call; a longer single "
                        "sentence is decoded alone.",
    "batch_timeout_micros": "Longest wait of a batch for more requests from the arrival of its "
                            "first one [microseconds].",
    "max_enqueued_batches": "Batches the queue holds; a request that would need more gets 503 "
                            "with Retry-After.",
}


def define_flags():
  flags.DEFINE_string("model_base_path", None, "Folder of numbered versions (<path>/1/"
                      "saved_model.pb, ...; python -m t2t_repro.export); the highest is served.")
  flags.DEFINE_string("model_name", "default", "Model name of the URLs: /v1/models/<name>.")
  flags.DEFINE_string("model_config_file", None, "Several models instead of --model_base_path: "
                      "a TensorFlow Serving ModelServerConfig text proto (model_config_list "
                      "{ config { name: ... base_path: ... } ... }).")
  flags.register_multi_flags_validator(
      ["model_base_path", "model_config_file"],
      lambda values: (values["model_base_path"] is None) != (values["model_config_file"] is None),
      "give one of --model_base_path and --model_config_file")
  flags.DEFINE_integer("rest_api_port", 8501, "HTTP port (0: any free port, printed at start).",
                       lower_bound=0, upper_bound=65535)
  flags.DEFINE_string("rest_api_host", "127.0.0.1", "Address to listen on (0.0.0.0: every "
                      "interface).")
  defaults = BatchingOptions()
  for name, help_text in _BATCHING_HELP.items():
    flags.DEFINE_integer(name, getattr(defaults, name), help_text,
                         lower_bound=0 if name == "batch_timeout_micros" else 1)
  flags.DEFINE_integer("max_request_bytes", 1 << 20, "Largest request body; a larger one gets "
                       "413.", lower_bound=1)


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    import uvicorn  # pylint: disable=import-outside-toplevel
    from t2t_repro.serving import http_app  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise errors.UsageError(f"the server needs the serve extra: pip install 't2t_repro[serve]' "
                            f"({e})") from None
  from t2t_repro.serving import servable  # pylint: disable=import-outside-toplevel
  models = ([(FLAGS.model_name, FLAGS.model_base_path)] if FLAGS.model_base_path else
            servable.read_model_config(FLAGS.model_config_file))
  versions = [(name, *servable.latest_version(base_path)) for name, base_path in models]
  options = BatchingOptions(**{name: FLAGS[name].value for name in _BATCHING_HELP})
  listener = _listen(FLAGS.rest_api_host, FLAGS.rest_api_port)
  served = [servable.Servable(name, version, path) for name, version, path in versions]
  for model in served:
    model.run("serving_default", {"sentences": ["Hello."]})  # the first call's set-up, now
  app = http_app.create_app(served, options, FLAGS.max_request_bytes)
  server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False,
                                         timeout_graceful_shutdown=None))
  host, port = listener.getsockname()[:2]
  print(f"serving {', '.join(f'model {m.name} version {m.version} ({m.path})' for m in served)} "
        f"at http://{host}:{port}/ (REST API: /v1/models/{served[0].name})", flush=True)
  # uvicorn ends its graceful shutdown by raising the signal again: once SIGTERM has been
  # handled, it must not kill the process (exit status 0).
  signal.signal(signal.SIGTERM, lambda signum, frame: None)
  server.run(sockets=[listener])
  print(f"stopped serving {', '.join(m.name for m in served)}", flush=True)


def _listen(host, port):
  """A bound socket for uvicorn (a port in use is an error line, exit 1, before loading)."""
  try:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(2048)  # connections wait in the backlog until uvicorn accepts them
  except OSError as e:
    raise errors.DataError(f"`rest_api_port` {port} on {host}: cannot listen "
                           f"({e.strerror or e})") from None
  return listener
