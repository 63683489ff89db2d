"""Perplexity of a saved model: `training.perplexity` and the validate command."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.constants import EOS_ID
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.training.api import train_model
from t2t_repro.config.train import TrainConfig
from t2t_repro.training.perplexity import perplexity

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hand_nll(model, tokenizer, pairs):
  """Mean NLL per target piece computed pair by pair with numpy: log_softmax of the
  teacher-forced logits at each target position, EOS included."""
  total, pieces = 0.0, 0
  for source, target in pairs:
    src = tokenizer.encode(source).numpy()[None]
    tgt = tokenizer.encode(target).numpy()[None]
    assert src[0, -1] == tgt[0, -1] == EOS_ID
    logits = model((tf.constant(src), tf.constant(tgt)), training=False).numpy()[0]
    logits = logits.astype(np.float64)
    log_z = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    total += float(np.sum(log_z - logits[np.arange(tgt.shape[1]), tgt[0]]))
    pieces += tgt.shape[1]
  return total / pieces, pieces


def test_perplexity_is_exp_of_the_mean_nll_per_target_piece(trained_run):
  model, hparams, tokenizer = load_for_inference(str(trained_run.model_dir))
  pairs = [("A man is riding a bike.", "Ein Mann fährt Fahrrad."),
           ("Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."),
           ("A girl.", "Ein Mädchen.")]
  nll, pieces = _hand_nll(model, tokenizer, pairs)
  for batch_tokens in (16, 4096):  # one pair per batch, or all in one: the same result
    result = perplexity(model, tokenizer, pairs, batch_tokens=batch_tokens,
                        max_length=hparams.max_length)
    assert result["target_pieces"] == pieces
    assert result["pairs"] == 3
    assert result["nll"] == pytest.approx(nll, rel=1e-5)
    assert result["ppl"] == pytest.approx(math.exp(nll), rel=1e-5)


@pytest.mark.parametrize("mixed_precision", ["none", "mixed_bfloat16"])
def test_trainer_dev_loss_equals_validate_on_the_same_checkpoint(multi30k_slice, tmp_path,
                                                                  mixed_precision):
  """Also for a mixed_bfloat16 run, which validate scores in bfloat16 as the trainer did (in
  float32 its nll differed by 1.06e-5 relative on this run)."""
  data = multi30k_slice
  config = TrainConfig(hparams="tiny", problem="parallel_text", model_dir=str(tmp_path / "m"),
                       vocab_dir=str(data), train_steps=4, eval_every_steps=4,
                       dev_bleu_lines=0, dev_samples=0, log_every_steps=2,
                       train_src=str(data / "train.en"),
                       train_tgt=str(data / "train.de"), dev_src=str(data / "dev.en"),
                       dev_tgt=str(data / "dev.de"), mixed_precision=mixed_precision)
  result = train_model(config)
  out = tmp_path / "v.json"
  proc = subprocess.run([sys.executable, "-m", "t2t_repro.validate", f"--model_dir={tmp_path / 'm'}",
                         f"--output_json={out}", "--batch_tokens=700"], capture_output=True,
                        text=True, cwd=_REPO, check=False)
  assert proc.returncode == 0, proc.stderr
  scored = json.loads(out.read_text())
  assert scored["checkpoint"].endswith("ckpt-4")
  assert scored["pairs"] == 300
  # float32: 1e-5 (sums over differently split batches); bfloat16 in float32 was 1.06e-5 off.
  assert scored["nll"] == pytest.approx(result.dev["nll"],
                                        rel=1e-5 if mixed_precision == "none" else 2e-6)
  assert scored["ppl"] == pytest.approx(result.dev["ppl"], rel=1e-4)
  assert proc.stdout.startswith(f"nll {scored['nll']:.4f} ppl ")
  assert len(proc.stdout.splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (["--src=x.en"], "--src and --tgt go together"),
    (["--split=nope"], "--split=nope"),
    (["--problem=nope"], "--problem=nope"),
])
def test_bad_arguments_are_one_line_usage_errors(trained_run, args, message):
  proc = subprocess.run([sys.executable, "-m", "t2t_repro.validate",
                         f"--model_dir={trained_run.model_dir}", *args],
                        capture_output=True, text=True, cwd=_REPO, check=False)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
  assert proc.stderr.startswith("validate: error: ") and message in proc.stderr
