"""python -m t2t_repro.serve: TensorFlow Serving's REST API over the exported model of a
briefly trained tiny model, batching that never changes an output, every error status,
the full queue, disconnecting clients, graceful SIGTERM and /metrics."""

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from serve_util import Gated, Timed, metric, running, start_server
from t2t_repro.serving.servable import Servable

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def servable(exported_model):
  return Servable("transformer", 1, str(exported_model / "1"))


@pytest.fixture(scope="module")
def test_lines(shared_data_dir):
  """The first 24 lines of Multi30k's test_2016_flickr.en."""
  with open(os.path.join(shared_data_dir, "multi30k", "test_2016_flickr.en"), encoding="utf-8") as f:
    return [next(f).strip() for _ in range(24)]


def _predict(base, body, model="transformer", timeout=300):
  return httpx.post(f"{base}/v1/models/{model}:predict", content=json.dumps(body), timeout=timeout)


def test_status_metadata_and_both_predict_formats(servable):
  with running(servable) as (base, _):
    assert httpx.get(f"{base}/v1/models/transformer").json() == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    assert httpx.get(f"{base}/v1/models/transformer/versions/1").status_code == 200
    metadata = httpx.get(f"{base}/v1/models/transformer/metadata").json()
    assert metadata["model_spec"] == {"name": "transformer", "signature_name": "", "version": "1"}
    signatures = metadata["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "translate_nbest", "translate_prefix", "score"} <= set(signatures)
    sentences = signatures["serving_default"]["inputs"]["sentences"]
    assert sentences["dtype"] == "DT_STRING"
    assert sentences["tensor_shape"] == {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False}
    assert signatures["serving_default"]["method_name"] == "tensorflow/serving/predict"

    lines = ["A man is riding a bike.", "Two dogs play in the snow."]
    direct = servable.run("serving_default", {"sentences": lines})
    rows = _predict(base, {"instances": lines}).json()["predictions"]
    assert [row["translations"] for row in rows] == [t.decode() for t in direct["translations"]]
    assert [row["scores"] for row in rows] == pytest.approx(direct["scores"].tolist())
    columns = _predict(f"{base}", {"inputs": {"sentences": lines}}).json()["outputs"]
    assert columns["translations"] == [row["translations"] for row in rows]
    versioned = httpx.post(f"{base}/v1/models/transformer/versions/1:predict",
                           content=json.dumps({"instances": [{"sentences": lines[0]}]})).json()
    assert versioned["predictions"][0]["translations"] == rows[0]["translations"]

    nbest = _predict(base, {"signature_name": "translate_nbest", "inputs": {"sentences": lines}})
    nbest = nbest.json()["outputs"]
    assert len(nbest["translations"]) == 2 and len(nbest["translations"][0]) == 4  # beam 4
    prefixed = _predict(base, {"signature_name": "translate_prefix", "instances": [
        {"sentences": lines[0], "prefixes": "Ein Hund"}]}).json()["predictions"][0]
    assert prefixed["translations"].startswith("Ein Hund")
    scored = _predict(base, {"signature_name": "score", "inputs": {
        "sources": lines[:1], "targets": [rows[0]["translations"]]}}).json()["outputs"]
    assert scored["scores"][0] < 0 and scored["lengths"][0] >= 2


def test_predict_equals_translate_alone_and_merged(servable, exported_model, trained_run,
                                                   test_lines):
  """Each line sent alone, the same lines sent at once from 12 clients (merged into shared
  batches, as /metrics shows) and `python -m t2t_repro.translate` give the same text; the
  n-best lists too."""
  with running(servable, max_batch_size=64, batch_timeout_micros=300_000) as (base, _):
    alone = [_predict(base, {"instances": [line]}).json()["predictions"][0]
             for line in test_lines]
    nbest_alone = [_predict(base, {"signature_name": "translate_nbest", "instances": [line]})
                   .json()["predictions"][0] for line in test_lines[:6]]
    before = httpx.get(f"{base}/metrics").text
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
      merged = list(pool.map(lambda line: _predict(base, {"instances": [line]}).json()
                             ["predictions"][0], test_lines))
      nbest_merged = list(pool.map(
          lambda line: _predict(base, {"signature_name": "translate_nbest", "instances": [line]})
          .json()["predictions"][0], test_lines[:6]))
    after = httpx.get(f"{base}/metrics").text
  calls = (metric(after, "t2t_serve_batch_size_count", model="transformer", signature="serving_default")
           - metric(before, "t2t_serve_batch_size_count", model="transformer", signature="serving_default"))
  assert calls < len(test_lines)  # requests were merged
  assert [m["translations"] for m in merged] == [a["translations"] for a in alone]
  assert [m["scores"] for m in merged] == pytest.approx([a["scores"] for a in alone], abs=1e-5)
  assert [n["translations"] for n in nbest_merged] == [n["translations"] for n in nbest_alone]
  assert [n["scores"] for n in nbest_merged] == [
      pytest.approx(n["scores"], abs=1e-5) for n in nbest_alone]
  cli = subprocess.run(
      [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={trained_run.model_dir}",
       "--noprogress"], input="".join(line + "\n" for line in test_lines), cwd=_REPO,
      capture_output=True, text=True, timeout=600, check=False)
  assert cli.returncode == 0, cli.stderr[-3000:]
  assert cli.stdout.splitlines() == [a["translations"] for a in alone]


def test_bad_requests_get_their_status_and_the_server_stays_up(servable):
  too_long = " ".join(["bicycle"] * 600)  # over max_input_length 462 and max_positions 512
  cases = [  # (body, model, status, words of the error)
      (b'{"instances": ["a", ', "transformer", 400, "JSON Parse error"),
      (b'["a"]', "transformer", 400, "JSON object"),
      ({"instances": ["a"], "examples": []}, "transformer", 400, "unknown field 'examples'"),
      ({"instances": ["a"], "inputs": ["a"]}, "transformer", 400, "only one of"),
      ({"signature_name": "serving_default"}, "transformer", 400, "Missing 'inputs' or 'instances'"),
      ({"instances": [3]}, "transformer", 400, "instance 0: input 'sentences' must be a string"),
      ({"instances": []}, "transformer", 400, "non-empty"),
      ({"inputs": {"sources": ["a"], "targets": ["b", "c"]}, "signature_name": "score"},
       "transformer", 400, "different batch sizes"),
      ({"signature_name": "translate", "instances": ["a"]}, "transformer", 400,
       'signature name: "translate" not found'),
      ({"instances": ["a", too_long, "b"]}, "transformer", 400,
       "instance 1: input 'sentences' is "),
      ({"signature_name": "score", "inputs": {"sources": ["a"], "targets": [too_long]}},
       "transformer", 400, "instance 0: input 'targets' is "),
      ({"instances": ["a"]}, "nosuchmodel", 404, "Servable not found for request: Latest(nosuchmodel)"),
  ]
  with running(servable, max_request_bytes=20_000) as (base, _):
    for body, model, status, words in cases:
      content = body if isinstance(body, bytes) else json.dumps(body)
      response = httpx.post(f"{base}/v1/models/{model}:predict", content=content, timeout=300)
      assert response.status_code == status, (body, response.text)
      assert response.headers["content-type"] == "application/json"
      assert words in response.json()["error"], (words, response.json())
    assert "max_input_length" in _predict(base, {"instances": [too_long]}).json()["error"]
    version = httpx.post(f"{base}/v1/models/transformer/versions/7:predict", content="{}")
    assert version.status_code == 404
    assert version.json() == {"error": "Servable not found for request: Specific(transformer, 7)"}
    assert httpx.get(f"{base}/v1/models/other").status_code == 404
    assert httpx.get(f"{base}/v1/nothing").json() == {"error": "Malformed request: GET /v1/nothing"}
    assert httpx.get(f"{base}/nothing").json()["error"].startswith("Not Found")
    large = httpx.post(f"{base}/v1/models/transformer:predict",
                       content=json.dumps({"instances": ["a man " * 4000]}))
    assert large.status_code == 413 and "limit of 20000 bytes" in large.json()["error"]
    assert _predict(base, {"instances": ["A dog."]}).status_code == 200  # still serving


def test_a_full_queue_answers_503_with_retry_after_and_every_request_gets_an_answer(servable):
  """The decoding thread is held busy while 2x the queue's capacity arrives: each request
  gets 200 or, at once, 503 with Retry-After; none hangs or is lost."""
  gated = Gated(servable)
  with running(gated, max_batch_size=2, max_enqueued_batches=3, batch_timeout_micros=0) as (
      base, _):
    def send(line):
      return _predict(base, {"instances": [line]}, timeout=300)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
      first = pool.submit(send, "A dog runs.")  # taken by the decoding thread, held
      time.sleep(1.0)
      others = [pool.submit(send, f"A dog runs {i} times.") for i in range(12)]
      deadline = time.monotonic() + 60
      while sum(f.done() for f in others) < 6:  # 3 batches of 2 rows queued: the rest refused
        assert time.monotonic() < deadline, "no answer to the requests over the queue's capacity"
        time.sleep(0.05)
      time.sleep(0.5)
      refused = [f.result() for f in others if f.done()]
      assert len(refused) == 6 and {r.status_code for r in refused} == {503}
      gated.gate.set()
      answers = [first.result(timeout=300)] + [f.result(timeout=300) for f in others]
  assert sorted(r.status_code for r in answers) == [200] * 7 + [503] * 6
  for response in refused:
    assert response.headers["retry-after"] == "1"
    assert "queue" in response.json()["error"] and "full" in response.json()["error"]


def test_a_flood_of_one_model_does_not_stall_another(servable):
  """32 clients send 4 sentences each, 3 times over, to model A (batches of 16 rows, one
  decoding thread) while one client sends single sentences to model B. The queues take turns
  (TensorFlow Serving's shared batch scheduler): B's batch waits for the batch of A under way
  and its own batch_timeout_micros, not for A's queue, so B's slowest answer is within a few
  of A's batch decoding times (as measured here) plus B's slowest answer alone."""
  flood, other = Timed(servable, "A"), Timed(servable, "B")
  lines = [f"A man number {i} rides a red bike down the street." for i in range(4)]
  with running([flood, other], max_batch_size=16, max_enqueued_batches=16) as (base, _):
    def seconds(model, sentences):
      started = time.perf_counter()
      assert _predict(base, {"instances": sentences}, model=model).status_code == 200
      return time.perf_counter() - started

    for _ in range(2):  # the first calls trace the graph
      seconds("B", ["A dog runs."])
    alone = [seconds("B", ["A dog runs."]) for _ in range(5)]
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
      clients = [pool.submit(lambda: [seconds("A", lines) for _ in range(3)]) for _ in range(32)]
      deadline = time.monotonic() + 60
      while metric(httpx.get(f"{base}/metrics").text, "t2t_serve_queue_batches") < 4:
        assert time.monotonic() < deadline, "A's requests did not queue up"
        time.sleep(0.01)
      during = []
      while not all(client.done() for client in clients):
        during.append(seconds("B", ["A dog runs."]))
      for client in clients:
        client.result()
  bound = 3 * max(flood.seconds) + max(alone)
  assert during and max(during) < bound, (during, alone, flood.seconds)


def test_a_client_that_disconnects_does_not_disturb_the_others(servable):
  gated = Gated(servable)
  with running(gated, batch_timeout_micros=0) as (base, _):
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
      busy = pool.submit(_predict, base, {"instances": ["A dog runs."]})
      time.sleep(1.0)
      with pytest.raises(httpx.TimeoutException):  # the client gives up and closes
        _predict(base, {"instances": ["A cat sleeps.", "A bird sings."]}, timeout=1.0)
      staying = pool.submit(_predict, base, {"instances": ["Two men talk."]})
      deadline = time.monotonic() + 30
      while metric(httpx.get(f"{base}/metrics").text, "t2t_serve_client_disconnects_total") < 1:
        assert time.monotonic() < deadline, "the disconnect was not seen"
        time.sleep(0.05)
      gated.gate.set()
      assert busy.result(timeout=300).status_code == 200
      answer = staying.result(timeout=300)
    assert answer.status_code == 200
    expected = servable.run("serving_default", {"sentences": ["Two men talk."]})
    assert answer.json()["predictions"][0]["translations"] == expected["translations"][0].decode()
    text = httpx.get(f"{base}/metrics").text
  # The decoded rows: the busy one and the staying one, not the 2 of the client that left.
  assert metric(text, "t2t_serve_batch_size_sum", model="transformer", signature="serving_default") == 2
  assert metric(text, "t2t_serve_client_disconnects_total") == 1
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="499") == 1


def test_metrics_count_requests_batches_and_the_queue(servable):
  with running(servable) as (base, _):
    _predict(base, {"instances": ["A dog.", "A cat is here."]})
    _predict(base, {"instances": "not a list"})
    httpx.get(f"{base}/v1/models/transformer")
    response = httpx.get(f"{base}/metrics")
  assert response.headers["content-type"].startswith("text/plain")
  text = response.text
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="200") == 1
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="400") == 1
  assert metric(text, "t2t_serve_requests_total", endpoint="status", code="200") == 1
  assert metric(text, "t2t_serve_request_latency_seconds_count", endpoint="predict") == 2
  assert metric(text, "t2t_serve_batch_size_count", model="transformer", signature="serving_default") == 1
  assert metric(text, "t2t_serve_batch_size_sum", model="transformer", signature="serving_default") == 2
  tokens = servable.row_tokens("serving_default", {"sentences": ["A dog.", "A cat is here."]})
  assert metric(text, "t2t_serve_batch_tokens_sum", model="transformer", signature="serving_default") == sum(tokens)
  assert "t2t_serve_queue_rows 0.0" in text and "t2t_serve_queue_batches 0.0" in text


def test_sigterm_answers_the_requests_under_way_and_exits_0(exported_model, test_lines):
  process, base = start_server(exported_model)
  try:
    assert httpx.get(f"{base}/v1/models/transformer").status_code == 200
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      under_way = pool.submit(_predict, base, {"instances": test_lines})
      time.sleep(0.5)
      process.send_signal(signal.SIGTERM)
      response = under_way.result(timeout=300)
    assert response.status_code == 200
    assert len(response.json()["predictions"]) == len(test_lines)
    assert process.wait(timeout=120) == 0
    port = int(base.rsplit(":", 1)[1])
    with pytest.raises(OSError):
      socket.create_connection(("127.0.0.1", port), timeout=5)
    assert "stopped serving transformer" in process.stdout.read()
  finally:
    if process.poll() is None:
      process.kill()


def test_a_model_config_file_serves_several_models(tmp_path, exported_model):
  """TensorFlow Serving's --model_config_file: two names for the same export, each with its
  status, metadata and predictions; a third name is not found."""
  config = tmp_path / "models.config"
  config.write_text("model_config_list {\n"
                    f'  config {{ name: "en_de" base_path: "{exported_model}" '
                    'model_platform: "tensorflow" }\n'
                    f'  config {{ name: "other" base_path: "{exported_model}" }}\n}}\n',
                    encoding="utf-8")
  process = subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.serve", f"--model_config_file={config}",
       "--rest_api_port=0", "--port=0"], cwd=_REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  try:
    line = process.stdout.readline()
    assert "model en_de version 1" in line and "model other version 1" in line, (
        line + process.stderr.read()[-3000:])
    base = line.split(" at ")[1].split("/ ")[0]
    answers = {}
    for name in ("en_de", "other"):
      assert httpx.get(f"{base}/v1/models/{name}").json()["model_version_status"][0]["state"] == (
          "AVAILABLE")
      assert httpx.get(f"{base}/v1/models/{name}/metadata").json()["model_spec"]["name"] == name
      answers[name] = _predict(base, {"instances": ["A dog runs."]}, model=name).json()
    assert answers["en_de"] == answers["other"] and answers["en_de"]["predictions"][0]["translations"]
    assert _predict(base, {"instances": ["A dog."]}, model="third").status_code == 404
    assert 'data-model="en_de"' in httpx.get(f"{base}/").text  # the page: the first model
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
  finally:
    if process.poll() is None:
      process.kill()


def test_serve_command_errors(tmp_path, exported_model):
  def serve(*flags):
    return subprocess.run([sys.executable, "-m", "t2t_repro.serve", *flags], cwd=_REPO,
                          capture_output=True, text=True, timeout=300, check=False)

  missing = serve(f"--model_base_path={tmp_path / 'none'}")
  assert missing.returncode == 1
  assert missing.stderr.strip().splitlines()[-1] == (
      f"serve: error: --model_base_path {tmp_path / 'none'}: no such folder")
  no_version = serve(f"--model_base_path={tmp_path}")
  assert no_version.returncode == 1 and "no version folder" in no_version.stderr
  assert serve(f"--model_base_path={tmp_path}", "--max_batch_size=0").returncode == 2
  both = serve(f"--model_base_path={tmp_path}", f"--model_config_file={tmp_path / 'c'}")
  assert both.returncode == 2 and "one of --model_base_path and --model_config_file" in both.stderr
  config = tmp_path / "bad.config"
  config.write_text('model_config_list { config { name: "a" base_path: "x" } '
                    'config { name: "a" base_path: "y" } }', encoding="utf-8")
  twice = serve(f"--model_config_file={config}")
  assert twice.returncode == 1
  assert twice.stderr.strip().splitlines()[-1] == (
      f"serve: error: --model_config_file {config}: model 'a' twice")
  config.write_text("model_config_list { config { nme: 1 } }", encoding="utf-8")
  malformed = serve(f"--model_config_file={config}")
  assert malformed.returncode == 1 and "nme" in malformed.stderr.splitlines()[-1]
  with socket.socket() as taken:
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = serve(f"--model_base_path={exported_model}",
                 f"--rest_api_port={taken.getsockname()[1]}")
    port = taken.getsockname()[1]
    grpc_busy = serve(f"--model_base_path={exported_model}", "--rest_api_port=0", f"--port={port}")
  assert busy.returncode == 1 and "cannot listen" in busy.stderr.splitlines()[-1]
  assert grpc_busy.returncode == 1
  assert grpc_busy.stderr.splitlines()[-1].startswith(
      f"serve: error: --port {port} on 127.0.0.1: cannot listen")
