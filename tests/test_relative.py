"""Relative position representations (Shaw et al. 2018): position_encoding=relative."""

import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.decoding import beam_search as bs
from t2t_repro.config.hparams import get_hparams
from t2t_repro.model.attention import MultiHeadAttention
from t2t_repro.model.transformer import Transformer
from t2t_repro.model.summary import closed_form_params, count_parameters
from model_dir_util import HPARAMS, make_model_dir
from test_beam_search import EosBiasedTransformer, random_sources

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hparams(**changes):
  overrides = ",".join(f"{k}={v}" for k, v in {
      "vocab_size": 12, "d_model": 16, "d_ff": 32, "num_heads": 2, "num_layers": 2,
      "dropout": 0.0, "max_length": 32, "decode_extra_length": 8,
      "position_encoding": "relative", "max_relative_position": 3, **changes}.items())
  return get_hparams("tiny", overrides)


def test_relative_attention_by_hand():
  """Shaw et al. eqs. 3-5 in numpy: e_ij = q_i (k_j + a^K_ij) / sqrt(d_k), z_i = sum_j
  softmax(e)_ij (v_j + a^V_ij), a chosen by clip(j - i, -k, k)."""
  keras.utils.set_random_seed(1)
  layer = MultiHeadAttention(8, 2, max_relative_position=2)
  x = tf.random.normal([1, 6, 8])
  out, _ = layer(x)
  wq, wk, wv, wo = (w.numpy() for w in (layer.q_kernel, layer.k_kernel, layer.v_kernel,
                                         layer.output_kernel))
  ak, av = layer.relative_keys.numpy(), layer.relative_values.numpy()
  xs = x.numpy()[0]
  heads = []
  for h in range(2):
    q, k, v = (xs @ w[:, h * 4:(h + 1) * 4] for w in (wq, wk, wv))
    rows = np.clip(np.arange(6)[None, :] - np.arange(6)[:, None], -2, 2) + 2
    logits = (q[:, None, :] * (k[None, :, :] + ak[rows])).sum(-1) / 2.0
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads.append((weights[:, :, None] * (v[None, :, :] + av[rows])).sum(1))
  expected = np.concatenate(heads, -1) @ wo
  np.testing.assert_allclose(out.numpy()[0], expected, rtol=1e-4, atol=1e-5)
  # moving every position by the same amount changes nothing: only distances count
  assert layer.relative_indices(2, 3, 5).numpy().tolist() == [[0, 0, 0], [0, 0, 0]]
  assert layer.relative_indices(3, 3, 0).numpy().tolist() == [[2, 3, 4], [1, 2, 3], [0, 1, 2]]


def test_no_absolute_positions_and_the_closed_form_parameter_count():
  hp = _hparams()
  model = Transformer.from_hparams(hp)
  assert model.position is None
  names = [w.path for w in model.weights]
  assert sum("relative_keys" in n for n in names) == 2 * hp.num_layers  # self-attentions only
  assert not any("memory_attention/relative" in n for n in names)
  assert count_parameters(model) == closed_form_params(hp)


@pytest.mark.parametrize("static", [None, 20])
def test_cached_decoding_equals_uncached(static):
  keras.utils.set_random_seed(3)
  model = EosBiasedTransformer.from_hparams(_hparams())
  model.eos_bias = 2.0
  sources = random_sources(12)
  cached = bs.beam_search(model, sources, beam_size=3, alpha=0.6, decode_extra_length=8,
                          static_max_length=static)
  uncached = bs.beam_search(model, sources, beam_size=3, alpha=0.6, decode_extra_length=8,
                            cached=False)
  width = min(cached[0].shape[2], uncached[0].shape[2])
  np.testing.assert_array_equal(cached[0].numpy()[:, :, :width], uncached[0].numpy()[:, :, :width])
  np.testing.assert_allclose(cached[1].numpy(), uncached[1].numpy(), atol=1e-5)
  assert len({tuple(r) for r in cached[0].numpy()[:, 0]}) > 1  # not one repeated output


def test_relative_hparams_are_checked():
  with pytest.raises(ValueError, match="max_relative_position"):
    get_hparams("tiny", "position_encoding=relative,max_relative_position=0")


def test_ctranslate2_export_refuses_relative_positions(tmp_path, shared_data_dir):
  """A model dir of a relative-position model (its hparams, vocabulary and a checkpoint of
  its weights): the CTranslate2 export is one usage error line and writes nothing."""
  model_dir = tmp_path / "m"
  model_dir.mkdir()
  source = make_model_dir(tmp_path / "source", shared_data_dir)
  shutil.copy(os.path.join(source, "vocab.model"), model_dir / "vocab.model")
  hparams = get_hparams("tiny", f"{HPARAMS},position_encoding=relative")
  (model_dir / "hparams.json").write_text(hparams.to_json(), encoding="utf-8")
  model = Transformer.from_hparams(hparams)
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(model_dir), 1).save(1)
  proc = subprocess.run([sys.executable, "-m", "t2t_repro.export", f"--model_dir={model_dir}",
                         f"--export_dir={tmp_path / 'ct2'}", "--format=ctranslate2"],
                        capture_output=True, text=True, cwd=_REPO, check=False)
  assert proc.returncode == 2
  assert "relative position" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
  assert not (tmp_path / "ct2").exists()
