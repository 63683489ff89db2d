"""Problems: named parallel-text data sources (tensor2tensor style).

A `Problem` names a language pair, a default BPE vocabulary size and, per
split, the files that hold its text. `get_problem(name, data_dir)` binds it to
a data directory; `problem.corpus(split)` streams the validated pairs (training
text of any size) and `problem.text_pairs(split)` reads a small split into memory.

* translate_ende_wmt14: train = TFDS `wmt14_translate/de-en` (or the local
  plain-text `wmt14/train.en-de.{en,de}`), dev = newstest2013, test =
  newstest2014 full (3003 lines); 37000 pieces.
* translate_enfr_wmt14: the same with French (TFDS `wmt14_translate/fr-en`,
  local `wmt14/train.en-fr.{en,fr}`); 32000 pieces.
* translate_ende_wmt_news: train = newstest2008-2012 + 2015-2018 (24,241
  pairs), dev = newstest2013, test = newstest2014 full; 8000 pieces.
* translate_ende_multi30k: Multi30k task 1 train / val / test_2016_flickr,
  plus the splits test_2016_flickr, test_2017_flickr, test_2017_mscoco and
  test_2018_flickr; 8000 pieces.
* parallel_text: the files given as train_src/train_tgt, dev_src/... ; 8000.

Local layout under the data dir (the same as the repository's shared/data):
`wmt14/`, `wmt_news_other_years/`, `multi30k/` (see docs/DATA.md). The data dir
is `data_dir` or else the environment variable `T2T_DATA_DIR`; there is no
other default. Any split of any problem can be pointed at other files with
`{split}_src=... , {split}_tgt=...` (that is all `parallel_text` has).

Sources: Vaswani et al. 2017 §5.1 (WMT14 En-De 37000 shared BPE, En-Fr 32000
word-pieces); tensor2tensor `translate_ende.py` / `translate_enfr.py` (dev
newstest2013, test newstest2014); Elliott et al. 2016 (Multi30k).
"""

import dataclasses
import glob
import hashlib
import os
from collections.abc import Mapping

from t2t_repro import errors
from t2t_repro.data import text_files
from t2t_repro.errors import MissingDataError

DATA_DIR_ENV = "T2T_DATA_DIR"
TFDS_SUBDIR = "tfds"


@dataclasses.dataclass(frozen=True)
class Problem:
  """A named parallel-text data source.

  Attributes:
    name: registry name, e.g. "translate_ende_wmt_news".
    source_lang, target_lang: language codes ("en", "de", ...).
    vocab_size_default: size of the joint BPE vocabulary [pieces].
    files: split -> tuple of (source, target) paths; relative paths are under
      `data_dir`.
    description: one line for --help and stats.
    data_dir: the local data directory (None: not given and T2T_DATA_DIR unset).
    tfds_name: TFDS config that holds the training text ("wmt14_translate/de-en"),
      read when the local train files are absent.
    downloadable: whether `python -m t2t_repro.download NAME` fetches it.
    overridden: splits whose files the caller gave explicitly.
  """

  name: str
  source_lang: str
  target_lang: str
  vocab_size_default: int
  files: Mapping
  description: str = ""
  data_dir: str | None = None
  tfds_name: str | None = None
  downloadable: bool = False
  overridden: tuple = ()

  @property
  def splits(self):
    """Names of the splits this problem has, e.g. ("train", "dev", "test")."""
    return tuple(self.files)

  @property
  def vocab_key(self):
    """Cache key of this problem's vocabulary: the name, plus a hash of the
    training files when the caller chose them (so two parallel_text corpora
    never share a cached vocabulary)."""
    if "train" not in self.overridden:
      return self.name
    paths = "\n".join(os.path.abspath(p) for pair in self.files["train"] for p in pair)
    return f"{self.name}-{hashlib.sha1(paths.encode()).hexdigest()[:8]}"

  @property
  def tfds_dir(self):
    """TFDS data_dir for `tfds_name`: `{data_dir}/tfds`."""
    return os.path.join(self._require_data_dir("train"), TFDS_SUBDIR)

  def file_pairs(self, split):
    """The (source, target) file paths of `split`, data-dir-relative paths resolved.

    Raises:
      MissingDataError: unknown split, or a relative path and no data dir.
    """
    if split not in self.files:
      raise MissingDataError(
          f"{self.name} has no split {split!r}; its splits are: {', '.join(self.splits) or 'none'} "
          f"(give files for a split with `{split}_src` and `{split}_tgt`)")
    return [tuple(self._resolve(p, split) for p in pair) for pair in self.files[split]]

  def source_file(self, split):
    """Path of the source-language file of a one-file split (e.g. newstest2014 for "test")."""
    return self._single_pair(split)[0]

  def target_file(self, split):
    """Path of the target-language file (the reference) of a one-file split."""
    return self._single_pair(split)[1]

  def has_local_files(self, split):
    """True when every file of `split` exists locally."""
    return all(os.path.exists(p) for pair in self.file_pairs(split) for p in pair)

  def text_pairs(self, split):
    """Reads and validates the sentence pairs of a small split into memory.

    For dev and test sets (BLEU needs the lines as lists) and small corpora;
    training text is streamed with `corpus` instead. For the WMT14 problems,
    "train" is read from the local plain-text files when they exist and
    otherwise from the prepared TFDS `tfds_name`.

    Args:
      split: "train", "dev", "test" or another name in `splits`.

    Returns:
      text_files.ParallelText: stripped (source, target) str pairs in file
      order, and the count of pairs dropped because a side was empty (0 for
      TFDS text).

    Raises:
      MissingDataError: unknown split, no data dir, or a file is missing (the
        message names the path and how to get the data).
      text_files.LineCountError, errors.EncodingError: see text_files.
    """
    pairs = self.file_pairs(split)
    if self._tfds_needed(split):
      tfds_corpus = self._tfds_corpus()
      return text_files.ParallelText(list(tfds_corpus.iter_pairs()), 0, tfds_corpus.origin)
    return text_files.read_parallel_files(pairs)

  def corpus(self, split, cache_dir=None, chunk_lines=None):
    """The pairs of `split` as a stream, for training text of any size.

    Local files are validated once (streaming) and indexed; the record is kept
    under `cache_dir` (None: not kept), see `corpus.ParallelCorpus`. For the
    WMT14 problems without local training files, the prepared TFDS
    `tfds_name` is read (`corpus.TfdsCorpus`).

    Args:
      split: a name in `splits`.
      cache_dir: folder of the validation records (e.g. the vocabulary cache).
      chunk_lines: lines per chunk of the index (None: `corpus.CHUNK_LINES`).

    Returns:
      corpus.ParallelCorpus or corpus.TfdsCorpus.

    Raises:
      as `text_pairs`.
    """
    from t2t_repro.data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
    if self._tfds_needed(split):
      return self._tfds_corpus()
    if chunk_lines is None:
      chunk_lines = corpus_lib.CHUNK_LINES
    return corpus_lib.ParallelCorpus(self.file_pairs(split), cache_dir, chunk_lines)

  def tfds_builder(self):
    """`tfds.builder(tfds_name, data_dir=tfds_dir)` (nothing is downloaded here)."""
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
    return tfds.builder(self.tfds_name, data_dir=self.tfds_dir)

  def _tfds_needed(self, split):
    """True when `split` is read from TFDS; raises MissingDataError when its files are
    missing and TFDS is no alternative."""
    missing = [p for pair in self.file_pairs(split) for p in pair if not os.path.exists(p)]
    if not missing:
      return False
    if split == "train" and self.tfds_name and "train" not in self.overridden:
      if not self.tfds_builder().is_prepared():
        raise MissingDataError(
            f"{self.name}: no training text: {_list_paths(missing)}, and TFDS "
            f"{self.tfds_name} is not prepared under {self.tfds_dir}. {self._how_to_get('train')}")
      return True
    raise MissingDataError(f"{self.name}: split {split!r} needs {_list_paths(missing)}. "
                           f"{self._how_to_get(split)}")

  def _tfds_corpus(self):
    # TensorFlow is imported only when a corpus is read: the commands check their flags
    # (problem names included) before it.
    from t2t_repro.data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
    return corpus_lib.TfdsCorpus(self.tfds_builder(), self.source_lang, self.target_lang,
                                 f"TFDS {self.tfds_name} train ({self.tfds_dir})")

  def _require_data_dir(self, split):
    if self.data_dir is None:
      raise MissingDataError(
          f"{self.name}: no data directory: pass `data_dir` or set ${DATA_DIR_ENV} (split {split!r} "
          f"reads {_list_paths([p for pair in self.files[split] for p in pair])} under it)")
    return self.data_dir

  def _resolve(self, path, split):
    return path if os.path.isabs(path) else os.path.join(self._require_data_dir(split), path)

  def _single_pair(self, split):
    pairs = self.file_pairs(split)
    if len(pairs) != 1:
      raise ValueError(f"{self.name}: split {split!r} has {len(pairs)} file pairs, not one; "
                       "use file_pairs() or text_pairs()")
    return pairs[0]

  def _how_to_get(self, split):
    if split in self.overridden or not self.downloadable:
      return f"Give existing files with --{split}_src and --{split}_tgt."
    command = f"python -m t2t_repro.download {self.name} --data_dir={self.data_dir}"
    if split == "train" and self.tfds_name:
      return (f"Get it with `{command}` (prepares TFDS {self.tfds_name}; needs internet), or put "
              "plain-text training files at the paths above.")
    return f"Get it with `{command}` (needs internet)."


def _list_paths(paths, shown=3):
  more = f" (and {len(paths) - shown} more files)" if len(paths) > shown else ""
  return ", ".join(paths[:shown]) + more


def _wmt14(target_lang, vocab_size, description):
  pair = f"en-{target_lang}"
  return Problem(
      name=f"translate_en{target_lang}_wmt14", source_lang="en", target_lang=target_lang,
      vocab_size_default=vocab_size, description=description, downloadable=True,
      tfds_name=f"wmt14_translate/{target_lang}-en",
      files={"train": ((f"wmt14/train.{pair}.en", f"wmt14/train.{pair}.{target_lang}"),),
             "dev": (("wmt14/newstest2013.en", f"wmt14/newstest2013.{target_lang}"),),
             "test": ((f"wmt14/newstest2014-full.{pair}.en",
                       f"wmt14/newstest2014-full.{pair}.{target_lang}"),)})


WMT_NEWS_TRAIN_YEARS = (2008, 2009, 2010, 2011, 2012, 2015, 2016, 2017, 2018)
MULTI30K_TESTS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")


def _multi30k_pair(name):
  return ((f"multi30k/{name}.en", f"multi30k/{name}.de"),)


_REGISTRY = {p.name: p for p in (
    _wmt14("de", 37000, "WMT14 English-German (paper §5.1: 4.5M pairs, 37000 shared BPE)"),
    _wmt14("fr", 32000, "WMT14 English-French (paper §5.1: 36M pairs, 32000 word-pieces)"),
    Problem(
        name="translate_ende_wmt_news", source_lang="en", target_lang="de", vocab_size_default=8000,
        description="WMT news test sets 2008-2012 and 2015-2018 as a small offline En-De training "
                    "set (24k pairs); dev newstest2013, test newstest2014 (full)",
        downloadable=True,
        files={"train": tuple((f"wmt_news_other_years/newstest{y}.en",
                               f"wmt_news_other_years/newstest{y}.de") for y in WMT_NEWS_TRAIN_YEARS),
               "dev": (("wmt14/newstest2013.en", "wmt14/newstest2013.de"),),
               "test": (("wmt14/newstest2014-full.en-de.en", "wmt14/newstest2014-full.en-de.de"),)}),
    Problem(
        name="translate_ende_multi30k", source_lang="en", target_lang="de", vocab_size_default=8000,
        description="Multi30k task 1 English-German (29k image-caption pairs); "
                    "test = test_2016_flickr",
        downloadable=True,
        files={"train": _multi30k_pair("train"), "dev": _multi30k_pair("val"),
               "test": _multi30k_pair("test_2016_flickr"),
               **{name: _multi30k_pair(name) for name in MULTI30K_TESTS}}),
    Problem(
        name="parallel_text", source_lang="src", target_lang="tgt", vocab_size_default=8000,
        description="any aligned files given with --{train,dev,test}_{src,tgt}", files={}),
)}


def list_problems():
  """Registered problem names, sorted."""
  return sorted(_REGISTRY)


def get_problem(name, data_dir=None, **files):
  """Looks up a problem and binds it to a data dir and, optionally, other files.

  Args:
    name: a name from `list_problems()`.
    data_dir: the local data directory; None reads $T2T_DATA_DIR (it may stay
      unset when every needed file is given by an absolute path).
    **files: `{split}_src=path, {split}_tgt=path` pairs that replace (or add) a
      split's files; a path may be a comma-separated list and may hold glob
      patterns (sorted), so several aligned shards form one split (the i-th
      source file pairs with the i-th target file). None values are ignored
      (so absl flags can be passed through). For "parallel_text" also `source_lang=`, `target_lang=`.

  Returns:
    Problem.

  Raises:
    ValueError: unknown problem, an unknown keyword, a split given only one
      of its two files, or different numbers of source and target files.
  """
  if name not in _REGISTRY:
    raise ValueError(errors.unknown("problem", name, list_problems(),
                                    "registered problems are"))
  problem = _REGISTRY[name]
  given = {k: v for k, v in files.items() if v is not None}
  langs = {k: given.pop(k) for k in ("source_lang", "target_lang") if k in given}
  if langs and name != "parallel_text":
    raise ValueError(f"{name}: source_lang/target_lang can only be set for parallel_text")
  overrides = _split_overrides(given)
  return dataclasses.replace(
      problem, data_dir=data_dir or os.environ.get(DATA_DIR_ENV) or None,
      files={**problem.files, **overrides}, overridden=tuple(overrides), **langs)


def _split_overrides(given):
  """{"dev_src": a, "dev_tgt": b} -> {"dev": ((a, b),)}; checks names and completeness."""
  bad = sorted(k for k in given if not k.endswith(("_src", "_tgt")))
  if bad:
    raise ValueError(f"get_problem: unknown keyword {bad[0]!r}; give files as SPLIT_src / SPLIT_tgt")
  overrides = {}
  for split in sorted({k[:-4] for k in given}):
    src, tgt = given.get(f"{split}_src"), given.get(f"{split}_tgt")
    if src is None or tgt is None:
      raise errors.UsageError(f"split {split!r}: give both `{split}_src` and `{split}_tgt` "
                              f"(got only `{split}_{'src' if tgt is None else 'tgt'}`)")
    sources, targets = _expand_files(src), _expand_files(tgt)
    if len(sources) != len(targets):
      raise errors.UsageError(
          f"split {split!r}: `{split}_src`={src} names {len(sources)} files but `{split}_tgt`="
          f"{tgt} names {len(targets)}; give aligned shards in the same order")
    overrides[split] = tuple(zip(sources, targets))
  return overrides


def _expand_files(spec):
  """"a.en,shard-*.en" -> absolute paths: comma-separated items, each glob expanded (sorted); an
  item that matches nothing is kept as is (so the missing file is reported by name)."""
  paths = []
  for item in spec.split(","):
    paths += sorted(glob.glob(item)) if glob.has_magic(item) and glob.glob(item) else [item]
  return [os.path.abspath(p) for p in paths]

