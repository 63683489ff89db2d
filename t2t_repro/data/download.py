r"""Fetch a problem's public data into the local layout (`download`; the command
`python -m t2t_repro.download PROBLEM --data_dir=DIR`, `t2t-download`).

Sources (the URLs sacrebleu uses for the WMT test sets):
* WMT newstest sets: the official SGML inside statmt.org's test tarballs
  (newstest2008-2013 `test.tgz` of each year, newstest2014 `test-full.tgz`,
  2015-2018 `test.tgz`), turned into one segment per line like Moses
  `input-from-sgm.perl`: runs of ASCII whitespace become one space, stripped
  at both ends; U+00A0 and everything else are kept; no entity decoding. The
  newstest2014 SGML is also kept under `wmt14/sgm/`.
* Multi30k task 1 (translate_ende_multi30k: train, val and the four test sets): the
  gzipped raw files of github.com/multi30k/dataset (`data/task1/raw/*.gz`), gunzipped
  into `{data_dir}/multi30k/`, where the problem reads them.
* WMT14 training text (translate_en{de,fr}_wmt14): TFDS `wmt14_translate`
  `download_and_prepare()` into `{data_dir}/tfds` (TFDS's own sources; skip
  with --notfds).

Fetching needs the internet; offline, `--source_url_base` replaces "scheme://" of every
URL, so a mirror holds
`{base}/{host}/{path}` (e.g. `file:///m/statmt.org/wmt14/test-full.tgz`).
Files that already exist are kept unless --force. After fetching, every local
split is read back through `Problem.text_pairs` (line counts, UTF-8).
"""

import dataclasses
import gzip
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request

from absl import logging

from t2t_repro import errors
from t2t_repro import fileio
from t2t_repro.data import problems

_STATMT = "https://statmt.org"
_DATA_STATMT = "https://data.statmt.org"
_MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"


@dataclasses.dataclass(frozen=True)
class Source:
  """One local file and where it comes from.

  Attributes:
    url: the file or archive to fetch.
    member: path inside a .tgz archive; None when `url` is the file itself.
    dest: path under the data dir.
    form: "sgm" (segments -> lines), "gz" (gunzip) or "raw" (bytes as they are).
  """

  url: str
  member: str | None
  dest: str
  form: str


def _newstest_sources(url, members, dest_prefix, langs):
  """SGML members (one per language) of a WMT tarball -> `{dest_prefix}.{lang}` text files."""
  return [Source(url, member, f"{dest_prefix}.{lang}", "sgm") for member, lang in zip(members, langs)]


def _older_newstest(year, langs):
  """newstest2008-2013: multi-parallel `newstest{year}-src.{lang}.sgm` in wmt{yy}/test.tgz."""
  folder = "" if year == 2011 else "test/"
  return [f"{folder}newstest{year}-src.{lang}.sgm" for lang in langs]


def _newstest2013(target_lang):
  langs = ("en", target_lang)
  return _newstest_sources(f"{_STATMT}/wmt13/test.tgz", _older_newstest(2013, langs),
                           "wmt14/newstest2013", langs)


def _newstest2014(target_lang):
  """newstest2014 full (3003 lines) as text plus its SGML under wmt14/sgm/."""
  url = f"{_STATMT}/wmt14/test-full.tgz"
  members = [f"test-full/newstest2014-{target_lang}en-src.en.sgm",
             f"test-full/newstest2014-{target_lang}en-ref.{target_lang}.sgm"]
  return (_newstest_sources(url, members, f"wmt14/newstest2014-full.en-{target_lang}",
                            ("en", target_lang))
          + [Source(url, m, f"wmt14/sgm/{os.path.basename(m)}", "raw") for m in members])


def _news_year(year):
  """One training year of translate_ende_wmt_news."""
  dest = f"wmt_news_other_years/newstest{year}"
  if year <= 2012:
    url = f"{_STATMT}/wmt{year % 100:02d}/test.tgz"
    return _newstest_sources(url, _older_newstest(year, ("en", "de")), dest, ("en", "de"))
  url = (f"{_STATMT}/wmt15/test.tgz" if year == 2015
         else f"{_DATA_STATMT}/wmt{year % 100}/translation-task/test.tgz")
  members = [f"test/newstest{year}-ende-src.en.sgm", f"test/newstest{year}-ende-ref.de.sgm"]
  return _newstest_sources(url, members, dest, ("en", "de"))


def _multi30k():
  names = ("train", "val") + problems.MULTI30K_TESTS
  return [Source(f"{_MULTI30K}/{name}.{lang}.gz", None, f"multi30k/{name}.{lang}", "gz")
          for name in names for lang in ("en", "de")]


SOURCES = {
    "translate_ende_wmt14": _newstest2013("de") + _newstest2014("de"),
    "translate_enfr_wmt14": _newstest2013("fr") + _newstest2014("fr"),
    "translate_ende_wmt_news": (
        [s for year in problems.WMT_NEWS_TRAIN_YEARS for s in _news_year(year)]
        + _newstest2013("de") + _newstest2014("de")),
    "translate_ende_multi30k": _multi30k(),
}


def mirror_url(url, source_url_base):
  """`{source_url_base}/{host}/{path}` for `url` (unchanged when the base is empty)."""
  if not source_url_base:
    return url
  parsed = urllib.parse.urlparse(url)
  return f"{source_url_base.rstrip('/')}/{parsed.netloc}{parsed.path}"


def sgm_to_lines(sgml):
  """Segments of a WMT SGML file, one str per <seg>, as Moses `input-from-sgm.perl` prints them."""
  return [re.sub(r"[ \t\n\r\f\v]+", " ", m.group(1)).strip(" ")
          for m in re.finditer(r"<seg[^>]*>(.*?)</seg>", sgml, re.DOTALL | re.IGNORECASE)]


def _convert(data, source):
  """Bytes of the fetched file or member -> bytes of the local file."""
  if source.form == "gz":
    return gzip.decompress(data)
  if source.form == "raw":
    return data
  try:
    sgml = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise errors.EncodingError(
        f"{source.url}:{source.member}: invalid UTF-8 at byte {e.start}") from None
  return "".join(line + "\n" for line in sgm_to_lines(sgml)).encode("utf-8")


def _fetch(url, folder):
  """Downloads `url` (http(s) or file://) into `folder` once; returns the local path."""
  path = os.path.join(folder, re.sub(r"[^A-Za-z0-9._-]", "_", url))
  if not os.path.exists(path):
    logging.info("fetching %s", url)
    try:
      with urllib.request.urlopen(url) as response, open(path + ".part", "wb") as out:
        shutil.copyfileobj(response, out)
    except urllib.error.URLError as e:
      raise urllib.error.URLError(
          f"could not fetch {url} ({e.reason}): downloading needs the internet, or a mirror "
          "given by `source_url_base`") from None
    os.replace(path + ".part", path)
  return path


def _read(local_path, member):
  if member is None:
    with open(local_path, "rb") as f:
      return f.read()
  with tarfile.open(local_path, "r:*") as archive:
    try:
      return archive.extractfile(member).read()
    except KeyError:
      raise errors.MissingDataError(f"{local_path}: archive has no member {member!r}") from None


def download(problem_name, data_dir, source_url_base=None, tfds=True, force=False):
  """Fetches the public files of a problem into `data_dir` and checks them.

  Args:
    problem_name: a problem with entries in `SOURCES` (or a TFDS train set).
    data_dir: destination; created if needed.
    source_url_base: mirror base URL replacing "scheme://" (see `mirror_url`).
    tfds: also prepare the TFDS training set of the WMT14 problems.
    force: fetch again files that exist.

  Returns:
    list of the local paths written.

  Raises:
    ValueError: the problem has nothing to download (parallel_text).
    urllib.error.URLError, errors.DataError: fetching or checking failed.
  """
  problem = problems.get_problem(problem_name, data_dir)
  if problem_name not in SOURCES:
    raise ValueError(f"{problem_name} has no public download; its files are given by the user")
  written = []
  os.makedirs(data_dir, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=data_dir, prefix="download.") as folder:
    for source in SOURCES[problem_name]:
      dest = os.path.join(data_dir, source.dest)
      if os.path.exists(dest) and not force:
        continue
      local = _fetch(mirror_url(source.url, source_url_base), folder)
      fileio.write_atomic(dest, _convert(_read(local, source.member), source))
      written.append(dest)
  if tfds and problem.tfds_name:
    logging.info("preparing TFDS %s in %s", problem.tfds_name, problem.tfds_dir)
    problem.tfds_builder().download_and_prepare()
  for split in problem.splits:
    if problem.has_local_files(split):
      text = problem.text_pairs(split)
      logging.info("%s %s: %d pairs (%d empty dropped)", problem_name, split, len(text),
                   text.dropped_empty)
  return written
