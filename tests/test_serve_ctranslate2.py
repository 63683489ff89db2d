"""A CTranslate2 export served behind the same REST and gRPC API (t2t_repro.serving.
ct2_servable): every signature equals CTranslate2 called directly on the same export, status
and metadata as for a SavedModel, the same 4xx for bad requests, the folder's file (or the
model config's model_platform) picks the servable, and the server's token budget reaches the
SavedModel's chunking."""

import json
import os
import subprocess
import sys

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from serve_util import running, start_server
from t2t_repro import errors
from t2t_repro.serving import batcher, servable as servable_lib, version_folder, versions

ctranslate2 = pytest.importorskip("ctranslate2")
spm = pytest.importorskip("sentencepiece")

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "", "A girl reads a book."]


@pytest.fixture(scope="module")
def ct2_base(trained_run, tmp_path_factory):
  """A model base path whose version 1 is `trained_run`'s model exported to CTranslate2."""
  base = tmp_path_factory.mktemp("ct2") / "base"
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.export", "--format=ctranslate2", "--n_best=3",
       f"--model_dir={trained_run.model_dir}", f"--export_dir={base / '1'}"],
      cwd=_REPO, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return base


@pytest.fixture(scope="module")
def ct2(ct2_base):
  return version_folder.load_warm("tr", 1, str(ct2_base / "1"))


def _direct(path, lines, **options):
  """CTranslate2 called directly on the export: [(text, score)] per hypothesis list."""
  with open(os.path.join(path, "decoding.json"), encoding="utf-8") as f:
    decoding = json.load(f)
  sp = spm.SentencePieceProcessor(model_file=os.path.join(path, "sentencepiece.model"))
  translator = ctranslate2.Translator(path, device="cpu", intra_threads=1)
  sources = sp.encode(lines, out_type=str)
  # The call's longest source + EOS + decode_extra_length (`Ct2Servable.max_output_length`).
  longest = max(len(p) for p in sources + [p for p in options.get("target_prefix", []) if p])
  options = {"beam_size": decoding["beam_size"], "length_penalty": decoding["alpha"],
             "max_decoding_length": longest + 1 + decoding["decode_extra_length"],
             "return_scores": True, **options}
  results = translator.translate_batch(sources, **options)
  return [[(sp.decode_pieces(h), s) for h, s in zip(r.hypotheses, r.scores)] for r in results]


def _grpc_request(inputs, signature=""):
  request = predict_pb2.PredictRequest()
  request.model_spec.name = "tr"
  request.model_spec.signature_name = signature
  for name, value in inputs.items():
    request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
  return request


def _predict(base, body):
  return httpx.post(f"{base}/v1/models/tr:predict", content=json.dumps(body), timeout=300)


def test_each_signature_equals_ctranslate2_called_directly(ct2, ct2_base):
  path = str(ct2_base / "1")
  lines = [line for line in _LINES if line]
  best = [hyps[0] for hyps in _direct(path, lines)]
  nbest = _direct(path, lines, beam_size=4, num_hypotheses=3)
  sp = spm.SentencePieceProcessor(model_file=os.path.join(path, "sentencepiece.model"))
  with running(ct2, max_batch_size=64, batch_timeout_micros=100_000) as (base, _):
    rows = _predict(base, {"instances": _LINES}).json()["predictions"]
    assert [r["translations"] for r in rows] == [best[0][0], best[1][0], "", best[2][0]]
    assert [r["scores"] for r in rows] == pytest.approx([best[0][1], best[1][1], 0.0, best[2][1]],
                                                        rel=1e-5)
    out = _predict(base, {"signature_name": "translate_nbest",
                          "inputs": {"sentences": lines}}).json()["outputs"]
    assert out["translations"] == [[text for text, _ in hyps] for hyps in nbest]
    assert np.allclose(out["scores"], [[score for _, score in hyps] for hyps in nbest], rtol=1e-5)

    prefix = best[0][0].split()[0]
    (prefixed,) = _direct(path, lines[:1], target_prefix=[sp.encode(prefix, out_type=str)])
    out = _predict(base, {"signature_name": "translate_prefix", "instances": [
        {"sentences": lines[0], "prefixes": prefix}]}).json()["predictions"][0]
    assert out["translations"] == prefixed[0][0] and out["translations"].startswith(prefix)

    translator = ctranslate2.Translator(path, device="cpu", intra_threads=1)
    scored = translator.score_batch(sp.encode(lines, out_type=str),
                                    sp.encode([t for t, _ in best], out_type=str))
    out = _predict(base, {"signature_name": "score", "inputs": {
        "sources": lines, "targets": [t for t, _ in best]}}).json()["outputs"]
    assert out["scores"] == pytest.approx([sum(r.log_probs) for r in scored], rel=1e-5)
    assert out["lengths"] == [len(sp.encode(t)) + 1 for t, _ in best]

    ids = [sp.encode(line) + [1] for line in lines[:2]]
    out = _predict(base, {"signature_name": "translate_ids",
                          "inputs": {"inputs": [ids[0], ids[1] + [0, 0]]}}).json()["outputs"]
    for row, (text, score) in zip(out["ids"], best):
      assert sp.decode([i for i in row if i > 1]) == text and row[row.index(1) + 1:] == [0] * (
          len(row) - row.index(1) - 1)
    assert out["scores"] == pytest.approx([score for _, score in best[:2]], rel=1e-5)


def test_the_output_cap_of_a_call_is_its_longest_source_plus_decode_extra_length(ct2):
  """Each CTranslate2 call caps the outputs at its longest source (EOS included) +
  decode_extra_length (with a target prefix: the longer of the two), as the SavedModel caps
  each sentence, not at max_positions (where a hypothesis that never ends held its batch
  for ~500 steps)."""
  class Spy:
    def __init__(self, translator):
      self.translator, self.caps = translator, []

    def translate_batch(self, *args, **kwargs):
      self.caps.append(kwargs["max_decoding_length"])
      return self.translator.translate_batch(*args, **kwargs)

  extra = ct2.decoding["decode_extra_length"]
  sentences = ["A dog.", "Two young men play football on a green field near the river."]
  pieces = [len(p) for p in ct2._encode(sentences)]  # pylint: disable=protected-access
  spy = Spy(ct2._translator)  # pylint: disable=protected-access
  ct2._translator = spy  # pylint: disable=protected-access
  try:
    ct2.run("serving_default", {"sentences": sentences})
    ct2.run("translate_ids", {"inputs": [[5, 6, 1], [5, 6, 7, 8, 1]]})
    ct2.run("translate_prefix", {"sentences": sentences[:1], "prefixes": sentences[1:]})
  finally:
    ct2._translator = spy.translator  # pylint: disable=protected-access
  assert spy.caps == [max(pieces) + 1 + extra, 4 + 1 + extra, pieces[1] + 1 + extra]
  assert ct2.max_output_length([["x"] * 10 ** 4]) == ct2.limits["max_positions"]


def test_grpc_status_and_metadata(ct2, ct2_base):
  path = str(ct2_base / "1")
  lines = [line for line in _LINES if line]
  best = [hyps[0][0] for hyps in _direct(path, lines)]
  with running(ct2, grpc=True) as (base, app):
    assert httpx.get(f"{base}/v1/models/tr").json()["model_version_status"][0]["state"] == \
        "AVAILABLE"
    signatures = httpx.get(f"{base}/v1/models/tr/metadata").json()["metadata"]["signature_def"][
        "signature_def"]
    assert sorted(signatures) == ["score", "serving_default", "translate_ids", "translate_nbest",
                                  "translate_prefix"]
    assert signatures["translate_nbest"]["outputs"]["translations"]["tensor_shape"]["dim"] == [
        {"size": "-1", "name": ""}] * 2
    assert signatures["serving_default"]["inputs"]["sentences"]["dtype"] == "DT_STRING"
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{app.state.grpc_port}"))
    answer = stub.Predict(_grpc_request({"sentences": lines}), timeout=300)
    assert [t.decode() for t in tf.make_ndarray(answer.outputs["translations"])] == best


def test_bad_requests_get_the_savedmodels_4xx(ct2, exported_model):
  saved = servable_lib.Servable("tr", 1, str(exported_model / "1"))
  bodies = [{"instances": ["a"], "signature_name": "nope"},
            {"instances": [{"sentence": "a"}]},
            {"instances": [1, 2]},
            {"signature_name": "translate_ids", "inputs": {"inputs": [[5, 6]]}},
            {"signature_name": "translate_ids", "inputs": {"inputs": [[5, 100000, 1]]}},
            {"instances": ["a " * 2000]},
            {"signature_name": "score", "inputs": {"sources": ["a"]}}]
  requests = [_grpc_request({"sentences": ["a"]}, "nope"), _grpc_request({"sentence": ["a"]}),
              _grpc_request({"sentences": [1, 2]}),
              _grpc_request({"inputs": np.array([[5, 6]], np.int32)}, "translate_ids")]
  answers, codes = [], []
  for served in (saved, ct2):
    with running(served, grpc=True) as (base, app):
      answers.append([(r.status_code, r.json()["error"].split(":")[0])
                      for r in (_predict(base, body) for body in bodies)])
      stub = prediction_service_pb2_grpc.PredictionServiceStub(
          grpc.insecure_channel(f"127.0.0.1:{app.state.grpc_port}"))
      found = []
      for request in requests:
        with pytest.raises(grpc.RpcError) as error:
          stub.Predict(request, timeout=60)
        found.append((error.value.code(), error.value.details()))
      codes.append(found)
  assert answers[0] == answers[1]
  assert all(400 <= code < 500 for code, _ in answers[1])
  assert codes[0] == codes[1]
  assert {code for code, _ in codes[1]} == {grpc.StatusCode.FAILED_PRECONDITION,
                                            grpc.StatusCode.INVALID_ARGUMENT}


def test_the_folder_or_model_platform_picks_the_servable(ct2_base, exported_model, tmp_path):
  assert list(versions.scan(str(ct2_base))) == [1]  # a folder holding model.bin
  two = version_folder.load_warm("tr", 1, str(ct2_base / "1"),
                               batcher.BatchingOptions(num_batch_threads=2))
  assert type(two).__name__ == "Ct2Servable"
  assert two._translator.num_translators == 2  # pylint: disable=protected-access  # a batch each
  (tmp_path / "model.bin").write_bytes(b"")  # no decoding.json, no model
  with pytest.raises(errors.DataError, match="not a loadable CTranslate2 export"):
    version_folder.load_warm("tr", 2, str(tmp_path))
  with pytest.raises(errors.DataError, match="model_platform tensorflow wants saved_model.pb"):
    version_folder.load_warm("tr", 1, str(ct2_base / "1"), model_platform="tensorflow")
  with pytest.raises(errors.DataError, match="model_platform ctranslate2 wants model.bin"):
    version_folder.load_warm("tr", 1, str(exported_model / "1"), model_platform="ctranslate2")
  config = tmp_path / "models.config"
  config.write_text(f'model_config_list {{ config {{ name: "a" base_path: "{ct2_base}" '
                    f'model_platform: "ctranslate2" }} config {{ name: "b" base_path: '
                    f'"{exported_model}" }} }}', encoding="utf-8")
  assert servable_lib.read_model_config(str(config)) == [
      ("a", str(ct2_base), "ctranslate2"), ("b", str(exported_model), "")]
  config.write_text('model_config_list { config { name: "a" base_path: "/x" '
                    'model_platform: "onnx" } }', encoding="utf-8")
  with pytest.raises(errors.DataError, match="'onnx', not one of tensorflow, ctranslate2"):
    servable_lib.read_model_config(str(config))


def test_the_command_serves_a_ctranslate2_export(ct2_base):
  process, base = start_server(str(ct2_base), "--num_batch_threads=2")
  try:
    assert str(ct2_base / "1") in process.stdout_line
    answer = httpx.post(f"{base}/v1/models/transformer:predict",
                        content=json.dumps({"instances": _LINES[:1]}), timeout=300)
    assert answer.json()["predictions"][0]["translations"] == \
        _direct(str(ct2_base / "1"), _LINES[:1])[0][0][0]
  finally:
    process.terminate()
    process.wait(60)


def test_the_servers_token_budget_is_the_savedmodels_chunk_budget(exported_model):
  """The server sets the SavedModel's `decode_batch_tokens` to its max_batch_tokens; the
  outputs do not depend on the chunking (one chunk per sentence at a budget of 1)."""
  path = str(exported_model / "1")
  loaded = version_folder.load_warm("tr", 1, path, batcher.BatchingOptions(max_batch_tokens=1))
  assert loaded._loaded.decode_batch_tokens.numpy() == 1  # pylint: disable=protected-access
  kept = servable_lib.Servable("tr", 1, path)
  assert kept._loaded.decode_batch_tokens.numpy() == 4096  # pylint: disable=protected-access
  lines = [line for line in _LINES if line]
  one = loaded.run("serving_default", {"sentences": lines})
  whole = kept.run("serving_default", {"sentences": lines})
  assert one["translations"].tolist() == whole["translations"].tolist()
