"""Tests for streamed corpora (t2t_repro.data.corpus, text_files.scan_lines): validation, the
remembered record, chunked and sharded reading, BPE sampling, the cache budget."""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro import errors
from t2t_repro.data import batching, corpus, problems, text_files, vocab

EDGE_FILES = {  # name: bytes, covering every rule of text_files.read_lines
    "plain": b"one\ntwo\nthree\n",
    "no_final_newline": b"one\ntwo\nthree",
    "crlf_and_inner_cr": b"one\r\ntw\ro\r\n\r\nfour\n",
    "bom": b"\xef\xbb\xbf first\nsecond\n",
    "bom_only": b"\xef\xbb\xbf",
    "empty": b"",
    "blank_lines": b"\n\n\n",
    "unicode_breaks": "a\u2028b\nc\x0bd\x85e\n\u00a0f\u3000\n".encode(),
    "multibyte": ("äöü€𝄞\n" * 7).encode(),
}


def _write(path, data):
  path.write_bytes(data)
  return str(path)


@pytest.mark.parametrize("name", sorted(EDGE_FILES))
@pytest.mark.parametrize("block_bytes", [1, 5, 1 << 20])
def test_scan_counts_lines_and_marks_line_starts_like_read_lines(tmp_path, name, block_bytes):
  path = _write(tmp_path / name, EDGE_FILES[name])
  lines = text_files.read_lines(path)
  scan = text_files.scan_lines(path, 2, block_bytes)
  assert scan.lines == len(lines) and scan.size == len(EDGE_FILES[name])
  data = EDGE_FILES[name]
  # marks[k] is where line 2 (k + 1) starts: the bytes from there begin with that line.
  assert len(scan.marks) == max(0, (len(lines) - 1) // 2)
  for k, mark in enumerate(scan.marks):
    assert data[mark:].decode().split("\n")[0].removesuffix("\r") == lines[2 * (k + 1)]


@pytest.mark.parametrize("block_bytes", [3, 1 << 20])
def test_scan_encoding_error_is_read_lines_error(tmp_path, block_bytes):
  data = "zeile eins\nzwei ä\n".encode() * 3 + b"drei \xff vier\nf\xc3\xbcnf\n"
  path = _write(tmp_path / "bad.de", data)
  with pytest.raises(errors.EncodingError) as expected:
    text_files.read_lines(path)
  with pytest.raises(errors.EncodingError) as got:
    text_files.scan_lines(path, 4, block_bytes)
  assert str(got.value) == str(expected.value)
  offset = data.index(b"\xff")
  assert f"{path}:7:" in str(got.value) and f"byte offset {offset} " in str(got.value)


def test_scan_truncated_character_at_end_is_an_error(tmp_path):
  path = _write(tmp_path / "cut.en", "ok\nnot ok €".encode()[:-1])
  with pytest.raises(errors.EncodingError, match=r"cut.en:2: invalid UTF-8"):
    text_files.scan_lines(path, 4, 4)


def test_index_errors_name_files_lines_and_counts(tmp_path):
  src = _write(tmp_path / "a.en", b"1\n2\n3\n")
  tgt = _write(tmp_path / "a.de", b"1\n2\n")
  with pytest.raises(text_files.LineCountError) as e:
    corpus.ParallelCorpus([(src, tgt)])
  assert f"{src} has 3 lines but {tgt} has 2 lines" in str(e.value)
  with pytest.raises(errors.MissingDataError, match="nope.de: file does not exist"):
    corpus.ParallelCorpus([(src, str(tmp_path / "nope.de"))])


def _corpus_files(tmp_path, sizes=(11, 7), prefix="c"):
  """File pairs of `sizes` lines, with blank and whitespace lines that must be dropped/stripped."""
  pairs = []
  for f, size in enumerate(sizes):
    src = [f" s{f}.{i} \u00a0" if i % 5 else "" for i in range(size)]
    tgt = [f"t{f}.{i}\r" for i in range(size)]
    pairs.append((_write(tmp_path / f"{prefix}{f}.src", "\n".join(src).encode() + b"\n"),
                  _write(tmp_path / f"{prefix}{f}.tgt", "\n".join(tgt).encode())))
  return pairs


def _pairs(dataset):
  return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def test_evaluation_pass_yields_exactly_the_file_pairs_in_order(tmp_path):
  files = _corpus_files(tmp_path)
  expected = text_files.read_parallel_files(files).pairs
  assert len(expected) == 18 - 3 - 2  # lines 0, 5, 10 and 0, 5 have an empty source
  text = corpus.ParallelCorpus(files, chunk_lines=3)
  assert len(text) == 18 and len(text.chunks) == 4 + 3
  assert list(text.iter_pairs()) == expected
  assert _pairs(text.dataset(training=False)) == expected


def test_training_pass_is_a_seeded_permutation_new_each_epoch(tmp_path):
  files = _corpus_files(tmp_path, sizes=(40, 30))
  expected = text_files.read_parallel_files(files).pairs
  text = corpus.ParallelCorpus(files, chunk_lines=4)
  ds = text.dataset(training=True, seed=5)
  first, second = _pairs(ds), _pairs(ds)
  assert sorted(first) == sorted(expected) == sorted(second)
  assert first != expected and second != first
  assert _pairs(text.dataset(training=True, seed=5)) == first


def test_input_pipelines_read_only_their_own_chunks(tmp_path, monkeypatch):
  files = _corpus_files(tmp_path, sizes=(40, 30))
  expected = text_files.read_parallel_files(files).pairs
  text = corpus.ParallelCorpus(files, chunk_lines=4)
  read = []
  original = corpus.ParallelCorpus.read_chunk
  monkeypatch.setattr(corpus.ParallelCorpus, "read_chunk",
                      lambda self, chunk: read.append(chunk) or original(self, chunk))
  got, chunks = [], []
  for i in range(3):
    read.clear()
    got.append(_pairs(text.dataset(training=True, seed=1,
                                   input_context=tf.distribute.InputContext(3, i, 1))))
    chunks.append(set(read))
    assert chunks[-1] == set(text.chunks[i::3])
  assert sorted(got[0] + got[1] + got[2]) == sorted(expected)
  small = corpus.ParallelCorpus(files[1:], chunk_lines=100)  # 1 chunk, 2 pipelines: by line
  halves = [_pairs(small.dataset(training=False, input_context=tf.distribute.InputContext(2, i, 1)))
            for i in range(2)]
  assert halves[0] + halves[1] != [] and sorted(halves[0] + halves[1]) == sorted(small.iter_pairs())
  assert halves[0] == list(small.iter_pairs())[0::2]


def test_validation_record_is_reused_and_invalidated_by_a_change(tmp_path, monkeypatch):
  files = _corpus_files(tmp_path, sizes=(9,))
  cache = tmp_path / "cache"
  first = corpus.ParallelCorpus(files, cache_dir=str(cache), chunk_lines=4)
  record = corpus.record_path(str(cache), *files[0])
  assert os.path.exists(record)
  scans = []
  original = text_files.scan_lines
  monkeypatch.setattr(text_files, "scan_lines",
                      lambda *args, **kwargs: scans.append(args) or original(*args, **kwargs))
  again = corpus.ParallelCorpus(files, cache_dir=str(cache), chunk_lines=4)
  assert scans == [] and again.chunks == first.chunks and len(again) == 9
  with open(files[0][0], "ab") as f:  # one more line on each side: size and mtime change
    f.write(b"new source\n")
  with open(files[0][1], "ab") as f:
    f.write(b"\nnew target\n")
  changed = corpus.ParallelCorpus(files, cache_dir=str(cache), chunk_lines=4)
  assert len(scans) == 2 and len(changed) == 10
  assert list(changed.iter_pairs())[-1] == ("new source", "new target")
  scans.clear()
  corpus.ParallelCorpus(files, cache_dir=str(cache), chunk_lines=4)
  assert scans == []


def test_strip_in_graph_is_python_strip():
  # Every code point Python calls whitespace is below 0x3100, so `chars` covers them all.
  assert max(c for c in range(0x110000) if chr(c).isspace()) < 0x3100
  chars = [chr(c) for c in range(0x3100)] + ["\ufeff", "\u200b", "\U0001d11e"]
  chars.remove("\x00")
  texts = [f"{c}{c}x{c}y{c}" for c in chars]
  got = text_files.strip_in_graph(tf.constant(texts)).numpy()
  assert [g.decode() for g in got] == [t.strip() for t in texts]


def test_bpe_sample_of_a_small_corpus_is_all_of_it(shared_data_dir, tmp_path):
  src = os.path.join(shared_data_dir, "wmt_news_other_years/newstest2018.en")
  tgt = os.path.join(shared_data_dir, "wmt_news_other_years/newstest2018.de")
  problem = problems.get_problem("parallel_text", train_src=src, train_tgt=tgt)
  streamed = vocab.get_or_learn_vocab(problem, 1000, str(tmp_path / "cache"))
  pairs = text_files.read_parallel(src, tgt).pairs
  listed = vocab.learn_vocab((t for pair in pairs for t in pair), 1000, str(tmp_path / "listed"))
  with open(streamed, "rb") as a, open(listed, "rb") as b:
    assert a.read() == b.read()
  assert os.path.exists(corpus.record_path(str(tmp_path / "cache"), src, tgt))


def test_bpe_sample_of_a_large_corpus_is_seeded_and_bounded(tmp_path):
  files = _corpus_files(tmp_path, sizes=(60, 45))
  text = corpus.ParallelCorpus(files, chunk_lines=8)
  all_pairs = list(text.iter_pairs())
  sample = list(vocab.sample_sentences(text, 40, seed=3))
  assert sample == list(vocab.sample_sentences(text, 40, seed=3))
  assert sample != list(vocab.sample_sentences(text, 40, seed=4))
  chosen = list(zip(sample[0::2], sample[1::2]))
  assert len(sample) <= 40 and len(chosen) >= 10  # 20 line pairs drawn, ~1/5 with an empty side
  positions = [all_pairs.index(p) for p in chosen]
  assert positions == sorted(positions) and len(set(chosen)) == len(chosen)
  counts = collections.Counter()  # uniform: every line pair drawn about equally often
  for seed in range(300):
    counts.update(p for p in zip(*[iter(vocab.sample_sentences(text, 40, seed))] * 2))
  frequencies = np.array([counts[p] for p in all_pairs]) / 300
  assert abs(frequencies.mean() - 20 / 105) < 0.01 and frequencies.min() > 0.1


def test_cache_only_within_budget(tmp_path, monkeypatch):
  files = _corpus_files(tmp_path, sizes=(60,))
  text = corpus.ParallelCorpus(files, chunk_lines=8)
  assert batching.cache_bytes(text) == text.num_bytes + batching.CACHE_BYTES_PER_EXAMPLE * 60
  path = vocab.learn_vocab((t for pair in text.iter_pairs() for t in pair), 40,
                           str(tmp_path / "v"))
  tokenizer = vocab.Tokenizer.from_file(path)
  reads = []
  original = corpus.ParallelCorpus.read_chunk
  monkeypatch.setattr(corpus.ParallelCorpus, "read_chunk",
                      lambda self, chunk: reads.append(chunk) or original(self, chunk))
  for cache_mb, cached in ((1, True), (0, False)):
    reads.clear()
    ds = batching.make_dataset(text, tokenizer, batch_tokens=64, max_length=32, training=True,
                               seed=1, cache_mb=cache_mb, shuffle_buffer=4)
    tokens = 0
    for batch in ds.take(400).as_numpy_iterator():
      tokens += np.count_nonzero(batch["targets"])
    assert tokens > 5 * 60 * 4  # several epochs were pulled
    if cached:  # read once, then replayed from memory
      assert len(reads) == len(text.chunks)
    else:  # read again every epoch
      assert len(reads) >= 3 * len(text.chunks)


class _FakeTfdsBuilder:
  """The part of a tfds builder that TfdsCorpus uses: info.splits and as_dataset."""

  def __init__(self, pairs):
    self.pairs, self.calls = pairs, []
    split = type("Split", (), {"num_examples": len(pairs), "num_bytes": 1000})
    self.info = type("Info", (), {"splits": {"train": split}})

  def as_dataset(self, split, shuffle_files=False, read_config=None):
    self.calls.append((split, shuffle_files, read_config))
    return tf.data.Dataset.from_tensor_slices({"en": [s for s, _ in self.pairs],
                                               "de": [t for _, t in self.pairs]})


def test_tfds_corpus_strips_and_drops_like_files():
  raw = [(" a\u00a0", "b "), ("", "x"), ("c", "\u3000"), ("d\r", "e")]
  builder = _FakeTfdsBuilder(raw)
  text = corpus.TfdsCorpus(builder, "en", "de", "fake")
  assert len(text) == 4 and list(text.iter_pairs()) == [("a", "b"), ("d", "e")]
  context = tf.distribute.InputContext(2, 1, 1)
  assert _pairs(text.dataset(training=True, seed=3, input_context=context)) == [("a", "b"),
                                                                                 ("d", "e")]
  _, shuffle_files, config = builder.calls[-1]
  assert shuffle_files and config.input_context is context and config.shuffle_seed == 3


def test_sharded_split_from_globs_and_comma_lists(tmp_path):
  files = _corpus_files(tmp_path, sizes=(5, 6, 7), prefix="shard-")
  expected = text_files.read_parallel_files(files).pairs
  problem = problems.get_problem("parallel_text", train_src=str(tmp_path / "shard-*.src"),
                                 train_tgt=",".join(tgt for _, tgt in files))
  assert problem.file_pairs("train") == files
  text = problem.corpus("train", chunk_lines=4)
  assert len(text) == 18 and _pairs(text.dataset(training=False)) == expected
  with pytest.raises(ValueError, match=r"names 3 files but train_tgt=.* names 2"):
    problems.get_problem("parallel_text", train_src=str(tmp_path / "shard-*.src"),
                         train_tgt=",".join(tgt for _, tgt in files[:2]))
  with pytest.raises(errors.MissingDataError, match="nothing-\\*.src"):
    problems.get_problem("parallel_text", train_src=str(tmp_path / "nothing-*.src"),
                         train_tgt=files[0][1]).corpus("train")


def test_streamed_corpus_under_mirrored_strategy(tmp_path):
  cpus = tf.config.list_logical_devices("CPU")
  if len(cpus) < 2:
    pytest.skip("needs 2 logical CPU devices (tests/conftest.py sets them up)")
  files = _corpus_files(tmp_path, sizes=(50, 40))
  text = corpus.ParallelCorpus(files, chunk_lines=8)
  path = vocab.learn_vocab((t for pair in text.iter_pairs() for t in pair), 40, str(tmp_path / "v"))
  tokenizer = vocab.Tokenizer.from_file(path)
  strategy = tf.distribute.MirroredStrategy([d.name for d in cpus[:2]])
  dist = batching.make_distributed_dataset(strategy, text, tokenizer, batch_tokens=64,
                                           max_length=32, training=False, cache_mb=0)
  decoded = []
  for batch in dist:
    for replica in strategy.experimental_local_results(batch):
      decoded += zip(tokenizer.decode(replica["inputs"]).numpy(),
                     tokenizer.decode(replica["targets"]).numpy())
  assert sorted((s.decode(), t.decode()) for s, t in decoded) == sorted(text.iter_pairs())
