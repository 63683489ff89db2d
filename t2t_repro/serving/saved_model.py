"""A model dir as a SavedModel that translates raw text (`export_model`; the command
`python -m t2t_repro.export --model_dir=DIR --export_dir=OUT/1`; the CTranslate2
conversion beside it: `t2t_repro.serving.ctranslate2`).

The SavedModel (tf.saved_model.save of a `ServingModule`, a tf.Module around the
project's one decoding path, `t2t_repro.decoding.translator.Translator.search`) has these
signatures (`SIGNATURES`), each equal to the command that does the same:

  serving_default: sentences tf.string [batch] -> translations tf.string [batch],
    scores float32 [batch] (log P(Y|X) / lp(Y)). Tokenization (tf_text
    SentencepieceTokenizer holding the model's sentencepiece proto), beam search
    and detokenization all run in the graph. Sentences are stripped; a blank one
    gives "" with score 0, as `python -m t2t_repro.translate` does.
  translate_ids: inputs int32 [batch, src_len] (0-padded, each ending with EOS)
    -> ids int32 [batch, T] (best hypothesis, 0-padded after EOS; T = the longest
    source + the extra decode length), scores float32 [batch].
  translate_nbest: sentences tf.string [batch] -> translations tf.string [batch, n],
    scores float32 [batch, n], best first (`translate --n_best=n`; n = --n_best at
    export, default the beam size).
  translate_prefix: sentences, prefixes tf.string [batch] -> translations, scores
    [batch]: each translation starts with its prefix ("": none), as `translate
    --target_prefix_file`.
  score: sources, targets tf.string [batch] -> scores float32 [batch] (log P(target |
    source), EOS included), lengths int32 [batch] (target pieces), as `t2t-score`.

The decoding signatures sort their batch by source length and decode it in chunks of at most
`decode_batch_tokens` source tokens (padding included) inside the graph, then restore the
input order: a client may send one large unsorted batch. The budget is the module's int32
variable `decode_batch_tokens` (the export's --decode_batch_tokens), which the server sets to
its own max_batch_tokens when it loads the model: one budget for batching and chunking.

Beam size, alpha and the extra decode length (--beam_size, --alpha,
--decode_extra_length, resolved by `DecodeConfig.resolve`: flags, else hparams.json) are
fixed at export time. A source longer than max_positions - decode_extra_length tokens is
cut to that length (EOS kept last), as the translate command does. The maximum output length is per sentence
(source length + extra), so a sentence's translation does not depend on the rest
of its batch and equals the translate CLI's. The module's variables `max_input_length` and
`max_positions` (int32 scalars) hold the two length limits. Loading needs only TensorFlow and
`import tensorflow_text` (registers the sentencepiece ops). Serving: docs/SERVING.md.
"""

import dataclasses
import time

import tensorflow as tf
from absl import logging

from t2t_repro import logs
from t2t_repro.constants import EOS_ID, PAD_ID
from t2t_repro.data import batching, text_files
from t2t_repro.config import decode as decode_config
from t2t_repro.decoding import scoring
from t2t_repro.decoding import translator as translator_lib
from t2t_repro.model.attention import non_pad_lengths
from t2t_repro.model_dir import ModelDir
from t2t_repro.serving import check_export_dir


class _Untracked:
  """Holds an object without making it part of the SavedModel's object graph."""

  def __init__(self, value):
    self.value = value


class ServingModule(tf.Module):
  """Text -> text translation module to export (see the module docstring).

  Args:
    translator: a `decoding.translator.Translator` (model with restored weights, its
      tokenizer, a `DecodeConfig`; `config.decode_batch_tokens` is the initial value of the
      `decode_batch_tokens` variable, the chunk budget of `_search`).
    n_best: hypotheses per sentence of the `translate_nbest` signature (the beam is
      widened to it if narrower); the other signatures return the best one.
  """

  def __init__(self, translator, n_best=1, name=None):
    super().__init__(name=name)
    config = dataclasses.replace(translator.config, n_best=1)
    wide = dataclasses.replace(config, beam_size=max(config.beam_size, n_best), n_best=n_best)
    # Only the weights are saved, not the Keras model object (tf.saved_model.save would try
    # to trace the Keras model's own call signatures).
    self._translator = _Untracked(translator_lib.Translator(
        translator.model, translator.tokenizer, config, translator.constraint))
    self._nbest_translator = _Untracked(translator_lib.Translator(
        translator.model, translator.tokenizer, wide, translator.constraint))
    self.model_weights = [w.value for w in translator.model.weights]  # the tf.Variables
    self.tokenizer = translator.tokenizer
    # The length limits, for a server to refuse a too-long sentence instead of cutting it
    # (t2t_repro.serving.servable): int32 scalars [tokens, EOS included].
    self.max_input_length = tf.Variable(self._translator.value.max_input_length(), dtype=tf.int32,
                                        trainable=False, name="max_input_length")
    self.max_positions = tf.Variable(translator.model.max_positions, dtype=tf.int32,
                                     trainable=False, name="max_positions")
    # The chunk budget of `_search` [source tokens, padding included]; a server sets it.
    self.decode_batch_tokens = tf.Variable(config.decode_batch_tokens, dtype=tf.int32,
                                           trainable=False, name="decode_batch_tokens")
    self._created = _Untracked(time.monotonic())

  def _tracing(self, method):
    """Logs that the signature of `method` is being traced: a signature's Python body runs
    only then (once, inside `tf.saved_model.save`), so export's longest stage is not silent."""
    name = next(name for name, m in SIGNATURES.items() if m == method)
    logging.info("export: tracing the %s signature (%s)", name,
                 logs.hms(time.monotonic() - self._created.value))

  def _bounded(self, inputs):
    """inputs cut to the translator's `max_input_length()`, EOS kept last (as
    `Translator.bound_lengths` does for the translate command), so no request can exceed
    the position table or exhaust memory."""
    limit = self._translator.value.max_input_length()
    kept = tf.minimum(non_pad_lengths(inputs), limit)
    inputs = inputs[:, :limit]
    return tf.where(tf.range(tf.shape(inputs)[1])[None, :] == kept[:, None] - 1, EOS_ID, inputs)

  def _search(self, inputs, prefixes=None, nbest=False):
    """Beam search (or the translator's sampling) over a batch in token-budget chunks.

    The batch is sorted by source length and cut into chunks of at most `decode_batch_tokens`
    (the variable) source tokens, padding included (a longer sentence is a chunk of its own), as
    `python -m t2t_repro.translate` batches; each chunk is decoded with its own padding
    width, and the outputs are put back in input order, padded to
    max(source length) + decode_extra_length columns, so they do not depend on the
    chunking (each sentence is decoded independently of its batch). Sources longer than
    `max_input_length()` are cut first (`_bounded`).

    Args:
      inputs: int32 [batch, src_len], 0-padded, each row ending with EOS.
      prefixes: None, or int32 [batch, P] forced target prefixes (`decoding.prefix`).
      nbest: decode with the n-best translator (`translate_nbest`).

    Returns:
      (ids int32 [batch, n, src_len' + decode_extra_length] (src_len' = the longest
       source after the cut, or prefix), scores float32 [batch, n]).
    """
    translator = (self._nbest_translator if nbest else self._translator).value
    config = translator.config
    n = config.outputs_per_sentence
    inputs = self._bounded(inputs)
    lengths = non_pad_lengths(inputs)
    longest = lengths if prefixes is None else tf.maximum(lengths, non_pad_lengths(prefixes))
    width = tf.reduce_max(tf.concat([longest, [0]], 0)) + config.decode_extra_length
    order, sizes = batching.length_sorted_chunks(lengths, self.decode_batch_tokens.read_value())
    starts = tf.cumsum(sizes, exclusive=True)
    sorted_inputs, sorted_lengths = tf.gather(inputs, order), tf.gather(lengths, order)
    sorted_prefixes = None if prefixes is None else tf.gather(prefixes, order)

    def body(b, ids_array, scores_array):
      start, size = starts[b], sizes[b]
      chunk = sorted_inputs[start:start + size, :tf.reduce_max(sorted_lengths[start:start + size])]
      # A call of the translator's one tf.function per (config, prefixed): translate and
      # translate_ids share one trace of the beam search instead of building it twice.
      ids, scores = translator.decode_batch(
          chunk, None if sorted_prefixes is None else sorted_prefixes[start:start + size],
          tf.cast(order[start:start + size], tf.int64))  # a sample's line: its request row
      ids = tf.pad(ids, [[0, 0], [0, 0], [0, width - tf.shape(ids)[2]]])
      return b + 1, ids_array.write(b, ids), scores_array.write(b, scores)

    arrays = (tf.TensorArray(tf.int32, size=tf.size(sizes), infer_shape=False,
                             element_shape=tf.TensorShape([None, n, None])),
              tf.TensorArray(tf.float32, size=tf.size(sizes), infer_shape=False,
                             element_shape=tf.TensorShape([None, n])))
    _, ids_array, scores_array = tf.while_loop(
        lambda b, *unused: b < tf.size(sizes), body, (tf.constant(0),) + arrays)
    restore = tf.argsort(order)  # sorted position of each input row
    ids = tf.reshape(ids_array.concat(), [-1, n, width])
    return tf.gather(ids, restore), tf.gather(tf.reshape(scores_array.concat(), [-1, n]), restore)

  def _encode(self, sentences):
    """tf.string [batch] -> (stripped sentences, int32 [batch, len] ids ending in EOS, 0-padded)."""
    sentences = text_files.strip_in_graph(sentences)
    return sentences, tf.cast(self.tokenizer.encode(sentences).to_tensor(default_value=PAD_ID),
                              tf.int32)

  def _texts(self, ids, blank):
    """int32 [batch, n, T] -> tf.string [batch, n] ("" where `blank` [batch])."""
    shape = tf.shape(ids)
    texts = tf.reshape(self.tokenizer.decode(tf.reshape(ids, [-1, shape[2]])), shape[:2])
    return tf.where(blank[:, None], "", texts)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
               autograph=False)
  def translate(self, sentences):
    """sentences tf.string [batch] -> {"translations": tf.string [batch], "scores": float32 [batch]}."""
    self._tracing("translate")
    sentences, inputs = self._encode(sentences)
    ids, scores = self._search(inputs)
    blank = tf.equal(sentences, "")
    return {"translations": self._texts(ids, blank)[:, 0],
            "scores": tf.where(blank, 0.0, scores[:, 0])}

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="inputs")],
               autograph=False)
  def translate_ids(self, inputs):
    """inputs int32 [batch, src_len] -> {"ids": int32 [batch, T], "scores": float32 [batch]}."""
    self._tracing("translate_ids")
    ids, scores = self._search(inputs)
    return {"ids": ids[:, 0], "scores": scores[:, 0]}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
               autograph=False)
  def translate_nbest(self, sentences):
    """sentences tf.string [batch] -> {"translations": tf.string [batch, n_best],
    "scores": float32 [batch, n_best]}, best first (`translate --n_best`)."""
    self._tracing("translate_nbest")
    sentences, inputs = self._encode(sentences)
    ids, scores = self._search(inputs, nbest=True)
    blank = tf.equal(sentences, "")
    finite = tf.math.is_finite(scores)  # fewer hypotheses than n_best: "" and -inf
    return {"translations": tf.where(finite, self._texts(ids, blank), ""),
            "scores": tf.where(blank[:, None], 0.0, scores)}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences"),
                                tf.TensorSpec([None], tf.string, name="prefixes")], autograph=False)
  def translate_prefix(self, sentences, prefixes):
    """sentences, prefixes tf.string [batch] -> {"translations", "scores"} [batch]: each
    translation starts with its prefix ("" : none), as `translate --target_prefix_file`."""
    self._tracing("translate_prefix")
    sentences, inputs = self._encode(sentences)
    _, forced = self._encode(prefixes)
    forced = tf.where(tf.equal(forced, EOS_ID), PAD_ID, forced)[:, :-1]  # drop EOS
    forced = tf.pad(forced, [[0, 0], [0, 1]])  # at least one column
    ids, scores = self._search(inputs, prefixes=forced)
    blank = tf.equal(sentences, "")
    return {"translations": self._texts(ids, blank)[:, 0],
            "scores": tf.where(blank, 0.0, scores[:, 0])}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sources"),
                                tf.TensorSpec([None], tf.string, name="targets")], autograph=False)
  def score(self, sources, targets):
    """sources, targets tf.string [batch] -> {"scores": float32 [batch] log P(target |
    source), "lengths": int32 [batch] target pieces (EOS included)}, as `t2t-score`;
    a pair longer than max_positions fails the request (InvalidArgumentError)."""
    self._tracing("score")
    _, inputs = self._encode(sources)
    _, outputs = self._encode(targets)
    model = self._translator.value.model
    limit = model.max_positions
    check = tf.debugging.assert_less_equal(
        tf.maximum(tf.shape(inputs)[1], tf.shape(outputs)[1]), limit,
        message=f"a source or target is longer than max_positions={limit}")
    with tf.control_dependencies([check]):
      log_probs = scoring.piece_log_probs(model, inputs, outputs)
    return {"scores": tf.reduce_sum(log_probs, axis=1), "lengths": non_pad_lengths(outputs)}


# Signature name -> ServingModule method.
SIGNATURES = {"serving_default": "translate", "translate_ids": "translate_ids",
              "translate_nbest": "translate_nbest", "translate_prefix": "translate_prefix",
              "score": "score"}


def export_model(model_dir, export_dir, checkpoint_path=None, beam_size=None, alpha=None,
                 decode_extra_length=None, overwrite=False, decode_batch_tokens=None,
                 inference_dtype="float32", n_best=None):
  """Writes the SavedModel of a model dir.

  Args:
    model_dir: model directory (hparams.json, vocab.model, checkpoints).
    export_dir: output folder (TensorFlow Serving wants `.../<name>/<version>`).
    checkpoint_path: checkpoint prefix (default: latest of model_dir).
    beam_size, alpha, decode_extra_length: None means the hparams' values
      (`DecodeConfig.resolve`).
    overwrite: replace a non-empty export_dir. The SavedModel is built in a staging sibling
      folder and renamed (`ModelDir.write_dir`), so export_dir is absent, as it was, or
      complete, whenever the export stops.
    decode_batch_tokens: source tokens per chunk decoded at once in the graph (None: 4096).
    inference_dtype: "float32" or "bfloat16" (see `load_for_inference`).
    n_best: hypotheses per sentence of `translate_nbest` (None: the beam size).

  Returns:
    export_dir.

  Raises:
    errors.UsageError: export_dir is not empty and overwrite is False.
    the errors of `decoding.loading.load_for_inference`.

  Logs a line as each stage starts (loading, writing, tracing each signature: `_tracing`),
  so the minutes of an export on a CPU are not silent.
  """
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  check_export_dir(export_dir, overwrite)
  started = time.monotonic()
  logging.info("export: loading %s", checkpoint_path or model_dir)
  model, hparams, tokenizer = load_for_inference(model_dir, checkpoint_path, inference_dtype)
  config = decode_config.DecodeConfig.resolve(hparams, beam_size=beam_size, alpha=alpha,
                                               decode_extra_length=decode_extra_length,
                                               decode_batch_tokens=decode_batch_tokens)
  module = ServingModule(translator_lib.Translator(model, tokenizer, config),
                         n_best=n_best or config.beam_size)
  logging.info("export: tracing the signatures and writing the SavedModel to %s (%s)", export_dir,
               logs.hms(time.monotonic() - started))
  # The signatures are traced here, once each, inside the save (a trace made before it would
  # be made again: the save context is part of a tf.function's cache key; docs/BENCHMARKS.md
  # §10). Serving never differentiates, so the custom gradients (LayerNorm's, the loss's) are
  # not saved.
  ModelDir(export_dir).write_dir(lambda staging: tf.saved_model.save(
      module, staging.path, signatures={
          name: getattr(module, method) for name, method in SIGNATURES.items()},
      options=tf.saved_model.SaveOptions(experimental_custom_gradients=False)))
  return export_dir
