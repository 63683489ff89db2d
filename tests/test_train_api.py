"""training.api.train_model in-process: TrainConfig -> TrainResult, the best checkpoint
(model_dir/best/), early stopping with patience and averaging at the end."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import tool_path
from t2t_repro import errors
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.training import averaging, preflight
from t2t_repro.training.api import train_model
from t2t_repro.training.best import BestCheckpoint, Patience
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.config.train import TrainConfig

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(data, model_dir, **changes):
  """`tiny` on the multi30k_slice files (the slice's dev split doubles as test)."""
  files = {f"{split}_{side}": str(data / f"{name}.{lang}")
           for split, name in (("train", "train"), ("dev", "dev"), ("test", "dev"))
           for side, lang in (("src", "en"), ("tgt", "de"))}
  return TrainConfig(hparams="tiny", problem="parallel_text", model_dir=str(model_dir),
                     vocab_dir=str(data), log_every_steps=3, dev_samples=0, **files, **changes)


@pytest.mark.parametrize("metric,series,stops_after", [
    ("loss", [5.0, 4.0, 4.5, 4.2, 3.9], 4),  # 4.5 and 4.2 do not beat 4.0: stop at the 4th
    ("loss", [5.0, 4.0, 3.0, 2.0], None),
    # min_improvement 0.1: 2.15 beats 2.0; 2.55 does not beat 2.5, the 2nd in a row: stop.
    ("bleu", [1.0, 2.0, 1.5, 2.15, 2.5, 2.4, 2.55], 7),
])
def test_patience_stops_exactly_after_n_evaluations_without_improvement(metric, series,
                                                                        stops_after):
  patience = Patience(metric, patience=2, min_improvement=0.1 if metric == "bleu" else 0.0)
  stopped = None
  for i, value in enumerate(series, 1):
    patience.update(value)
    if patience.exhausted:
      stopped = i
      break
  assert stopped == stops_after
  assert patience.best == {"loss": 4.0 if stops_after else 2.0, "bleu": 2.5}[metric]
  assert not Patience("loss", patience=0).exhausted  # 0: never stops


def test_bad_settings_are_usage_errors(multi30k_slice, tmp_path):
  """TrainConfig checks itself on construction and names the field (the train command
  writes it as the flag)."""
  for changes, message in (({"best_metric": "bleu", "dev_bleu_lines": 0}, "best_metric=bleu"),
                           ({"best_metric": "ppl"}, "best_metric='ppl' is not one of"),
                           ({"early_stopping": 2, "eval_every_steps": 0}, "early_stopping=2"),
                           ({"early_stopping": 2, "best_metric": "none"}, "early_stopping=2"),
                           ({"early_stopping": -1}, "early_stopping must be >= 0, got -1"),
                           ({"average_last": -2}, "average_last must be >= 0, got -2")):
    with pytest.raises(errors.UsageError, match=message):
      _config(multi30k_slice, tmp_path / "m", **changes)
  assert not (tmp_path / "m").exists()


def test_train_in_process_writes_best_stops_early_and_averages(multi30k_slice, tmp_path):
  model_dir = tmp_path / "model"
  # Dev every 3 updates; an improvement must exceed 100 nats, so only the first evaluation
  # improves and patience 1 stops training at the second one (step 6 of 12).
  result = train_model(_config(multi30k_slice, model_dir, train_steps=12, eval_every_steps=3,
                         dev_bleu_lines=4, save_checkpoints_steps=3, save_checkpoints_secs=0,
                         early_stopping=1, min_improvement=100.0, average_last=2,
                         test_bleu_lines=4))
  assert (result.step, result.early_stopped, result.stopped) == (6, True, None)
  assert result.checkpoint == str(model_dir / "ckpt-6")
  assert result.dev["step"] == 6 and result.dev["bleu_lines"] == 4
  best_dir = model_dir / "best"
  assert sorted(os.listdir(best_dir)) == ["best.json", "checkpoint", "ckpt-3.data-00000-of-00001",
                                          "ckpt-3.index", "flags.json", "hparams.json",
                                          "vocab.model"]
  info = json.loads((best_dir / "best.json").read_text())
  assert info == {"metric": "loss", "value": pytest.approx(info["value"]), "step": 3,
                  "bleu_lines": 4}
  assert result.best == dict(info, dir=str(best_dir))
  assert json.loads((model_dir / "flags.json").read_text())["early_stopping"] == 1
  # A resume restores the best value and the patience counter.
  resumed = BestCheckpoint(str(model_dir), "loss", patience=1)
  assert (resumed.patience.best, resumed.patience.bad_evaluations) == (info["value"], 1)
  assert resumed.exhausted

  # best/ is a model dir: the decoder loads and translates it, averaging takes it.
  model, _, tokenizer = load_for_inference(str(best_dir))
  assert Translator(model, tokenizer, DecodeConfig(beam_size=1, decode_extra_length=2)).translate(
      ["A dog runs."])[0]
  path, _ = averaging.average_checkpoints(averaging.last_checkpoints(str(best_dir), 1),
                                          str(tmp_path / "best_avg"))
  assert path == str(tmp_path / "best_avg" / "ckpt-3")

  # averaged/ equals what the command produces from the same model dir.
  assert result.averaged == str(model_dir / "averaged" / "ckpt-6")
  assert "averaged model of the last 2 checkpoints" in result.test_description
  assert 0.0 <= result.test["sacrebleu"] <= 100.0
  command = subprocess.run([sys.executable, tool_path("average_checkpoints"),
                            f"--model_dir={model_dir}", "--num_last=2",
                            f"--output_dir={tmp_path / 'tool_avg'}"],
                           cwd=_REPO, capture_output=True, text=True, timeout=300, check=False)
  assert command.returncode == 0, command.stderr[-2000:]
  ours, theirs = (tf.train.load_checkpoint(p) for p in (
      result.averaged, str(tmp_path / "tool_avg" / "ckpt-6")))
  names = sorted(n for n in ours.get_variable_to_shape_map()  # not the object graph (layer names)
                 if n != "_CHECKPOINTABLE_OBJECT_GRAPH")
  assert names == sorted(n for n in theirs.get_variable_to_shape_map()
                         if n != "_CHECKPOINTABLE_OBJECT_GRAPH") and len(names) > 60
  for name in names:
    np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name))


def test_checkpoints_stay_on_the_save_grid_beside_the_evaluated_steps(multi30k_slice, tmp_path):
  """--save_checkpoints_steps=2 with a dev evaluation every 3 updates saves 2, 3 (the evaluated
  step, so an interrupted evaluation loses nothing), 4, 6, 8, 9, 10 - not 2, 3, 5, 7, 9, 10."""
  model_dir = tmp_path / "grid"
  train_model(_config(multi30k_slice, model_dir, train_steps=10, eval_every_steps=3, dev_bleu_lines=0,
                save_checkpoints_steps=2, save_checkpoints_secs=0, best_metric="none"))
  state = tf.train.get_checkpoint_state(str(model_dir))
  steps = [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]
  assert steps == [2, 3, 4, 6, 8, 9, 10]
