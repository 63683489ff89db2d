"""What the REST API (`http_app`) and the gRPC API (`grpc_app`) both answer: the served models
(`versions.ModelVersions`), their status and metadata, and predict requests checked, queued in
the batcher (`batcher.Batcher`) and answered when their rows are decoded. Errors are
`rest.ApiError`s with TensorFlow Serving's canonical codes and words.
"""

import asyncio
import contextlib

from t2t_repro.serving import batcher as batcher_lib
from t2t_repro.serving import metrics as metrics_lib
from t2t_repro.serving import rest
from t2t_repro.serving import versions as versions_lib


class Service:
  """The models and the batcher behind both APIs.

  Args:
    models: [`versions.ModelVersions`] with distinct names, the first the page's.
    options: `config.BatchingOptions`.
    poll_wait_seconds: seconds between two looks at each model base path (0: never).
  """

  def __init__(self, models, options, poll_wait_seconds=0):
    self.models = {model.name: model for model in models}
    self.metrics = metrics_lib.ServerMetrics()
    self.batcher = batcher_lib.Batcher(lambda key, columns: key[1].run(key[2], columns), options,
                                       self.metrics)
    self.model_config = None  # a `model_config.ModelConfig` that may change the models
    self._poll_wait_seconds = poll_wait_seconds
    self._watchers = {}  # model name -> the task watching its base path
    self._tasks = []  # other tasks that run until the stop (the model config's watcher)

  def start(self):
    """Starts the batcher, the version watchers and the model config's watcher (in the
    running loop)."""
    self.batcher.start()
    self._watch_new_models()
    if self.model_config is not None:
      self._tasks.append(asyncio.get_running_loop().create_task(self.model_config.watch()))

  async def stop(self):
    """Stops watching, decodes what is queued, stops the decoding thread."""
    tasks = [*self._tasks, *self._watchers.values()]
    for task in tasks:
      task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await self.batcher.stop()

  def serve_models(self, models):
    """Serves `models` ([`versions.ModelVersions`], loaded and warmed up; distinct names)
    from now on: a model not among them, or replaced by another of its name, stops taking
    requests, and its version is unloaded once the requests holding it are answered."""
    old, self.models = self.models, {model.name: model for model in models}
    for name, model in old.items():
      if self.models.get(name) is not model:
        watcher = self._watchers.pop(name, None)
        if watcher is not None:
          watcher.cancel()
        model.retire()
    self._watch_new_models()

  def _watch_new_models(self):
    for name, model in self.models.items():
      if name not in self._watchers:
        self._watchers[name] = asyncio.get_running_loop().create_task(
            model.watch(self._poll_wait_seconds))

  def model(self, name, version=None, label=None):
    """The `ModelVersions` of `name` with `version` served (NOT_FOUND otherwise, TensorFlow
    Serving's words; a version label is INVALID_ARGUMENT: none is served)."""
    if label is not None:
      raise rest.ApiError("INVALID_ARGUMENT", f"Unrecognized servable version label: {label}")
    model = self.models.get(name)
    served = model.current if model is not None else None
    if served is None or version not in (None, served.version):
      spec = f"Latest({name})" if version is None else f"Specific({name}, {version})"
      raise rest.ApiError("NOT_FOUND", f"Servable not found for request: {spec}")
    return model

  def status(self, name, version=None, label=None):
    """[(version, state, error message)] as GetModelStatus gives them (NOT_FOUND for an
    unknown model, or a version never seen)."""
    if label is not None:
      raise rest.ApiError("INVALID_ARGUMENT", f"Unrecognized servable version label: {label}")
    model = self.models.get(name)
    found = model.status(version) if model is not None else []
    if not found:
      spec = name if version is None else f"{name}, version {version}"
      raise rest.ApiError("NOT_FOUND", f"Could not find any versions of model {spec}")
    return found

  @contextlib.asynccontextmanager
  async def held(self, name, version=None, label=None):
    """The servable answering a request, held (not unloaded) until the block ends."""
    model = self.model(name, version, label)
    servable = model.acquire(version)
    try:
      yield servable
    finally:
      model.release(servable)

  def submit(self, servable, signature, columns):
    """Checks a request's columns and queues them; returns the future of the outputs
    ({output: numpy array [rows, ...]}).

    Raises:
      rest.ApiError: INVALID_ARGUMENT (over a length limit, larger than a queue) or
        UNAVAILABLE (the model's queue is full, with Retry-After).
    """
    row_tokens = servable.row_tokens(signature, columns)
    try:
      return self.batcher.submit((servable.name, servable, signature), columns, row_tokens,
                                 servable.signatures[signature].batched)
    except batcher_lib.QueueFull as e:
      raise rest.ApiError("UNAVAILABLE", f"The batch scheduling queue to which this task was "
                          f"submitted is full: {e}", headers={"Retry-After": "1"}) from None
    except batcher_lib.RequestTooLarge as e:
      raise rest.ApiError("INVALID_ARGUMENT", str(e)) from None


def fixed(servables):
  """[`ModelVersions`] serving each of `servables` (objects with a servable's attributes and
  methods, distinct names) to the end, without watching a base path."""
  servables = servables if isinstance(servables, (list, tuple)) else [servables]
  return [versions_lib.ModelVersions(servable.name, servable) for servable in servables]
