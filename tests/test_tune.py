"""Choosing beam size and alpha on dev (`decoding.tuning`, `python -m t2t_repro.tune`): the
grid's scores, the choice, decoding.json, and the decoding commands' use of it."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from events_util import read_events, scalars
from t2t_repro import evaluation
from t2t_repro.decoding import tuning
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.decoding.translator import Translator

_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


class _Fake:
  """A translator stand-in whose value at (beam_size, alpha) is a table."""

  def __init__(self, values):
    self.values, self.config = values, DecodeConfig()


def test_grid_search_keeps_the_best_and_the_first_of_a_tie():
  fake = _Fake({(4, 0.6): 1.0, (4, 1.0): 3.0, (5, 0.6): 3.0, (5, 1.0): 2.0})
  best, details, rows = tuning.grid_search(
      fake, list(fake.values), lambda t: (t.values[(t.config.beam_size, t.config.alpha)], "x"))
  assert (best["beam_size"], best["alpha"], best["value"], details) == (4, 1.0, 3.0, "x")
  assert [r["value"] for r in rows] == [1.0, 3.0, 3.0, 2.0]
  assert (fake.config.beam_size, fake.config.alpha) == (4, 1.0)  # left at the choice
  with pytest.raises(ValueError, match="empty"):
    tuning.grid_search(fake, [], lambda t: (0, None))


def test_tune_decoding_scores_each_point_as_evaluate_does(trained_run, multi30k_slice):
  model, hparams, tokenizer = load_for_inference(str(trained_run.model_dir))
  sources = (multi30k_slice / "dev.en").read_text(encoding="utf-8").splitlines()[:12]
  refs = (multi30k_slice / "dev.de").read_text(encoding="utf-8").splitlines()[:12]
  translator = Translator(model, tokenizer, DecodeConfig.resolve(hparams, decode_extra_length=10))
  choice = tuning.tune_decoding(translator, sources, refs, beam_sizes=(1, 3), alphas=(0.0, 1.0))
  assert [(r["beam_size"], r["alpha"]) for r in choice["grid"]] == [(1, 0.0), (1, 1.0), (3, 0.0),
                                                                   (3, 1.0)]
  best = max(choice["grid"], key=lambda r: r["sacrebleu"])
  assert (choice["beam_size"], choice["alpha"]) == (best["beam_size"], best["alpha"])
  alone = Translator(model, tokenizer, DecodeConfig.resolve(
      hparams, beam_size=3, alpha=1.0, decode_extra_length=10))
  hyps = [h[0][1] for h in alone.nbest(sources)]
  assert choice["grid"][3]["sacrebleu"] == round(evaluation.evaluate_translations(hyps, refs)["sacrebleu"], 2)


def test_tune_writes_decoding_json_and_translate_uses_it(trained_run, multi30k_slice, tmp_path):
  model_dir = shutil.copytree(trained_run.model_dir, tmp_path / "model")
  dev_src, dev_tgt = multi30k_slice / "dev.en", multi30k_slice / "dev.de"
  tuned = subprocess.run(
      [sys.executable, "-m", "t2t_repro.tune", f"--model_dir={model_dir}", f"--src={dev_src}",
       f"--tgt={dev_tgt}", "--beam_sizes=1,2", "--alphas=0,1,2", "--decode_extra_length=10"],
      capture_output=True, text=True, env=_ENV, timeout=600, check=False)
  assert tuned.returncode == 0, tuned.stderr[-3000:]
  choice = json.loads((model_dir / "decoding.json").read_text(encoding="utf-8"))
  assert len(choice["grid"]) == 6 and "<- chosen" in tuned.stdout
  assert choice["value"] == max(r["sacrebleu"] for r in choice["grid"])
  assert "retracing" not in tuned.stderr  # six traces, one per point, each by design
  dev = read_events(model_dir / "dev")  # the grid in TensorBoard at the checkpoint's step
  assert {tag: scalars(dev, tag) for tag in dev if tag.startswith("tune/")} == {
      f"tune/sacrebleu_beam{r['beam_size']}_alpha{r['alpha']:g}": {200: pytest.approx(r["value"])}
      for r in choice["grid"]}

  def translate(*flags):
    result = subprocess.run(
        [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
         f"--input_file={dev_src}", "--decode_extra_length=10", "--n_best=1", *flags],
        capture_output=True, text=True, env=_ENV, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result
  default = translate()
  assert f"beam_size {choice['beam_size']}, alpha {choice['alpha']:g}" in default.stderr
  explicit = translate(f"--beam_size={choice['beam_size']}", f"--alpha={choice['alpha']}")
  assert default.stdout == explicit.stdout
  other = 3 - choice["beam_size"]  # the other beam of the grid: a flag still overrides
  overridden = translate(f"--beam_size={other}")
  assert translate(f"--beam_size={other}", f"--alpha={choice['alpha']}").stdout == overridden.stdout
  # the line says what is used: the flag's beam, decoding.json's alpha
  assert f"decoding with beam_size {other}, alpha {choice['alpha']:g}," in overridden.stderr


def test_tune_refuses_a_bad_grid_before_loading(tmp_path):
  result = subprocess.run([sys.executable, "-m", "t2t_repro.tune", f"--model_dir={tmp_path}",
                           "--beam_sizes=0,4"], capture_output=True, text=True, env=_ENV,
                          timeout=300, check=False)
  assert result.returncode == 2 and "tune: error: --beam_sizes=0,4" in result.stderr
  assert not os.listdir(tmp_path)


def test_a_broken_decoding_json_is_one_line(trained_run, tmp_path):
  model_dir = shutil.copytree(trained_run.model_dir, tmp_path / "model")
  (model_dir / "decoding.json").write_text('{"beam_size": 0}', encoding="utf-8")
  before = sorted(os.listdir(model_dir))
  result = subprocess.run([sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}"],
                          input="A dog.\n", capture_output=True, text=True, env=_ENV, timeout=300,
                          check=False)
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
  errors = [line for line in result.stderr.splitlines() if line.startswith("translate: error: ")]
  assert len(errors) == 1 and "decoding.json: not a choice of" in errors[0]
  assert sorted(os.listdir(model_dir)) == before


def test_the_tuned_line_names_only_the_settings_a_command_uses(tmp_path, caplog, request):
  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import tuned_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.model_dir import ModelDir  # pylint: disable=import-outside-toplevel
  (tmp_path / "hparams.json").write_text(get_hparams("tiny").to_json(), encoding="utf-8")
  (tmp_path / "decoding.json").write_text(json.dumps(
      {"beam_size": 5, "alpha": 1.4, "metric": "sacrebleu", "value": 20.5, "dev": "val"}),
      encoding="utf-8")
  caplog.set_level("INFO")
  # An earlier command run in this process may have lowered absl's verbosity.
  request.addfinalizer(lambda v=absl_logging.get_verbosity(): absl_logging.set_verbosity(v))
  absl_logging.set_verbosity(absl_logging.INFO)
  scored = tuned_hparams(ModelDir(str(tmp_path)), tuned=("alpha",))  # score: no beam
  assert (scored.beam_size, scored.alpha) == (get_hparams("tiny").beam_size, 1.4)
  assert caplog.messages[-1].endswith(
      "decoding.json: tune chose alpha 1.4 (on val by sacrebleu 20.50), the default of --alpha")
  decoded = tuned_hparams(ModelDir(str(tmp_path)))
  assert (decoded.beam_size, decoded.alpha) == (5, 1.4)
  assert caplog.messages[-1].endswith("tune chose beam_size 5, alpha 1.4 (on val by sacrebleu "
                                      "20.50), the defaults of --beam_size and --alpha")
