"""Convert a model dir to a CTranslate2 model directory (`export --format=ctranslate2`).

CTranslate2 (OpenNMT's C++ inference engine) reads a `model.bin` written by its own
`ctranslate2.specs` API; this module fills a `TransformerSpec` from our weights and
saves it through `ctranslate2.converters.Converter.convert` (validation, optional
quantization, aliasing of shared weights), as CTranslate2's own converters do:

- one shared embedding (§3.4) is the encoder embedding, the decoder embedding and the
  tied output projection (no bias); `scale_embeddings` multiplies by sqrt(d_model);
- our positions are written as explicit `position_encodings` (sinusoids with sin/cos
  interleaved as in §3.5, or the learned table): CTranslate2's built-in sinusoid
  table puts all sines before all cosines, a different encoding;
- self-attention q/k/v fused into one [3 d_model, d_model] linear, encoder-decoder
  attention q alone and k/v fused; no projection biases (tensor2tensor has none);
- `pre_norm` follows our norm_type (post-norm: LayerNorm(x + Sublayer(x)), no final
  norm; pre-norm adds the final encoder/decoder norms), LayerNorm epsilon 1e-6;
- the vocabulary is our sentencepiece pieces in id order (pad 0, eos 1, unk 2), the
  decoder starts from id 0 (our shifted-right start symbol), EOS is appended to
  sources (`add_source_eos`), there is no BOS.

The output directory also gets the sentencepiece model (`sentencepiece.model`), the
decoding settings a server uses (`decoding.json`: beam_size, alpha, decode_extra_length,
n_best, max_input_length; `t2t_repro.serving.ct2_servable`) and a README.md with a call
example. One difference remains (docs/SERVING.md): CTranslate2's
beam search normalizes scores by length^length_penalty, not the GNMT
((5 + |Y|) / 6)^alpha of §6.1, so beam outputs can differ where the two penalties rank
hypotheses differently; greedy search (beam 1) is the same search (tested equal).
"""

import importlib.util
import os

import numpy as np
from absl import logging

from t2t_repro.data.vocab import EOS_ID, PAD_ID, UNK_ID
from t2t_repro.model_dir import DECODING_FILE, ModelDir
from t2t_repro.model.position import sinusoid_table
from t2t_repro.serving import QUANTIZATIONS, check_export_dir

# Rows of the explicit position table: CTranslate2 cannot encode positions beyond it
# (its own default maximum input length is 1024 tokens).
MAX_POSITIONS = 1024
LAYER_NORM_EPSILON = 1e-6  # keras.layers.LayerNormalization(epsilon=1e-6) in model/layers.py

_README = """# CTranslate2 model converted from a t2t_repro model dir

Converted by `python -m t2t_repro.export --format=ctranslate2` from `{model_dir}`
(quantization: {quantization}). Files: `model.bin`, `config.json`, the vocabulary
(`shared_vocabulary.json`: the sentencepiece pieces in id order) and `sentencepiece.model`.

```python
import ctranslate2
import sentencepiece as spm

sp = spm.SentencePieceProcessor(model_file="{out}/sentencepiece.model")
translator = ctranslate2.Translator("{out}", device="cpu", inter_threads=1, intra_threads=2)
pieces = sp.encode(["A man rides a bike."], out_type=str)  # EOS is appended by CTranslate2
results = translator.translate_batch(pieces, beam_size={beam_size}, length_penalty={alpha},
                                     max_decoding_length=256)
print(sp.decode_pieces(results[0].hypotheses[0]))
```

Differences from `python -m t2t_repro.translate`: CTranslate2 divides a hypothesis'
log-probability by length^length_penalty, not by the GNMT ((5 + length) / 6)^alpha of
the paper (§6.1), so beam search may pick other hypotheses (greedy search, beam_size=1,
is the same); its maximum output length is one number for the batch
(`max_decoding_length`), not source length + {extra} per sentence.
"""


def require_ctranslate2():
  """The ctranslate2 module.

  Raises:
    ImportError: not installed, with the extra that installs it.
  """
  try:
    import ctranslate2  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ImportError("the CTranslate2 export needs the ctranslate2 package: "
                      "pip install 't2t_repro[ctranslate2]'") from None
  return ctranslate2


def _numpy(variable):
  return np.asarray(variable.numpy(), np.float32)


def _linear(spec, kernel, bias=None):
  """Our [in, out] kernel -> CTranslate2's [out, in] weight."""
  spec.weight = np.ascontiguousarray(kernel.T)
  if bias is not None:
    spec.bias = bias


def _layer_norm(spec, norm):
  spec.gamma, spec.beta = _numpy(norm.gamma), _numpy(norm.beta)


def _attention(spec, layer, norm, self_attention):
  q, k, v = (_numpy(w) for w in (layer.q_kernel, layer.k_kernel, layer.v_kernel))
  if self_attention:
    _linear(spec.linear[0], np.concatenate([q, k, v], axis=1))
  else:
    _linear(spec.linear[0], q)
    _linear(spec.linear[1], np.concatenate([k, v], axis=1))
  _linear(spec.linear[-1], _numpy(layer.output_kernel))
  _layer_norm(spec.layer_norm, norm)


def _ffn(spec, ffn, norm):
  _linear(spec.linear_0, _numpy(ffn.w1), _numpy(ffn.b1))
  _linear(spec.linear_1, _numpy(ffn.w2), _numpy(ffn.b2))
  _layer_norm(spec.layer_norm, norm)


def position_table(model, rows=MAX_POSITIONS):
  """float32 [rows, d_model]: what our model adds at positions 0..rows-1."""
  if hasattr(model.position, "table"):  # learned (Table 3 E); past its end the last row repeats
    table = _numpy(model.position.table)
    return table[np.minimum(np.arange(rows), len(table) - 1)]
  return sinusoid_table(np.arange(rows, dtype=np.float32), model.d_model).numpy()


def build_spec(model, pieces):
  """Fills a `ctranslate2.specs.TransformerSpec` with a model's weights.

  Args:
    model: a `t2t_repro.model.transformer.Transformer` with restored weights.
    pieces: list of str, the sentencepiece pieces in id order (len = vocab_size).

  Returns:
    the spec (not yet validated or quantized).

  Raises:
    ValueError: len(pieces) differs from the model's vocabulary size, or the special
      ids are not pad 0, eos 1, unk 2.
  """
  specs = require_ctranslate2().specs
  if len(pieces) != model.vocab_size:
    raise ValueError(f"{len(pieces)} vocabulary pieces for a model of {model.vocab_size}")
  pre_norm = model.pre_norm
  encoder = specs.TransformerEncoderSpec(model.num_layers, model.num_heads, pre_norm=pre_norm)
  decoder = specs.TransformerDecoderSpec(model.num_layers, model.num_heads, pre_norm=pre_norm)
  spec = specs.TransformerSpec(encoder, decoder)

  embedding = _numpy(model.embedding.embeddings)
  positions = position_table(model)
  encoder.embeddings[0].weight = embedding
  decoder.embeddings.weight = embedding
  decoder.projection.weight = embedding  # tied pre-softmax projection (§3.4), aliased on save
  encoder.position_encodings.encodings = positions
  decoder.position_encodings.encodings = positions
  encoder.scale_embeddings = decoder.scale_embeddings = True

  for layer_spec, layer in zip(encoder.layer, model.encoder_layers):
    _attention(layer_spec.self_attention, layer.self_attention, layer.norms[0], True)
    _ffn(layer_spec.ffn, layer.ffn, layer.norms[1])
  for layer_spec, layer in zip(decoder.layer, model.decoder_layers):
    _attention(layer_spec.self_attention, layer.self_attention, layer.norms[0], True)
    _attention(layer_spec.attention, layer.memory_attention, layer.norms[1], False)
    _ffn(layer_spec.ffn, layer.ffn, layer.norms[2])
  if pre_norm:
    _layer_norm(encoder.layer_norm, model.encoder_norm)
    _layer_norm(decoder.layer_norm, model.decoder_norm)

  specials = {PAD_ID: pieces[PAD_ID], EOS_ID: pieces[EOS_ID], UNK_ID: pieces[UNK_ID]}
  if specials != {PAD_ID: "<pad>", EOS_ID: "</s>", UNK_ID: "<unk>"}:
    raise ValueError(f"vocabulary special pieces {specials}: expected pad 0, eos 1, unk 2")
  config = spec.config
  config.unk_token, config.eos_token = pieces[UNK_ID], pieces[EOS_ID]
  # No BOS in our vocabulary: the decoder starts from id 0, as in training (targets shifted
  # right with 0); "bos" names the same piece so that CTranslate2 never looks up a missing one.
  config.bos_token = config.decoder_start_token = pieces[PAD_ID]
  config.add_source_bos, config.add_source_eos = False, True
  config.layer_norm_epsilon = LAYER_NORM_EPSILON
  spec.register_source_vocabulary(pieces)
  spec.register_target_vocabulary(pieces)
  return spec


def save_spec(spec, output_dir, quantization=None):
  """Writes a filled spec (`build_spec`) as a CTranslate2 model dir (model.bin, config.json,
  shared_vocabulary.json) with CTranslate2's own converter, replacing what is there.

  Args:
    spec: a `ctranslate2.specs.TransformerSpec`.
    output_dir: the folder written.
    quantization: None (float32) or one of `QUANTIZATIONS`.

  Raises:
    ImportError: ctranslate2 is not installed.
  """
  ctranslate2 = require_ctranslate2()

  class _Converter(ctranslate2.converters.Converter):
    def _load(self):
      return spec

  _Converter().convert(output_dir, quantization=quantization, force=True)


def export_ctranslate2(model_dir, output_dir, checkpoint_path=None, quantization=None,
                       overwrite=False, beam_size=None, alpha=None, decode_extra_length=None,
                       n_best=None):
  """Writes the CTranslate2 model directory of a model dir.

  Args:
    model_dir: model directory (hparams.json, vocab.model, checkpoints).
    output_dir: folder to write (model.bin, config.json, shared_vocabulary.json,
      sentencepiece.model, decoding.json, README.md).
    checkpoint_path: checkpoint prefix (default: latest of model_dir).
    quantization: None (float32) or one of `QUANTIZATIONS` (weights stored in that
      type; CTranslate2 computes with it).
    overwrite: replace a non-empty output_dir. The model is built in a staging sibling folder
      and renamed (`ModelDir.write_dir`): output_dir is absent, as it was, or complete.
    beam_size, alpha, decode_extra_length: the decoding a server applies (`decoding.json`)
      and the README's example (None: the hparams', `DecodeConfig.resolve`).
    n_best: hypotheses per sentence of a server's translate_nbest (None: the beam size).

  Returns:
    output_dir.

  Raises:
    errors.UsageError: output_dir is not empty and overwrite is False.
    ValueError: unknown quantization, a model with relative positions, or see `build_spec`.
    ImportError: ctranslate2 is not installed (or torch, for the bfloat16 types).
    the errors of `decoding.loading.load_for_inference`.
  """
  # Everything is checked before anything is written.
  if quantization is not None and quantization not in QUANTIZATIONS:
    raise ValueError(f"unknown quantization {quantization!r}; one of {', '.join(QUANTIZATIONS)}")
  check_export_dir(output_dir, overwrite)
  from t2t_repro.config import decode as decode_config  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  if ModelDir(model_dir).read_hparams().position_encoding == "relative":
    raise ValueError(f"{model_dir} uses relative position representations (position_encoding="
                     "relative), which this CTranslate2 export does not convert; serve it with "
                     "the SavedModel (`format`=saved_model)")
  require_ctranslate2()  # before anything is written
  if quantization in ("bfloat16", "int8_bfloat16") and importlib.util.find_spec("torch") is None:
    raise ImportError(f"CTranslate2's converter needs torch for `quantization`={quantization} "
                      "(pip install torch), or choose int8 / int8_float32 / float16")
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  logging.info("export: loading %s", checkpoint_path or model_dir)
  model, hparams, tokenizer = load_for_inference(model_dir, checkpoint_path)
  processor = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto)
  pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
  logging.info("export: converting to CTranslate2 (weights %s) and writing %s",
               quantization or "float32", output_dir)
  spec = build_spec(model, pieces)
  config = decode_config.DecodeConfig.resolve(hparams, beam_size=beam_size, alpha=alpha,
                                               decode_extra_length=decode_extra_length)
  decoding = {"beam_size": config.beam_size, "alpha": config.alpha,
              "decode_extra_length": config.decode_extra_length,
              "n_best": n_best or config.beam_size,
              "max_input_length": min(model.max_positions, MAX_POSITIONS)
                                  - config.decode_extra_length}
  readme = _README.format(model_dir=os.path.abspath(model_dir), out=os.path.abspath(output_dir),
                          quantization=quantization or "none (float32)",
                          beam_size=config.beam_size, alpha=config.alpha,
                          extra=config.decode_extra_length)

  def write(staging):
    save_spec(spec, staging.path, quantization)
    tokenizer.save(staging.file("sentencepiece.model"))
    staging.write_json(DECODING_FILE, decoding)
    staging.write_bytes("README.md", readme)

  ModelDir(output_dir).write_dir(write)
  return output_dir

