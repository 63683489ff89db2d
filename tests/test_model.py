"""The Transformer layers against the paper's equations and NumPy references."""

import hashlib

import numpy as np
import pytest
import tensorflow as tf
import keras

from t2t_repro.config.hparams import get_hparams
from t2t_repro.model.attention import MultiHeadAttention, causal_bias, padding_bias
from t2t_repro.config.model import ModelConfig
from t2t_repro.model.position import SinusoidalPositionEncoding, sinusoid_table
from t2t_repro.model.transformer import Transformer
from t2t_repro.model import summary

HP = get_hparams("tiny", "vocab_size=37,dropout=0")


def _model(**overrides):
  hp = HP.replace(**overrides) if overrides else HP
  return Transformer.from_hparams(hp)


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def test_attention_matches_numpy_reference():
  rng = np.random.default_rng(0)
  layer = MultiHeadAttention(d_model=8, num_heads=2)
  q_in = rng.normal(size=(2, 3, 8)).astype(np.float32)
  m_in = rng.normal(size=(2, 5, 8)).astype(np.float32)
  ids = np.array([[4, 5, 6, 0, 0], [4, 5, 6, 7, 8]])
  bias = padding_bias(tf.constant(ids))
  out, weights = layer.call_with_weights(q_in, m_in, bias=bias)
  called, cache = layer(q_in, m_in, bias=bias)  # the call returns (outputs, cache)
  assert cache is None
  np.testing.assert_allclose(called.numpy(), out.numpy(), rtol=1e-6, atol=1e-6)
  wq, wk, wv, wo = (layer.q_kernel.numpy(), layer.k_kernel.numpy(), layer.v_kernel.numpy(),
                    layer.output_kernel.numpy())
  heads = []
  ref_weights = []
  for h in range(2):
    cols = slice(4 * h, 4 * h + 4)
    q, k, v = q_in @ wq[:, cols], m_in @ wk[:, cols], m_in @ wv[:, cols]
    logits = q @ k.transpose(0, 2, 1) / np.sqrt(4)  # eq. 1: QK^T / sqrt(d_k)
    logits = np.where((ids == 0)[:, None, :], -1e9, logits)
    w = _softmax(logits)
    ref_weights.append(w)
    heads.append(w @ v)
  expected = np.concatenate(heads, -1) @ wo  # Concat(head_1..h) W^O
  np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(weights.numpy(), np.stack(ref_weights, 1), rtol=1e-5, atol=1e-6)
  assert np.all(weights.numpy()[0, :, :, 3:] < 1e-6)  # padding gets no attention


def test_positional_encoding_is_section_3_5():
  d = 16
  table = sinusoid_table(tf.range(50), d).numpy()
  pos, i = 37, 3
  assert table[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / d)), abs=1e-5)
  assert table[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / d)), abs=1e-5)
  layer = SinusoidalPositionEncoding(d)
  x = np.zeros((1, 4, d), np.float32)
  np.testing.assert_allclose(layer(x, start=10).numpy()[0], table[10:14], atol=1e-6)


def test_padding_never_changes_real_positions():
  model = _model()
  src = np.array([[5, 6, 7, 1]], np.int32)
  tgt = np.array([[8, 9, 1]], np.int32)
  base = model((src, tgt)).numpy()
  padded = model((np.pad(src, [[0, 0], [0, 5]]), np.pad(tgt, [[0, 0], [0, 4]]))).numpy()
  np.testing.assert_allclose(padded[:, :3], base, rtol=1e-5, atol=1e-5)


def test_causal_mask_future_targets_do_not_matter():
  model = _model()
  src = np.array([[5, 6, 7, 1]], np.int32)
  a = np.array([[8, 9, 10, 11, 1]], np.int32)
  b = np.array([[8, 9, 30, 31, 32]], np.int32)  # differs from position 2 on
  la, lb = model((src, a)).numpy(), model((src, b)).numpy()
  # Logits at position i depend on targets < i (shifted right), so 0..2 agree, 3.. differ.
  np.testing.assert_allclose(la[:, :3], lb[:, :3], rtol=1e-5, atol=1e-5)
  assert not np.allclose(la[:, 3:], lb[:, 3:])
  assert causal_bias(3).numpy()[0, 0, 0, 1] == -1e9 and causal_bias(3).numpy()[0, 0, 2, 1] == 0


def test_three_embedding_uses_share_one_variable():
  model = _model()
  matrix = model.embedding.embeddings
  assert sum(1 for v in model.trainable_variables if v is matrix or v.path == matrix.path) == 1
  src = tf.constant([[5, 1]])
  with tf.GradientTape() as tape:
    logits = model((src, src))
    # Through the source embedding, target embedding and the pre-softmax projection.
  grads = tape.gradient(logits, [matrix])
  assert grads[0] is not None
  hidden = tf.random.normal([2, HP.d_model])
  np.testing.assert_allclose(model.logits(hidden).numpy(), hidden.numpy() @ matrix.numpy().T,
                             rtol=1e-5, atol=1e-5)
  scaled = model.embedding(tf.constant([[3]])).numpy()[0, 0]
  np.testing.assert_allclose(scaled, matrix.numpy()[3] * np.sqrt(HP.d_model), rtol=1e-6)


@pytest.mark.parametrize("overrides", [{}, {"norm_type": "pre", "position_encoding": "learned"}])
def test_serialization_round_trip_gives_identical_outputs(tmp_path, overrides):
  model = _model(**overrides)
  src, tgt = np.array([[5, 6, 1, 0]], np.int32), np.array([[7, 8, 9, 1]], np.int32)
  expected = model((src, tgt)).numpy()
  path = str(tmp_path / "model.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  np.testing.assert_allclose(loaded((src, tgt)).numpy(), expected, rtol=1e-6, atol=1e-6)
  clone = Transformer.from_config(model.get_config())
  clone.build_variables()
  clone.set_weights(model.get_weights())
  np.testing.assert_allclose(clone((src, tgt)).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_model_only_checkpoint_holds_every_variable(tmp_path):
  # Keras keeps sublayers of lists in its own containers that tf.train.Checkpoint does not
  # traverse; every layer must therefore also be reachable as an attribute.
  model = _model()
  path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  saved = [k for k in tf.train.load_checkpoint(path).get_variable_to_shape_map() if k.startswith("model/")]
  assert len(saved) == len(model.variables) == len(model.trainable_variables)
  other = _model()
  tf.train.Checkpoint(model=other).restore(path).assert_existing_objects_matched()
  for a, b in zip(model.variables, other.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


# sha256 of the sorted checkpoint variable names (tf.train.list_variables) of two tiny
# models, as written before the model's fields moved into ModelConfig: existing model dirs
# must keep restoring, so these names must never change.
_VARIABLE_NAMES = {
    "": (62, "4d79c0bfc8b88c551bcdf77549fa87d3756da50438dd5da1bbeba83234c1307b"),
    ",norm_type=pre,position_encoding=learned,d_k=4,d_v=6":
        (67, "1a89d73503c62e186c830f17c081cdf04f11778a2ada83b8a44787fbc8b4bfb5"),
}


@pytest.mark.parametrize("extra", sorted(_VARIABLE_NAMES))
def test_checkpoint_variable_names_are_unchanged(tmp_path, extra):
  hp = get_hparams("tiny", "num_layers=2,d_model=16,d_ff=32,num_heads=2,vocab_size=20" + extra)
  path = tf.train.Checkpoint(model=Transformer.from_hparams(hp)).write(str(tmp_path / "ckpt"))
  names = sorted(name for name, _ in tf.train.list_variables(path))
  assert (len(names), hashlib.sha256("\n".join(names).encode()).hexdigest()) == _VARIABLE_NAMES[extra]


def test_word_dropout_zeroes_whole_token_embeddings_in_training_only():
  # Relative positions add nothing to the embeddings and dropout is 0, so _embed's output
  # is the scaled embedding times the word-dropout mask: per token 0 or 1 / (1 - p).
  model = _model(word_dropout=0.25, position_encoding="relative")
  ids = tf.constant(np.random.default_rng(0).integers(2, 37, size=(64, 50)), tf.int32)
  plain = model.embedding(ids).numpy()
  np.testing.assert_array_equal(model._embed(ids, training=False).numpy(), plain)  # pylint: disable=protected-access
  out = model._embed(ids, training=True).numpy()  # pylint: disable=protected-access
  ratio = out[..., 0] / plain[..., 0]
  dropped = ratio == 0
  np.testing.assert_allclose(ratio[~dropped], 1 / 0.75, rtol=1e-6)
  np.testing.assert_array_equal(out[dropped], 0)  # every d_model component of a dropped token
  np.testing.assert_allclose(out[~dropped], plain[~dropped] / 0.75, rtol=1e-6)
  assert abs(dropped.mean() - 0.25) < 0.03  # 3,200 tokens: 0.25 +- 4 sd
  # Off (the default), the model has no such layer: its variables and seeds are unchanged.
  assert _model().word_dropout_layer is None


def test_model_config_is_the_one_list_of_fields():
  hp = get_hparams("tiny", "d_k=4")
  model = Transformer.from_hparams(hp)
  config = ModelConfig.from_hparams(hp)
  assert model.config == config and (model.d_k, model.d_v) == (4, hp.d_model // hp.num_heads)
  assert model.get_config()["d_k"] == 4
  assert model.decoder_0.memory_attention.d_k == 4
  assert Transformer.from_config(model.get_config()).config == config
  with pytest.raises(ValueError, match="norm_type"):
    ModelConfig(vocab_size=8, norm_type="middle")


@pytest.mark.parametrize("grow_cache", [False, True])
def test_cached_decoding_equals_full_decoder(grow_cache):
  model = _model(norm_type="pre")
  src = np.array([[5, 6, 7, 1, 0], [8, 9, 1, 0, 0]], np.int32)
  tgt = np.array([[11, 12, 13, 14, 1], [15, 16, 1, 0, 0]], np.int32)
  full = model((src, tgt)).numpy()
  memory, bias = model.encode(src)
  cache = model.init_cache(memory, None if grow_cache else 7)
  previous = np.pad(tgt[:, :-1], [[0, 0], [1, 0]])
  for step in range(tgt.shape[1]):
    logits, cache = model.decode_step(tf.constant(previous[:, step]), tf.constant(step), cache, bias,
                                      grow_cache=grow_cache)
    np.testing.assert_allclose(logits.numpy(), full[:, step], atol=1e-5)
    expected_length = step + 1 if grow_cache else 7
    assert cache["decoder_0"]["self"]["k"].shape[2] == expected_length


def test_beams_of_a_sentence_share_its_encoder_decoder_keys_values():
  """init_cache(beam_size=g): self-attention entries per hypothesis (g per sentence, the
  beams adjacent), encoder-decoder keys/values once per sentence; every hypothesis's
  logits equal the full decoder's on its own prefix and its sentence's memory."""
  model = _model()
  src = np.array([[5, 6, 7, 1, 0], [8, 9, 1, 0, 0]], np.int32)
  beams = 3
  tgt = np.random.default_rng(1).integers(3, 20, size=(2 * beams, 4)).astype(np.int32)
  full = model((np.repeat(src, beams, 0), tgt)).numpy()
  memory, bias = model.encode(src)
  cache = model.init_cache(memory, beam_size=beams)
  assert cache["decoder_0"]["self"]["k"].shape[0] == 2 * beams
  assert cache["decoder_0"]["memory"]["k"].shape[0] == 2
  previous = np.pad(tgt[:, :-1], [[0, 0], [1, 0]])
  for step in range(tgt.shape[1]):
    logits, cache = model.decode_step(tf.constant(previous[:, step]), tf.constant(step), cache,
                                      bias, grow_cache=True)
    np.testing.assert_allclose(logits.numpy(), full[:, step], atol=1e-5)


@pytest.mark.parametrize("name,paper_m", [("base", 65), ("big", 213)])
def test_parameter_counts_match_closed_form_and_table3(name, paper_m):
  hp = get_hparams(name, "vocab_size=37000")
  closed = summary.closed_form_params(hp)
  # Closed form by hand for base: 37000*512 + 6*(4*512^2 + 2*512*2048+2048+512 + 2*1024)
  #   + 6*(8*512^2 + 2*512*2048+2048+512 + 3*1024) = 63,045,632.
  if name == "base":
    assert closed == 63_045_632
  model = Transformer.from_hparams(hp)
  assert model.count_params() == closed
  assert abs(closed / 1e6 - paper_m) / paper_m < 0.05


def test_table3_variants_have_their_counts():
  for name, paper_m in (("base_c_layers2", 36), ("base_c_dff4096", 90), ("base_b_dk16", 58)):
    closed = summary.closed_form_params(get_hparams(name))
    assert abs(closed / 1e6 - paper_m) / paper_m < 0.08, (name, closed)


def test_bfloat16_bias_gradients_are_accurate():
  """Under mixed_bfloat16 the FFN bias gradients are sums over all batch x length rows; they
  must stay within 1% of the exact sum (tf.nn.bias_add's CPU gradient kernel summed 2,048
  rows in bfloat16 and was 5% off, in the wrong direction)."""
  from t2t_repro.model.feed_forward import FeedForward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(size=(8, 256, 64)), tf.float32)
  upstream = rng.normal(0.01, 0.05, size=(8, 256, 64)).astype(np.float32)
  keras.mixed_precision.set_global_policy("mixed_bfloat16")  # as the trainer sets it
  try:
    layer = FeedForward(64, 128)
    with tf.GradientTape() as tape:
      y = layer(x)
    grad = tape.gradient(y, layer.b2, output_gradients=tf.constant(upstream, tf.bfloat16))
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert y.dtype == tf.bfloat16
  exact = upstream.astype(np.float64).reshape(-1, 64).sum(0)
  error = np.linalg.norm(grad.numpy().astype(np.float64) - exact) / np.linalg.norm(exact)
  assert error < 0.01, error


def test_attention_init_per_head_has_the_per_head_glorot_spread():
  """glorot_per_head: Glorot uniform with the fans of the per-head kernels, std
  sqrt(2 / (fan_in + fan_out)): Q/K/V [256, 4, 64] -> sqrt(2 / (1024 + 16384)) = 0.01072,
  output [4, 64, 256] -> sqrt(2 / (256 + 1024)) = 0.03953 (tf_keras 2.21's MultiHeadAttention
  measured 0.01073 and 0.03943); glorot: the 2-D matrices, sqrt(2 / 512) = 0.0625."""
  keras.utils.set_random_seed(0)
  ours = MultiHeadAttention(256, 4, attention_init="glorot_per_head")
  ours.build()
  for kernel in (ours.q_kernel, ours.k_kernel, ours.v_kernel):
    assert np.std(kernel.numpy()) == pytest.approx((2 / (1024 + 16384)) ** 0.5, rel=0.02)
    assert np.abs(kernel.numpy()).max() <= (6 / (1024 + 16384)) ** 0.5
  assert np.std(ours.output_kernel.numpy()) == pytest.approx((2 / 1280) ** 0.5, rel=0.02)
  plain = MultiHeadAttention(256, 4)
  plain.build()
  for kernel in (plain.q_kernel, plain.output_kernel):
    assert np.std(kernel.numpy()) == pytest.approx((2 / 512) ** 0.5, rel=0.02)
  assert MultiHeadAttention.from_config(ours.get_config()).attention_init == "glorot_per_head"


def test_every_weight_matrix_is_drawn_on_its_own():
  """W_Q, W_K, W_V and W_O of one attention layer, and W1 and W2 of one FFN, are
  independent draws: Keras 3 initializers fix their seed when made, so a shared
  initializer object would draw equal matrices (W_Q = W_K makes every query start by
  attending to itself). No two weight matrices of a model share their values, and
  W_Q and W_K are uncorrelated (|corr| < 0.05 over 65,536 entries)."""
  keras.utils.set_random_seed(0)
  model = Transformer.from_hparams(get_hparams(
      "tiny", "vocab_size=64,num_layers=2,d_model=32,d_ff=64,num_heads=4"))
  model((tf.constant([[5, 6, 1]]), tf.constant([[7, 1]])))
  matrices = [w.numpy() for w in model.trainable_weights if len(w.shape) == 2]
  assert len(matrices) == 1 + 2 * (4 + 2) + 2 * (8 + 2)  # embedding, encoder, decoder
  values = {tuple(np.sort(m.ravel())[:50]) for m in matrices}
  assert len(values) == len(matrices)
  keras.utils.set_random_seed(0)
  attention = MultiHeadAttention(256, 4)
  attention.build()
  q, k = attention.q_kernel.numpy().ravel(), attention.k_kernel.numpy().ravel()
  assert abs(np.corrcoef(q, k)[0, 1]) < 0.05
