"""What a run shows in TensorBoard (`training.summaries`), read back from the event files of the
suite's shared `trained_run` (`tiny`, 200 steps, dev evaluations at 0 and 200 with a dev BLEU
on 20 lines and 10 sample lines, test BLEU on 20 lines): every tag, the translations table,
the attention images, the HParams row and the Projector's vocabulary."""

import contextlib
import re
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import api_pb2, metadata as hparams_metadata

from events_util import read_events, scalars
from t2t_repro import model_dir
from t2t_repro.config.train import TrainConfig
from t2t_repro.decoding import attention_plot
from t2t_repro.decoding.loading import load_for_inference
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.training import summaries
from t2t_repro.training.evaluator import Evaluator

KINDS = ("encoder_self", "decoder_self", "encoder_decoder")


@pytest.fixture(name="run", scope="module")
def fixture_run(trained_run):
  assert trained_run.returncode == 0, trained_run.stderr[-3000:]
  model_dir = trained_run.model_dir
  return {"dir": model_dir, "output": trained_run.stderr,
          **{name: read_events(model_dir / name) for name in ("train", "dev")}}


def test_train_and_dev_scalars_share_grouped_tags(run):
  train, dev = run["train"], run["dev"]
  grouped = {"loss/loss", "loss/nll", "loss/perplexity"}
  assert set(train) == grouped | {"train_step"} | {
      "optimization/learning_rate", "optimization/grad_norm", "optimization/skipped_updates",
      "speed/target_tokens_per_sec"}
  assert sorted(scalars(train, "loss/loss")) == list(range(5, 201, 5))  # log_every_steps=5
  nll = scalars(train, "loss/nll")[200]
  assert scalars(train, "loss/perplexity")[200] == pytest.approx(np.exp(nll), rel=1e-5)
  printed = {int(step): (float(loss), float(ppl)) for step, loss, ppl in re.findall(
      r"dev step (\d+): loss ([\d.]+) nll [\d.]+ ppl ([\d.]+)", run["output"])}
  assert set(printed) == {0, 200}
  for step, (loss, ppl) in printed.items():
    assert scalars(dev, "loss/loss")[step] == pytest.approx(loss, abs=1e-4)
    assert scalars(dev, "loss/perplexity")[step] == pytest.approx(ppl, abs=0.01)
  assert scalars(dev, "loss/best_loss") == {0: pytest.approx(printed[0][0], abs=1e-4),
                                            200: pytest.approx(printed[200][0], abs=1e-4)}
  bleu = {int(s): float(b) for s, b in re.findall(r"dev step (\d+): .* BLEU ([\d.]+)",
                                                  run["output"])}
  assert scalars(dev, "quality/bleu") == {s: pytest.approx(b, abs=0.01) for s, b in bleu.items()}
  test = float(re.search(r"test +sacreBLEU ([\d.]+)", run["output"]).group(1))
  assert scalars(dev, "quality/test_bleu") == {200: pytest.approx(test, abs=0.01)}


def test_the_graph_of_one_training_step(run):
  [(step, tensor, plugin, _)] = run["train"]["train_step"]
  assert (step, plugin) == (1, "graph_run_metadata_graph")
  graphs = [g.pre_optimization_graph for g in
            tf.compat.v1.RunMetadata.FromString(tensor.item()).function_graphs]
  ops = {n.op for g in graphs for f in g.library.function for n in f.node_def} | {
      n.op for g in graphs for n in g.node}
  assert {"ResourceApplyAdam", "BatchMatMulV2"} <= ops  # the update and the attention


def test_dev_translations_table_of_the_first_dev_lines(run, multi30k_slice):
  entries = run["dev"]["translations/dev"]
  assert [step for step, *_ in entries] == [0, 200] and entries[0][2] == "text"
  rows = entries[-1][1].item().decode("utf-8").split("\n")
  assert rows[:2] == ["| source | reference | translation |", "|---|---|---|"]
  cells = [row[2:-2].split(" | ") for row in rows[2:]]
  sources = (multi30k_slice / "dev.en").read_text(encoding="utf-8").splitlines()[:10]
  references = (multi30k_slice / "dev.de").read_text(encoding="utf-8").splitlines()[:10]
  assert [c[0] for c in cells] == sources and [c[1] for c in cells] == references
  model, hparams, tokenizer = load_for_inference(str(run["dir"]))  # the step-200 checkpoint
  assert [c[2] for c in cells] == Translator(model, tokenizer,
                                             DecodeConfig.resolve(hparams)).translate(sources)


def test_attention_images_of_one_dev_sentence_at_each_evaluation(run):
  for kind in KINDS:
    entries = run["dev"][f"attention/{kind}"]
    assert [step for step, *_ in entries] == [0, 200] and entries[0][2] == "images"
    width, height, png = entries[-1][1]
    image = tf.io.decode_png(png).numpy()
    assert image.shape[:2] == (int(height), int(width)) and image.shape[1] > 400
    assert image.std() > 10  # drawn, not blank


def test_hparams_row_metrics_and_end(run):
  def content(tag):
    [(_, _, plugin, data)] = run["dev"][tag]
    assert plugin == hparams_metadata.PLUGIN_NAME
    return data
  experiment = hparams_metadata.parse_experiment_plugin_data(
      content(hparams_metadata.EXPERIMENT_TAG))
  shown = {info.name for info in experiment.hparam_infos if info.differs}
  assert shown == set(summaries.DEFAULT_COLUMNS)
  assert [(m.name.group, m.name.tag, m.display_name) for m in experiment.metric_infos] == [
      ("", "loss/best_loss", "best dev loss"), ("", "loss/perplexity", "dev perplexity"),
      ("", "quality/bleu", "dev BLEU"), ("", "quality/test_bleu", "test BLEU")]
  start = hparams_metadata.parse_session_start_info_plugin_data(
      content(hparams_metadata.SESSION_START_INFO_TAG))
  values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
            for k, v in start.hparams.items()}
  assert {k: values[k] for k in ("hparams", "problem", "replicas", "mixed_precision", "d_model",
                                 "num_layers")} == {
      "hparams": "tiny", "problem": "parallel_text", "replicas": 1.0, "mixed_precision": "none",
      "d_model": 64.0, "num_layers": 2.0}
  assert "model_dir" not in values and "data_dir" not in values
  assert start.group_name == "model"  # the model dir's name
  assert {info.name for info in experiment.hparam_infos} == set(values)
  end = hparams_metadata.parse_session_end_info_plugin_data(
      content(hparams_metadata.SESSION_END_INFO_TAG))
  assert end.status == api_pb2.STATUS_SUCCESS


def _lines(path):
  return path.read_text(encoding="utf-8").splitlines()


def test_projector_vocabulary_matches_the_embedding(run):
  vocab = _lines(run["dir"] / model_dir.PROJECTOR_VOCAB_FILE)
  shapes = dict(tf.train.list_variables(str(run["dir"])))
  assert shapes[summaries.EMBEDDING_KEY] == [len(vocab), 64]
  _, _, tokenizer = load_for_inference(str(run["dir"]))
  assert vocab[:2] == ["<pad>", "</s>"] and vocab == attention_plot.pieces(
      tokenizer, range(len(vocab)))
  for folder in (".", "train", "dev"):  # the Projector offers each run
    config = (run["dir"] / folder / model_dir.PROJECTOR_FILE).read_text(encoding="utf-8")
    assert config == (f'embeddings {{\n  tensor_name: "{summaries.EMBEDDING_KEY}"\n'
                      '  metadata_path: "vocab.tsv"\n}\n')
    assert _lines(run["dir"] / folder / model_dir.PROJECTOR_VOCAB_FILE) == vocab


def test_dev_bleu_every_steps_keeps_it_for_its_steps_and_the_last():
  """The dev BLEU's schedule (`Evaluator._bleu_due`) and the names of tune's scalars."""
  def due(every, step, last=False):
    evaluator = Evaluator.__new__(Evaluator)
    evaluator.config = TrainConfig(dev_bleu_lines=100, dev_bleu_every_steps=every)
    return bool(evaluator._bleu_due(step, last))  # pylint: disable=protected-access
  assert [due(0, s) for s in (500, 700)] == [True, True]
  assert [due(1000, 500), due(1000, 1000), due(1000, 700, last=True)] == [False, True, True]
  grid = [{"beam_size": 4, "alpha": 0.6, "value": 20.5},
          {"beam_size": 4, "alpha": 1.0, "value": 21.0}]
  assert summaries.tune_scalars({"metric": "sacrebleu", "grid": grid}) == {
      "tune/sacrebleu_beam4_alpha0.6": 20.5, "tune/sacrebleu_beam4_alpha1": 21.0}


@pytest.mark.parametrize("how, status", [("stopped", api_pb2.STATUS_RUNNING),  # to be resumed
                                         ("error", api_pb2.STATUS_FAILURE),
                                         ("finished", api_pb2.STATUS_SUCCESS)])
def test_the_run_end_is_recorded_as_it_ended(tmp_path, monkeypatch, how, status):
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(summaries, "write_projector", lambda *args: None)
  trainer = types.SimpleNamespace(chief=True, model_dir=str(tmp_path), step=7,
                                  hparams=get_hparams("tiny"),
                                  strategy=types.SimpleNamespace(num_replicas_in_sync=2))
  with contextlib.suppress(RuntimeError):
    run_info = {"flags": {"hparams": "tiny", "model_dir": "x"}}
    with summaries.hparams_row(trainer, None, run_info) as end:
      if how == "error":
        raise RuntimeError("a failed run")
      end["stopped"] = "SIGTERM" if how == "stopped" else None
  dev = read_events(tmp_path / "dev")
  [(step, _, _, content)] = dev[hparams_metadata.SESSION_END_INFO_TAG]
  assert (step, hparams_metadata.parse_session_end_info_plugin_data(content).status) == (7, status)
  [(_, _, _, content)] = dev[hparams_metadata.SESSION_START_INFO_TAG]
  start = hparams_metadata.parse_session_start_info_plugin_data(content)
  assert start.hparams["replicas"].number_value == 2 and "model_dir" not in start.hparams
