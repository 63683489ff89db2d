"""Bad requests to python -m t2t_repro.serve get TensorFlow Serving's answer, never a 500: the
rows a to i of the server's known wrong answers (each failed before its fix), and a fixed
corpus of a few hundred malformed bodies and URLs after which the server still answers."""

import base64
import concurrent.futures
import json
import random
import signal
import socket
import time

import httpx
import pytest

from serve_util import metric, running, start_server
from t2t_repro.serving.servable import Servable


@pytest.fixture(scope="module")
def servable(exported_model):
  return Servable("tr", 1, str(exported_model / "1"))


def _post(base, path, body):
  content = body if isinstance(body, bytes) else json.dumps(body)
  return httpx.post(f"{base}/v1/models/{path}", content=content, timeout=300)


def test_each_known_wrong_answer_is_now_tensorflow_servings(servable):
  expected = servable.run("serving_default", {"sentences": ["A man."]})["translations"][0].decode()
  with running(servable) as (base, _):
    # a: {"b64": ...} as a whole instance is a value (json_tensor.cc).
    b64 = _post(base, "tr:predict", {"instances": [{"b64": base64.b64encode(b"A man.").decode()}]})
    assert b64.status_code == 200 and b64.json()["predictions"][0]["translations"] == expected
    # b: an empty signature_name is serving_default.
    empty = _post(base, "tr:predict", {"signature_name": "", "instances": ["A man."]})
    assert empty.json()["predictions"][0]["translations"] == expected
    # c: a lone surrogate is 400 naming the instance.
    lone = _post(base, "tr:predict", b'{"instances": ["fine", "a \\ud800 b"]}')
    assert lone.status_code == 400
    assert lone.json()["error"].startswith("instance 1: input 'sentences' is not Unicode text")
    # d: 100,000 nested brackets are a JSON parse error.
    deep = _post(base, "tr:predict", b"[" * 100_000)
    assert deep.status_code == 400 and deep.json()["error"].startswith("JSON Parse error")
    # f: a version label is refused as TensorFlow Serving does without labels.
    label = httpx.get(f"{base}/v1/models/tr/labels/stable")
    assert (label.status_code, label.json()) == (
        400, {"error": "Unrecognized servable version label: stable"})
    assert _post(base, "tr/labels/stable:predict", {"instances": ["a"]}).status_code == 400
    # g: paths outside TensorFlow Serving's patterns are malformed requests.
    for method, path in (("GET", "tr/versions/abc"), ("GET", "tr:predict"),
                         ("POST", "tr/versions/abc:predict"), ("POST", "tr")):
      response = httpx.request(method, f"{base}/v1/models/{path}", timeout=60)
      assert (response.status_code, response.json()) == (
          400, {"error": f"Malformed request: {method} /v1/models/{path}"})
    # i: translate_ids rows must end with EOS (1), then 0-padding.
    for row in ([], [5, 6, 7], [5, 1, 6, 1], [0, 0]):
      ids = _post(base, "tr:predict", {"signature_name": "translate_ids", "instances": [row]})
      assert ids.status_code == 400 and "ending with one EOS (1)" in ids.json()["error"], row
    padded = _post(base, "tr:predict", {"signature_name": "translate_ids",
                                        "instances": [[5, 6, 1, 0, 0]]})
    assert padded.status_code == 200
    # e: a client that closes while sending its body is a disconnect (499), not a 500.
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as sock:
      sock.sendall(b"POST /v1/models/tr:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
                   b"\r\n{\"instances\": [")
      time.sleep(0.5)
    deadline = time.monotonic() + 30
    while metric(httpx.get(f"{base}/metrics").text, "t2t_serve_client_disconnects_total") < 1:
      assert time.monotonic() < deadline, "the disconnect was not counted"
      time.sleep(0.05)
    text = httpx.get(f"{base}/metrics").text
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="499") == 1
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="500") == 0


def _corpus(seed=0, size=400):
  """[(method, path, body bytes)]: malformed predict requests, deterministic."""
  rng = random.Random(seed)
  good = [{"instances": ["A dog."]}, {"inputs": {"sentences": ["A dog."]}},
          {"signature_name": "score", "inputs": {"sources": ["a"], "targets": ["b"]}},
          {"signature_name": "translate_prefix", "instances": [{"sentences": "a", "prefixes": ""}]},
          {"signature_name": "translate_ids", "instances": [[5, 1]]},
          {"signature_name": "translate_nbest", "instances": [{"b64": "QQ=="}]}]
  values = [None, True, 0, -1, 2**31, 10**30, 1.5, float("nan"), "", "\ud800", "\x00", [], {},
            [[[]]], {"b64": "!!"}, {"b64": 3}, {"b64": "/w=="}, ["a"] * 3, [1, 2], [["a"]],
            {"sentences": 1}, "x" * 5000]
  paths = ["tr:predict", "tr/versions/1:predict", "tr/versions/9:predict", "tr:classify",
           "nosuch:predict", "tr/labels/x:predict", "tr/versions/-1:predict", "tr::predict",
           "tr%00:predict", "tr/versions/1/metadata:predict"]
  corpus = []
  while len(corpus) < size:
    body = json.loads(json.dumps(rng.choice(good)))
    kind = rng.randrange(6)
    if kind == 0:  # a value replaced
      key = rng.choice(list(body))
      body[key] = rng.choice(values)
    elif kind == 1:  # a row or input replaced
      container = body.get("instances", body.get("inputs"))
      if isinstance(container, list):
        container[0] = rng.choice(values)
      else:
        container[rng.choice(list(container))] = rng.choice(values)
    elif kind == 2:  # an extra or renamed field
      body[rng.choice(["signature_name", "instances", "inputs", "extra", ""])] = rng.choice(values)
    text = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    if kind == 3:  # cut
      text = text[:rng.randrange(len(text))]
    elif kind == 4:  # bytes flipped
      text = bytearray(text)
      for _ in range(rng.randrange(1, 4)):
        text[rng.randrange(len(text))] = rng.randrange(256)
      text = bytes(text)
    elif kind == 5:  # nesting
      text = b'{"instances": ' + b"[" * rng.randrange(10, 5000) + b"]"
    method = "POST" if rng.random() < 0.9 else rng.choice(["GET", "PUT", "DELETE"])
    corpus.append((method, rng.choice(paths) if rng.random() < 0.3 else "tr:predict", text))
  return corpus


def test_a_corpus_of_malformed_requests_never_gets_a_500(servable):
  corpus = _corpus()
  with running(servable) as (base, _):
    statuses = {}
    with httpx.Client(timeout=300) as client:
      for method, path, body in corpus:
        response = client.request(method, f"{base}/v1/models/{path}", content=body)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code in (200, 400, 404, 405), (path, body[:200], response.text)
        if response.status_code != 200:
          assert set(response.json()) == {"error"}, (path, body[:200], response.text)
      answer = client.post(f"{base}/v1/models/tr:predict", json={"instances": ["A dog."]})
    text = httpx.get(f"{base}/metrics").text
  assert answer.status_code == 200 and answer.json()["predictions"][0]["translations"]
  assert statuses[400] > len(corpus) / 2  # mostly refused, as malformed
  assert metric(text, "t2t_serve_requests_total", endpoint="predict", code="500") == 0


def test_a_forced_stop_answers_every_request_with_json_or_closes(exported_model):
  """h: a second Ctrl-C with 32 requests in flight: each client gets a JSON answer (200, or
  503 for a request the stop cut short) or a closed connection; no traceback."""
  process, base = start_server(exported_model)
  try:
    def send(i):
      try:
        return httpx.post(f"{base}/v1/models/transformer:predict", timeout=120,
                          json={"instances": [f"A man number {i} rides a bike."] * 4})
      except httpx.TransportError as e:
        return e

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
      futures = [pool.submit(send, i) for i in range(32)]
      time.sleep(1.5)
      process.send_signal(signal.SIGINT)
      time.sleep(0.3)
      process.send_signal(signal.SIGINT)
      answers = [f.result(timeout=300) for f in futures]
    process.wait(timeout=120)
    stderr = process.stderr.read()
  finally:
    if process.poll() is None:
      process.kill()
  for answer in answers:
    if isinstance(answer, httpx.Response):
      assert answer.headers["content-type"] == "application/json", answer.text
      assert answer.status_code in (200, 503), answer.text
  assert "Traceback" not in stderr, stderr[-3000:]
