"""Tests for t2t_repro.data.vocab: BPE learning, caching and the in-graph tokenizer."""

import io
import os

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from t2t_repro import errors
from t2t_repro.data import corpus, problems, text_files, vocab

TRAIN_YEARS = (2015, 2016, 2017, 2018)


def _news_files(data_dir, years, langs=("en", "de")):
  return [os.path.join(data_dir, "wmt_news_other_years", f"newstest{y}.{lang}")
          for y in years for lang in langs]


@pytest.fixture(scope="module")
def tokenizer(shared_data_dir, tmp_path_factory):
  """2000-piece vocabulary learned on the en+de newstest2015-2018 lines (22k lines)."""
  prefix = str(tmp_path_factory.mktemp("vocab") / "news2000")
  path = vocab.learn_vocab(text_files.iter_lines(_news_files(shared_data_dir, TRAIN_YEARS)), 2000,
                           prefix)
  assert path == prefix + ".model"
  return vocab.Tokenizer.from_file(path)


def test_special_ids_and_size(tokenizer):
  sp = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto)
  assert tokenizer.vocab_size == sp.get_piece_size() == 2000
  assert [sp.id_to_piece(i) for i in range(3)] == ["<pad>", "</s>", "<unk>"]
  assert (sp.pad_id(), sp.eos_id(), sp.unk_id(), sp.bos_id()) == (0, 1, 2, -1)


def test_round_trip_on_real_newstest_lines(tokenizer, shared_data_dir):
  """detok(tok(x)) == x on newstest2013 en+de (6000 held-out lines); the only
  exception is a line holding a character never seen in training (-> unk)."""
  lines = list(text_files.iter_lines([os.path.join(shared_data_dir, f"wmt14/newstest2013.{lang}")
                                      for lang in ("en", "de")]))
  ids = tokenizer.encode(tf.constant(lines))
  decoded = [d.decode("utf-8") for d in tokenizer.decode(ids).numpy()]
  has_unk = [vocab.UNK_ID in row for row in ids.to_list()]
  exact = [d == x for d, x in zip(decoded, lines)]
  assert sum(exact) >= 1000 and sum(exact) >= 0.99 * len(lines)
  assert [not e for e in exact] == has_unk  # every mismatch is an unseen character
  assert all(row[-1] == vocab.EOS_ID for row in ids.to_list())


def test_round_trip_is_exact_on_training_text(tokenizer, shared_data_dir):
  lines = [line.strip() for line in text_files.iter_lines(_news_files(shared_data_dir, (2018,)))]
  decoded = tokenizer.decode(tokenizer.encode(tf.constant(lines))).numpy()
  assert [d.decode("utf-8") for d in decoded] == lines


def test_whitespace_is_kept(tokenizer):
  texts = ["a  b", "Die Stra\u00dfe  ist  lang  !"]
  assert [d.decode() for d in tokenizer.decode(tokenizer.encode(texts)).numpy()] == texts


def test_encode_shapes_and_decode_stops_at_eos(tokenizer):
  scalar = tokenizer.encode("Guten Tag")
  assert isinstance(scalar, tf.Tensor) and scalar.dtype == tf.int32 and scalar[-1] == vocab.EOS_ID
  batch = tokenizer.encode(tf.constant(["Guten Tag", "Hello world, how are you?"]))
  assert isinstance(batch, tf.RaggedTensor) and batch.shape[0] == 2
  ids = scalar.numpy().tolist()
  padded = tf.constant([ids + [57, 99, 0, 0], ids[:-1] + [0] * 5])  # junk after EOS; no EOS
  assert tokenizer.decode(padded).numpy().tolist() == [b"Guten Tag", b"Guten Tag"]
  assert tokenizer.decode(scalar).numpy() == b"Guten Tag"
  assert tokenizer.decode(batch).numpy()[1] == b"Hello world, how are you?"


def test_works_in_tf_function_and_tf_data(tokenizer):
  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def round_trip(texts):
    return tokenizer.decode(tokenizer.encode(texts).to_tensor())

  texts = ["Das Haus ist klein.", "The house is small."]
  assert round_trip(tf.constant(texts)).numpy().tolist() == [t.encode() for t in texts]
  ds = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(tokenizer.encode)
  assert next(iter(ds)).to_list() == tokenizer.encode(texts).to_list()


def test_saved_model_carries_the_tokenizer(tokenizer, tmp_path):
  module = tf.Module()
  module.tokenizer = tokenizer
  module.round_trip = tf.function(
      lambda texts: tokenizer.decode(tokenizer.encode(texts).to_tensor()),
      input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path / "sm"))
  loaded = tf.saved_model.load(str(tmp_path / "sm"))
  assert loaded.round_trip(tf.constant(["Ein kleiner Test."])).numpy().tolist() == [b"Ein kleiner Test."]


def test_get_or_learn_vocab_caches(shared_data_dir, tmp_path, monkeypatch):
  en, de = _news_files(shared_data_dir, (2015,))
  problem = problems.get_problem("parallel_text", train_src=en, train_tgt=de)
  path = vocab.get_or_learn_vocab(problem, 1000, str(tmp_path))
  assert path == os.path.join(str(tmp_path), f"vocab.{problem.vocab_key}.1000.model")
  assert vocab.Tokenizer.from_file(path).vocab_size == 1000
  # No temporary file left; the corpus validation record sits next to the vocabulary.
  assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(path),
                                                 os.path.basename(corpus.record_path(tmp_path, en, de))])
  again = vocab.get_or_learn_vocab(problem, 1000, str(tmp_path / "again"))
  with open(path, "rb") as a, open(again, "rb") as b:
    assert a.read() == b.read()  # learning is deterministic

  def fail(*args, **kwargs):
    raise AssertionError("learned again")

  monkeypatch.setattr(vocab, "learn_vocab", fail)
  assert vocab.get_or_learn_vocab(problem, 1000, str(tmp_path)) == path


def test_lowercase_vocab_lowercases_like_str_lower_everywhere(shared_data_dir, tmp_path):
  """A lowercasing model: its ids are those of the lowercased text, in sentencepiece and
  in the in-graph tokenizer, and decode(encode(x)) == x.lower() (Moses lowercase.perl)."""
  en, de = _news_files(shared_data_dir, (2015,))
  problem = problems.get_problem("parallel_text", train_src=en, train_tgt=de)
  path = vocab.get_or_learn_vocab(problem, 1000, str(tmp_path), lowercase=True)
  assert path == os.path.join(str(tmp_path), f"vocab.{problem.vocab_key}.1000.lc.model")
  lowercasing = vocab.Tokenizer.from_file(path)
  cased = vocab.Tokenizer.from_file(vocab.get_or_learn_vocab(problem, 1000, str(tmp_path)))
  assert (lowercasing.lowercase, cased.lowercase) == (True, False)
  sp = spm.SentencePieceProcessor(model_proto=lowercasing.model_proto)
  assert not any(any(c != c.lower() for c in sp.id_to_piece(i)) for i in range(3, 1000))
  lines = [line.strip() for line in text_files.iter_lines([de])][:300] + [
      "DIE STRASSE ÜBER DEM ÄRMELKANAL", "Ein Mann (\"Bob\") läuft."]
  ids = lowercasing.encode(tf.constant(lines)).to_list()
  assert ids == [sp.encode(line.lower()) + [vocab.EOS_ID] for line in lines]
  decoded = lowercasing.decode(lowercasing.encode(tf.constant(lines)).to_tensor()).numpy()
  assert [d.decode("utf-8") for d in decoded] == [line.lower() for line in lines]
  assert len(vocab.lowercase_rules().splitlines()) == sum(
      chr(c) != chr(c).lower() for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_rejects_other_special_ids_and_too_little_text(tmp_path):
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f g h"] * 20), model_writer=model,
                                 vocab_size=12, model_type="bpe", minloglevel=2)  # unk 0, bos 1, eos 2
  with pytest.raises(ValueError, match=r"pad/eos/unk/bos ids \(-1, 2, 0, 1\)"):
    vocab.Tokenizer(model.getvalue())
  with pytest.raises(ValueError, match="could not learn a 5000-piece"):
    vocab.learn_vocab(["a b c"] * 10, 5000, str(tmp_path / "x"))
  assert not os.path.exists(tmp_path / "x.model")


def test_decode_handles_int64_and_all_pad(tokenizer):
  out = tokenizer.decode(tf.constant(np.zeros((2, 3), np.int64)))
  assert out.numpy().tolist() == [b"", b""]


def test_too_long_sentences_are_skipped_and_all_too_long_is_a_data_error(tmp_path):
  long = "x" * (vocab.MAX_SENTENCE_BYTES - 1) + "é"  # one byte over the limit in UTF-8
  with pytest.raises(errors.DataError,
                     match=f"^no sentence to learn the BPE vocabulary from: all 3 sentences are "
                           f"longer than {vocab.MAX_SENTENCE_BYTES} bytes"):
    vocab.learn_vocab([long] * 3, 20, str(tmp_path / "x"))
  with pytest.raises(errors.DataError, match="the text is empty"):
    vocab.learn_vocab(["", ""], 20, str(tmp_path / "x"))
  assert not os.path.exists(tmp_path / "x.model")
  # The long sentence is left out: its "é" is not a piece of the learned model.
  path = vocab.learn_vocab(["a b c d e f g h"] * 20 + [long], 20, str(tmp_path / "y"))
  processor = spm.SentencePieceProcessor(model_file=path)
  assert processor.piece_to_id("é") == processor.unk_id()
  assert processor.piece_to_id("a") != processor.unk_id()
