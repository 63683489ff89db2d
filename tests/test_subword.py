"""Subword regularization (BPE-dropout) of the training text: hparams subword_alpha/_nbest."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.data import batching
from t2t_repro.data.vocab import Tokenizer
from t2t_repro.config.hparams import HParamsError, get_hparams

SENTENCE = "Two young, White males are outside near many bushes."


@pytest.fixture(name="tokenizer", scope="module")
def fixture_tokenizer(trained_run):
  return Tokenizer.from_file(str(trained_run.model_dir / "vocab.model"))


def test_sampling_draws_other_segmentations_of_the_same_text(tokenizer):
  plain = {tuple(tokenizer.encode(SENTENCE).numpy()) for _ in range(10)}
  assert len(plain) == 1
  sampler = tokenizer.sampling(-1, 0.3)
  drawn = [sampler.encode(SENTENCE).numpy() for _ in range(30)]
  assert len({tuple(ids) for ids in drawn}) > 5
  assert all(ids[-1] == 1 for ids in drawn)  # EOS kept
  assert {tokenizer.decode(ids).numpy().decode() for ids in drawn} == {SENTENCE}
  # BPE-dropout only splits merges: never fewer pieces than the deterministic segmentation
  assert min(len(ids) for ids in drawn) >= len(next(iter(plain)))


def test_training_input_resamples_every_epoch_and_dev_input_does_not(tokenizer):
  pairs = [(SENTENCE, "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.")]
  sampler = tokenizer.sampling(-1, 0.3)
  train = batching.make_dataset(pairs, tokenizer, batch_tokens=256, max_length=64, training=True,
                                seed=1, sampling_tokenizer=sampler)  # cached: 1 pair fits
  seen = {tuple(b["inputs"].numpy()[0]) for b in train.take(20)}
  assert len(seen) > 3
  dev = [tuple(b["inputs"].numpy()[0]) for _ in range(3) for b in batching.make_dataset(
      pairs, tokenizer, batch_tokens=256, max_length=64, training=False)]
  assert len(set(dev)) == 1
  assert np.array_equal(np.trim_zeros(np.array(dev[0]), "b"), tokenizer.encode(SENTENCE).numpy())


def test_subword_hparams_are_checked():
  assert get_hparams("tiny", "subword_alpha=0.1").subword_alpha == 0.1
  for override in ("subword_alpha=1.0", "subword_alpha=-0.1", "subword_nbest=0", "subword_nbest=1"):
    with pytest.raises(HParamsError, match=override.split("=")[0]):
      get_hparams("tiny", override)


def test_a_training_run_with_bpe_dropout(multi30k_slice, tmp_path):
  from t2t_repro.training.api import train_model  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.train import TrainConfig  # pylint: disable=import-outside-toplevel
  data = multi30k_slice
  result = train_model(TrainConfig(hparams="tiny", hparams_override="subword_alpha=0.1",
                             problem="parallel_text", model_dir=str(tmp_path / "m"),
                             vocab_dir=str(data), train_steps=3, eval_every_steps=3,
                             dev_bleu_lines=0, dev_samples=0, train_src=str(data / "train.en"),
                             train_tgt=str(data / "train.de"), dev_src=str(data / "dev.en"),
                             dev_tgt=str(data / "dev.de")))
  assert result.step == 3 and np.isfinite(result.dev["nll"])
  assert tf.io.gfile.exists(str(tmp_path / "m" / "ckpt-3.index"))
