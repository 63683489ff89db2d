"""examples/serving: its REST and gRPC clients against a server of a two-model
--model_config_file like examples/serving/models.config, giving the same translations as each
other and as the served SavedModel itself."""

import os
import re
import signal
import subprocess
import sys

import pytest

from t2t_repro.serving.servable import Servable

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXAMPLES = os.path.join(_REPO, "examples", "serving")
_LINES = ["A man is riding a bike.", "Two dogs play in the snow."]


def _client(name, *args):
  return subprocess.run([sys.executable, os.path.join(_EXAMPLES, name), *args], cwd=_REPO,
                        capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def server(exported_model, tmp_path):
  """(REST URL, gRPC address) of a server of examples/serving/models.config with both base
  paths pointing at the exported model."""
  with open(os.path.join(_EXAMPLES, "models.config"), encoding="utf-8") as f:
    text = f.read()
  assert re.findall(r'base_path: "([^"]+)"', text) == ["runs/serving/en_de",
                                                       "runs/serving/en_de_early"]
  config = tmp_path / "models.config"
  config.write_text(re.sub(r'base_path: "[^"]+"', f'base_path: "{exported_model}"', text),
                    encoding="utf-8")
  process = subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.serve", f"--model_config_file={config}",
       "--rest_api_port=0", "--port=0"], cwd=_REPO, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    line = process.stdout.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+)/ .*gRPC: (127\.0\.0\.1:\d+)\)", line)
    assert match, line + process.stderr.read()[-3000:]
    yield match[1], match[2]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
  finally:
    if process.poll() is None:
      process.kill()


def test_the_rest_and_grpc_clients_give_the_models_translations(server, exported_model):
  rest_url, grpc_address = server
  direct = Servable("en_de", 1, str(exported_model / "1")).run("serving_default",
                                                               {"sentences": _LINES})
  expected = [f"{t.decode()}\t{s:.4f}" for t, s in zip(direct["translations"], direct["scores"])]
  for model in ("en_de", "en_de_early"):
    rest = _client("rest_client.py", f"--server={rest_url}", f"--model_name={model}", *_LINES)
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert rest.stdout.splitlines() == expected
    grpc = _client("grpc_client.py", f"--server={grpc_address}", f"--model_name={model}", *_LINES)
    assert grpc.returncode == 0, grpc.stderr[-3000:]
    assert grpc.stdout.splitlines() == expected + ["version 1: AVAILABLE"]
  unknown = _client("rest_client.py", f"--server={rest_url}", "--model_name=fr_de", "A man.")
  assert (unknown.returncode, unknown.stderr) == (
      1, "rest_client: HTTP 404: Servable not found for request: Latest(fr_de)\n")
  unknown = _client("grpc_client.py", f"--server={grpc_address}", "--model_name=fr_de", "A man.")
  assert unknown.returncode == 1
  assert unknown.stderr.splitlines()[-1] == (
      "grpc_client: NOT_FOUND: Servable not found for request: Latest(fr_de)")
