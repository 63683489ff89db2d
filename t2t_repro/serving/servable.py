"""One exported model version as the server serves it (`Servable`), the highest
version of a model base path at start (`latest_version`) and TensorFlow Serving's model config
file (`read_model_config`). A CTranslate2 export is served by `ct2_servable.Ct2Servable`, a
`Servable` with the same signatures; `version_folder.load_warm` picks the kind of a folder.

A `Servable` loads `<model_base_path>/<version>/` (a SavedModel of `t2t_repro.serving.
saved_model`) with `tf.saved_model.load` and calls its signatures; it checks a request's
inputs before they are queued (so that one bad request cannot fail the batch it would
share with others) and gives the model's metadata as TensorFlow Serving's REST API does
(tensorflow_serving/g3doc/api_rest.md, `GetModelMetadataResponse`).
"""

import contextlib
import logging
import os

import numpy as np

from t2t_repro import errors
from t2t_repro.serving import batcher
from t2t_repro.serving import rest
from t2t_repro.serving import versions

# Input name -> the length limit it must respect (a variable of the SavedModel, tokens with
# EOS): a longer source is refused instead of cut; `score` fails on a pair over the table.
_LIMITS = {"sentences": "max_input_length", "prefixes": "max_input_length",
           "inputs": "max_input_length", "sources": "max_positions", "targets": "max_positions"}


def latest_version(model_base_path):
  """The highest version of a model base path: (version int, its folder).

  TensorFlow Serving's layout: `<model_base_path>/<integer version>/saved_model.pb` (or
  model.bin: a CTranslate2 export; model.tflite: a LiteRT export).

  Raises:
    errors.DataError: no such folder, or no version folder holding a saved_model.pb.
  """
  if not os.path.isdir(model_base_path):
    raise errors.MissingDataError(f"`model_base_path` {model_base_path}: no such folder")
  found = versions.scan(model_base_path)
  if not found:
    raise errors.DataError(
        f"`model_base_path` {model_base_path}: no version folder (an integer name holding "
        f"saved_model.pb, model.bin or model.tflite, e.g. {os.path.join(model_base_path, '1')} as "
        "the export command writes it)")
  return max(found), found[max(found)][0]


def read_model_config(path):
  """The models of a TensorFlow Serving model config file (`--model_config_file`): a
  ModelServerConfig text proto (tensorflow_serving/config/model_server_config.proto, read with
  tensorflow-serving-api's own classes),

    model_config_list {
      config { name: "en_de" base_path: "/models/en_de" model_platform: "tensorflow" }
      config { name: "de_en" base_path: "/models/de_en" model_platform: "ctranslate2" }
    }

  Returns:
    [(name, base_path, model_platform)] in the file's order (model_platform "" when not
    given: each version folder's file says it).

  Raises:
    errors.DataError: the file is not such a config, names a model twice, leaves a name or
      base_path empty, asks for a platform other than those of `versions.PLATFORMS`, a version policy
      other than the latest version, or version labels.
    FileNotFoundError: no such file.
  """
  from google.protobuf import text_format  # pylint: disable=import-outside-toplevel
  from tensorflow_serving.config import model_server_config_pb2  # pylint: disable=import-outside-toplevel
  with open(path, encoding="utf-8") as f:
    text = f.read()
  try:
    config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
  except text_format.ParseError as e:
    raise errors.DataError(f"`model_config_file` {path}: {e}") from None
  return config_models(config, f"`model_config_file` {path}")


def config_models(config, where):
  """[(name, base_path, model_platform)] of a ModelServerConfig message, checked as
  `read_model_config` says; `where` starts the message of a `errors.DataError`."""
  models = config.model_config_list.config
  if not models:
    raise errors.DataError(f"{where}: no model_config_list with a config")
  names = set()
  for model in models:
    policy = model.model_version_policy.WhichOneof("policy_choice")
    problem = ("a config without name or base_path" if not (model.name and model.base_path) else
               f"model {model.name!r} twice" if model.name in names else
               f"model {model.name!r}: model_platform {model.model_platform!r}, not one of "
               f"{', '.join(versions.PLATFORMS)}"
               if model.model_platform not in ("", *versions.PLATFORMS) else
               f"model {model.name!r}: model_version_policy {policy}; only the latest version "
               "is served" if policy not in (None, "latest") or
               (policy == "latest" and model.model_version_policy.latest.num_versions > 1) else
               f"model {model.name!r}: version_labels; no label is served"
               if model.version_labels else None)
    if problem:
      raise errors.DataError(f"{where}: {problem}")
    names.add(model.name)
  return [(model.name, model.base_path, model.model_platform) for model in models]


def configure_threads(options, inter_op_threads=0):
  """Sets TensorFlow's intra-op threads to the cores split between the decoding threads
  (`decoding.translator.configure_threads`) and its inter-op threads to `inter_op_threads`
  (`ServerConfig.tensorflow_inter_op_parallelism`; 0: TensorFlow's default); call before
  TensorFlow runs anything."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import translator  # pylint: disable=import-outside-toplevel
  translator.configure_threads(options.num_batch_threads)
  if inter_op_threads:
    tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)


class Signature:
  """A signature's inputs and outputs: `inputs` {name: (tf.DType, rank)}, `outputs`
  (names, sorted); `batched`: whether requests can be merged into one call (every input
  is [batch]: a [batch, len] input such as translate_ids' would need padding, which
  widens its outputs)."""

  def __init__(self, inputs, outputs):
    self.inputs = dict(sorted(inputs.items()))
    self.outputs = sorted(outputs)
    self.batched = all(rank == 1 for _, rank in self.inputs.values())

  @classmethod
  def of_function(cls, function):
    """The signature of a loaded SavedModel's concrete function."""
    specs = function.structured_input_signature[1]
    return cls({name: (spec.dtype, spec.shape.rank) for name, spec in specs.items()},
               function.structured_outputs)


class Servable:
  """A loaded SavedModel version.

  Args:
    name: the model name of the REST API's URLs (--model_name).
    version: its version (int).
    path: the version's folder.
    max_batch_tokens: the source tokens (padding included) per chunk the SavedModel's graph
      decodes at once, set in its `decode_batch_tokens` variable: the server's one budget
      (`config.BatchingOptions.max_batch_tokens`); None keeps the export's.

  Raises:
    errors.DataError: the folder holds no loadable SavedModel of this project, or its
      variables are a corrupt checkpoint (`model.weights.check_readable`).
  """

  def __init__(self, name, version, path, max_batch_tokens=None):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # pylint: disable=import-outside-toplevel,unused-import  # the ops
    self.name, self.version, self.path = name, version, path
    self._tf = tf
    try:
      with quiet_loader():
        self._loaded = tf.saved_model.load(path)
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:
      from t2t_repro.model.weights import check_readable  # pylint: disable=import-outside-toplevel
      check_readable(os.path.join(path, "variables", "variables"))  # a short or garbled file
      raise errors.DataError(f"`model_base_path` {path}: not a loadable SavedModel ({e})") from None
    self._meta_graph = _meta_graph(path)
    self.signatures = {name: Signature.of_function(function)
                       for name, function in self._loaded.signatures.items()}
    if "serving_default" not in self.signatures:
      raise errors.DataError(f"`model_base_path` {path}: the SavedModel has no serving_default "
                             "signature")
    self.limits = {key: int(getattr(self._loaded, key).numpy())
                   for key in ("max_input_length", "max_positions") if hasattr(self._loaded, key)}
    if max_batch_tokens is not None and hasattr(self._loaded, "decode_batch_tokens"):
      self._loaded.decode_batch_tokens.assign(max_batch_tokens)
    self._pieces = _sentencepiece(self._meta_graph)

  def metadata(self):
    """TensorFlow Serving's GetModelMetadataResponse as JSON: model_spec and the
    SignatureDefMap of the SavedModel (protobuf's JSON mapping, every field printed)."""
    from google.protobuf import json_format  # pylint: disable=import-outside-toplevel
    signature_def = {
        name: json_format.MessageToDict(sig, preserving_proto_field_name=True,
                                        always_print_fields_with_no_presence=True)
        for name, sig in self.signature_defs().items()}
    return {"model_spec": {"name": self.name, "signature_name": "", "version": str(self.version)},
            "metadata": {"signature_def": {"signature_def": signature_def}}}

  def signature_defs(self):
    """{name: tensorflow.SignatureDef} of the SavedModel's "serve" MetaGraphDef."""
    return dict(self._meta_graph.signature_def)

  def row_tokens(self, signature_name, columns):
    """Checks a request's columns against the model's length limits and returns the
    tokens of each row (its first input's, EOS included: the batching budget's unit).

    Args:
      signature_name: a key of `signatures`.
      columns: {input name: list of rows} as `rest.parse_predict` gives.

    Returns:
      list of int [rows].

    Raises:
      rest.ApiError: INVALID_ARGUMENT naming the first instance over a limit, with a token
        id outside the vocabulary, or token ids not ending with EOS (empty, or cut).
    """
    counts = {}
    for name, (dtype, _) in self.signatures[signature_name].inputs.items():
      rows = columns[name]
      if dtype == self._tf.string:
        counts[name] = [len(ids) + 1 for ids in self._pieces.encode([r.strip() for r in rows])]
      else:
        counts[name] = [sum(1 for i in row if i != 0) for row in rows]
        vocab, eos = self._pieces.get_piece_size(), self._pieces.eos_id()
        for index, row in enumerate(rows):
          if any(not 0 <= i < vocab for i in row):
            raise rest.ApiError("INVALID_ARGUMENT", f"instance {index}: input '{name}' has a token "
                                f"id outside the vocabulary [0, {vocab})")
          ids = [i for i in row if i != 0]  # 0: padding
          if not ids or ids[-1] != eos or eos in ids[:-1]:
            raise rest.ApiError("INVALID_ARGUMENT", f"instance {index}: input '{name}' must be "
                                f"token ids ending with one EOS ({eos}), then 0-padding")
      limit = self.limits.get(_LIMITS.get(name))
      for index, count in enumerate(counts[name]):
        if limit is not None and count > limit:
          raise rest.ApiError(
              "INVALID_ARGUMENT", f"instance {index}: input '{name}' is {count} tokens (EOS "
              f"included), longer than the model's {_LIMITS[name]} of {limit}")
    return next(iter(counts.values()))

  def run(self, signature_name, columns):
    """Calls a signature on a batch (in the decoding thread).

    Args:
      signature_name: a key of `signatures`.
      columns: {input name: list of rows}; string rows are str, [batch, len] int32 rows
        lists of ints (0-padded here to the longest).

    Returns:
      {output name: numpy array [rows, ...]} (strings as bytes).

    Raises:
      tf.errors.OpError: the signature failed.
    """
    tf = self._tf
    tensors = {}
    for name, (dtype, rank) in self.signatures[signature_name].inputs.items():
      rows = columns[name]
      if rank == 2:
        width = max((len(row) for row in rows), default=0)
        rows = np.array([list(row) + [0] * (width - len(row)) for row in rows],
                        dtype=dtype.as_numpy_dtype).reshape([len(rows), width])
      tensors[name] = tf.constant(rows, dtype=dtype)
    outputs = self._loaded.signatures[signature_name](**tensors)
    return {name: value.numpy() for name, value in outputs.items()}


@contextlib.contextmanager
def quiet_loader():
  """Silences the loader's warning per beam-search function, "Importing a function ... with
  ops with unsaved custom gradients": the export leaves them out on purpose (serving never
  differentiates)."""
  loggers = [logging.getLogger(name) for name in ("absl", "tensorflow")]
  levels = [logger.level for logger in loggers]
  for logger in loggers:
    logger.setLevel(logging.ERROR)
  try:
    yield
  finally:
    for logger, level in zip(loggers, levels):
      logger.setLevel(level)


def _meta_graph(path):
  """The SavedModel's "serve" MetaGraphDef (signatures, graph)."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
  saved = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    saved.ParseFromString(f.read())
  for meta_graph in saved.meta_graphs:
    if "serve" in meta_graph.meta_info_def.tags:
      return meta_graph
  raise errors.DataError(f"`model_base_path` {path}: the SavedModel has no 'serve' tag set")


def _sentencepiece(meta_graph):
  """The sentencepiece processor of the model the graph's SentencepieceOp holds (TensorFlow
  Text keeps the serialized model in the op's `model` attribute), to count a sentence's
  tokens before it is queued."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  nodes = list(meta_graph.graph_def.node)
  for function in meta_graph.graph_def.library.function:
    nodes.extend(function.node_def)
  for node in nodes:
    if node.op == "SentencepieceOp" and node.attr["model"].s:
      return spm.SentencePieceProcessor(model_proto=node.attr["model"].s)
  raise errors.DataError("the SavedModel has no sentencepiece model (SentencepieceOp): not a "
                         "t2t_repro export")
