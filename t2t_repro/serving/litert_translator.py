"""Translating with a LiteRT export (`export --format=tflite`) without TensorFlow: the
`ai-edge-litert` interpreter, sentencepiece and numpy (`LiteRtTranslator`).

The version folder holds model.tflite (signatures beam_search, greedy, nbest:
`t2t_repro.serving.litert`), sentencepiece.model and decoding.json. Lines are stripped and
tokenized (sentencepiece ids + EOS, as the translate command's tokenizer), cut to the export's
max_input_length (EOS kept last, as `decoding.translator.Translator.bound_lengths`), sorted by
length and decoded in batches of at most decode_batch_tokens padded source tokens; the search
itself (beam search with the GNMT length penalty, or greedy) runs inside the model. A blank
line gives "" with score 0. Each thread that calls the translator gets its own interpreter
(an interpreter serves one call at a time).
"""

import json
import os
import threading

import numpy as np

from t2t_repro import errors
from t2t_repro.constants import EOS_ID, PAD_ID
from t2t_repro.model_dir import DECODING_FILE  # model_dir imports no TensorFlow

MODEL_FILE = "model.tflite"


def require_litert():
  """The LiteRT Interpreter class.

  Raises:
    ImportError: ai-edge-litert is not installed, with the extra that installs it.
  """
  try:
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ImportError("the LiteRT export needs the litert extra: pip install "
                      "'t2t_repro[litert]' (ai-edge-litert)") from None
  return Interpreter


def sorted_batches(lengths, batch_tokens):
  """Indices into `lengths` sorted by length (ties in input order), cut into batches of at
  most `batch_tokens` padded tokens (rows x the batch's longest; a longer row alone)."""
  batches, batch, longest = [], [], 0
  for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
    if batch and (len(batch) + 1) * max(longest, lengths[index]) > batch_tokens:
      batches.append(batch)
      batch, longest = [], 0
    batch.append(index)
    longest = max(longest, lengths[index])
  return batches + [batch] if batch else batches


class LiteRtTranslator:
  """A loaded LiteRT export.

  Args:
    path: the version folder (model.tflite, sentencepiece.model, decoding.json).
    num_threads: threads of each interpreter (None: LiteRT's default).
    batch_tokens: padded source tokens per batch (None: the export's decode_batch_tokens).

  Attributes:
    decoding: decoding.json ({beam_size, alpha, decode_extra_length, n_best,
      max_input_length, decode_batch_tokens, eos_id}).

  Raises:
    errors.DataError: the folder is not a LiteRT export of this project.
    ImportError: ai-edge-litert is not installed.
  """

  def __init__(self, path, num_threads=None, batch_tokens=None):
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel
    self.path, self._num_threads = path, num_threads
    self._interpreter_class = require_litert()
    self._local = threading.local()
    try:
      with open(os.path.join(path, DECODING_FILE), encoding="utf-8") as f:
        self.decoding = json.load(f)
      self.pieces = spm.SentencePieceProcessor(model_file=os.path.join(path, "sentencepiece.model"))
      self.signatures = self._runners()[0].get_signature_list()
      self.batch_tokens = batch_tokens or self.decoding["decode_batch_tokens"]
    except (OSError, ValueError, RuntimeError) as e:
      raise errors.DataError(f"{path}: not a loadable LiteRT export of the export command's "
                             f"`format`=tflite ({e})") from None

  def _runners(self):
    """(this thread's interpreter, {signature: its runner})."""
    if not hasattr(self._local, "interpreter"):
      self._local.interpreter = self._interpreter_class(
          model_path=os.path.join(self.path, MODEL_FILE), num_threads=self._num_threads)
      self._local.runners = {}
    return self._local.interpreter, self._local.runners

  def search(self, inputs, signature="beam_search"):
    """Decodes one padded batch.

    Args:
      inputs: int32 [batch, src_len], 0-padded, each row ending with EOS, at most
        max_input_length tokens.
      signature: "beam_search", "greedy" or "nbest".

    Returns:
      (ids int32 [batch, n, T], scores float32 [batch, n]): n = 1, or the export's n_best
      for "nbest"; best first, 0-padded after EOS; scores log P(Y|X) / lp(Y).
    """
    interpreter, runners = self._runners()
    if signature not in runners:
      runners[signature] = interpreter.get_signature_runner(signature)
    outputs = runners[signature](inputs=np.asarray(inputs, np.int32))
    return outputs["ids"], outputs["scores"]

  def encode(self, lines):
    """Stripped, non-blank lines -> int32 id arrays ending with EOS, cut to max_input_length."""
    limit = self.decoding["max_input_length"]
    return [np.array(ids[:limit - 1] + [EOS_ID], np.int32)
            for ids in self.pieces.encode([line.strip() for line in lines])]

  def text(self, ids):
    """Output ids [T] (0-padded) -> the text of the ids before the first EOS."""
    ids = [int(i) for i in ids]
    ids = ids[:ids.index(EOS_ID)] if EOS_ID in ids else [i for i in ids if i != PAD_ID]
    return self.pieces.decode(ids).replace("\r", " ").replace("\n", " ")

  def decode(self, ids, signature="beam_search"):
    """Decodes id arrays in sorted batches of at most `batch_tokens` padded tokens.

    Args:
      ids: list of int32 arrays, each ending with EOS (`encode`).
      signature: "beam_search", "greedy" or "nbest".

    Returns:
      list (the order of `ids`) of (ids int32 [n, T_batch], scores float32 [n]), best first
      (`search`).
    """
    results = [None] * len(ids)
    for batch in sorted_batches([len(x) for x in ids], self.batch_tokens):
      inputs = np.zeros([len(batch), max(len(ids[j]) for j in batch)], np.int32)
      for row, j in enumerate(batch):
        inputs[row, :len(ids[j])] = ids[j]
      out_ids, scores = self.search(inputs, signature)
      for row, j in enumerate(batch):
        results[j] = (out_ids[row], scores[row])
    return results

  def nbest(self, lines, signature="beam_search"):
    """Translates lines (`decode`).

    Args:
      lines: list of str.
      signature: "beam_search", "greedy" or "nbest".

    Returns:
      list (input order) of lists of (score, text), best first; [(0.0, "")] for a blank
      line (with "nbest": n_best pairs of it).
    """
    lines = [line.strip() for line in lines]
    todo = [i for i, line in enumerate(lines) if line]
    width = self.decoding["n_best"] if signature == "nbest" else 1
    results = [[(0.0, "")] * width for _ in lines]
    for i, (out_ids, scores) in zip(todo, self.decode(self.encode([lines[i] for i in todo]),
                                                      signature)):
      results[i] = [(float(score), self.text(row)) for row, score in zip(out_ids, scores)]
    return results

  def translate(self, lines, greedy=False):
    """list[str] -> list[str]: the best translation of each line (beam search, or greedy)."""
    return [hyps[0][1] for hyps in self.nbest(lines, "greedy" if greedy else "beam_search")]
