"""Builds a tiny, random but complete model directory for the decoding/serving tests.

Layout as written by the trainer (docs/DESIGN.md): hparams.json, flags.json,
vocab.model (a 1000-piece BPE learned on real Multi30k lines) and two checkpoints
(ckpt-5, ckpt-7 with different weights) of tf.train.Checkpoint(model, optimizer, step)
managed by a CheckpointManager. Built once per test process.
"""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from t2t_repro.data import vocab
from t2t_repro.config.hparams import get_hparams
from t2t_repro.model.transformer import Transformer

VOCAB_SIZE = 1000
HPARAMS = (f"vocab_size={VOCAB_SIZE},num_layers=2,d_model=32,d_ff=64,num_heads=4,dropout=0.0,"
           "beam_size=3,alpha=0.6,decode_extra_length=4,average_last=2")
_BUILT = {}


def read_lines(path, count):
  with open(path, encoding="utf-8") as f:
    return [next(f).strip() for _ in range(count)]


def make_model_dir(path, data_dir, train_lines=3000):
  """Writes the model dir at `path` (once per process) and returns `path`."""
  path = str(path)
  if path in _BUILT:
    return path
  os.makedirs(path, exist_ok=True)
  texts = (read_lines(os.path.join(data_dir, "multi30k", "train.en"), train_lines)
           + read_lines(os.path.join(data_dir, "multi30k", "train.de"), train_lines))
  vocab.learn_vocab(texts, VOCAB_SIZE, os.path.join(path, "vocab"), num_threads=1)
  keras.utils.set_random_seed(11)
  hparams = get_hparams("tiny", HPARAMS)
  with open(os.path.join(path, "hparams.json"), "w", encoding="utf-8") as f:
    f.write(hparams.to_json())
  with open(os.path.join(path, "flags.json"), "w", encoding="utf-8") as f:
    json.dump({"hparams": "tiny", "hparams_override": HPARAMS}, f)
  model = Transformer.from_hparams(hparams)
  optimizer = keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  step = tf.Variable(0, dtype=tf.int64)
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=model, optimizer=optimizer, step=step), path, max_to_keep=5)
  rng = np.random.RandomState(0)
  for number in (5, 7):
    step.assign(number)
    for v in model.trainable_variables:  # different weights in each checkpoint
      v.assign(v + 0.05 * rng.standard_normal(v.shape).astype(np.float32))
    manager.save(checkpoint_number=number)
  _BUILT[path] = True
  return path


def make_trainer_dir(path, data_dir):
  """A model dir as `python -m t2t_repro.train` leaves it after 0 steps: the vocab and
  hparams of `make_model_dir` and a `Trainer` checkpoint ckpt-0 (model + its optimizer)."""
  from t2t_repro.training.trainer import Trainer, make_strategy  # pylint: disable=import-outside-toplevel
  path = str(path)
  if path in _BUILT:
    return path
  source = make_model_dir(os.path.join(os.path.dirname(path), "model_dir_util_source"), data_dir)
  os.makedirs(path, exist_ok=True)
  for name in ("vocab.model", "hparams.json"):
    with open(os.path.join(source, name), "rb") as f, open(os.path.join(path, name), "wb") as g:
      g.write(f.read())
  Trainer(get_hparams("tiny", HPARAMS), make_strategy("one_device"), path).save()
  _BUILT[path] = True
  return path


EOS_LOGIT_BONUS = 6.5


def add_eos_reward(model, bonus=EOS_LOGIT_BONUS):
  """Sets the last decoder LayerNorm's bias to bonus * e_eos / |e_eos|^2: +bonus on the
  EOS logit (a length reward, as a trained model has), so the random model's hypotheses
  end at different lengths, some before their maximum length and some cut there."""
  eos = model.embedding.embeddings.numpy()[1]
  model.decoder_layers[-1].norms[-1].beta.assign(bonus * eos / np.dot(eos, eos))
  return model
