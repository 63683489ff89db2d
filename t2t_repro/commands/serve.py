r"""Serves exported SavedModels with TensorFlow Serving's REST and gRPC APIs.

  python -m t2t_repro.serve --model_base_path=runs/export --model_name=transformer \
      --port=8500 --rest_api_port=8501

Flags named as tensorflow_model_server's: --model_base_path (a folder of numbered versions,
each a SavedModel of `python -m t2t_repro.export` or a CTranslate2 export of its
--format=ctranslate2; the highest is served, and a new one is picked up every
--file_system_poll_wait_seconds), --model_name, or --model_config_file for
several models (re-read every --model_config_file_poll_wait_seconds, and replaced by
ModelService/HandleReloadConfigRequest: `t2t_repro.serving.model_config`); the settings (ports, batching, request size, polling) are generated from the
fields of `t2t_repro.config.serving`. Binds 127.0.0.1 unless --rest_api_host says otherwise.
SIGTERM or Ctrl-C: stops accepting connections, answers the requests under way, exits 0
(130 for Ctrl-C). The APIs, the page at / and the metrics: docs/SERVING.md,
`t2t_repro.serving.http_app`, `t2t_repro.serving.grpc_app`. Needs the serve extra:
pip install "t2t_repro[serve]".
"""

import signal
import socket

from absl import flags

from t2t_repro import errors
from t2t_repro.commands import config_flags
from t2t_repro.config.serving import BatchingOptions, ServerConfig

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("model_base_path", None, "Folder of numbered versions (<path>/1/"
                      "saved_model.pb, model.bin or model.tflite, ...; python -m "
                      "t2t_repro.export); the highest is served.")
  flags.DEFINE_string("model_name", "default", "Model name of the URLs: /v1/models/<name>.")
  flags.DEFINE_string("model_config_file", None, "Several models instead of --model_base_path: "
                      "a TensorFlow Serving ModelServerConfig text proto (model_config_list "
                      "{ config { name: ... base_path: ... } ... }).")
  flags.register_multi_flags_validator(
      ["model_base_path", "model_config_file"],
      lambda values: (values["model_base_path"] is None) != (values["model_config_file"] is None),
      "give one of --model_base_path and --model_config_file")
  config_flags.define(ServerConfig)
  config_flags.define(BatchingOptions)


def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    import uvicorn  # pylint: disable=import-outside-toplevel
    from t2t_repro.serving import http_app, service  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise errors.UsageError(f"the server needs the serve extra: pip install 't2t_repro[serve]' "
                            f"({e})") from None
  # pylint: disable-next=import-outside-toplevel
  from t2t_repro.serving import model_config, servable, version_folder, versions
  config = ServerConfig(**config_flags.values(ServerConfig))
  options = BatchingOptions(**config_flags.values(BatchingOptions))
  models = ([(FLAGS.model_name, FLAGS.model_base_path, "")] if FLAGS.model_base_path else
            servable.read_model_config(FLAGS.model_config_file))
  for _, base_path, _ in models:
    servable.latest_version(base_path)  # a missing version: one line, before listening
  listener = _listen(config.rest_api_host, config.rest_api_port, "rest_api_port")
  if config.port:
    _listen(config.rest_api_host, config.port, "port").close()  # free now: grpcio binds it
  servable.configure_threads(options, config.tensorflow_inter_op_parallelism)

  def load_model(name, base_path, platform):
    """The `ModelVersions` of a model config's entry, its latest version loaded and warm."""
    version, path = servable.latest_version(base_path)
    return versions.ModelVersions(
        name, version_folder.load_warm(name, version, path, options, platform), base_path,
        lambda v, p: version_folder.load_warm(name, v, p, options, platform))

  served = [load_model(*model) for model in models]
  host, port = listener.getsockname()[:2]

  def started(grpc_port):
    names = ", ".join(f"model {m.name} version {m.current.version} ({m.current.path})"
                      for m in served)
    print(f"serving {names} at http://{host}:{port}/ (REST API: /v1/models/{served[0].name}; "
          f"gRPC: {host}:{grpc_port})", flush=True)

  models_service = service.Service(served, options, config.file_system_poll_wait_seconds)
  models_service.model_config = model_config.ModelConfig(
      models_service, models, load_model, FLAGS.model_config_file,
      config.model_config_file_poll_wait_seconds)
  app = http_app.create_app(
      None, None, config.max_request_bytes, models_service,
      grpc_address=(config.rest_api_host, config.port), on_started=started)
  server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False,
                                         timeout_graceful_shutdown=None))
  # uvicorn ends its graceful shutdown by raising the signal again: once SIGTERM has been
  # handled, it must not kill the process (exit status 0).
  signal.signal(signal.SIGTERM, lambda signum, frame: None)
  server.run(sockets=[listener])
  print(f"stopped serving {', '.join(models_service.models)}", flush=True)


def _listen(host, port, flag):
  """A bound socket (a port in use is an error line naming `flag`, exit 1, before loading)."""
  try:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(2048)  # connections wait in the backlog until uvicorn accepts them
  except OSError as e:
    raise errors.DataError(f"`{flag}` {port} on {host}: cannot listen "
                           f"({e.strerror or e})") from None
  return listener
