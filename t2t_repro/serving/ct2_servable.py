"""A CTranslate2 export (`export --format=ctranslate2`: model.bin, sentencepiece.model,
decoding.json) served behind the same REST and gRPC API as a SavedModel (`Ct2Servable`).

The signatures are the SavedModel's (`t2t_repro.serving.saved_model`), with the same inputs,
outputs and checks (`servable.Servable.row_tokens`), mapped to CTranslate2's
`Translator.translate_batch` and `score_batch` around the export's sentencepiece model:

  serving_default: sentences -> translations, scores (beam_size, length_penalty = alpha);
  translate_ids: inputs int32 [batch, len] (ending with EOS) -> ids [batch, T], scores;
  translate_nbest: sentences -> translations, scores [batch, n_best] (num_hypotheses);
  translate_prefix: sentences, prefixes -> translations, scores (target_prefix);
  score: sources, targets -> scores (the sum of score_batch's log_probs, EOS included),
    lengths (target pieces, EOS included).

Beam size, alpha, decode_extra_length and n_best are the export's (decoding.json). A blank
sentence gives "" with score 0, as the SavedModel. CTranslate2 batches each call itself:
sorted by length in chunks of `max_batch_tokens` source tokens (max_batch_size with
batch_type="tokens"), the server's one token budget. Two differences from the SavedModel
(docs/SERVING.md): the scores are normalized by length^alpha, not GNMT's
((5 + length) / 6)^alpha, and the maximum output length is the call's longest source (or
target prefix) + decode_extra_length for every sentence of the call (one number per call in
CTranslate2, `max_output_length`), not each sentence's own. A cap of max_positions for every
call instead made a hypothesis that never ends run ~500 steps and hold its whole batch (p99
latencies of 1-3 s on `small`, docs/SERVER_LOAD.md).
"""

import json
import os

import numpy as np

from t2t_repro import errors
from t2t_repro.config import serving as serving_config
from t2t_repro.model_dir import DECODING_FILE
from t2t_repro.serving import batcher
from t2t_repro.serving import servable as servable_lib
from t2t_repro.serving.ctranslate2 import require_ctranslate2

_EOS = 1  # t2t_repro.data.vocab.EOS_ID
# Signature name -> ({input: (dtype, rank)}, {output: (dtype, rank)}), the SavedModel's.
SIGNATURES = {
    "serving_default": ({"sentences": ("string", 1)},
                        {"translations": ("string", 1), "scores": ("float32", 1)}),
    "translate_ids": ({"inputs": ("int32", 2)}, {"ids": ("int32", 2), "scores": ("float32", 1)}),
    "translate_nbest": ({"sentences": ("string", 1)},
                        {"translations": ("string", 2), "scores": ("float32", 2)}),
    "translate_prefix": ({"sentences": ("string", 1), "prefixes": ("string", 1)},
                         {"translations": ("string", 1), "scores": ("float32", 1)}),
    "score": ({"sources": ("string", 1), "targets": ("string", 1)},
              {"scores": ("float32", 1), "lengths": ("int32", 1)}),
}


class Ct2Servable(servable_lib.Servable):
  """A loaded CTranslate2 export version.

  Args:
    name: the model name of the API's URLs.
    version: its version (int).
    path: the version's folder (model.bin, sentencepiece.model, decoding.json).
    options: `config.BatchingOptions`: max_batch_tokens is CTranslate2's token budget per
      chunk; num_batch_threads its inter_threads (batches translated at once,
      `config.serving.batch_threads`), each with `config.serving.intra_op_threads` threads.
      None: the defaults.

  Raises:
    errors.DataError: the folder is not a loadable CTranslate2 export of this project, or
      the ctranslate2 package is not installed.
  """

  def __init__(self, name, version, path, options=None):  # pylint: disable=super-init-not-called
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    options = options or batcher.BatchingOptions()
    self.name, self.version, self.path = name, version, path
    self._tf = tf
    try:
      ctranslate2 = require_ctranslate2()
    except ImportError as e:
      raise errors.DataError(f"`model_base_path` {path}: {e}") from None
    try:
      with open(os.path.join(path, DECODING_FILE), encoding="utf-8") as f:
        self.decoding = json.load(f)
      self._pieces = spm.SentencePieceProcessor(
          model_file=os.path.join(path, "sentencepiece.model"))
      threads = options.num_batch_threads
      self._translator = ctranslate2.Translator(
          path, device="cpu", inter_threads=serving_config.batch_threads(threads),
          intra_threads=serving_config.intra_op_threads(threads))
      beam_size, alpha, extra, limit = (self.decoding[key] for key in (
          "beam_size", "alpha", "decode_extra_length", "max_input_length"))
    except (OSError, ValueError, RuntimeError, KeyError) as e:
      raise errors.DataError(f"`model_base_path` {path}: not a loadable CTranslate2 export of "
                             f"the export command's `format`=ctranslate2 ({e})") from None
    self.limits = {"max_input_length": limit, "max_positions": limit + extra}
    self._budget = {"max_batch_size": options.max_batch_tokens, "batch_type": "tokens"}
    self._search = dict(self._budget, beam_size=beam_size, length_penalty=alpha, return_scores=True)
    self.signatures = {
        key: servable_lib.Signature(
            {n: (tf.as_dtype(d), r) for n, (d, r) in inputs.items()}, outputs)
        for key, (inputs, outputs) in SIGNATURES.items()}

  def signature_defs(self):
    """{name: tensorflow.SignatureDef} describing `SIGNATURES` (`signature_defs`)."""
    return signature_defs(SIGNATURES)

  def run(self, signature_name, columns):
    """Calls a signature on a batch (in a decoding thread): {output: numpy array [rows, ...]}
    (strings as bytes), as `Servable.run`."""
    if signature_name == "score":
      return self._score(columns["sources"], columns["targets"])
    if signature_name == "translate_ids":
      return self._translate_ids(columns["inputs"])
    prefixes = columns.get("prefixes")
    n = self.decoding["n_best"] if signature_name == "translate_nbest" else 1
    texts, scores = self._translate(columns["sentences"], prefixes, n)
    if n == 1:
      texts, scores = texts[:, 0], scores[:, 0]
    return {"translations": texts, "scores": scores}

  def max_output_length(self, pieces):
    """CTranslate2's max_decoding_length of a call [pieces, EOS excluded]: the longest of
    `pieces` (lists of source or target-prefix pieces, EOS excluded) + EOS +
    decode_extra_length, at most max_positions."""
    longest = max((len(p) for p in pieces), default=0)
    return min(self.limits["max_positions"], longest + 1 + self.decoding["decode_extra_length"])

  def _encode(self, texts):
    return self._pieces.encode([text.strip() for text in texts], out_type=str)

  def _translate(self, sentences, prefixes, n):
    """(translations bytes [rows, n], scores float32 [rows, n]); blank sentences "" and 0."""
    sources = self._encode(sentences)
    kept = [row for row, pieces in enumerate(sources) if pieces]
    texts = np.full([len(sources), n], b"", dtype=object)
    scores = np.zeros([len(sources), n], np.float32)
    if not kept:
      return texts, scores
    target_prefix = None
    if prefixes is not None:
      target_prefix = [pieces or None for pieces in self._encode([prefixes[r] for r in kept])]
    kept_sources = [sources[r] for r in kept]
    results = self._translator.translate_batch(
        kept_sources, target_prefix, max_decoding_length=self.max_output_length(
            kept_sources + [p for p in target_prefix or [] if p]),
        **dict(self._search, beam_size=max(self._search["beam_size"], n), num_hypotheses=n))
    for row, result in zip(kept, results):
      for i, (pieces, score) in enumerate(zip(result.hypotheses, result.scores)):
        texts[row, i] = self._pieces.decode_pieces(pieces).encode()
        scores[row, i] = score
    return texts, scores

  def _translate_ids(self, inputs):
    """int32 rows ending with EOS (0-padded) -> ids int32 [rows, T] (each ending with EOS,
    0-padded; T >= the longest source + decode_extra_length), scores float32 [rows]."""
    sources = [[self._pieces.id_to_piece(i) for i in row if i != 0][:-1] for row in inputs]
    results = self._translator.translate_batch(
        sources, max_decoding_length=self.max_output_length(sources), **self._search)
    outputs = [[self._pieces.piece_to_id(p) for p in result.hypotheses[0]] + [_EOS]
               for result in results]
    width = max([len(s) + 1 + self.decoding["decode_extra_length"] for s in sources] +
                [len(ids) for ids in outputs])
    ids = np.zeros([len(outputs), width], np.int32)
    for row, output in enumerate(outputs):
      ids[row, :len(output)] = output
    return {"ids": ids, "scores": np.array([r.scores[0] for r in results], np.float32)}

  def _score(self, sources, targets):
    """log P(target | source) float32 [rows] (EOS included) and target pieces int32 [rows]."""
    results = self._translator.score_batch(self._encode(sources), self._encode(targets),
                                           **self._budget)
    return {"scores": np.array([sum(r.log_probs) for r in results], np.float32),
            "lengths": np.array([len(r.log_probs) for r in results], np.int32)}


def signature_defs(table):
  """{name: tensorflow.SignatureDef} describing a table of the form of `SIGNATURES` (dims -1:
  any size)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tensorflow.core.protobuf import meta_graph_pb2  # pylint: disable=import-outside-toplevel
  defs = {}
  for key, (inputs, outputs) in table.items():
    signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
    for field, tensors in ((signature.inputs, inputs), (signature.outputs, outputs)):
      for tensor, (dtype, rank) in tensors.items():
        info = field[tensor]
        info.name = f"{key}_{tensor}:0"
        info.dtype = tf.as_dtype(dtype).as_datatype_enum
        for _ in range(rank):
          info.tensor_shape.dim.add(size=-1)
    defs[key] = signature
  return defs
