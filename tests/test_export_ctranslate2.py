"""`python -m t2t_repro.export --format=ctranslate2`: CTranslate2 decodes our weights as we do."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from model_dir_util import read_lines
from t2t_repro import errors
from t2t_repro.serving import ctranslate2 as export_ctranslate2
from t2t_repro.decoding import beam_search as bs
from t2t_repro.decoding.loading import load_for_inference

ctranslate2 = pytest.importorskip("ctranslate2")
spm = pytest.importorskip("sentencepiece")

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LENGTH = 30


@pytest.fixture(scope="module")
def trained_dir(trained_run):
  """The suite's shared trained model (`tiny`, 300 updates on Multi30k text): its outputs
  end in EOS (a random model repeats one token up to the length cap)."""
  assert trained_run.returncode == 0, trained_run.stderr[-3000:]
  return str(trained_run.model_dir)


@pytest.fixture(scope="module")
def sentences(shared_data_dir):
  return read_lines(os.path.join(shared_data_dir, "multi30k", "test_2016_flickr.en"), 24)


def ours(model_dir, lines, beam_size, alpha):
  """Our beam search: (list of id lists without EOS/pad, ended-before-cap flags,
  per-token log-probabilities [len + 1] of those tokens and EOS)."""
  model, _, tokenizer = load_for_inference(model_dir)
  inputs = tokenizer.encode(lines).to_tensor()
  ids, _ = bs.beam_search(model, inputs, beam_size=beam_size, alpha=alpha, n_best=1,
                          max_decode_length=MAX_LENGTH)
  ids = ids[:, 0]
  memory, src_bias = model.encode(inputs)
  targets = tf.pad(ids, [[0, 0], [0, 1]])  # room for the EOS after a capped hypothesis
  log_probs = tf.nn.log_softmax(model.decode(targets, memory, src_bias)).numpy()
  out, ended, token_log_probs = [], [], []
  for row, tokens in enumerate(ids.numpy().tolist()):
    ended.append(bs.EOS_ID in tokens)
    out.append(tokens[:tokens.index(bs.EOS_ID)] if ended[-1] else [t for t in tokens if t])
    token_log_probs.append([log_probs[row, t, y] for t, y in enumerate(out[-1] + [bs.EOS_ID])])
  return out, ended, token_log_probs


def theirs(ct2_dir, lines, score_ids=None, **options):
  """CTranslate2's translations of `lines` (id lists without EOS) and, with `score_ids`,
  its per-token log-probabilities of those target ids plus EOS (`score_batch`)."""
  sp = spm.SentencePieceProcessor(model_file=os.path.join(ct2_dir, "sentencepiece.model"))
  translator = ctranslate2.Translator(ct2_dir, device="cpu", intra_threads=1)
  sources = sp.encode(lines, out_type=str)
  results = translator.translate_batch(sources, max_decoding_length=MAX_LENGTH, **options)
  ids = [[sp.piece_to_id(p) for p in r.hypotheses[0]] for r in results]
  if score_ids is None:
    return ids
  scored = translator.score_batch(sources, [[sp.id_to_piece(t) for t in x] for x in score_ids])
  return ids, [r.log_probs for r in scored]


def test_cli_export_greedy_equals_ours(trained_dir, sentences, tmp_path):
  out = str(tmp_path / "ct2")
  cli = subprocess.run(
      [sys.executable, "-m", "t2t_repro.export", "--format=ctranslate2",
       f"--model_dir={trained_dir}", f"--export_dir={out}"],
      cwd=_REPO, capture_output=True, text=True, timeout=300, check=False)
  assert cli.returncode == 0, cli.stderr[-3000:]
  assert sorted(os.listdir(out)) == ["README.md", "config.json", "decoding.json", "model.bin",
                                     "sentencepiece.model", "shared_vocabulary.json"]
  with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  assert config["add_source_eos"] and config["decoder_start_token"] == "<pad>"
  assert config["layer_norm_epsilon"] == 1e-6

  our_ids, ended, our_log_probs = ours(trained_dir, sentences, beam_size=1, alpha=0.0)
  assert sum(ended) >= len(sentences) // 2 and len({len(x) for x in our_ids}) >= 5
  ct2_ids, ct2_log_probs = theirs(out, sentences, score_ids=our_ids, beam_size=1)
  for i, done in enumerate(ended):
    # The same model: the same log-probability for every target token and EOS ...
    np.testing.assert_allclose(ct2_log_probs[i], our_log_probs[i], atol=1e-3)
    if done:  # ... and the same greedy translation where ours ended before the length cap.
      assert ct2_ids[i] == our_ids[i], i


def test_quantized_exports(trained_dir, sentences, tmp_path):
  our_ids, _, our_log_probs = ours(trained_dir, sentences, beam_size=1, alpha=0.0)
  ours_flat = np.concatenate(our_log_probs)
  sizes = {}
  for quantization in (None, "int8", "float16"):
    out = str(tmp_path / str(quantization))
    export_ctranslate2.export_ctranslate2(trained_dir, out, quantization=quantization)
    sizes[quantization] = os.path.getsize(os.path.join(out, "model.bin"))
    ct2_ids, ct2_log_probs = theirs(out, sentences, score_ids=our_ids, beam_size=1)
    theirs_flat = np.concatenate(ct2_log_probs)
    if quantization == "int8":
      # int8 weights and activations move this 64-wide model's per-token log-probabilities
      # by ~0.4 nats (correlation ~0.9 with ours; a wrong export, e.g. a transposed or
      # misplaced weight, gives ~0), enough to change most greedy outputs of a model that
      # is still this uncertain: the scores are compared, not the texts.
      assert np.corrcoef(theirs_flat, ours_flat)[0, 1] > 0.75
      assert np.mean(np.abs(theirs_flat - ours_flat)) < 1.0
    else:  # float32, float16 (computed in float32 on a CPU): the same model
      np.testing.assert_allclose(theirs_flat, ours_flat, atol=1e-2)
      # Reduced precision may flip a near tie, not the bulk of the outputs.
      assert sum(a == b for a, b in zip(ct2_ids, our_ids)) >= len(sentences) // 2, quantization
  assert sizes["int8"] < sizes[None] * 0.6 and sizes["float16"] < sizes[None] * 0.6, sizes


def test_errors(trained_dir, tmp_path):
  with pytest.raises(ValueError, match="quantization"):
    export_ctranslate2.export_ctranslate2(trained_dir, str(tmp_path / "x"), quantization="int3")
  (tmp_path / "full").mkdir()
  (tmp_path / "full" / "keep.txt").write_text("x")
  with pytest.raises(errors.UsageError, match="is not empty"):
    export_ctranslate2.export_ctranslate2(trained_dir, str(tmp_path / "full"))
  assert os.listdir(tmp_path / "full") == ["keep.txt"]


def test_pre_norm_and_learned_positions(trained_dir, sentences, tmp_path):
  """The other layouts: pre-norm (final encoder/decoder norms) and a learned position table."""
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel
  model_dir = tmp_path / "pre"
  model_dir.mkdir()
  shutil.copy(os.path.join(trained_dir, "vocab.model"), model_dir / "vocab.model")
  keras.utils.set_random_seed(2)
  hparams = get_hparams("tiny", "num_layers=2,d_model=32,d_ff=64,num_heads=4,"
                                "norm_type=pre,position_encoding=learned,max_length=40,"
                                "decode_extra_length=4")
  (model_dir / "hparams.json").write_text(hparams.to_json())
  model = Transformer.from_hparams(hparams)
  for v in model.trainable_variables:  # LayerNorm gains/biases away from 1/0, so they matter
    v.assign(v + 0.1 * tf.random.normal(v.shape))
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(model_dir), 1).save(1)
  out = str(tmp_path / "pre_ct2")
  export_ctranslate2.export_ctranslate2(str(model_dir), out)
  our_ids, _, our_log_probs = ours(str(model_dir), sentences[:6], beam_size=1, alpha=0.0)
  ct2_ids, ct2_log_probs = theirs(out, sentences[:6], score_ids=our_ids, beam_size=1)
  for i in range(6):
    np.testing.assert_allclose(ct2_log_probs[i], our_log_probs[i], atol=1e-3)
  assert ct2_ids == our_ids  # a random model runs to the cap: the same MAX_LENGTH tokens
