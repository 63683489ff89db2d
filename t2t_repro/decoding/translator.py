"""The one decoding path: `Translator` (text in, text out) with a `DecodeConfig`.

Everything that turns source text into model output goes through here: the training
loop's dev/test BLEU, `python -m t2t_repro.translate`, the exported SavedModel
(`t2t_repro.serving.saved_model`), the attention plots and the parser
(`t2t_repro.parsing.pipeline`).

Settings (Vaswani et al. 2017 §6.1: beam 4, alpha 0.6, input length + 50; §6.3
parsing: beam 21, alpha 0.3, input + 300) are resolved once, by `DecodeConfig.resolve`:
a value given (a command's flag, generated from `DecodeConfig`'s fields) wins, else the
model's hparams. One name per concept in every command: `beam_size`, `alpha`,
`decode_extra_length`, `decode_batch_tokens`, `n_best`.

`decode_batch_tokens` is the decoding batch's budget: padded source tokens per batch,
rows x padded source length [tokens] (the source's is the only length known; each row then
decodes beam_size hypotheses). Training's budget is the hparam `batch_tokens`, which counts
the longer of source and target per replica (`t2t_repro.data.batching`).

`Translator` strips every line, tokenizes, sorts the sentences by length and batches
them under `decode_batch_tokens` (`batching.length_sorted_batches`), runs beam search
(`t2t_repro.decoding.beam_search`) or, when the config samples, random sampling
(`t2t_repro.decoding.sampling`), restores the input order and detokenizes. A
blank line gives "" with score 0 and is not decoded. Each sentence is beam-searched
independently of its batch, so batching does not change any beam-search output; a
sample's draws depend on the seed, its line's index in the input and its index among
the samples (`sampling.sample_keys`), so neither does batching change any sample.
"""

import concurrent.futures
import contextlib
import itertools
import sys
import typing
import weakref

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from t2t_repro import errors
from t2t_repro.constants import EOS_ID, PAD_ID
from t2t_repro.data import batching
from t2t_repro.decoding import beam_search, loading, sampling
from t2t_repro.config.decode import DecodeConfig, check_positions
from t2t_repro.config.serving import batch_threads, intra_op_threads
from t2t_repro.decoding.prefix import TargetPrefix, max_output_lengths

TOKENIZE_CHUNK = 4096  # lines per tokenizer call
# model -> {(config, constraint, prefixed): tf.function of `Translator.search`}
_SEARCHES = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _to_stderr():
  with contextlib.redirect_stdout(sys.stderr):
    yield


class Hypothesis(typing.NamedTuple):
  """One output of `Translator.nbest(..., return_ids=True)`."""
  score: float            # log P(Y|X) / lp(Y) (beam search), as without return_ids
  text: str               # the detokenized output
  ids: np.ndarray         # int32 [len]: the output ids up to and including EOS (`until_eos`)
  source_ids: np.ndarray  # int32 [len]: the source ids it was decoded from (cut to
                          # max_input_length, EOS last), shared by the n-best of a line


class Translator:
  """Text -> text with one model: batch by length, beam search, input order, detokenize.

  Args:
    model: a `Transformer` with restored weights, or a `decoding.ensemble.Ensemble`.
    tokenizer: its `data.vocab.Tokenizer`.
    config: a `DecodeConfig`.
    constraint: None, or a beam-search constraint (`beam_search.search`), e.g.
      `t2t_repro.parsing.constraint.TreeConstraint`.
    num_batch_threads: batches decoded at the same time, each in its own thread (int >= 1;
      the server's setting of that name, `config.serving.batch_threads`); give each thread
      its share of the cores with `configure_threads` first. The outputs do not depend on it.
  """

  def __init__(self, model, tokenizer, config=DecodeConfig(), constraint=None,
               num_batch_threads=1):
    self.model = model
    self.tokenizer = tokenizer
    self.config = config
    self.constraint = constraint
    self.num_batch_threads = num_batch_threads
    self._ready = set()  # the configs whose search nbest called once
    self.model_dir = None  # the model dir it was loaded from (`from_model_dir`), or None

  @classmethod
  def from_model_dir(cls, model_dir, checkpoint_path=None, inference_dtype="float32",
                     num_batch_threads=1, **settings):
    """The translator of a trained model dir, text in, text out (fairseq's
    `from_pretrained(...).translate(...)`):

    >>> Translator.from_model_dir("runs/m", beam_size=5).translate(["A dog."])  # doctest: +SKIP

    Args:
      model_dir: a model dir (a run, its best/ or averaged/), `load_for_inference`.
      checkpoint_path: a checkpoint prefix; None: the latest.
      inference_dtype: "float32" or "bfloat16" (`load_for_inference`).
      num_batch_threads: batches decoded at the same time (see the class).
      **settings: `DecodeConfig` fields as values (beam_size=5, n_best=2, ...); the others
        are the model dir's: what `tune` chose (decoding.json), else its hparams
        (`DecodeConfig.resolve`).

    Raises:
      errors.UsageError: a setting out of range; the errors of `load_for_inference`.
    """
    model, hparams, tokenizer = loading.load_for_inference(model_dir, checkpoint_path,
                                                           inference_dtype)
    translator = cls(model, tokenizer, DecodeConfig.resolve(hparams, **settings),
                     num_batch_threads=num_batch_threads)
    translator.model_dir = model_dir
    return translator

  def search(self, inputs, prefixes=None, line_ids=None):
    """Graph-building decoding of one padded batch (for tf.functions, e.g. the export):
    beam search, or sampling when the config samples (`DecodeConfig.sampling`).

    Args:
      inputs: int32 [batch, src_len], 0-padded, each row ending with EOS.
      prefixes: None, or int32 [batch, P] target prefixes, 0-padded, no EOS (a row of
        zeros: none), forced by a `prefix.TargetPrefix` constraint.
      line_ids: sampling: int64 [batch], each sentence's index in the whole input, which
        with the seed fixes its draws (None: 0, 1, ...); beam search ignores it.

    Returns:
      (ids int32 [batch, n, T], scores float32 [batch, n]), n = the config's
      `outputs_per_sentence`; `beam_search.search`, `sampling.sample`.

    The maximum output length of a sentence is max(source length, prefix length) +
    decode_extra_length (`prefix.max_output_lengths`): a prefix is never cut.

    Raises:
      tf.errors.InvalidArgumentError (at run time): an output could exceed max_positions.
    """
    cfg = self.config
    lengths = max_output_lengths(inputs, prefixes, cfg.decode_extra_length)
    check = tf.debugging.assert_less_equal(
        lengths, tf.constant(self.model.max_positions, tf.int32),
        message=f"source or prefix length + decode_extra_length exceeds max_positions="
                f"{self.model.max_positions}")
    with tf.control_dependencies([check]):
      lengths = tf.identity(lengths)
    constraint = self.constraint
    if prefixes is not None:
      if constraint is not None:
        raise ValueError("a target prefix cannot be combined with another decoding constraint")
      constraint = TargetPrefix(prefixes, self.model.vocab_size)
    if cfg.sampling:
      return sampling.sample(self.model, inputs, lengths, cfg.alpha, n_samples=cfg.n_samples,
                             top_k=cfg.sampling_topk or 0, top_p=cfg.sampling_topp or 1.0,
                             temperature=(1.0 if cfg.sampling_temperature is None
                                          else cfg.sampling_temperature),
                             seed=cfg.sampling_seed, eos_id=EOS_ID, constraint=constraint,
                             line_ids=line_ids)
    return beam_search.search(self.model, inputs, lengths, cfg.alpha, beam_size=cfg.beam_size,
                              n_best=cfg.n_best, eos_id=EOS_ID, constraint=constraint)

  def decode_batch(self, inputs, prefixes=None, line_ids=None):
    """`search` of one padded batch, run as a tf.function of fixed signature: one trace per
    (model, config, constraint, with or without prefixes), shared by every Translator of
    that model (the training loop makes one per dev evaluation), whatever the batch shape.

    Args:
      inputs: int32 [batch, src_len] (numpy or tensor), 0-padded, rows ending with EOS.
      prefixes: None, or int32 [batch, P >= 1] forced target prefixes (see `search`).
      line_ids: None (0, 1, ...), or int [batch]: each row's index in the input (`search`).

    Returns:
      (ids int32 [batch, n, T], scores float32 [batch, n]); beam search: best first,
      see `beam_search.search`; sampling: in the order drawn.
    """
    per_model = _SEARCHES.setdefault(self.model, {})
    key = (self.config, self.constraint, prefixes is not None)
    if key not in per_model:
      per_model[key] = _compiled_search(self.model, self.config, self.constraint, key[2])
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    line_ids = tf.range(tf.shape(inputs)[0], dtype=tf.int64) if line_ids is None else line_ids
    args = [inputs, tf.convert_to_tensor(line_ids, tf.int64)]
    return per_model[key](*args, *([] if prefixes is None else
                                   [tf.convert_to_tensor(prefixes, tf.int32)]))

  def encode(self, lines):
    """list[str] (already stripped, none blank) -> list of int32 numpy id arrays ending with EOS."""
    ids = []
    for start in range(0, len(lines), TOKENIZE_CHUNK):
      ragged = self.tokenizer.encode(tf.constant(lines[start:start + TOKENIZE_CHUNK], tf.string))
      ids.extend(np.asarray(row, np.int32) for row in ragged.to_list())
    return ids

  def max_input_length(self):
    """The longest source decoded [tokens, EOS included] (`DecodeConfig.max_input_length`).

    Raises:
      ValueError: the configured length does not fit the position table.
    """
    cfg = self.config
    if cfg.max_input_length is None:
      return self.model.max_positions - cfg.decode_extra_length
    check_positions(self.model.max_positions, cfg.max_input_length, cfg.decode_extra_length,
                    where="`max_input_length`")
    return cfg.max_input_length

  def bound_lengths(self, ids, line_numbers):
    """Cuts sources longer than `max_input_length()` to its first ids + EOS, with a warning.

    Args:
      ids: list of int32 arrays, each ending in EOS.
      line_numbers: 1-based input line number of each entry of `ids` (for the warning).

    Returns:
      the list with over-long entries cut (EOS kept last).
    """
    limit = self.max_input_length()
    bounded = []
    for number, row in zip(line_numbers, ids):
      if len(row) > limit:
        logging.warning("input line %d has %d tokens; translating its first %d "
                        "(max_input_length)", number, len(row), limit - 1)
        row = np.concatenate([row[:limit - 1], row[-1:]])
      bounded.append(row)
    return bounded

  def check_prefixes(self, ids, forced, line_numbers):
    """Warns for each prefix longer than its line's source length + decode_extra_length
    (decoding extends that line's limit to the prefix + decode_extra_length).

    Args:
      ids: list of int32 source id arrays, EOS included (`bound_lengths`).
      forced: list of int32 prefix id arrays, no EOS, one per entry of ids.
      line_numbers: 1-based input line number of each entry (for the messages).

    Raises:
      errors.DataError: a prefix + decode_extra_length exceeds the model's max_positions.
    """
    extra, limit = self.config.decode_extra_length, self.model.max_positions
    for number, source, prefix in zip(line_numbers, ids, forced):
      if len(prefix) + extra > limit:
        raise errors.DataError(
            f"input line {number}: its target prefix of {len(prefix)} pieces + "
            f"decode_extra_length {extra} exceeds the model's max_positions={limit}")
      if len(prefix) > len(source) + extra:
        logging.warning("input line %d: its target prefix has %d pieces, more than the maximum "
                        "output length %d (source length + decode_extra_length); decoding up "
                        "to %d (prefix + decode_extra_length)", number, len(prefix),
                        len(source) + extra, len(prefix) + extra)

  def sorted_batches(self, ids):
    """The batches of `ids` (lists of source ids): lists of indices into ids, sorted by
    length, each within decode_batch_tokens padded source tokens, shortest first."""
    return batching.length_sorted_batches([len(x) for x in ids], self.config.decode_batch_tokens)

  def padded_batches(self, ids):
    """Yields (indices into ids, int32 [rows, width] 0-padded inputs), shortest first."""
    for batch in self.sorted_batches(ids):
      yield batch, batching.pad_rows([ids[j] for j in batch])

  def nbest(self, lines, progress=False, return_ids=False, prefixes=None, first_line=0):
    """Decodes sentences and returns their n-best lists (or samples).

    Args:
      lines: list of str source sentences (stripped here); blank ones are not decoded.
      progress: a Keras Progbar (sentences) on stderr.
      return_ids: return `Hypothesis` tuples, with each hypothesis's token ids and its
        source's (for alignments and scoring without encoding the lines again).
      prefixes: None, or one str per line: the start every output of that line is forced
        to ("" or blank: none); its pieces are part of the output and its score.
      first_line: the index of lines[0] in the whole input (a stream's later batches):
        sampling draws line i's samples from (seed, first_line + i), and warnings and
        errors name it line first_line + i + 1.

    Returns:
      list (one per line, input order) of `config.n_best` (score, text) pairs, best
      first, score = log P(Y|X) / lp(Y); a blank line gives [(0.0, "")]. With
      return_ids, `Hypothesis` tuples; a blank line gives [Hypothesis(0.0, "", [], [EOS])].

    Raises:
      ValueError: `config.max_input_length` + decode_extra_length exceeds the model's
        max_positions (`check_positions`); errors.DataError: so does a prefix
        (`check_prefixes`).
    """
    n_best = self.config.outputs_per_sentence
    lines = [line.strip() for line in lines]
    results = [[Hypothesis(0.0, "", np.zeros([0], np.int32), np.array([EOS_ID], np.int32))
                 if return_ids else (0.0, "")] for _ in lines]
    todo = [i for i, line in enumerate(lines) if line]
    ids = self.bound_lengths(self.encode([lines[i] for i in todo]) if todo else [],
                             [first_line + i + 1 for i in todo])
    forced = None
    if prefixes is not None:
      if len(prefixes) != len(lines):
        raise ValueError(f"{len(prefixes)} target prefixes for {len(lines)} lines")
      forced = [p[:-1] for p in self.encode([prefixes[i].strip() for i in todo])] if todo else []
      self.check_prefixes(ids, forced, [first_line + i + 1 for i in todo])
    bar = keras.utils.Progbar(len(lines), unit_name="sentence") if progress else None
    done = len(lines) - len(todo)
    batches = self.sorted_batches(ids)

    def decode(batch):  # padded here, in the decoding thread: one batch's copy at a time
      return self.decode_batch(
          batching.pad_rows([ids[j] for j in batch]),
          None if forced is None else batching.pad_rows([forced[j] for j in batch]),
          np.array([first_line + todo[j] for j in batch], np.int64))

    threads = min(self.num_batch_threads, len(batches))
    with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:  # threads start on use
      # A config's first batch alone: the first call readies its search function once for
      # all threads (concurrent first calls took 1.5 s longer on `small`).
      alone = 0 if self.config in self._ready else 1
      self._ready.add(self.config)
      outputs = map(decode, batches) if threads <= 1 else itertools.chain(
          [decode(item) for item in batches[:alone]], pool.map(decode, batches[alone:]))
      for batch, (out_ids, scores) in zip(batches, outputs):
        texts = self.tokenizer.decode(tf.reshape(out_ids, [len(batch) * n_best, -1])).numpy()
        texts = np.reshape(texts, [len(batch), n_best])
        scores, out_ids = scores.numpy(), out_ids.numpy()
        for row, j in enumerate(batch):
          results[todo[j]] = [
              Hypothesis(float(scores[row, r]), _one_line(texts[row, r]),
                         until_eos(out_ids[row, r]), ids[j])
              if return_ids else (float(scores[row, r]), _one_line(texts[row, r]))
              for r in range(n_best)]
        done += len(batch)
        if bar is not None:
          with _to_stderr():
            bar.update(done)
    if bar is not None and not ids:
      with _to_stderr():
        bar.update(len(lines))
    return results

  def translate(self, lines, progress=False):
    """list[str] -> list[str], the best output per line in input order ("" for blank lines)."""
    return [hyps[0][1] for hyps in self.nbest(lines, progress)]


def configure_threads(num_batch_threads):
  """Gives each of `num_batch_threads` decoding threads its share of the cores as TensorFlow's
  intra-op threads (`config.serving.intra_op_threads`; 0: one thread per core, at most
  `config.serving.MAX_AUTO_BATCH_THREADS`) and returns the number of decoding threads
  (`config.serving.batch_threads`). One thread per core decodes faster than one thread with
  every core: TensorFlow's thread pool costs more than it gives on decoding's small matrices
  (docs/SERVER_LOAD.md). Call it before TensorFlow runs anything (the setting is
  read once, when TensorFlow's runtime starts).

  Raises:
    RuntimeError: TensorFlow's runtime already started with another setting.
  """
  tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads(num_batch_threads))
  return batch_threads(num_batch_threads)


def _compiled_search(model, config, constraint, prefixed):
  """`Translator.search` as a tf.function with a fixed input signature (inputs, line_ids,
  and the prefixes when `prefixed`), traced here (its concrete function): one trace per
  config by design, so TensorFlow's warning about functions retraced by their calls does
  not fire when `tune` decodes a grid. It holds the model weakly, so the `_SEARCHES` entry
  does not keep its own key alive."""
  model_ref = weakref.ref(model)

  def run(inputs, line_ids, prefixes=None):
    return Translator(model_ref(), None, config, constraint).search(inputs, prefixes, line_ids)

  ids = tf.TensorSpec([None, None], tf.int32)
  return tf.function(run, input_signature=[ids, tf.TensorSpec([None], tf.int64)] + [ids] * prefixed,
                     autograph=False).get_concrete_function()


def until_eos(ids):
  """int32 numpy [T] 0-padded output ids -> the ids up to and including the first EOS
  (all non-pad ids if there is none: a hypothesis cut at its maximum length)."""
  eos = np.flatnonzero(ids == EOS_ID)
  return ids[:eos[0] + 1] if eos.size else ids[ids != PAD_ID]


def _one_line(text):
  """Decoded bytes -> one line of text."""
  return text.decode("utf-8").replace("\r", " ").replace("\n", " ")


def format_nbest(nbest):
  """n-best lists (of `Translator.nbest`, with or without ids) -> lines
  "i<TAB>score<TAB>text" (i the 0-based input line, score %.4f)."""
  return [f"{i}\t{hyp[0]:.4f}\t{hyp[1]}" for i, hyps in enumerate(nbest) for hyp in hyps]
