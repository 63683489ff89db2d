"""A LiteRT export (`export --format=tflite`: model.tflite, sentencepiece.model,
decoding.json) served behind the same REST and gRPC API as a SavedModel (`LiteRtServable`).

It runs `litert_translator.LiteRtTranslator` (the search inside model.tflite) and serves the
SavedModel's signatures that a LiteRT export holds (`SERVED`), with the same inputs, outputs
and checks (`servable.Servable.row_tokens`):

  serving_default: sentences -> translations, scores (the beam_search signature);
  translate_ids: inputs int32 [batch, len] (ending with EOS) -> ids [batch, T], scores (T =
    the longest source + decode_extra_length);
  translate_nbest: sentences -> translations, scores [batch, n_best] (the nbest signature).

translate_prefix and score are not in the export: a request for one gets INVALID_ARGUMENT
(HTTP 400) naming the signatures served. Beam size, alpha, decode_extra_length and n_best
are the export's (decoding.json). Batches are sorted by length and decoded in chunks of at
most the server's max_batch_tokens source tokens; each decoding thread has its own
interpreter with `config.serving.intra_op_threads` threads.
"""

import numpy as np

from t2t_repro import errors
from t2t_repro.config import serving as serving_config
from t2t_repro.serving import batcher, rest
from t2t_repro.serving import ct2_servable
from t2t_repro.serving import servable as servable_lib
from t2t_repro.serving.litert_translator import LiteRtTranslator

SERVED = ("serving_default", "translate_ids", "translate_nbest")


class LiteRtServable(servable_lib.Servable):
  """A loaded LiteRT export version.

  Args:
    name: the model name of the API's URLs.
    version: its version (int).
    path: the version's folder (model.tflite, sentencepiece.model, decoding.json).
    options: `config.BatchingOptions` (max_batch_tokens: source tokens per decoded chunk;
      num_batch_threads: the split of the cores into interpreter threads), or None: the
      defaults.

  Raises:
    errors.DataError: the folder is not a loadable LiteRT export of this project, or
      ai-edge-litert is not installed.
  """

  def __init__(self, name, version, path, options=None):  # pylint: disable=super-init-not-called
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    options = options or batcher.BatchingOptions()
    self.name, self.version, self.path = name, version, path
    self._tf = tf
    try:
      self._translator = LiteRtTranslator(
          path, num_threads=serving_config.intra_op_threads(options.num_batch_threads),
          batch_tokens=options.max_batch_tokens)
    except (ImportError, errors.DataError) as e:
      raise errors.DataError(f"`model_base_path` {e}") from None
    self.decoding = self._translator.decoding
    self._pieces = self._translator.pieces
    limit = self.decoding["max_input_length"]
    self.limits = {"max_input_length": limit,
                   "max_positions": limit + self.decoding["decode_extra_length"]}
    # Every signature of the SavedModel is known, so that those not served get a clear 400.
    self.signatures = {
        key: servable_lib.Signature({n: (tf.as_dtype(d), r) for n, (d, r) in inputs.items()},
                                    outputs)
        for key, (inputs, outputs) in ct2_servable.SIGNATURES.items()}

  def signature_defs(self):
    """{name: tensorflow.SignatureDef} of the signatures served (`SERVED`)."""
    return ct2_servable.signature_defs({key: ct2_servable.SIGNATURES[key] for key in SERVED})

  def row_tokens(self, signature_name, columns):
    """`Servable.row_tokens`, after refusing a signature not in the export.

    Raises:
      rest.ApiError: INVALID_ARGUMENT for a signature not in `SERVED`, or `Servable.row_tokens`'s.
    """
    if signature_name not in SERVED:
      raise rest.ApiError("INVALID_ARGUMENT", f"signature {signature_name} is not in a LiteRT "
                          f"export (model.tflite serves {', '.join(SERVED)}); serve the "
                          "SavedModel or CTranslate2 export for it")
    return super().row_tokens(signature_name, columns)

  def run(self, signature_name, columns):
    """Calls a signature on a batch (in a decoding thread): {output: numpy array [rows, ...]}
    (strings as bytes), as `Servable.run`."""
    if signature_name == "translate_ids":
      return self._translate_ids(columns["inputs"])
    nbest = signature_name == "translate_nbest"
    hypotheses = self._translator.nbest(columns["sentences"], "nbest" if nbest else "beam_search")
    texts = np.array([[text.encode() for _, text in row] for row in hypotheses], dtype=object)
    texts = texts.reshape([len(hypotheses), -1])
    scores = np.array([[score for score, _ in row] for row in hypotheses], np.float32)
    scores = scores.reshape([len(hypotheses), -1])
    return {"translations": texts, "scores": scores} if nbest else {
        "translations": texts[:, 0], "scores": scores[:, 0]}

  def _translate_ids(self, inputs):
    """int32 rows ending with EOS (0-padded) -> ids int32 [rows, T] (0-padded; T = the
    longest source + decode_extra_length), scores float32 [rows]."""
    limit, eos = self.limits["max_input_length"], self._pieces.eos_id()
    pieces = [[i for i in row if i != 0][:-1] for row in inputs]  # each ends with one EOS
    sources = [np.array(ids[:limit - 1] + [eos], np.int32) for ids in pieces]
    outputs = self._translator.decode(sources)
    width = max(len(s) for s in sources) + self.decoding["decode_extra_length"]
    ids = np.zeros([len(sources), width], np.int32)
    for row, (out_ids, _) in enumerate(outputs):
      ids[row, :out_ids.shape[1]] = out_ids[0, :width]
    return {"ids": ids, "scores": np.array([s[0] for _, s in outputs], np.float32)}
