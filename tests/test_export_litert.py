"""The LiteRT export (`export --format=tflite`, t2t_repro.serving.litert): builtin ops only
with the weights as constants, translations by the TensorFlow-free translator (TensorFlow
hidden from imports) equal to the translate command's, beam search and greedy on batches,
dynamic-range int8, and the checks of the other exports."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.decoding.translator import Translator
from t2t_repro.serving import litert
from t2t_repro.serving.litert_translator import LiteRtTranslator

pytest.importorskip("ai_edge_litert")

# Runs the translator with tensorflow, keras and tensorflow_text unimportable.
_WITHOUT_TENSORFLOW = """
import importlib.abc, json, sys

class NoTensorFlow(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("tensorflow", "keras", "tensorflow_text", "tf_keras"):
      raise ImportError(f"{name} is hidden")

sys.meta_path.insert(0, NoTensorFlow())
from t2t_repro.serving.litert_translator import LiteRtTranslator
translator = LiteRtTranslator(sys.argv[1], num_threads=1, batch_tokens=200)
lines = json.load(sys.stdin)
print(json.dumps({"beam": translator.translate(lines), "greedy": translator.translate(lines, True),
                  "nbest": translator.nbest(lines[:2], "nbest"),
                  "tensorflow": sorted(m for m in sys.modules if "tensorflow" in m)}))
"""


def _export(*flags):
  return subprocess.run([sys.executable, "-m", "t2t_repro.export", *flags], capture_output=True,
                        text=True, timeout=900, check=False)


def test_builtin_ops_only_and_the_weights_as_constants(litert_export):
  folder = litert_export / "1"
  assert sorted(os.listdir(folder)) == ["README.md", "decoding.json", "model.tflite",
                                        "sentencepiece.model"]
  data = (folder / "model.tflite").read_bytes()
  ops = litert.builtin_ops(data)
  assert litert.custom_ops(data) == []  # no Flex op in any subgraph
  assert {"WHILE", "FULLY_CONNECTED", "TOPK_V2"} <= set(ops)
  assert not {"VAR_HANDLE", "READ_VARIABLE"} & set(ops)  # frozen: XNNPACK takes the matmuls
  assert json.loads((folder / "decoding.json").read_text(encoding="utf-8"))["n_best"] == 3


def test_new_axes_are_traced_as_expand_dims():
  def index(x):
    return x[:, None, None, :], x[..., None], x[None], x[:, :1]

  x = tf.reshape(tf.range(6.0), [2, 3])
  with litert.new_axes_as_expand_dims():
    graph = tf.function(index, input_signature=[tf.TensorSpec([None, None])]).get_concrete_function()
  assert all(np.array_equal(a, b) for a, b in zip(graph(x), index(x)))
  masks = [node.attr["new_axis_mask"].i for node in graph.graph.as_graph_def().node
           if node.op == "StridedSlice"]
  assert masks == [0]  # x[:, :1] only
  assert tf.constant([[1.0]])[:, None].shape == [1, 1, 1]  # TensorFlow's own indexing is back


def test_without_tensorflow_the_translations_equal_the_translate_commands(
    litert_export, trained_run, multi30k_slice):
  lines = (multi30k_slice / "dev.en").read_text(encoding="utf-8").splitlines()[:24]
  lines += ["", "a " * 600]  # blank; cut to max_input_length as translate cuts it
  result = subprocess.run([sys.executable, "-c", _WITHOUT_TENSORFLOW, str(litert_export / "1")],
                          input=json.dumps(lines), capture_output=True, text=True, timeout=600,
                          check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  found = json.loads(result.stdout)
  assert found["tensorflow"] == []
  beam = Translator.from_model_dir(str(trained_run.model_dir), n_best=3)
  greedy = Translator.from_model_dir(str(trained_run.model_dir), beam_size=1)
  expected = [hyps[0][1] for hyps in beam.nbest(lines)]
  same = sum(a == b for a, b in zip(found["beam"], expected))
  assert same >= len(lines) - 1, list(zip(found["beam"], expected))
  assert sum(a == b for a, b in zip(found["greedy"], greedy.translate(lines))) >= len(lines) - 1
  assert found["beam"] != found["greedy"]  # the two searches differ somewhere
  for hyps, want in zip(found["nbest"], beam.nbest(lines[:2])):
    assert [text for _, text in hyps] == [text for _, text in want]
    np.testing.assert_allclose([s for s, _ in hyps], [s for s, _ in want], rtol=1e-4)
  assert found["beam"][-2] == "" and found["beam"][-1] == expected[-1]


def test_dynamic_range_is_builtin_smaller_and_translates(trained_run, litert_export, tmp_path):
  out = tmp_path / "int8" / "1"
  result = _export("--format=tflite", "--quantization=dynamic_range",
                   f"--model_dir={trained_run.model_dir}", f"--export_dir={out}")
  assert result.returncode == 0, result.stderr[-3000:]
  data = (out / "model.tflite").read_bytes()
  assert litert.custom_ops(data) == []
  assert len(data) < 0.8 * (litert_export / "1" / "model.tflite").stat().st_size
  assert LiteRtTranslator(str(out)).translate(["A man rides a bike."])[0]


def test_the_checks_of_the_other_exports(trained_run, litert_export):
  folder = litert_export / "1"
  before = {name: (folder / name).stat().st_mtime_ns for name in os.listdir(folder)}
  refused = [_export("--format=tflite", f"--model_dir={trained_run.model_dir}",
                     f"--export_dir={folder}"),
             _export("--format=tflite", "--quantization=int8", f"--model_dir={trained_run.model_dir}",
                     f"--export_dir={folder.parent / '2'}"),
             _export("--quantization=dynamic_range", f"--model_dir={trained_run.model_dir}",
                     f"--export_dir={folder.parent / '2'}"),
             _export("--format=tflite", "--inference_dtype=bfloat16",
                     f"--model_dir={trained_run.model_dir}", f"--export_dir={folder.parent / '2'}")]
  assert [r.returncode for r in refused] == [2, 2, 2, 2]
  assert [r.stderr.strip().splitlines() for r in refused] == [
      [f"export: error: --export_dir={folder} is not empty; give --overwrite to replace it, or "
       "a new folder"],
      ["export: error: --quantization=int8 is not a weight type of --format=tflite (one of none, "
       "float16, dynamic_range)"],
      ["export: error: --quantization=dynamic_range is not a weight type of "
       "--format=saved_model; it needs --format=ctranslate2 or --format=tflite"],
      ["export: error: --inference_dtype is the SavedModel's; --format=tflite takes --quantization "
       "(none, float16, dynamic_range)"]]
  assert {name: (folder / name).stat().st_mtime_ns for name in os.listdir(folder)} == before
  assert sorted(os.listdir(folder.parent)) == ["1"]
