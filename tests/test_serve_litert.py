"""A LiteRT export served behind the same REST and gRPC API (t2t_repro.serving.
litert_servable): the folder's model.tflite picks the servable, the signatures it holds answer
as the SavedModel's do on the same model, the others get a clear 400 (INVALID_ARGUMENT over
gRPC), and the serve command serves such a folder."""

import json

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from serve_util import running, start_server
from t2t_repro import errors
from t2t_repro.serving import servable as servable_lib, version_folder, versions

pytest.importorskip("ai_edge_litert")

_LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "", "A girl reads a book."]


@pytest.fixture(scope="module")
def lite(litert_export):
  return version_folder.load_warm("tr", 1, str(litert_export / "1"))


def test_the_folder_picks_the_litert_servable(lite, litert_export, exported_model, tmp_path):
  assert type(lite).__name__ == "LiteRtServable"
  assert list(versions.scan(str(litert_export))) == [1]
  with pytest.raises(errors.DataError, match="model_platform litert wants model.tflite"):
    version_folder.load_warm("tr", 1, str(exported_model / "1"), model_platform="litert")
  (tmp_path / "model.tflite").write_bytes(b"not a model")
  with pytest.raises(errors.DataError, match="not a loadable LiteRT export"):
    version_folder.load_warm("tr", 2, str(tmp_path))


def test_the_signatures_it_holds_answer_as_the_savedmodels(lite, exported_model):
  saved = servable_lib.Servable("tr", 1, str(exported_model / "1"))
  for name, columns in (("serving_default", {"sentences": _LINES}),
                        ("translate_nbest", {"sentences": _LINES[:2]}),
                        ("translate_ids", {"inputs": [[5, 6, 7, 1], [9, 1, 0, 0]]})):
    want, got = saved.run(name, columns), lite.run(name, columns)
    assert sorted(got) == sorted(want)
    for output in want:
      if name == "translate_nbest":  # the export's n_best is 3, the SavedModel's the beam's 4
        assert got[output].shape[1] == 3
        want[output] = want[output][:, :3]
      assert got[output].shape == want[output].shape
      if want[output].dtype == np.float32:
        np.testing.assert_allclose(got[output], want[output], rtol=1e-4, atol=1e-4)
      else:
        np.testing.assert_array_equal(got[output], want[output])


def test_rest_and_grpc_and_a_clear_400_for_the_others(lite):
  with running(lite, grpc=True) as (base, app):
    metadata = httpx.get(f"{base}/v1/models/tr/metadata").json()
    assert sorted(metadata["metadata"]["signature_def"]["signature_def"]) == [
        "serving_default", "translate_ids", "translate_nbest"]
    answer = httpx.post(f"{base}/v1/models/tr:predict", timeout=300,
                        content=json.dumps({"instances": _LINES}))
    assert [p["translations"] for p in answer.json()["predictions"]] == [
        t.decode() for t in lite.run("serving_default", {"sentences": _LINES})["translations"]]
    refused = httpx.post(f"{base}/v1/models/tr:predict", timeout=60, content=json.dumps(
        {"signature_name": "score", "inputs": {"sources": ["a"], "targets": ["b"]}}))
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("signature score is not in a LiteRT export")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{app.state.grpc_port}"))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tr"
    request.inputs["sentences"].CopyFrom(tf.make_tensor_proto(_LINES[:1]))
    got = stub.Predict(request, timeout=300)
    assert tf.make_ndarray(got.outputs["translations"])[0].decode() == \
        answer.json()["predictions"][0]["translations"]
    request.model_spec.signature_name = "translate_prefix"
    request.inputs["prefixes"].CopyFrom(tf.make_tensor_proto(["Ein"]))
    with pytest.raises(grpc.RpcError) as error:
      stub.Predict(request, timeout=60)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "translate_prefix is not in a LiteRT export" in error.value.details()


def test_the_command_serves_a_litert_export(lite, litert_export):
  process, base = start_server(str(litert_export))
  try:
    assert str(litert_export / "1") in process.stdout_line
    answer = httpx.post(f"{base}/v1/models/transformer:predict",
                        content=json.dumps({"instances": _LINES[:1]}), timeout=300)
    assert answer.json()["predictions"][0]["translations"] == lite.run(
        "serving_default", {"sentences": _LINES[:1]})["translations"][0].decode()
  finally:
    process.terminate()
    process.wait(60)
