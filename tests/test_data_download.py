"""Tests for t2t_repro.data.download, offline: a file:// mirror built from the real files.

For every source the mirror holds what the public server serves: Multi30k
files gzipped; WMT tarballs holding the SGML members. The newstest2014 SGML
is the real official file (shared/data/wmt14/sgm); for the other years the
member is written from the real plain-text lines. The download must then
rebuild the shared/data files byte for byte.
"""

import collections
import gzip
import io
import os
import subprocess
import sys
import tarfile

import pytest

from t2t_repro.data import download, problems, text_files

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sgml(lines):
  segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
  return f'<srcset setid="x" srclang="any">\n<doc docid="d" genre="news">\n{segs}</doc>\n</srcset>\n'


def _member_bytes(source, data_dir):
  official = os.path.join(data_dir, "wmt14", "sgm", os.path.basename(source.member))
  if os.path.exists(official):
    with open(official, "rb") as f:
      return f.read()
  return _sgml(text_files.read_lines(os.path.join(data_dir, source.dest))).encode("utf-8")


def _build_mirror(root, sources, data_dir):
  archives = collections.defaultdict(dict)
  for source in sources:
    path = download.mirror_url(source.url, str(root))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if source.member is None:
      with open(os.path.join(data_dir, source.dest), "rb") as f, open(path, "wb") as out:
        out.write(gzip.compress(f.read(), compresslevel=1))
    else:
      archives[path][source.member] = _member_bytes(source, data_dir)
  for path, members in archives.items():
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
      for name, data in members.items():
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
  return "file://" + str(root)


@pytest.fixture(scope="module")
def mirror(shared_data_dir, tmp_path_factory):
  sources = [s for name in sorted(download.SOURCES) for s in download.SOURCES[name]]
  return _build_mirror(tmp_path_factory.mktemp("mirror"), sources, shared_data_dir)


def _same_bytes(a, b):
  with open(a, "rb") as fa, open(b, "rb") as fb:
    return fa.read() == fb.read()


@pytest.mark.parametrize("name", ["translate_ende_wmt_news", "translate_enfr_wmt14"])
def test_wmt_download_rebuilds_the_local_layout(name, mirror, shared_data_dir, tmp_path):
  written = download.download(name, str(tmp_path), source_url_base=mirror, tfds=False)
  assert len(written) == len(download.SOURCES[name])
  for source in download.SOURCES[name]:
    assert _same_bytes(os.path.join(tmp_path, source.dest), os.path.join(shared_data_dir, source.dest)), \
        source.dest
  problem = problems.get_problem(name, str(tmp_path))
  assert len(problem.text_pairs("test")) == 3003
  assert download.download(name, str(tmp_path), source_url_base=mirror, tfds=False) == []  # kept
  assert sorted(os.listdir(tmp_path)) == sorted({s.dest.split("/")[0] for s in download.SOURCES[name]})


def test_multi30k_download_command(mirror, shared_data_dir, tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "t2t_repro.download", "translate_ende_multi30k",
       f"--data_dir={tmp_path}", f"--source_url_base={mirror}"],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr
  assert "12 files written" in result.stdout
  for name in os.listdir(os.path.join(shared_data_dir, "multi30k")):
    assert _same_bytes(tmp_path / "multi30k" / name, os.path.join(shared_data_dir, "multi30k", name))


def test_sgm_to_lines_follows_moses_input_from_sgm():
  sgml = ('<doc docid="a">\n<seg id="1"> Two  spaces\tand a tab </seg>\n'
          '<seg id="2">A segment\nover two lines</seg>\n<seg id="3">Non\u00a0breaking &amp; kept</seg>\n')
  assert download.sgm_to_lines(sgml) == ["Two spaces and a tab", "A segment over two lines",
                                         "Non\u00a0breaking &amp; kept"]


def test_mirror_url_and_errors(tmp_path):
  url = "https://statmt.org/wmt14/test-full.tgz"
  assert download.mirror_url(url, "file:///m/") == "file:///m/statmt.org/wmt14/test-full.tgz"
  assert download.mirror_url(url, None) == url
  with pytest.raises(ValueError, match="parallel_text has no public download"):
    download.download("parallel_text", str(tmp_path))
  with pytest.raises(OSError, match="could not fetch file://.*/no/statmt.org/wmt13/test.tgz"):
    download.download("translate_ende_wmt14", str(tmp_path), source_url_base=f"file://{tmp_path}/no",
                      tfds=False)


def test_multi30k_download_from_small_local_files(tmp_path):
  """Without ../shared/data: a file:// mirror of small gz files laid out as
  raw.githubusercontent.com serves multi30k/dataset's data/task1/raw/*.gz; the download
  gunzips them into {data_dir}/multi30k/, where translate_ende_multi30k reads every split."""
  sizes = {"train": 5, "val": 3, **{name: 2 for name in problems.MULTI30K_TESTS}}
  for source in download.SOURCES["translate_ende_multi30k"]:
    split, lang = os.path.basename(source.dest).rsplit(".", 1)
    path = download.mirror_url(source.url, str(tmp_path / "mirror")).removeprefix("file://")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = "".join(f"{split} {lang} line {i}\n" for i in range(sizes[split]))
    with open(path, "wb") as out:
      out.write(gzip.compress(lines.encode("utf-8")))
  data_dir = tmp_path / "data"
  written = download.download("translate_ende_multi30k", str(data_dir),
                              source_url_base=f"file://{tmp_path / 'mirror'}")
  assert len(written) == 12 and sorted(os.listdir(data_dir)) == ["multi30k"]
  problem = problems.get_problem("translate_ende_multi30k", str(data_dir))
  assert [len(problem.text_pairs(s)) for s in ("train", "dev", "test")] == [5, 3, 2]
  assert problem.text_pairs("dev").pairs[2] == ("val en line 2", "val de line 2")


def test_offline_download_is_one_line_saying_it_needs_the_internet(tmp_path):
  """The command offline (urlopen failing as without a network): one error line, exit 1."""
  script = ("import urllib.error, urllib.request, sys\n"
            "def offline(*a, **k):\n"
            "  raise urllib.error.URLError('[Errno -2] Name or service not known')\n"
            "urllib.request.urlopen = offline\n"
            "from t2t_repro.commands import launch\n"
            "sys.argv = ['t2t-download', 'translate_ende_multi30k', '--data_dir=" + str(tmp_path) +
            "']\nlaunch.launch('download')\n")
  result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == 1, result.stderr
  error = result.stderr.splitlines()[-1]
  assert error.startswith("download: error: could not fetch https://raw.githubusercontent.com/"
                          "multi30k/dataset/master/data/task1/raw/train.en.gz (")
  assert error.endswith("downloading needs the internet, or a mirror given by --source_url_base")
  assert "Traceback" not in result.stderr
  help_text = subprocess.run([sys.executable, "-m", "t2t_repro.download", "--help"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=120, check=False).stdout
  assert "Needs the internet" in help_text
