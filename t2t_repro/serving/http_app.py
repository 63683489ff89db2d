"""The HTTP application: TensorFlow Serving's REST API over one or more `Servable`s
(Starlette, an ASGI app that uvicorn runs; `t2t_repro.commands.serve`).

  GET  /v1/models/<name>[/versions/<v>]            model status
  GET  /v1/models/<name>[/versions/<v>]/metadata   signatures (GetModelMetadataResponse)
  POST /v1/models/<name>[/versions/<v>]:predict    {"instances": [...]} or {"inputs": ...},
                                                   optional "signature_name"
  GET  /metrics                                    Prometheus metrics (`metrics`)
  GET  /                                           a page to translate in a browser

The formats and status codes are TensorFlow Serving's (tensorflow_serving/g3doc/api_rest.md;
`rest`). Predict requests are checked (`Servable.row_tokens`), queued (`batcher.Batcher`,
one queue and one decoding thread for all the models, a batch holding one model's requests
of one signature: 503 with Retry-After when full) and answered when their rows are decoded;
the page is the first model's. A client that
disconnects first has its rows dropped from the queue, and nobody else notices. Errors
are {"error": message} with a status; no request takes the server down.
"""

import asyncio
import contextlib
import html
import importlib.resources
import json
import time

from absl import logging
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from t2t_repro.serving import batcher as batcher_lib
from t2t_repro.serving import metrics as metrics_lib
from t2t_repro.serving import rest

DEFAULT_MAX_REQUEST_BYTES = 1 << 20


def create_app(servables, options, max_request_bytes=DEFAULT_MAX_REQUEST_BYTES):
  """The ASGI app serving `servables`.

  Args:
    servables: a `servable.Servable` (or an object with its attributes and methods), or a
      list of them with distinct names.
    options: `batcher.BatchingOptions`.
    max_request_bytes: the largest request body; a larger one gets 413.

  Returns:
    A Starlette app; `app.state.metrics` is its `metrics.ServerMetrics`, `app.state.batcher`
    its `batcher.Batcher` (started and stopped with the app's lifespan).
  """
  servables = servables if isinstance(servables, (list, tuple)) else [servables]
  by_name = {servable.name: servable for servable in servables}
  metrics = metrics_lib.ServerMetrics()
  batcher = batcher_lib.Batcher(lambda key, columns: by_name[key[0]].run(key[1], columns),
                                options, metrics)
  api = _Api(by_name, batcher, metrics, max_request_bytes)
  versioned = "/v1/models/{name}/versions/{version}"
  routes = [
      Route("/v1/models/{name}:{verb}", api.predict, methods=["POST"]),
      Route(versioned + ":{verb}", api.predict, methods=["POST"]),
      Route("/v1/models/{name}", api.status, methods=["GET"]),
      Route(versioned, api.status, methods=["GET"]),
      Route("/v1/models/{name}/metadata", api.metadata, methods=["GET"]),
      Route(versioned + "/metadata", api.metadata, methods=["GET"]),
      Route("/metrics", api.metrics, methods=["GET"]),
      Route("/", api.page, methods=["GET"]),
  ]

  @contextlib.asynccontextmanager
  async def lifespan(app):
    del app
    batcher.start()
    yield
    await batcher.stop()

  app = Starlette(routes=routes, lifespan=lifespan,
                  middleware=[Middleware(_Observed, metrics=metrics)],
                  exception_handlers={HTTPException: _http_exception})
  app.state.metrics, app.state.batcher = metrics, batcher
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
  return _json_response({"error": f"{exc.detail}: {request.method} {request.url.path}"},
                        exc.status_code)


class _Api:
  """The endpoints' handlers."""

  def __init__(self, servables, batcher, metrics, max_request_bytes):
    self._servables, self._batcher, self._metrics = servables, batcher, metrics
    self._max_request_bytes = max_request_bytes
    page = importlib.resources.files("t2t_repro.serving").joinpath("page.html").read_text("utf-8")
    self._page = page.replace("{{model_name}}", html.escape(next(iter(servables)), quote=True))

  def _find(self, request):
    """The servable the URL names (404 NOT_FOUND otherwise, TensorFlow Serving's words)."""
    name = request.path_params["name"]
    version = request.path_params.get("version")
    servable = self._servables.get(name)
    if servable is None or version not in (None, str(servable.version)):
      spec = f"Latest({name})" if version is None else f"Specific({name}, {version})"
      raise rest.ApiError("NOT_FOUND", f"Servable not found for request: {spec}")
    return servable

  async def status(self, request):
    return await _answer(self._status, request)

  async def _status(self, request):
    servable = self._find(request)
    return _json_response({"model_version_status": [{
        "version": str(servable.version), "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""}}]})

  async def metadata(self, request):
    return await _answer(lambda r: _metadata(self._find(r)), request)

  async def metrics(self, request):
    del request
    body, content_type = self._metrics.exposition()
    return Response(body, headers={"Content-Type": content_type})

  async def page(self, request):
    del request
    return HTMLResponse(self._page)

  async def predict(self, request):
    return await _answer(self._predict, request)

  async def _predict(self, request):
    servable = self._find(request)
    if request.path_params["verb"] != "predict":
      raise rest.ApiError("INVALID_ARGUMENT", f"':{request.path_params['verb']}' is not served; "
                          "this server answers ':predict'")
    body = await self._body(request)
    signature, columns, row_format = rest.parse_predict(body, servable.signatures)
    row_tokens = servable.row_tokens(signature, columns)
    try:
      future = self._batcher.submit((servable.name, signature), columns, row_tokens,
                                    servable.signatures[signature].batched)
    except batcher_lib.QueueFull as e:
      raise rest.ApiError("UNAVAILABLE", f"The batch scheduling queue to which this task was "
                          f"submitted is full: {e}", headers={"Retry-After": "1"}) from None
    except batcher_lib.RequestTooLarge as e:
      raise rest.ApiError("INVALID_ARGUMENT", str(e)) from None
    outputs = await _result_or_disconnect(request, future, self._metrics)
    if outputs is None:
      return Response(status_code=rest.HTTP_STATUS["CANCELLED"])  # nobody reads it
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


async def _metadata(servable):
  return _json_response(servable.metadata())


async def _answer(handler, request):
  """handler(request)'s response, or the error's: an ApiError as its status and message, a
  decoding error as 400 (INVALID_ARGUMENT) or 500, any other exception as 500 (logged)."""
  try:
    return await handler(request)
  except rest.ApiError as e:
    return _error_response(e)
  except Exception as e:  # pylint: disable=broad-except  # a server stays up
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if isinstance(e, tf.errors.InvalidArgumentError):
      return _error_response(rest.ApiError("INVALID_ARGUMENT", e.message))
    logging.exception("internal error answering %s %s", request.method, request.url.path)
    return _error_response(rest.ApiError("INTERNAL", f"internal error: {type(e).__name__}: {e}"))


async def _result_or_disconnect(request, future, metrics):
  """The future's result, or None if the client disconnects first (the future is then
  cancelled, so its rows not yet decoded are dropped)."""

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
  metrics.disconnects.inc()
  return None


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
