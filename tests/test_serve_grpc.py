"""TensorFlow Serving's gRPC API of python -m t2t_repro.serve, called with tensorflow-serving-
api's stock stubs: every signature answers as the REST API (and serving_default as
`translate`), errors have TensorFlow Serving's codes, a full queue is UNAVAILABLE, the
metrics count the calls, the methods not offered are UNIMPLEMENTED without a log line, and
SIGTERM answers the calls under way."""

import concurrent.futures
import logging
import signal
import subprocess
import sys
import time

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import inference_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import regression_pb2

from serve_util import Gated, metric, running, start_server
from t2t_repro.serving.servable import Servable

_LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "A girl reads a book."]


@pytest.fixture(scope="module")
def servable(exported_model):
  return Servable("tr", 1, str(exported_model / "1"))


def _request(inputs, signature="", model="tr"):
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model
  request.model_spec.signature_name = signature
  for name, value in inputs.items():
    request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
  return request


def _stub(port):
  return prediction_service_pb2_grpc.PredictionServiceStub(
      grpc.insecure_channel(f"127.0.0.1:{port}"))


def _outputs(response):
  return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


def test_each_signature_answers_as_rest_and_translate(servable, trained_run):
  requests = {
      "serving_default": {"sentences": _LINES},
      "translate_nbest": {"sentences": _LINES},
      "translate_prefix": {"sentences": _LINES, "prefixes": ["Ein", "", "Ein Mädchen"]},
      "score": {"sources": _LINES, "targets": ["Ein Mann fährt.", "Zwei Hunde.", "Ein Buch."]},
      "translate_ids": {"inputs": np.array([[25, 40, 1], [7, 1, 0]], np.int32)},
  }
  with running(servable, grpc=True) as (base, app):
    stub = _stub(app.state.grpc_port)
    for signature, inputs in requests.items():
      answer = stub.Predict(_request(inputs, signature), timeout=300)
      assert answer.model_spec.name == "tr" and answer.model_spec.version.value == 1
      assert answer.model_spec.signature_name == signature
      rest = httpx.post(f"{base}/v1/models/tr:predict", timeout=300, json={
          "signature_name": signature,
          "inputs": {k: np.asarray(v).tolist() for k, v in inputs.items()}}).json()["outputs"]
      outputs = _outputs(answer)
      assert sorted(outputs) == sorted(rest), signature
      for name, value in outputs.items():
        if value.dtype == object:
          assert np.vectorize(bytes.decode)(value).tolist() == rest[name], (signature, name)
        else:
          np.testing.assert_allclose(value, rest[name], atol=1e-5, err_msg=signature)
    only = stub.Predict(_request({"sentences": _LINES[:1]}), timeout=300)
    assert sorted(only.outputs) == ["scores", "translations"]
    filtered = _request({"sentences": _LINES[:1]})
    filtered.output_filter.append("translations")
    assert list(stub.Predict(filtered, timeout=300).outputs) == ["translations"]
    metadata = get_model_metadata_pb2.GetModelMetadataRequest()
    metadata.model_spec.name = "tr"
    metadata.metadata_field.append("signature_def")
    signatures = get_model_metadata_pb2.SignatureDefMap()
    stub.GetModelMetadata(metadata, timeout=60).metadata["signature_def"].Unpack(signatures)
    assert set(requests) <= set(signatures.signature_def)  # and __saved_model_init_op, as REST
    status = get_model_status_pb2.GetModelStatusRequest()
    status.model_spec.name = "tr"
    versions = model_service_pb2_grpc.ModelServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{app.state.grpc_port}")).GetModelStatus(status)
    assert [(v.version, v.state, v.status.error_code) for v in versions.model_version_status] == [
        (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE, 0)]
    translations = _outputs(stub.Predict(_request({"sentences": _LINES}), timeout=300))
    text = httpx.get(f"{base}/metrics").text
  assert metric(text, "t2t_serve_requests_total", endpoint="grpc_predict", code="OK") == 8
  assert metric(text, "t2t_serve_requests_total", endpoint="grpc_status", code="OK") == 1
  cli = subprocess.run(
      [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={trained_run.model_dir}",
       "--noprogress"], input="".join(line + "\n" for line in _LINES), capture_output=True,
      text=True, timeout=600, check=False)
  assert cli.returncode == 0, cli.stderr[-3000:]
  assert [t.decode() for t in translations["translations"]] == cli.stdout.splitlines()


def _negative_dimension():
  """A request whose TensorProto of 3 strings says dim size=-3."""
  request = _request({"sentences": ["A dog.", "A cat.", "A bird."]})
  request.inputs["sentences"].tensor_shape.dim[0].size = -3
  return request


def test_errors_have_tensorflow_servings_codes(servable):
  gated = Gated(servable)
  cases = [  # (request, code, words)
      (_request({"sentences": ["a"]}, model="nosuch"), grpc.StatusCode.NOT_FOUND,
       "Servable not found for request: Latest(nosuch)"),
      (_request({"sentence": ["a"]}), grpc.StatusCode.INVALID_ARGUMENT, "got sentence"),
      (_request({"sentences": [1, 2]}), grpc.StatusCode.INVALID_ARGUMENT, "must be string"),
      (_request({"sentences": [b"\xff"]}), grpc.StatusCode.INVALID_ARGUMENT, "not UTF-8"),
      (_request({"sentences": ["a"]}, signature="nope"), grpc.StatusCode.FAILED_PRECONDITION,
       'signature name: "nope" not found'),
      (_request({"inputs": np.array([[5, 6]], np.int32)}, signature="translate_ids"),
       grpc.StatusCode.INVALID_ARGUMENT, "ending with one EOS"),
      (_request({"inputs": np.array([[25, 40, 1]], np.int8)}, signature="translate_ids"),
       grpc.StatusCode.INVALID_ARGUMENT, "must be int32 of rank 2 (shape [batch, len]); got int8"),
      (_request({"inputs": np.array([[25, 40, 1]], np.int64)}, signature="translate_ids"),
       grpc.StatusCode.INVALID_ARGUMENT, "must be int32 of rank 2 (shape [batch, len]); got int64"),
      (_negative_dimension(), grpc.StatusCode.INVALID_ARGUMENT,
       "tensor parsing error: input 'sentences' has a negative dimension (shape [-3])"),
  ]
  with running(gated, grpc=True, max_batch_size=1, max_enqueued_batches=1,
               batch_timeout_micros=0) as (_, app):
    stub = _stub(app.state.grpc_port)
    for request, code, words in cases:
      with pytest.raises(grpc.RpcError) as error:
        stub.Predict(request, timeout=60)
      assert error.value.code() == code and words in error.value.details(), error.value
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
      held = pool.submit(stub.Predict, _request({"sentences": ["A dog."]}), timeout=300)
      time.sleep(1.0)  # taken by the decoding thread, held at the gate
      queued = pool.submit(stub.Predict, _request({"sentences": ["A cat."]}), timeout=300)
      time.sleep(1.0)  # the queue's one batch
      with pytest.raises(grpc.RpcError) as full:
        stub.Predict(_request({"sentences": ["A bird."]}), timeout=60)
      assert full.value.code() == grpc.StatusCode.UNAVAILABLE
      assert "queue" in full.value.details() and "full" in full.value.details()
      gated.gate.set()
      assert len(_outputs(held.result())["translations"]) == 1
      assert len(_outputs(queued.result())["translations"]) == 1


def test_sigterm_answers_the_grpc_calls_under_way(exported_model):
  process, _ = start_server(exported_model)
  try:
    port = int(process.stdout_line.rsplit("gRPC: 127.0.0.1:", 1)[1].rstrip(")\n"))
    stub = _stub(port)
    lines = [f"A man number {i} rides a bike." for i in range(24)]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      call = pool.submit(stub.Predict, _request({"sentences": lines}, model="transformer"),
                         timeout=300)
      time.sleep(0.5)
      process.send_signal(signal.SIGTERM)
      answer = call.result(timeout=300)
    assert len(_outputs(answer)["translations"]) == len(lines)
    assert process.wait(timeout=120) == 0
  finally:
    if process.poll() is None:
      process.kill()


def test_the_methods_not_offered_answer_unimplemented_without_a_log_line(servable, caplog):
  """Classify, Regress and MultiInference: UNIMPLEMENTED, counted in /metrics, and nothing in
  the server's log (grpcio logged the stubs' NotImplementedError with a traceback)."""
  with running(servable, grpc=True) as (base, app):
    stub = _stub(app.state.grpc_port)
    for method, request in ((stub.Classify, classification_pb2.ClassificationRequest()),
                            (stub.Regress, regression_pb2.RegressionRequest()),
                            (stub.MultiInference, inference_pb2.MultiInferenceRequest())):
      with pytest.raises(grpc.RpcError) as error:
        method(request, timeout=60)
      assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
      assert "is not offered by this server: use Predict" in error.value.details()
    text = httpx.get(f"{base}/metrics").text
  assert metric(text, "t2t_serve_requests_total", endpoint="grpc_unimplemented",
                code="UNIMPLEMENTED") == 3
  assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
