"""The exported SavedModel translates raw text in a fresh TensorFlow-only process,
exactly as the translate CLI does."""

import json
import os
import subprocess
import sys

import pytest

from model_dir_util import make_model_dir
from t2t_repro import errors
from t2t_repro.serving import saved_model
from t2t_repro.data import batching
from t2t_repro.decoding.translator import DecodeConfig, Translator

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in a fresh interpreter: only tensorflow and tensorflow_text are imported.
_LOAD_AND_TRANSLATE = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the sentencepiece ops
export_dir, lines = sys.argv[1], json.loads(sys.stdin.read())
loaded = tf.saved_model.load(export_dir)
out = loaded.signatures["serving_default"](sentences=tf.constant(lines))
ids = loaded.signatures["translate_ids"](inputs=tf.constant([[25, 40, 1], [7, 1, 0]], tf.int32))
# The TF1 session loader (as TensorFlow Serving and saved_model_cli load a SavedModel).
with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
  meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], export_dir)
  sig = meta.signature_def["serving_default"]
  v1 = sess.run(sig.outputs["translations"].name, {sig.inputs["sentences"].name: lines})
assert not any(m.startswith("t2t_repro") for m in sys.modules), "t2t_repro was imported"
print(json.dumps({"translations": [t.decode("utf-8") for t in out["translations"].numpy()],
                  "v1_translations": [t.decode("utf-8") for t in v1],
                  "scores": out["scores"].numpy().tolist(),
                  "ids_shape": ids["ids"].shape.as_list(), "ids_scores": ids["scores"].numpy().tolist()}))
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data_dir):
  return make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir)


def test_saved_model_equals_translate_cli(tmp_path, model_dir, shared_data_dir):
  with open(os.path.join(shared_data_dir, "wmt14", "newstest2014-full.en-de.en"), encoding="utf-8") as f:
    lines = [next(f).rstrip("\n")[:60] for _ in range(5)]
  lines.insert(2, "")
  # Whitespace-only lines under Python's str.strip() rule (translate and training) must be blank
  # when served too: U+00A0, U+3000 and U+2028 are not ASCII whitespace (tf.strings.strip keeps them).
  lines += ["\u00a0", "\u3000 \u3000", "\u2028", f"\u00a0\u3000{lines[0]}\u2028 "]
  export_dir = str(tmp_path / "export" / "1")
  saved_model.export_model(model_dir, export_dir)
  assert os.path.exists(os.path.join(export_dir, "saved_model.pb"))
  with pytest.raises(errors.UsageError, match=f"export_dir={export_dir} is not empty"):
    saved_model.export_model(model_dir, export_dir)

  cli = subprocess.run(
      [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}", "--noprogress",
       "--decode_batch_tokens=30"], input="".join(line + "\n" for line in lines),
      cwd=_REPO, capture_output=True, text=True, timeout=300, check=False)
  assert cli.returncode == 0, cli.stderr[-3000:]
  cli_lines = cli.stdout.splitlines()

  served = subprocess.run(
      [sys.executable, "-c", _LOAD_AND_TRANSLATE, export_dir], input=json.dumps(lines),
      cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=False)
  assert served.returncode == 0, served.stderr[-3000:]
  result = json.loads(served.stdout.strip().splitlines()[-1])
  assert result["translations"] == cli_lines
  assert result["v1_translations"] == cli_lines
  assert len(cli_lines) == 10 and cli_lines[2] == "" and result["scores"][2] == 0.0
  assert all(cli_lines[i] for i in (0, 1, 3, 4, 5))
  assert cli_lines[6:9] == ["", "", ""] and result["scores"][6:9] == [0.0, 0.0, 0.0]
  assert cli_lines[9] == cli_lines[0] and result["scores"][9] == pytest.approx(result["scores"][0])
  assert result["ids_shape"][0] == 2 and len(result["ids_scores"]) == 2


def test_serving_sorts_and_chunks_in_input_order(model_dir):
  """translate_ids decodes an unsorted batch in token-budget chunks (several here) and
  returns exactly what one beam search over the whole batch gives, in input order."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import beam_search as bs  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  model, hparams, tokenizer = load_for_inference(model_dir)
  rng = np.random.RandomState(4)
  lengths = [9, 2, 6, 1, 7, 3, 9, 5]
  inputs = np.zeros([len(lengths), max(lengths) + 2], np.int32)  # extra padding columns
  for row, n in enumerate(lengths):
    inputs[row, :n] = rng.randint(3, hparams.vocab_size, n)
    inputs[row, n] = 1
  config = DecodeConfig(beam_size=3, alpha=0.6, decode_extra_length=4, decode_batch_tokens=20)
  module = saved_model.ServingModule(Translator(model, tokenizer, config))
  out = module.translate_ids(tf.constant(inputs))
  ids, scores = bs.beam_search(model, inputs, beam_size=3, alpha=0.6, n_best=1,
                               decode_extra_length=4)
  expected = np.pad(ids[:, 0].numpy(), [[0, 0], [0, max(lengths) + 1 + 4 - ids.shape[2]]])
  np.testing.assert_array_equal(out["ids"].numpy(), expected)
  np.testing.assert_allclose(out["scores"].numpy(), scores[:, 0].numpy(), atol=1e-5)



def test_decoding_batches_follow_the_token_budget():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  # Lengths with EOS of the batch above, shuffled; budget 20 tokens. Sorted: 2 3 4 6 7 8 10 10:
  # [2 3 4] (4 x 6 = 24 > 20), [6 7] (3 x 8 = 24), [8 10] (2 x 10 = 20), [10].
  lengths = [10, 4, 2, 8, 6, 10, 3, 7]
  order, sizes = batching.length_sorted_chunks(tf.constant(lengths), tf.constant(20))
  assert sizes.numpy().tolist() == [3, 2, 2, 1]
  assert order.numpy().tolist() == [2, 6, 1, 4, 7, 3, 0, 5]  # ties (10, 10) in input order
  # The same function inside a graph, as the SavedModel runs it.
  in_graph = tf.function(lambda x: batching.length_sorted_chunks(x, 20)[1])
  assert in_graph(tf.constant(lengths)).numpy().tolist() == [3, 2, 2, 1]
  assert batching.length_sorted_batches(lengths, 20) == [[2, 6, 1], [4, 7], [3, 0], [5]]
  assert batching.length_sorted_chunks(tf.zeros([0], tf.int32), 20)[1].shape == [0]


def test_bfloat16_inference_is_close_and_really_bfloat16(model_dir):
  import keras  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import beam_search as bs  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  full, _, tokenizer = load_for_inference(model_dir)
  half, _, _ = load_for_inference(model_dir, inference_dtype="bfloat16")
  assert keras.mixed_precision.global_policy().name == "float32"  # restored after loading
  assert half.compute_dtype == "bfloat16" and half.embedding.embeddings.dtype == "float32"
  inputs = tokenizer.encode(["A man rides a bike.", "Two dogs play in the snow."]).to_tensor()
  targets = tf.constant([[30, 40, 50, 1], [60, 70, 1, 0]])
  logits = [m((inputs, targets)).numpy() for m in (full, half)]
  diff = np.abs(logits[0] - logits[1]).max()
  assert 1e-4 < diff < 0.05 * np.abs(logits[0]).max(), diff  # bfloat16 rounding, not noise
  memory, _ = half.encode(inputs)
  cache = half.init_cache(memory)
  assert {t.dtype for t in tf.nest.flatten(cache)} == {tf.bfloat16}
  ids, scores = bs.beam_search(half, inputs, beam_size=2, max_decode_length=6)
  assert ids.shape[:2] == (2, 2) and np.all(np.isfinite(scores.numpy()))
  with pytest.raises(ValueError, match="inference_dtype"):
    load_for_inference(model_dir, inference_dtype="int4")


def test_export_logs_each_stage_and_traces_each_search_once(tmp_path, model_dir, caplog,
                                                             monkeypatch):
  """A line per stage (loading, writing, each signature's tracing), and one beam-search
  trace per decoding setting: serving_default and translate_ids share theirs, so 3 traces
  (best, n-best, prefixed) for 4 decoding signatures."""
  import logging  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import beam_search  # pylint: disable=import-outside-toplevel
  traces = []
  search = beam_search.search
  monkeypatch.setattr(beam_search, "search", lambda *a, **k: traces.append(1) or search(*a, **k))
  export_dir = str(tmp_path / "1")
  with caplog.at_level(logging.INFO, logger="absl"):
    saved_model.export_model(model_dir, export_dir, beam_size=2, n_best=2)
  stages = [r.getMessage().split(" (")[0] for r in caplog.records
            if r.getMessage().startswith("export: ")]
  assert stages[:2] == [f"export: loading {model_dir}",
                        f"export: tracing the signatures and writing the SavedModel to {export_dir}"]
  assert sorted(stages[2:]) == sorted(f"export: tracing the {name} signature"
                                      for name in saved_model.SIGNATURES)  # once each
  assert len(traces) == 3


def test_nbest_prefix_and_score_signatures_equal_translate_and_score(tmp_path, model_dir):
  """The SavedModel's translate_nbest, translate_prefix and score give what the Translator
  (translate --n_best / --target_prefix_file) and the Scorer (t2t-score) give."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.scoring import Scorer  # pylint: disable=import-outside-toplevel
  lines = ["A man rides a bike.", "", "Two dogs play in the snow with a ball.", "Hello."]
  prefixes = ["Ein", "X", "", "Hallo Welt"]
  targets = ["Ein Mann.", "", "Zwei Hunde spielen.", "Hallo."]
  export_dir = str(tmp_path / "1")
  saved_model.export_model(model_dir, export_dir, beam_size=3, n_best=3, decode_batch_tokens=12)
  loaded = tf.saved_model.load(export_dir)
  assert set(loaded.signatures) == set(saved_model.SIGNATURES)
  model, hparams, tokenizer = load_for_inference(model_dir)
  config = DecodeConfig.resolve(hparams, beam_size=3)

  out = loaded.signatures["translate_nbest"](sentences=tf.constant(lines))
  expected = Translator(model, tokenizer, DecodeConfig.resolve(hparams, beam_size=3, n_best=3)
                        ).nbest(lines)
  texts = [[t.decode() for t in row] for row in out["translations"].numpy()]
  for row, scores, hyps in zip(texts, out["scores"].numpy(), expected):
    assert row[:len(hyps)] == [h[1] for h in hyps]
    np.testing.assert_allclose(scores[:len(hyps)], [h[0] for h in hyps], atol=1e-4)
  assert texts[1] == ["", "", ""]

  out = loaded.signatures["translate_prefix"](sentences=tf.constant(lines),
                                              prefixes=tf.constant(prefixes))
  expected = Translator(model, tokenizer, config).nbest(lines, prefixes=prefixes)
  assert [t.decode() for t in out["translations"].numpy()] == [h[0][1] for h in expected]
  np.testing.assert_allclose(out["scores"].numpy(), [h[0][0] for h in expected], atol=1e-4)

  out = loaded.signatures["score"](sources=tf.constant(lines), targets=tf.constant(targets))
  src = [tokenizer.encode(line).numpy() for line in lines]
  tgt = [tokenizer.encode(line).numpy() for line in targets]
  expected = [float(np.sum(p)) for p in Scorer(model, 4096).score_ids(src, tgt)]
  np.testing.assert_allclose(out["scores"].numpy(), expected, atol=1e-4)
  assert out["lengths"].numpy().tolist() == [len(t) for t in tgt]
