"""Joint source+target BPE vocabulary (sentencepiece) and the in-graph tokenizer.

`learn_vocab` trains one sentencepiece BPE model on source and target text
together (the paper's shared vocabulary, §5.1). Ids follow the project
convention: pad = 0, eos = 1, unk = 2, no bos. `get_or_learn_vocab` caches the
model as `{cache_dir}/vocab.{problem}.{size}.model`, by default in the user's cache folder
(`default_cache_dir`): a data folder is read-only input, never written. `Tokenizer` wraps
`tensorflow_text.SentencepieceTokenizer`, so tokenizing runs inside tf.data,
tf.function and an exported SavedModel.

Normalization: the `identity` rule and `remove_extra_whitespaces=False`, so
`decode(encode(x)) == x` for every line x of the training text (lines are
already stripped by text_files); with `lowercase=True` a rule that maps every
character to its Unicode lowercase (`lowercase_rules`, what Moses `lowercase.perl`
does), so `decode(encode(x)) == x.lower()`. The one exception: a character that never
occurs in the training text (coverage 1.0 keeps every one that does) becomes
unk (id 2) because byte fallback is off, and decodes as " ⁇ " (sentencepiece's
unk surface). Example: the German quotes "›" "‹" of one newstest2014 line are
absent from the WMT news training years.
"""

import io
import os
import tempfile

import numpy as np
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from absl import logging

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.constants import EOS_ID, PAD_ID, UNK_ID
from t2t_repro.data import text_files

# sentencepiece's default `max_sentence_length` [bytes]: longer sentences are not learned from.
MAX_SENTENCE_BYTES = 4192


def lowercase_rules():
  """sentencepiece normalization rules (TSV, hex code points) mapping every character
  whose Unicode lowercase differs to that lowercase, as Python's `str.lower` and Perl's
  `lc` (Moses `lowercase.perl`) do (1,433 rules with Python 3.11's Unicode tables); learning
  compiles them into the model's charsmap, so every later encode applies them."""
  rules = []
  for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:
      continue
    lower = chr(cp).lower()
    if lower != chr(cp):
      rules.append(f"{cp:X}\t{' '.join(f'{ord(c):X}' for c in lower)}\n")
  return "".join(rules)


def learn_vocab(texts, vocab_size, model_prefix, *, lowercase=False, character_coverage=1.0,
                input_sentence_size=10_000_000, seed=1, num_threads=16):
  """Learns a sentencepiece BPE model and writes `{model_prefix}.model`.

  Args:
    texts: iterable of str sentences, source and target mixed (for files use
      `text_files.iter_lines(paths)`). Empty strings are skipped.
    vocab_size: number of pieces, including pad/eos/unk.
    model_prefix: output path without ".model"; its folder is created.
    lowercase: lowercase every text the model tokenizes (`lowercase_rules`).
    character_coverage: share of characters kept as pieces (1.0: all).
    input_sentence_size: at most this many sentences are used, sampled at
      random (reservoir) when the corpus is larger (WMT14 En-Fr: 72M lines).
    seed: seed of that sampling.
    num_threads: training threads. The learned model depends on this number
      (not on the cores), so it is fixed by default (16, sentencepiece's own
      default): the same text gives the same vocabulary on every machine.

  Returns:
    Path of the written model (`{model_prefix}.model`), written atomically.

  Raises:
    DataError: no text, or every sentence is longer than
      `MAX_SENTENCE_BYTES` (sentencepiece skips longer ones).
    ValueError: sentencepiece cannot learn `vocab_size` pieces from `texts`
      (too little text).
  """
  count, too_long = [0], [0]

  def sentences():
    for text in texts:
      if len(text.encode("utf-8")) > MAX_SENTENCE_BYTES:
        too_long[0] += 1
      elif text:
        count[0] += 1
        yield text

  model = io.BytesIO()
  spm.set_random_generator_seed(seed)
  try:
    _train_bpe(sentences(), model, vocab_size, lowercase,
               character_coverage=character_coverage, input_sentence_size=input_sentence_size,
               num_threads=num_threads)
  except RuntimeError as e:
    if not count[0]:
      raise errors.DataError(
          "no sentence to learn the BPE vocabulary from: "
          + (f"all {too_long[0]} sentences are longer than {MAX_SENTENCE_BYTES} bytes "
             "(sentencepiece's limit)" if too_long[0] else "the text is empty")) from None
    raise ValueError(f"sentencepiece could not learn a {vocab_size}-piece BPE vocabulary from "
                     f"{count[0]} sentences: {e}") from None
  if too_long[0]:
    logging.warning("BPE learning skipped %d sentences longer than %d bytes", too_long[0],
                    MAX_SENTENCE_BYTES)
  path = f"{model_prefix}.model"
  fileio.write_atomic(path, model.getvalue())
  logging.info("learned a %d-piece BPE vocabulary from %d sentences", vocab_size, count[0])
  return path


def _train_bpe(sentences, model_writer, vocab_size, lowercase, **options):
  """sentencepiece BPE training with the project's ids, no byte fallback, and the
  identity (or lowercasing) normalization; raises sentencepiece's RuntimeError."""
  with tempfile.NamedTemporaryFile("w", suffix=".tsv", encoding="utf-8") as rules:
    rules.write(lowercase_rules() if lowercase else "")
    rules.flush()
    normalization = ({"normalization_rule_tsv": rules.name} if lowercase
                     else {"normalization_rule_name": "identity"})
    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences, model_writer=model_writer, vocab_size=vocab_size,
        model_type="bpe", pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
        remove_extra_whitespaces=False, byte_fallback=False, shuffle_input_sentence=True,
        max_sentence_length=MAX_SENTENCE_BYTES, minloglevel=1, **normalization, **options)


CACHE_ENV = "XDG_CACHE_HOME"


def default_cache_dir():
  """The cache of vocabularies and corpus validation records when no model dir or
  `vocab_dir` is given: `$XDG_CACHE_HOME/t2t_repro`, else `~/.cache/t2t_repro` (the XDG
  base directory convention, as pip and Hugging Face use it). Created by the first write."""
  return os.path.join(os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache"),
                      "t2t_repro")


def vocab_path(problem, vocab_size, cache_dir, lowercase=False):
  """`{cache_dir}/vocab.{problem.vocab_key}.{vocab_size}.model` (`...{vocab_size}.lc.model`
  for a lowercasing one)."""
  suffix = ".lc" if lowercase else ""
  return os.path.join(cache_dir, f"vocab.{problem.vocab_key}.{vocab_size}{suffix}.model")


def sample_sentences(corpus, max_sentences, seed=1):
  """Sentences for BPE learning: both sides of at most max_sentences // 2 line pairs.

  One streaming pass; memory holds one chunk, never the corpus. When the
  corpus has at most max_sentences // 2 line pairs, every pair is used in file
  order (so the learned model is the one of `learn_vocab` on all of the
  text). Otherwise max_sentences // 2 line pairs are drawn uniformly at random
  without replacement, reproducibly for a seed: chunk by chunk, the number
  taken follows the hypergeometric law of the lines left (selection sampling,
  Knuth TAOCP vol. 2, 3.4.2, Algorithm S, by blocks).

  Args:
    corpus: a corpus.ParallelCorpus or corpus.TfdsCorpus.
    max_sentences: at most this many sentences are yielded.
    seed: sampling seed.

  Yields:
    str: source, target, source, target, ... of the chosen pairs (stripped;
    pairs with an empty side skipped), in file order.
  """
  wanted, left = max_sentences // 2, len(corpus)
  rng = np.random.default_rng(seed)
  for sources, targets in corpus.iter_chunk_lines():
    if left > wanted:
      take = rng.hypergeometric(len(sources), left - len(sources), wanted) if wanted else 0
      rows = np.sort(rng.choice(len(sources), take, replace=False))
    else:
      take, rows = len(sources), range(len(sources))
    left -= len(sources)
    wanted -= take
    for i in rows:
      pair = text_files.strip_pair(sources[i], targets[i])
      if pair:
        yield from pair


def get_or_learn_vocab(problem, vocab_size=None, cache_dir=None, input_sentence_size=10_000_000,
                       seed=1, lowercase=False):
  """Returns the cached vocabulary of `problem`, learning it first if needed.

  Learned on both sides of a streamed sample (`sample_sentences`) of
  `problem.corpus("train", cache_dir)`; the corpus validation record is kept
  in `cache_dir` too, so training does not validate the text again.

  Args:
    problem: a `problems.Problem`.
    vocab_size: pieces; None means `problem.vocab_size_default`.
    cache_dir: folder of the cache; None means `default_cache_dir()` (never the data
      folder).
    input_sentence_size: at most this many sentences are learned from.
    seed: sampling seed.
    lowercase: learn (or find) a lowercasing model (see `learn_vocab`).

  Returns:
    Path of the sentencepiece model.

  Raises:
    DataError: as `learn_vocab`, the message prefixed with the training files.
    the errors of `Problem.corpus` and `learn_vocab`.
  """
  vocab_size = vocab_size or problem.vocab_size_default
  cache_dir = cache_dir or default_cache_dir()
  path = vocab_path(problem, vocab_size, cache_dir, lowercase)
  if os.path.exists(path):
    return path
  corpus = problem.corpus("train", cache_dir)
  try:
    return learn_vocab(sample_sentences(corpus, input_sentence_size, seed), vocab_size,
                       path[:-len(".model")], lowercase=lowercase,
                       input_sentence_size=input_sentence_size, seed=seed)
  except errors.DataError as e:
    raise errors.DataError(f"{corpus.origin}: {e}") from None


class Tokenizer(tf.Module):
  """In-graph sentencepiece tokenizer with the project's ids (pad 0, eos 1, unk 2).

  A `tf.Module`, so it can be attached to a module that is exported as a
  SavedModel; usable in eager code, tf.function and tf.data.
  """

  def __init__(self, model_proto, name=None, nbest_size=0, alpha=1.0):
    """Args:
      model_proto: bytes of a sentencepiece model learned by `learn_vocab`.
      nbest_size, alpha: subword sampling of `encode` (tf_text's SentencepieceTokenizer):
        nbest_size 0 or 1 is deterministic (the default); for this project's BPE models
        nbest_size -1 with alpha in (0, 1) is BPE-dropout (Provilkov et al. 2020: each
        merge is skipped with probability alpha). Use `sampling` to get one.

    Raises:
      ValueError: the model's special ids are not pad 0, eos 1, unk 2, no bos.
    """
    super().__init__(name=name)
    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    ids = (processor.pad_id(), processor.eos_id(), processor.unk_id(), processor.bos_id())
    if ids != (PAD_ID, EOS_ID, UNK_ID, -1):
      raise ValueError(f"sentencepiece model has pad/eos/unk/bos ids {ids}; this project needs "
                       f"({PAD_ID}, {EOS_ID}, {UNK_ID}, -1): learn it with vocab.learn_vocab")
    self._model_proto = model_proto
    self._vocab_size = processor.get_piece_size()
    self._lowercase = processor.normalize("A").endswith("a")
    self._sp = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32, add_eos=True,
                                              nbest_size=nbest_size, alpha=alpha)

  def sampling(self, nbest_size, alpha):
    """A tokenizer of the same model whose `encode` samples a segmentation per call (subword
    regularization, Kudo 2018; BPE-dropout for BPE models, Provilkov et al. 2020); the
    draws are not seeded (sentencepiece's own generator). `decode` is unchanged."""
    return Tokenizer(self._model_proto, nbest_size=nbest_size, alpha=alpha)

  @classmethod
  def from_file(cls, path):
    """Loads a `.model` file (local path or any tf.io.gfile URL)."""
    with tf.io.gfile.GFile(path, "rb") as f:
      return cls(f.read())

  @property
  def vocab_size(self):
    """Number of pieces [int], the model's embedding rows."""
    return self._vocab_size

  @property
  def lowercase(self):
    """Whether the model lowercases the text it tokenizes (learned with `lowercase=True`)."""
    return self._lowercase

  @property
  def model_proto(self):
    """The serialized sentencepiece model (bytes), e.g. to write `vocab.model` in a model dir."""
    return self._model_proto

  def save(self, path):
    """Writes the model (atomically) to `path`, e.g. `{model_dir}/vocab.model`."""
    fileio.write_atomic(path, self._model_proto)

  def encode(self, texts):
    """Tokenizes text; every sequence ends with EOS (1).

    Args:
      texts: tf.string scalar or [batch] (or a str / list of str).

    Returns:
      scalar input: int32 Tensor [len]; [batch] input: int32 RaggedTensor
      [batch, (len)].
    """
    return self._sp.tokenize(texts)

  def decode(self, ids):
    """Turns ids back into text, stopping at the first EOS and skipping pad (0).

    Args:
      ids: int32 [len] or [batch, len] Tensor, or RaggedTensor [batch, (len)].

    Returns:
      tf.string scalar for [len], [batch] for [batch, len].
    """
    if isinstance(ids, tf.RaggedTensor):
      ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(ids, tf.int32)
    is_eos = tf.cast(tf.equal(ids, EOS_ID), tf.int32)
    before_eos = tf.equal(tf.cumsum(is_eos, axis=-1), 0)
    return self._sp.detokenize(tf.ragged.boolean_mask(ids, before_eos & tf.not_equal(ids, PAD_ID)))
