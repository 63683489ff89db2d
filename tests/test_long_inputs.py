"""Memory: no input line can make decoding or dev evaluation unbounded.

A 100,000-character line used to reach beam search (and the dev loss) at its full
length: attention over ~60k tokens took the process past 5 GB. Now the source is
cut to what the position table leaves (or --max_input_length), with a warning naming the
line, and the output still has one line per input line.
"""

import logging

import numpy as np
import pytest

from model_dir_util import make_model_dir
from t2t_repro.data import batching
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.decoding.loading import load_for_inference


@pytest.fixture(scope="module")
def loaded(shared_data_dir, tmp_path_factory):
  return load_for_inference(make_model_dir(tmp_path_factory.mktemp("long"), shared_data_dir))


def test_bound_lengths_cuts_and_keeps_eos(loaded, caplog):
  model, _, tokenizer = loaded
  translator = Translator(model, tokenizer, DecodeConfig(max_input_length=4))
  ids = [np.array([5, 6, 1], np.int32), np.arange(2, 12, dtype=np.int32)]
  ids[1][-1] = 1
  with caplog.at_level(logging.WARNING):
    bounded = translator.bound_lengths(ids, [3, 8])
  np.testing.assert_array_equal(bounded[0], [5, 6, 1])
  np.testing.assert_array_equal(bounded[1], [2, 3, 4, 1])
  assert "input line 8 has 10 tokens" in caplog.text
  assert "line 3 " not in caplog.text


def test_one_huge_line_is_decoded_within_the_bound(loaded, monkeypatch, caplog):
  model, hparams, tokenizer = loaded
  widths = []
  real_decode = Translator.decode_batch

  def recording_decode(self, inputs, prefixes=None, line_ids=None):
    widths.append(np.shape(inputs)[1])
    return real_decode(self, inputs, prefixes, line_ids)

  monkeypatch.setattr(Translator, "decode_batch", recording_decode)
  huge = " ".join(["a little dog runs on the grass"] * 15000)  # 105,000 characters
  lines = ["A man rides a bike.", huge, "", "Two dogs play."]
  bound = 40  # tokens; decoding a random model to its full position table took 47 s
  translator = Translator(model, tokenizer, DecodeConfig(beam_size=2, decode_extra_length=2,
                                                         max_input_length=bound))
  with caplog.at_level(logging.WARNING):
    out = translator.translate(lines)
  assert len(out) == 4 and out[2] == ""
  assert max(widths) == bound  # the huge line, cut; not ~60k tokens
  assert "input line 2 has" in caplog.text and f"first {bound - 1}" in caplog.text
  # By default the bound is what the position table leaves after decode_extra_length.
  default = Translator(model, tokenizer, DecodeConfig(beam_size=1, decode_extra_length=2))
  assert default.max_input_length() == hparams.max_positions - 2


def test_dev_input_is_cut_to_the_token_bound(loaded):
  _, _, tokenizer = loaded
  pairs = [("a dog", "ein Hund"), (" ".join(["a little dog"] * 400), "ein Hund " * 300)]
  batches = list(batching.make_dataset(pairs, tokenizer, batch_tokens=64, max_length=16,
                                       training=False, truncate_length=16))
  widths = sorted(int(b["inputs"].shape[1]) for b in batches)
  assert widths[-1] <= 16
  rows = [r for b in batches for r in b["inputs"].numpy() if (r > 0).sum() == 16]
  assert len(rows) == 1 and rows[0][15] == 1  # the long pair, cut, still ending in EOS
  untruncated = list(batching.make_dataset(pairs, tokenizer, batch_tokens=64, max_length=16,
                                           training=False))
  assert max(int(b["inputs"].shape[1]) for b in untruncated) > 400
