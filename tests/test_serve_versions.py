"""Model versions picked up while serving, as tensorflow_model_server does: a new version is
loaded and warmed up, then takes the requests (none fails meanwhile), the old one is drained
and released; a removed version is replaced by the highest remaining one; a broken version is
one log line and the served one goes on; memory does not grow over 20 reloads; the model
config changed while serving (HandleReloadConfigRequest, the re-read config file)."""

import asyncio
import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref

import httpx
import pytest

from serve_util import metric, running
from t2t_repro.serving import service as service_lib
from t2t_repro.serving import servable as servable_lib
from t2t_repro.serving import version_folder, versions
from t2t_repro.config.serving import BatchingOptions

_LINE = "A man in a blue shirt is riding a bike."


@pytest.fixture(scope="module")
def early_export(trained_run, tmp_path_factory):
  """A SavedModel of `trained_run`'s step-100 checkpoint (other weights than step 200's)."""
  folder = tmp_path_factory.mktemp("early") / "1"
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.export", f"--model_dir={trained_run.model_dir}",
       f"--checkpoint_path={trained_run.model_dir / 'ckpt-100'}", f"--export_dir={folder}"],
      capture_output=True, text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return folder


def _load(version, path):
  return version_folder.load_warm("tr", version, path)


def _translation(path):
  return servable_lib.Servable("tr", 0, str(path)).run(
      "serving_default", {"sentences": [_LINE]})["translations"][0].decode()


def _service(base, version):
  model = versions.ModelVersions("tr", _load(version, str(base / str(version))), str(base), _load)
  return service_lib.Service([model], BatchingOptions(), poll_wait_seconds=1)


def _states(base_url):
  response = httpx.get(f"{base_url}/v1/models/tr", timeout=60).json()
  return {int(v["version"]): (v["state"], v["status"]["error_message"])
          for v in response["model_version_status"]}


def _wait_for(base_url, states):
  deadline = time.monotonic() + 180
  while {v: s for v, (s, _) in _states(base_url).items()} != states:
    assert time.monotonic() < deadline, (states, _states(base_url))
    time.sleep(0.1)


def _predict(base_url):
  return httpx.post(f"{base_url}/v1/models/tr:predict", json={"instances": [_LINE]}, timeout=300)


def _add(source, base, version):
  """Copies a version in as a careful user does: a hidden folder, then a rename."""
  shutil.copytree(source, base / f".{version}.tmp")
  os.rename(base / f".{version}.tmp", base / str(version))


def test_a_new_version_under_load_takes_over_and_no_request_fails(
    exported_model, early_export, tmp_path):
  base = tmp_path / "base"
  shutil.copytree(early_export, base / "1")
  old, new = _translation(early_export), _translation(exported_model / "1")
  assert old != new
  with running(None, service=_service(base, 1)) as (url, _):
    answers, stop = [], threading.Event()

    def client():
      while not stop.is_set():
        response = _predict(url)
        answers.append((response.status_code, response.json()))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
      clients = [pool.submit(client) for _ in range(4)]
      while len(answers) < 8:
        time.sleep(0.05)
      _add(exported_model / "1", base, 2)
      _wait_for(url, {2: "AVAILABLE", 1: "END"})
      switched = len(answers)
      while len(answers) < switched + 8:
        time.sleep(0.05)
      stop.set()
      for done in clients:
        done.result(timeout=300)
    text = httpx.get(f"{url}/metrics").text
    assert httpx.post(f"{url}/v1/models/tr/versions/1:predict", json={"instances": ["a"]}
                      ).status_code == 404
  assert {status for status, _ in answers} == {200}
  translations = [body["predictions"][0]["translations"] for _, body in answers]
  assert translations[0] == old and translations[-1] == new
  assert set(translations) == {old, new}
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="200") == len(answers)


def test_a_broken_version_and_removed_versions(exported_model, early_export, tmp_path, caplog):
  base = tmp_path / "base"
  shutil.copytree(early_export, base / "1")
  shutil.copytree(exported_model / "1", base / "2")
  old, new = _translation(early_export), _translation(exported_model / "1")
  with running(None, service=_service(base, 2)) as (url, _):
    (base / "3").mkdir()
    (base / "3" / "saved_model.pb").write_bytes(b"not a SavedModel")
    _wait_for(url, {3: "END", 2: "AVAILABLE"})
    assert "not a loadable SavedModel" in _states(url)[3][1]
    assert _predict(url).json()["predictions"][0]["translations"] == new
    time.sleep(2.5)  # more polls: the broken version is not tried again
    failures = [r for r in caplog.records if "version 3" in r.getMessage()]
    assert len(failures) == 1 and "version 2 keeps serving" in failures[0].getMessage()
    shutil.rmtree(base / "2")  # the served version removed: the highest remaining one
    _wait_for(url, {3: "END", 2: "END", 1: "AVAILABLE"})
    assert _predict(url).json()["predictions"][0]["translations"] == old
    shutil.rmtree(base / "1")  # none left: not found until a version comes
    _wait_for(url, {3: "END", 2: "END", 1: "END"})
    gone = _predict(url)
    assert (gone.status_code, gone.json()) == (
        404, {"error": "Servable not found for request: Latest(tr)"})
    _add(exported_model / "1", base, 4)
    _wait_for(url, {4: "AVAILABLE", 3: "END", 2: "END", 1: "END"})
    assert _predict(url).json()["predictions"][0]["translations"] == new


def _rss_mb():
  with open("/proc/self/status", encoding="utf-8") as f:
    return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) / 1024


def test_memory_does_not_grow_over_20_reloads(exported_model, tmp_path):
  """Each reload replaces the served version by a copy under a new number; the replaced one
  is released (no reference left), and the process's memory over the last 5 reloads is on
  average within 200 MB of that over reloads 3 to 7 (one load of this model takes about
  120 MB, so keeping every version would add some 1,700 MB; the allocator alone moves the
  memory by up to about 130 MB between reloads)."""
  base = tmp_path / "base"
  shutil.copytree(exported_model / "1", base / "1")
  model = versions.ModelVersions("tr", _load(1, str(base / "1")), str(base), _load)
  first = weakref.ref(model.current)
  measured = {}

  async def reload_20_times():
    watcher = asyncio.get_running_loop().create_task(model.watch(3600))  # its loading thread
    await asyncio.sleep(0)
    for version in range(2, 22):
      shutil.copytree(exported_model / "1", base / str(version))
      await model.poll()
      shutil.rmtree(base / str(version - 1))
      assert model.current.version == version
      measured[version - 1] = _rss_mb()
    watcher.cancel()

  asyncio.run(reload_20_times())
  assert first() is None
  assert [state for _, state, _ in model.status()] == ["AVAILABLE"] + ["END"] * 20
  early = sum(measured[i] for i in range(3, 8)) / 5
  late = sum(measured[i] for i in range(16, 21)) / 5
  assert late - early < 200, measured


def _config(path, models):
  """Writes a model config file of `models` {name: base path}, replacing it at once."""
  text = "model_config_list {\n" + "".join(
      f'  config {{ name: "{name}" base_path: "{base}" }}\n' for name, base in models.items()) + "}\n"
  (path.parent / "tmp.config").write_text(text, encoding="utf-8")
  os.replace(path.parent / "tmp.config", path)


def _reload(port, models):
  """ModelService/HandleReloadConfigRequest with the config of `models` {name: base path}."""
  import grpc  # pylint: disable=import-outside-toplevel
  from tensorflow_serving.apis import model_management_pb2  # pylint: disable=import-outside-toplevel
  from tensorflow_serving.apis import model_service_pb2_grpc  # pylint: disable=import-outside-toplevel
  request = model_management_pb2.ReloadConfigRequest()
  for name, base in models.items():
    model = request.config.model_config_list.config.add()
    model.name, model.base_path = name, str(base)
  with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
    return model_service_pb2_grpc.ModelServiceStub(channel).HandleReloadConfigRequest(
        request, timeout=300)


def test_the_model_config_changed_while_serving(exported_model, early_export, tmp_path):
  """As tensorflow_model_server: HandleReloadConfigRequest adds a model; a config whose model
  cannot load is INVALID_ARGUMENT and one log line, the old config serving on; the file,
  re-read every --model_config_file_poll_wait_seconds, removes a model and gives another a new
  base path (loaded and warmed up first: a client of that model never fails); a broken file is
  one log line."""
  import grpc  # pylint: disable=import-outside-toplevel
  config = tmp_path / "models.config"
  _config(config, {"a": exported_model})
  new, old = _translation(exported_model / "1"), _translation(early_export)
  process = subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.serve", f"--model_config_file={config}",
       "--model_config_file_poll_wait_seconds=1", "--file_system_poll_wait_seconds=0",
       "--rest_api_port=0", "--port=0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  try:
    line = process.stdout.readline()
    assert "model a version 1" in line, line + process.stderr.read()[-3000:]
    url = line.split(" at ")[1].split("/ ")[0]
    port = int(line.rsplit("gRPC: 127.0.0.1:", 1)[1].rstrip(")\n"))

    def translate(name):
      response = httpx.post(f"{url}/v1/models/{name}:predict", json={"instances": [_LINE]},
                            timeout=300)
      return response.status_code, response.json()["predictions"][0]["translations"] if (
          response.status_code == 200) else None

    assert _reload(port, {"a": exported_model, "b": exported_model}).status.error_code == 0
    assert translate("a") == translate("b") == (200, new)
    with pytest.raises(grpc.RpcError) as broken:
      _reload(port, {"a": exported_model, "c": tmp_path / "none"})
    assert broken.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert broken.value.details() == f"model c: model_base_path {tmp_path / 'none'}: no such folder"
    assert translate("c")[0] == 404 and translate("b") == (200, new)

    answers, stop = [], threading.Event()

    def client():
      while not stop.is_set():
        answers.append(translate("b"))

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
      clients = [pool.submit(client) for _ in range(2)]
      _config(config, {"b": early_export.parent})
      deadline = time.monotonic() + 180
      while not answers or answers[-1] != (200, old):
        assert time.monotonic() < deadline and all(not c.done() for c in clients), answers[-3:]
        time.sleep(0.1)
      stop.set()
      for done in clients:
        done.result(timeout=300)
    assert set(answers) <= {(200, new), (200, old)} and answers[0] == (200, new)
    assert translate("a")[0] == 404
    config.write_text("model_config_list { config { nme: 1 } }", encoding="utf-8")
    time.sleep(2.5)  # two polls of the file
    assert translate("b") == (200, old)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
    stderr = process.stderr.read()
  finally:
    if process.poll() is None:
      process.kill()
  assert "Traceback" not in stderr, stderr[-3000:]
  refused = [line for line in stderr.splitlines() if "the old one serves on" in line]
  assert len(refused) == 2, stderr[-3000:]
  assert "ReloadConfigRequest" in refused[0] and "model c:" in refused[0]
  assert f"model config {config} not served" in refused[1] and "nme" in refused[1]
