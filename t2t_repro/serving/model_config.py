"""The model config changed while serving, as tensorflow_model_server allows
(`ServerCore::ReloadConfig`): by ModelService/HandleReloadConfigRequest (`grpc_app`) and by
re-reading --model_config_file every --model_config_file_poll_wait_seconds.

A new config takes effect as a new version does (`versions`): first the models it adds and
those whose base_path or model_platform changed are loaded and warmed up (the latest version
of each), while the old config keeps serving; then requests go to the new config's models
(`service.Service.serve_models`); a model removed or replaced answers the requests that
hold it, then its version is unloaded. A config that cannot be read or checked, or a model
that fails to load, changes nothing: one log line (and the gRPC call's error), and the old
config serves on. Models whose entry is unchanged keep serving untouched.
"""

import asyncio
import os

from absl import logging

from t2t_repro import errors
from t2t_repro.serving import servable as servable_lib


class ModelConfig:
  """The served model config of a `service.Service`, and its changes.

  Args:
    service: the `service.Service` whose models the config gives.
    models: [(name, base_path, model_platform)], the config served now (`servable.
      config_models`), one `versions.ModelVersions` per entry in `service.models`.
    load_model: (name, base_path, model_platform) -> a `versions.ModelVersions` serving its
      latest version, loaded and warmed up (called in a thread; raises on failure).
    path: the --model_config_file to re-read, or None.
    poll_wait_seconds: seconds between two readings of `path` (0: never).
  """

  def __init__(self, service, models, load_model, path=None, poll_wait_seconds=0):
    self.service, self.models, self._load_model = service, list(models), load_model
    self.path, self.poll_wait_seconds = path, poll_wait_seconds
    self._lock = asyncio.Lock()

  async def reload(self, models):
    """Serves the config `models` ([(name, base_path, model_platform)]): loads and warms up
    what is new, then switches (see the module docstring).

    Raises:
      errors.DataError: a model's base path has no version, or its version fails to load;
        nothing changed.
    """
    async with self._lock:
      if list(models) == self.models:
        return
      served = {name: (base_path, platform) for name, base_path, platform in self.models}
      loaded = {}
      for name, base_path, platform in models:
        if served.get(name) != (base_path, platform):
          loaded[name] = await asyncio.get_running_loop().run_in_executor(
              None, self._loaded, name, base_path, platform)
      self.service.serve_models([loaded.get(name) or self.service.models[name]
                                 for name, _, _ in models])
      self.models = list(models)
      logging.info("model config: serving %s", ", ".join(
          f"{name} ({base_path})" for name, base_path, _ in models))

  def _loaded(self, name, base_path, platform):
    try:
      return self._load_model(name, base_path, platform)
    except Exception as e:  # pylint: disable=broad-except  # a model that does not load
      raise errors.DataError(f"model {name}: {_first_line(e)}") from None

  async def watch(self):
    """Re-reads the config file every `poll_wait_seconds` once it changed (its mtime or
    size) and serves it, until cancelled (at once without a file or with 0). A broken file
    is one log line, once."""
    if self.path is None or self.poll_wait_seconds <= 0:
      return
    seen = _stamp(self.path)
    while True:
      await asyncio.sleep(self.poll_wait_seconds)
      stamp = _stamp(self.path)
      if stamp == seen:
        continue
      seen = stamp
      try:
        await self.reload(servable_lib.read_model_config(self.path))
      except (errors.DataError, OSError) as e:
        logging.error("model config %s not served, the old one serves on: %s", self.path,
                      _first_line(e))


def _stamp(path):
  """(mtime_ns, size) of a file, or None when it cannot be read."""
  try:
    stat = os.stat(path)
  except OSError:
    return None
  return stat.st_mtime_ns, stat.st_size


def _first_line(error):
  return str(error).splitlines()[0] if str(error) else type(error).__name__
