"""What a run shows in TensorBoard (`tensorboard --logdir={model_dir}`), as tensor2tensor and
OpenNMT-tf users know it. The one module that names the tags.

  {model_dir}/train/  Scalars every log_every_steps updates: loss/loss (label-smoothed),
                      loss/nll, loss/perplexity; optimization/learning_rate,
                      optimization/grad_norm, optimization/skipped_updates;
                      speed/target_tokens_per_sec. Graphs: one training step, traced once
                      at the start of the process.
  {model_dir}/dev/    At every dev evaluation: loss/loss, loss/nll, loss/perplexity (the
                      same tags as train, so train and dev share each chart), loss/best_loss
                      (the lowest so far); quality/bleu when the dev BLEU is computed; Text
                      translations/dev, a Markdown table of the first `dev_samples` dev lines
                      (source, reference, translation); Images attention/encoder_self,
                      attention/decoder_self, attention/encoder_decoder: every head of the last
                      layer for one fixed dev sentence (`attention_plot.attention_pngs`).
                      After training quality/test_bleu; after `tune` one
                      tune/{metric}_beam{b}_alpha{a} scalar per grid point. HParams: the
                      model's hparams and the run settings of `RUN_SETTINGS`, metrics best dev
                      loss, dev perplexity, dev BLEU and test BLEU, and the run's end (success,
                      failure, or running for a run stopped by a signal). The HParams row
                      is written in the dev run itself: TensorBoard 2.21 finds no metric in a
                      subfolder of a row written in the logdir itself ("./dev" is not "dev").
  {model_dir}/        Projector: vocab.tsv, the pieces of the embedding rows, named by
                      `projector_config.pbtxt` (the metadata OpenNMT-tf writes); both also in
                      train/ and dev/.

Only the chief writes. Scalars are float32; steps are optimizer updates.
"""

import contextlib
import os
import time

import tensorflow as tf

from t2t_repro import model_dir as model_dir_lib
from t2t_repro.model_dir import ModelDir

ATTENTION_MAX_WORDS = 20  # the attention sentence: the first sample line of at most this many words
# The checkpoint key of the shared embedding matrix [vocab_size, d_model] (the Projector's tensor).
EMBEDDING_KEY = "model/embedding/embeddings/.ATTRIBUTES/VARIABLE_VALUE"
# HParams columns: the run settings beside the model's hparams (values from flags.json, and the
# replicas), and those TensorBoard shows by default (it shows the first five it lists).
RUN_SETTINGS = ("hparams", "problem", "replicas", "mixed_precision")
DEFAULT_COLUMNS = ("hparams", "problem", "d_model", "num_layers", "train_steps")
# HParams metrics: (display name, tag in the dev run).
METRICS = (("best dev loss", "loss/best_loss"), ("dev perplexity", "loss/perplexity"),
           ("dev BLEU", "quality/bleu"), ("test BLEU", "quality/test_bleu"))


def writer(model_dir, run=model_dir_lib.DEV_EVENTS_DIR):
  """A summary file writer for `{model_dir}/{run}`."""
  return tf.summary.create_file_writer(ModelDir(model_dir).file(run))


def write_train(summary_writer, step, stats, learning_rate, tokens_per_sec, skipped):
  """The training scalars of `step`: stats of `Trainer.train_step`, the learning rate,
  target tokens per second and the updates skipped so far."""
  with summary_writer.as_default(step=step):
    _loss_scalars(stats["loss"], stats["nll"])
    tf.summary.scalar("optimization/learning_rate", learning_rate)
    tf.summary.scalar("optimization/grad_norm", stats["grad_norm"])
    tf.summary.scalar("optimization/skipped_updates", skipped)
    tf.summary.scalar("speed/target_tokens_per_sec", tokens_per_sec)


def _loss_scalars(loss, nll):
  tf.summary.scalar("loss/loss", loss)
  tf.summary.scalar("loss/nll", nll)
  tf.summary.scalar("loss/perplexity", min(float(tf.exp(float(nll))), 1e9))


def write_dev(summary_writer, stats, best_loss, samples, attention):
  """One dev evaluation: its scalars (stats of `Evaluator`, "step" among them), the best loss
  so far, the translations table of `samples` [(source, reference, translation)] (none when
  empty) and the
  attention images `attention` ({kind: PNG bytes}, or None)."""
  with summary_writer.as_default(step=stats["step"]):
    _loss_scalars(stats["loss"], stats["nll"])
    tf.summary.scalar("loss/best_loss", best_loss)
    if "bleu" in stats:
      tf.summary.scalar("quality/bleu", stats["bleu"])
    if samples:
      rows = ["| source | reference | translation |", "|---|---|---|"]
      rows += ["| " + " | ".join(t.replace("|", "\\|") for t in row) + " |" for row in samples]
      tf.summary.text("translations/dev", "\n".join(rows))
    for kind, png in (attention or {}).items():
      tf.summary.image(f"attention/{kind}", tf.io.decode_png(png, channels=3)[tf.newaxis])
  summary_writer.flush()


def attention_line(sources):
  """The index of the attention sentence among `sources` (the sample lines)."""
  return next((i for i, s in enumerate(sources) if len(s.split()) <= ATTENTION_MAX_WORDS), 0)


def write_scalars(model_dir, step, values, run=model_dir_lib.DEV_EVENTS_DIR):
  """Scalars {tag: value} at `step` in `{model_dir}/{run}` (e.g. the test BLEU, tune's grid),
  with a writer of their own."""
  summary_writer = writer(model_dir, run)
  with summary_writer.as_default(step=step):
    for tag, value in values.items():
      tf.summary.scalar(tag, value)
  summary_writer.close()


def tune_scalars(choice):
  """{tag: value} of a `tuning.tune_decoding` result: its metric at every grid point."""
  return {f"tune/{choice['metric']}_beam{row['beam_size']}_alpha{row['alpha']:g}": row["value"]
          for row in choice["grid"]}


@contextlib.contextmanager
def trace_graph(summary_writer, step):
  """Traces the graph of the functions first called inside the block (one training step) and
  writes it to `summary_writer` at `step` (TensorBoard's Graphs). No-op for a None writer."""
  if summary_writer is None:
    yield
    return
  tf.summary.trace_on(graph=True, profiler=False)
  try:
    yield
  finally:
    with summary_writer.as_default(step=step):
      tf.summary.trace_export("train_step", step=step)
    summary_writer.flush()


def run_values(trainer, run_info):
  """The HParams row of a run: {name: value} of the hparams (description left out) and the
  `RUN_SETTINGS` (from run_info["flags"], the replicas from the trainer)."""
  values = {k: v for k, v in trainer.hparams.to_dict().items() if k != "description"}
  flags = run_info.get("flags", {})
  values.update({k: flags[k] for k in RUN_SETTINGS if isinstance(flags.get(k), (str, int, float))})
  values["replicas"] = trainer.strategy.num_replicas_in_sync
  return {k: v for k, v in values.items() if isinstance(v, (bool, int, float, str))}


@contextlib.contextmanager
def hparams_row(trainer, tokenizer, run_info):
  """Around a run (chief only): at the start the HParams experiment and the run's row (in the
  dev run) and the Projector's vocabulary; at the end the run's status, from the dict the
  block gets: "stopped" set (a signal) -> running (to be resumed), an exception -> failure (a
  SystemExit or KeyboardInterrupt: running), else success."""
  # pylint: disable-next=import-outside-toplevel
  from tensorboard.plugins.hparams import api as hparams_api, api_pb2, summary as hparams_summary
  if not trainer.chief:
    yield {}
    return
  model_dir = trainer.model_dir
  values = run_values(trainer, run_info)
  dev_writer = writer(model_dir)
  with dev_writer.as_default(step=trainer.step):
    _write_experiment(values)
    hparams_api.hparams(values, trial_id=os.path.basename(os.path.normpath(model_dir)))
  dev_writer.flush()
  write_projector(model_dir, tokenizer)
  # TensorBoard has no "stopped" status: a run stopped by a signal (it resumes where it
  # stopped) is recorded as running.
  outcome, status = {}, api_pb2.STATUS_FAILURE
  try:
    yield outcome
    status = api_pb2.STATUS_RUNNING if outcome.get("stopped") else api_pb2.STATUS_SUCCESS
  except (KeyboardInterrupt, SystemExit):
    status = api_pb2.STATUS_RUNNING
    raise
  finally:
    with dev_writer.as_default(step=trainer.step):
      end = hparams_summary.session_end_pb(status, time.time())
      tf.summary.experimental.write_raw_pb(end.SerializeToString(), step=trainer.step)
    dev_writer.close()


def _write_experiment(values):
  """The HParams experiment (the default writer): one column per value, typed, those of
  DEFAULT_COLUMNS marked `differs`, which TensorBoard lists first and so shows by default,
  and the METRICS. No domains: a domain would hide other runs' values in the dashboard."""
  # pylint: disable-next=import-outside-toplevel
  from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
  from tensorboard.compat.proto import summary_pb2  # pylint: disable=import-outside-toplevel
  types = {bool: api_pb2.DATA_TYPE_BOOL, str: api_pb2.DATA_TYPE_STRING}
  experiment = api_pb2.Experiment(
      hparam_infos=[api_pb2.HParamInfo(name=name, type=types.get(type(value),
                                                                 api_pb2.DATA_TYPE_FLOAT64),
                                       differs=name in DEFAULT_COLUMNS)
                    for name, value in values.items()],
      metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag), display_name=display)
                    for display, tag in METRICS],
      time_created_secs=time.time())
  summary = summary_pb2.Summary()
  summary.value.add(tag=metadata.EXPERIMENT_TAG, metadata=metadata.create_summary_metadata(
      plugin_data_pb2.HParamsPluginData(experiment=experiment)), tensor=metadata.NULL_TENSOR)
  tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=0)


def write_projector(model_dir, tokenizer):
  """`vocab.tsv` (one piece per embedding row) and the Projector's config naming it as the
  metadata of the embedding (`EMBEDDING_KEY`), in the model dir and in its train and dev runs
  (the Projector offers every run with a checkpoint at or above it, dev first, and reads no
  metadata outside a run's folder); each file written atomically."""
  from t2t_repro.decoding.attention_plot import pieces  # pylint: disable=import-outside-toplevel
  labels = pieces(tokenizer, range(tokenizer.vocab_size))
  vocab = "".join(p.replace("\t", " ") + "\n" for p in labels)
  config = (f'embeddings {{\n  tensor_name: "{EMBEDDING_KEY}"\n'
            f'  metadata_path: "{model_dir_lib.PROJECTOR_VOCAB_FILE}"\n}}\n')
  for folder in (ModelDir(model_dir), ModelDir(model_dir).subdir(model_dir_lib.TRAIN_EVENTS_DIR),
                 ModelDir(model_dir).subdir(model_dir_lib.DEV_EVENTS_DIR)):
    folder.write_bytes(model_dir_lib.PROJECTOR_VOCAB_FILE, vocab)
    folder.write_bytes(model_dir_lib.PROJECTOR_FILE, config)
