"""The versions of one model while it is served, as tensorflow_model_server manages them
with its default version policy (the latest version; tensorflow_serving/core/
aspired_versions_manager.h, file_system_storage_path_source.h):

* every `poll_wait_seconds` the model base path is listed (`scan`); when its highest version
  (an integer folder holding saved_model.pb, or a CTranslate2 export's model.bin) is not the
  one served, it is loaded and warmed up (one sentence through serving_default) in a thread of its own while the old one keeps
  answering, then takes the requests that arrive from then on;
* the version it replaces is UNLOADING until the requests it holds (`acquire`) are answered,
  then released (END);
* the served version's folder removed: the highest remaining version is loaded, or, with
  none left, the model has no version (requests get 404) until one appears;
* a version that fails to load is one log line and the state END with its error; the old
  version keeps serving; the broken version is tried again only once its saved_model.pb
  (model.bin) changes.

`status` gives each version's state as GetModelStatus does (LOADING, AVAILABLE, UNLOADING,
END). All methods but the loading itself run in the event loop's thread.
"""

import asyncio
import concurrent.futures
import gc
import os

from absl import logging

LOADING, AVAILABLE, UNLOADING, END = "LOADING", "AVAILABLE", "UNLOADING", "END"
# model_platform -> the file that marks a version folder of it: a SavedModel of
# `t2t_repro.serving.saved_model`, a CTranslate2 export (`t2t_repro.serving.ctranslate2`) or a
# LiteRT export (`t2t_repro.serving.litert`).
PLATFORMS = {"tensorflow": "saved_model.pb", "ctranslate2": "model.bin", "litert": "model.tflite"}


def platform(path):
  """The model_platform of a version folder (a key of `PLATFORMS`), or None."""
  return next((name for name, file in PLATFORMS.items()
               if os.path.isfile(os.path.join(path, file))), None)


def scan(model_base_path):
  """{version: (its folder, its model file's (mtime_ns, size))} of a model base path
  (TensorFlow Serving's layout `<model_base_path>/<integer version>/saved_model.pb`, or
  model.bin for a CTranslate2 export); {} when the folder is missing."""
  try:
    names = os.listdir(model_base_path)
  except OSError:
    return {}
  found = {}
  for name in names:
    path = os.path.join(model_base_path, name)
    found_platform = platform(path)
    if found_platform is None:
      continue
    try:
      stat = os.stat(os.path.join(path, PLATFORMS[found_platform]))
    except OSError:
      continue
    if name.isdigit():
      found[int(name)] = (path, (stat.st_mtime_ns, stat.st_size))
  return found


class ModelVersions:
  """One model's served version and the states of the versions it has seen.

  Args:
    name: the model name.
    servable: the version served at start (a `servable.Servable`, loaded and warmed up).
    base_path: the model base path to watch, or None: `servable` is served to the end.
    load: (version, folder) -> a warmed-up servable, raising on failure (called in the
      loading thread); needed with `base_path`.
  """

  def __init__(self, name, servable, base_path=None, load=None):
    self.name, self.base_path, self._load = name, base_path, load
    self.current = servable  # None: no version served
    self._states = {servable.version: [AVAILABLE, ""]}  # version -> [state, error message]
    self._held = {}  # servable -> requests holding it
    self._draining = []  # replaced servables not yet released
    self._failed = {}  # version -> its model file's (mtime_ns, size) when its load failed
    self._executor = None

  def acquire(self, version=None):
    """The servable answering a request for `version` (None: the served one), held until
    `release`; None when that version is not served."""
    servable = self.current
    if servable is None or version not in (None, servable.version):
      return None
    self._held[servable] = self._held.get(servable, 0) + 1
    return servable

  def release(self, servable):
    """Ends a request's hold on `servable`; a replaced version is released after its last."""
    self._held[servable] -= 1
    if self._held[servable] == 0:
      del self._held[servable]
      self._release_drained()

  def status(self, version=None):
    """[(version, state, error message)] of every version seen (or only `version`), newest
    first."""
    return [(v, state, error) for v, (state, error) in sorted(self._states.items(), reverse=True)
            if version is None or v == version]

  async def watch(self, poll_wait_seconds):
    """Polls the base path every `poll_wait_seconds` until cancelled (at once without a
    base path or with 0)."""
    if self.base_path is None or poll_wait_seconds <= 0:
      return
    self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="load")
    try:
      while True:
        await asyncio.sleep(poll_wait_seconds)
        await self.poll()
    finally:
      self._executor.shutdown(wait=False, cancel_futures=True)

  async def poll(self):
    """One look at the base path: loads and switches to its highest version if that is not
    the served one; unloads the served one if its folder is gone and nothing replaces it."""
    on_disk = scan(self.base_path)
    for version in [v for v in self._failed if on_disk.get(v, (None, None))[1] != self._failed[v]]:
      del self._failed[version]  # changed or gone: may be tried again
    candidates = [v for v in on_disk if v not in self._failed]
    served = self.current.version if self.current is not None else None
    if served is not None and served not in on_disk and not candidates:
      logging.info("model %s: version %d removed from %s; no version left to serve", self.name,
                   served, self.base_path)
      self._retire(self.current)
      self.current = None
      return
    if not candidates or max(candidates) == served:
      return
    version = max(candidates)
    path = on_disk[version][0]
    self._states[version] = [LOADING, ""]
    loop = asyncio.get_running_loop()
    try:
      servable = await loop.run_in_executor(self._executor, self._load, version, path)
    except Exception as e:  # pylint: disable=broad-except  # logged, the old version serves on
      message = str(e).splitlines()[0] if str(e) else type(e).__name__
      logging.error("model %s: version %d at %s failed to load, version %s keeps serving: %s",
                    self.name, version, path, served, message)
      self._states[version] = [END, message]
      self._failed[version] = on_disk[version][1]
      return
    self._states[version] = [AVAILABLE, ""]
    logging.info("model %s: serving version %d (%s)", self.name, version, path)
    replaced, self.current = self.current, servable
    if replaced is not None:
      self._retire(replaced)

  def retire(self):
    """Stops serving this model (it left the model config, or another base path replaces
    it): requests get NOT_FOUND from now on, and the served version is unloaded once the
    requests holding it are answered."""
    if self.current is not None:
      self._retire(self.current)
      self.current = None

  def _retire(self, servable):
    self._states[servable.version] = [UNLOADING, ""]
    self._draining.append(servable)
    self._release_drained()

  def _release_drained(self):
    idle = [s for s in self._draining if s not in self._held]
    for servable in idle:
      self._draining.remove(servable)
      self._states[servable.version] = [END, ""]
      logging.info("model %s: version %d unloaded", self.name, servable.version)
    if idle:
      del servable, idle
      gc.collect()  # the SavedModel's graphs and weights go now, not at some later collection
