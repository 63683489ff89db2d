"""A model dir as a LiteRT model that translates without TensorFlow (`export --format=tflite`:
`export_litert`).

LiteRT is TensorFlow Lite's runtime (the `ai-edge-litert` package). The export converts the
project's one decoding path, `decoding.translator.Translator.search` (beam search with the
GNMT length penalty, the search loop a `While` inside the model), with TFLiteConverter into
`model.tflite` with these signatures (`SIGNATURES`), each on a batch of any size:

  beam_search: inputs int32 [batch, src_len] (0-padded, each row ending with EOS) -> ids
    int32 [batch, 1, T] (0-padded after EOS; T = the longest source + decode_extra_length),
    scores float32 [batch, 1] (log P(Y|X) / lp(Y));
  greedy: the same with beam 1;
  nbest: ids [batch, n_best, T], scores [batch, n_best], best first.

Builtin ops only (no Flex / SELECT_TF_OPS, checked after conversion: `custom_ops`) and the
weights as constants (the variables are frozen before conversion), so XNNPACK's kernels run
the matmuls. `quantization`: None (float32), "float16" (weights stored as float16, computed in
float32) or "dynamic_range" (int8 weights, activations quantized per call: LiteRT's int8).
The version folder also holds sentencepiece.model, decoding.json (beam_size, alpha,
decode_extra_length, n_best, max_input_length, decode_batch_tokens, eos_id) and a README.md; the
translator that needs only LiteRT, sentencepiece and numpy is `serving.litert_translator`.
"""

import contextlib
import dataclasses
import os
import tempfile

import tensorflow as tf
from absl import logging

from t2t_repro.constants import EOS_ID
from t2t_repro.model_dir import DECODING_FILE, ModelDir
from t2t_repro.serving import LITERT_QUANTIZATIONS, check_export_dir
from t2t_repro.serving.litert_translator import MODEL_FILE
from t2t_repro.serving.servable import quiet_loader

# The signatures of model.tflite (see the module docstring).
SIGNATURES = ("beam_search", "greedy", "nbest")
_INPUTS = tf.TensorSpec([None, None], tf.int32, name="inputs")

_README = """# LiteRT model exported from a t2t_repro model dir

Exported by `python -m t2t_repro.export --format=tflite` from `{model_dir}` (quantization:
{quantization}). It runs on LiteRT's interpreter (`pip install ai-edge-litert`) with
sentencepiece and numpy, without TensorFlow: builtin ops only, the weights constants (XNNPACK on
CPU). The project's tests run it on Linux x86-64.

Files: `model.tflite` (signatures beam_search, greedy, nbest: int32 ids in, ids and scores
out), `sentencepiece.model`, `decoding.json` (beam_size {beam_size}, alpha {alpha},
decode_extra_length {extra}).

```python
from t2t_repro.serving.litert_translator import LiteRtTranslator  # numpy, sentencepiece, LiteRT
translator = LiteRtTranslator("{out}")
print(translator.translate(["A man rides a bike."]))
```

examples/litert/ of the repository translates with the interpreter alone.
"""


@contextlib.contextmanager
def new_axes_as_expand_dims():
  """While tracing: `x[:, None]`-style indexing (new axes and full slices only) builds
  ExpandDims instead of a StridedSlice with new_axis_mask, which TFLite's builtin
  StridedSlice cannot take on a tensor of dynamic shape (the converter then asks for Flex).
  Every other indexing is TensorFlow's own."""
  from tensorflow.python.framework import tensor as tensor_lib  # pylint: disable=import-outside-toplevel
  original = tensor_lib.Tensor.__getitem__

  def getitem(tensor, key):
    spec = key if isinstance(key, tuple) else (key,)
    plain = all(k is None or k is Ellipsis or (isinstance(k, slice) and k == slice(None))
                for k in spec)
    if not (plain and None in spec and spec.count(Ellipsis) <= 1 and
            tensor.shape.rank is not None):
      return original(tensor, key)
    taken = sum(1 for k in spec if k is not None and k is not Ellipsis)
    at = spec.index(Ellipsis) if Ellipsis in spec else len(spec)
    spec = spec[:at] + (slice(None),) * (tensor.shape.rank - taken) + spec[at + 1:]
    for axis, k in enumerate(spec):
      if k is None:
        tensor = tf.expand_dims(tensor, axis)
    return tensor

  tensor_lib.Tensor.__getitem__ = getitem
  try:
    yield
  finally:
    tensor_lib.Tensor.__getitem__ = original


def signature_functions(translator, n_best):
  """{signature name: frozen concrete function} of `SIGNATURES` (weights as constants).

  Args:
    translator: a `decoding.translator.Translator` (its model, its config's beam_size, alpha,
      decode_extra_length).
    n_best: hypotheses per sentence of `nbest` (the beam widened to it if narrower).
  """
  from tensorflow.python.framework import convert_to_constants  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel
  config = dataclasses.replace(translator.config, n_best=1)
  configs = {"beam_search": config, "greedy": dataclasses.replace(config, beam_size=1),
             "nbest": dataclasses.replace(config, beam_size=max(config.beam_size, n_best),
                                          n_best=n_best)}
  functions = {}
  for name in SIGNATURES:
    search = translator_lib.Translator(translator.model, None, configs[name]).search

    def run(inputs, search=search):
      ids, scores = search(inputs)
      return {"ids": ids, "scores": scores}

    with new_axes_as_expand_dims():
      function = tf.function(run, input_signature=[_INPUTS], autograph=False)
      concrete = function.get_concrete_function()
    frozen = convert_to_constants.convert_variables_to_constants_v2(
        concrete, lower_control_flow=False)  # the weights as constants (XNNPACK needs them)
    # Freezing loses the output names; the flat outputs are the dict's in key order.
    functions[name] = tf.function(
        lambda inputs, frozen=frozen: dict(zip(("ids", "scores"), tf.nest.flatten(frozen(inputs)))),
        input_signature=[_INPUTS], autograph=False).get_concrete_function()
  return functions


def convert(functions, quantization=None):
  """The flatbuffer (bytes) of `functions` ({signature name: frozen concrete function}).

  Args:
    quantization: None (float32) or one of `LITERT_QUANTIZATIONS`.

  Raises:
    ValueError: an unknown quantization, or the model needs ops outside TFLite's builtins.
  """
  _check_quantization(quantization)
  holder = tf.Module()
  with tempfile.TemporaryDirectory() as folder:  # the converter reads signatures from a SavedModel
    tf.saved_model.save(holder, folder, signatures=functions,
                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
    with quiet_loader():  # its reading of the SavedModel: no warning per custom gradient
      converter = tf.lite.TFLiteConverter.from_saved_model(folder, signature_keys=list(functions))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization in ("float16", "dynamic_range"):
      converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
      converter.target_spec.supported_types = [tf.float16]
    with quiet_loader():
      data = converter.convert()
  extra = custom_ops(data)
  if extra:
    raise ValueError(f"the LiteRT model needs ops outside TFLite's builtins: {', '.join(extra)}")
  return data


def _check_quantization(quantization):
  """Raises ValueError unless `quantization` is None or one of `LITERT_QUANTIZATIONS`."""
  if quantization is not None and quantization not in LITERT_QUANTIZATIONS:
    raise ValueError(f"unknown quantization {quantization!r}; one of "
                     f"{', '.join(LITERT_QUANTIZATIONS)}")


def custom_ops(data):
  """The custom (non-builtin, e.g. Flex) op names of a flatbuffer, sorted; [] when every op of
  every subgraph is a builtin."""
  from tensorflow.lite.tools import flatbuffer_utils  # pylint: disable=import-outside-toplevel
  model = flatbuffer_utils.read_model_from_bytearray(bytearray(data))
  return sorted({code.customCode.decode() if isinstance(code.customCode, bytes) else
                 str(code.customCode) for code in model.operatorCodes if code.customCode})


def builtin_ops(data):
  """The builtin op names of every subgraph of a flatbuffer (the While's bodies included)."""
  from tensorflow.lite.tools import flatbuffer_utils  # pylint: disable=import-outside-toplevel
  from tensorflow.lite.python import schema_py_generated as schema  # pylint: disable=import-outside-toplevel
  model = flatbuffer_utils.read_model_from_bytearray(bytearray(data))
  names = {value: name for name, value in vars(schema.BuiltinOperator).items()
           if not name.startswith("_")}
  return sorted({names[max(code.builtinCode, code.deprecatedBuiltinCode)]
                 for code in model.operatorCodes if not code.customCode})


def export_litert(model_dir, output_dir, checkpoint_path=None, quantization=None, overwrite=False,
                  beam_size=None, alpha=None, decode_extra_length=None, n_best=None,
                  decode_batch_tokens=None):
  """Writes the LiteRT version folder of a model dir (model.tflite, sentencepiece.model,
  decoding.json, README.md).

  Args:
    model_dir: model directory (hparams.json, vocab.model, checkpoints).
    output_dir: folder to write, e.g. /models/transformer/1.
    checkpoint_path: checkpoint prefix (default: latest of model_dir).
    quantization: None / "none" (float32), "float16" or "dynamic_range" (int8 weights).
    overwrite: replace a non-empty output_dir. The folder is built in a staging sibling and
      renamed (`ModelDir.write_dir`): output_dir is absent, as it was, or complete.
    beam_size, alpha, decode_extra_length: fixed in the model (None: the hparams',
      `DecodeConfig.resolve`).
    n_best: hypotheses per sentence of the nbest signature (None: the beam size).
    decode_batch_tokens: source tokens (padding included) per batch the translator decodes
      at once (decoding.json; None: 4096).

  Returns:
    output_dir.

  Raises:
    errors.UsageError: output_dir is not empty and overwrite is False.
    ValueError: unknown quantization, or ops outside TFLite's builtins (`convert`).
    the errors of `decoding.loading.load_for_inference`.
  """
  _check_quantization(quantization)
  check_export_dir(output_dir, overwrite)
  from t2t_repro.config import decode as decode_config  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  logging.info("export: loading %s", checkpoint_path or model_dir)
  model, hparams, tokenizer = load_for_inference(model_dir, checkpoint_path)
  model.step_weights_per_search = False  # frozen: the weights as constants in the loop
  config = decode_config.DecodeConfig.resolve(hparams, beam_size=beam_size, alpha=alpha,
                                               decode_extra_length=decode_extra_length,
                                               decode_batch_tokens=decode_batch_tokens)
  translator = translator_lib.Translator(model, tokenizer, config)
  n_best = n_best or config.beam_size
  logging.info("export: tracing and converting to LiteRT (weights %s)", quantization or "none")
  data = convert(signature_functions(translator, n_best), quantization)
  decoding = {"beam_size": config.beam_size, "alpha": config.alpha,
              "decode_extra_length": config.decode_extra_length, "n_best": n_best,
              "max_input_length": translator.max_input_length(),
              "decode_batch_tokens": config.decode_batch_tokens, "eos_id": EOS_ID}
  named = quantization if quantization not in (None, "none") else "none (float32)"
  readme = _README.format(model_dir=os.path.abspath(model_dir), out=os.path.abspath(output_dir),
                          quantization=named,
                          beam_size=config.beam_size, alpha=config.alpha,
                          extra=config.decode_extra_length)

  def write(staging):
    staging.write_bytes(MODEL_FILE, data)
    tokenizer.save(staging.file("sentencepiece.model"))
    staging.write_json(DECODING_FILE, decoding)
    staging.write_bytes("README.md", readme)

  ModelDir(output_dir).write_dir(write)
  return output_dir
