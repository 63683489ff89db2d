"""The HTTP application: TensorFlow Serving's REST API over the served models (Starlette, an
ASGI app that uvicorn runs; `t2t_repro.commands.serve`).

  GET  /v1/models/<name>[/versions/<v>]            model status (every version's state)
  GET  /v1/models/<name>[/versions/<v>]/metadata   signatures (GetModelMetadataResponse)
  POST /v1/models/<name>[/versions/<v>]:predict    {"instances": [...]} or {"inputs": ...},
                                                   optional "signature_name"
  GET  /metrics                                    Prometheus metrics (`metrics`)
  GET  /                                           a page to translate in a browser

The URLs, formats and status codes are TensorFlow Serving's (tensorflow_serving/g3doc/
api_rest.md, http_rest_api_handler.cc: a /v1 path outside these patterns is 400 "Malformed
request"; `rest`). Predict requests go through `service.Service` (checked, queued in the
batcher, answered when their rows are decoded; 503 with Retry-After when the model's queue
is full); the page is the first model's. A client that disconnects first, while sending its
body or waiting, has its rows dropped from the queue and is counted as 499, and nobody else
notices. Every answer is JSON ({"error": message} with a status); no request takes the
server down, and a request cut short by a forced stop gets 503.
"""

import asyncio
import contextlib
import html
import importlib.resources
import json
import re
import time

from absl import logging
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from t2t_repro.serving import rest
from t2t_repro.serving import service as service_lib
from t2t_repro.config.serving import ServerConfig

DEFAULT_MAX_REQUEST_BYTES = ServerConfig().max_request_bytes
# TensorFlow Serving's patterns (http_rest_api_handler.cc).
_PREDICT = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?:(\w+)")
_STATUS = re.compile(r"/v1/models(?:/([^/:]+))?(?:/versions/(\d+)|/labels/([^/:]+))?"
                     r"(/metadata)?")


def create_app(servables, options, max_request_bytes=DEFAULT_MAX_REQUEST_BYTES, service=None,
               grpc_address=None, on_started=None):
  """The ASGI app serving `servables`, or the models of `service`.

  Args:
    servables: a `servable.Servable` (or an object with its attributes and methods), or a
      list of them with distinct names, each served to the end; ignored with `service`.
    options: `config.BatchingOptions`; ignored with `service`.
    max_request_bytes: the largest request body; a larger one gets 413.
    service: a `service.Service` (e.g. watching its models' base paths), started and
      stopped with the app's lifespan.
    grpc_address: (host, port): also serve the gRPC API there (`grpc_app`), started and
      stopped (its calls under way answered first) with the app's lifespan.
    on_started: called with the gRPC port (or None) once the app serves.

  Returns:
    A Starlette app; `app.state.service` is its `service.Service`, `app.state.metrics` and
    `app.state.batcher` that service's.
  """
  service = service or service_lib.Service(service_lib.fixed(servables), options)
  api = _Api(service, max_request_bytes)
  routes = [
      Route("/v1/{path:path}", api.v1, methods=["GET", "POST"]),
      Route("/metrics", api.metrics, methods=["GET"]),
      Route("/", api.page, methods=["GET"]),
  ]

  @contextlib.asynccontextmanager
  async def lifespan(app):
    service.start()
    grpc_server = None
    if grpc_address is not None:
      from t2t_repro.serving import grpc_app  # pylint: disable=import-outside-toplevel
      grpc_server, app.state.grpc_port = grpc_app.create_server(service, *grpc_address,
                                                                max_request_bytes)
      await grpc_server.start()
    if on_started is not None:
      on_started(app.state.grpc_port)
    try:
      yield
    except asyncio.CancelledError:  # a forced stop (a second Ctrl-C): nothing is waited for
      return
    if grpc_server is not None:
      await grpc_app.stop(grpc_server)
    await service.stop()

  app = Starlette(routes=routes, lifespan=lifespan,
                  middleware=[Middleware(_Observed, metrics=service.metrics)],
                  exception_handlers={HTTPException: _http_exception})
  app.state.service, app.state.metrics, app.state.batcher = (service, service.metrics,
                                                             service.batcher)
  app.state.grpc_port = None
  return app


def _json_response(obj, status=200, headers=None):
  """JSON with NaN/Infinity allowed, as the REST API's JSON is (Starlette's JSONResponse
  refuses them)."""
  return Response(json.dumps(obj, ensure_ascii=False).encode("utf-8"), status_code=status,
                  headers=headers, media_type="application/json")


def _error_response(error):
  return Response(error.body(), status_code=error.status, headers=error.headers,
                  media_type="application/json")


async def _http_exception(request, exc):
  """Starlette's own errors (no such route, wrong method) as {"error": ...}."""
  return Response(json.dumps({"error": f"{exc.detail}: {request.method} {request.url.path}"}),
                  status_code=exc.status_code, media_type="application/json")


class _Api:
  """The endpoints' handlers."""

  def __init__(self, service, max_request_bytes):
    self._service, self._metrics = service, service.metrics
    self._max_request_bytes = max_request_bytes
    page = importlib.resources.files("t2t_repro.serving").joinpath("page.html").read_text("utf-8")
    self._page = page.replace("{{model_name}}", html.escape(next(iter(service.models)),
                                                            quote=True))

  async def v1(self, request):
    return await _answer(self._v1, request, self._metrics)

  async def _v1(self, request):
    path = request.url.path
    if request.method == "POST" and (match := _PREDICT.fullmatch(path)):
      name, version, label, verb = match.groups()
      return await self._predict(request, name, _version(version), label, verb)
    if request.method == "GET" and (match := _STATUS.fullmatch(path)):
      name, version, label, metadata = match.groups()
      if name is None:
        raise rest.ApiError("INVALID_ARGUMENT", "Missing model name in request.")
      if metadata:
        model = self._service.model(name, _version(version), label)
        return _json_response(model.current.metadata())
      return _json_response({"model_version_status": [
          {"version": str(v), "state": state,
           "status": {"error_code": "UNKNOWN" if error else "OK", "error_message": error}}
          for v, state, error in self._service.status(name, _version(version), label)]})
    raise rest.ApiError("INVALID_ARGUMENT", f"Malformed request: {request.method} {path}")

  async def metrics(self, request):
    del request
    body, content_type = self._metrics.exposition()
    return Response(body, headers={"Content-Type": content_type})

  async def page(self, request):
    del request
    return HTMLResponse(self._page)

  async def _predict(self, request, name, version, label, verb):
    async with self._service.held(name, version, label) as servable:
      if verb != "predict":
        raise rest.ApiError("INVALID_ARGUMENT", f"':{verb}' is not served; this server answers "
                            "':predict'")
      body = await self._body(request)
      signature, columns, row_format = rest.parse_predict(body, servable.signatures)
      future = self._service.submit(servable, signature, columns)
      outputs = await _result_or_disconnect(request, future)
    return _json_response(rest.predict_response(outputs, row_format))

  async def _body(self, request):
    """The request body, at most max_request_bytes (413 REQUEST_TOO_LARGE otherwise)."""
    limit = self._max_request_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
      raise rest.ApiError("REQUEST_TOO_LARGE", f"the request body is {declared} bytes, more than "
                          f"the server's limit of {limit} bytes (max_request_bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
      size += len(chunk)
      if size > limit:
        raise rest.ApiError("REQUEST_TOO_LARGE", f"the request body is more than the server's "
                            f"limit of {limit} bytes (max_request_bytes)")
      chunks.append(chunk)
    return b"".join(chunks)


def _version(text):
  return int(text) if text is not None else None


class _Disconnected(Exception):
  """The client went away before its answer."""


async def _answer(handler, request, metrics):
  """handler(request)'s response, or the error's: an ApiError as its status and message, a
  client gone as 499 (counted, nobody reads it), a request cancelled by a forced stop as
  503, a decoding error as 400 (INVALID_ARGUMENT), any other exception as 500 (logged)."""
  try:
    return await handler(request)
  except rest.ApiError as e:
    return _error_response(e)
  except (ClientDisconnect, _Disconnected):
    metrics.disconnects.inc()
    return Response(status_code=rest.HTTP_STATUS["CANCELLED"])
  except asyncio.CancelledError:  # the server is forced to stop: answer rather than drop
    return _error_response(rest.ApiError("UNAVAILABLE", "the server was stopped before the "
                                         "answer was ready"))
  except Exception as e:  # pylint: disable=broad-except  # a server stays up
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if isinstance(e, tf.errors.InvalidArgumentError):
      return _error_response(rest.ApiError("INVALID_ARGUMENT", e.message))
    logging.exception("internal error answering %s %s", request.method, request.url.path)
    return _error_response(rest.ApiError("INTERNAL", f"internal error: {type(e).__name__}: {e}"))


async def _result_or_disconnect(request, future):
  """The future's result; raises _Disconnected if the client disconnects first (the future
  is then cancelled, so its rows not yet decoded are dropped)."""

  async def disconnected():
    while (await request.receive())["type"] != "http.disconnect":
      pass

  watcher = asyncio.ensure_future(disconnected())
  try:
    await asyncio.wait({future, watcher}, return_when=asyncio.FIRST_COMPLETED)
  finally:
    watcher.cancel()
  if future.done():
    return future.result()
  future.cancel()
  raise _Disconnected()


def _endpoint(method, path):
  """The metrics' endpoint label of a request."""
  if path.startswith("/v1/models/"):
    if method == "POST":
      return "predict"
    return "metadata" if path.endswith("/metadata") else "status"
  return {"/": "page", "/metrics": "metrics"}.get(path, "other")


class _Observed:
  """ASGI middleware: counts each HTTP request by endpoint and status, and times it."""

  def __init__(self, app, metrics):
    self._app, self._metrics = app, metrics

  async def __call__(self, scope, receive, send):
    if scope["type"] != "http":
      await self._app(scope, receive, send)
      return
    started, status = time.perf_counter(), [500]

    async def observed_send(message):
      if message["type"] == "http.response.start":
        status[0] = message["status"]
      await send(message)

    try:
      await self._app(scope, receive, observed_send)
    finally:
      self._metrics.observe_request(_endpoint(scope["method"], scope["path"]), status[0],
                                    time.perf_counter() - started)
