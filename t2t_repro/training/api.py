"""Training as a library call: `train_model(TrainConfig(...)) -> TrainResult`.

The train command (`python -m t2t_repro.train`) is this function behind flags; a
library caller (e.g. `parsing.pipeline.train_parser`) calls it in-process:

  from t2t_repro.training.api import train_model
  from t2t_repro.config.train import TrainConfig
  result = train_model(TrainConfig(model_dir="runs/x", hparams="tiny",
                             problem="translate_ende_multi30k", train_steps=100))
  print(result.step, result.checkpoint, result.dev, result.best)

Every setting, hparam and data file is checked before anything is written
(`training.preflight`, docs/RELIABILITY.md); a failed call leaves the model dir as
it was, or absent. A model dir that holds a run resumes from its latest checkpoint.
"""

import contextlib
import dataclasses
import tempfile
import time

from absl import logging

from t2t_repro import errors, writer_lock
from t2t_repro.config import hparams as hparams_lib
from t2t_repro.model_dir import ModelDir
from t2t_repro.training import preflight, signals


def _make_strategy(config):
  """The tf.distribute strategy of `config` (num_cpu_replicas logical CPUs first)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.training import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  if config.num_cpu_replicas > 1:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * config.num_cpu_replicas)
  try:
    return trainer_lib.make_strategy(config.strategy, config.num_gpus)
  except ValueError as e:
    raise errors.UsageError(errors.marked(e)) from None


def train_model(config):
  """Trains (or resumes) the run of `config.model_dir`.

  Args:
    config: a `config.train.TrainConfig`.

  Returns:
    A `config.train.TrainResult`: final step, last checkpoint, dev and test
    scores, the signal that stopped it, early stopping, the best checkpoint
    (`{model_dir}/best/`) and the averaged checkpoint (`{model_dir}/averaged/`).

  Raises:
    errors.UsageError: a bad setting or combination, a resume with other hparams or
      update settings (the message names the flag).
    errors.DataError: missing, empty or unusable data files, a full disk; another writer
      holds the model dir (`writer_lock.LockedError`), or it cannot be written.
    errors.WorkerLostError: another worker of a multi-worker job is gone (`workers`).

  SIGINT/SIGTERM end the call at once before training and during dev evaluation
  (nothing is lost), and save and stop during the steps (`training.signals`).
  """
  with signals.exit_at_once(), tempfile.TemporaryDirectory(prefix="t2t_vocab_") as staging, \
      contextlib.ExitStack() as lock:
    hp, problem = preflight.validate(config)
    model_dir = ModelDir(config.model_dir)
    preflight.check_data_files(config, problem)
    # TensorFlow and Keras, timed for the startup block: after the checks without them, so a
    # usage error comes at once; before the first check that needs them.
    imports_started = time.monotonic()
    import keras  # pylint: disable=import-outside-toplevel
    from t2t_repro.training import loop, trainer as trainer_lib, workers  # pylint: disable=import-outside-toplevel
    imports = time.monotonic() - imports_started
    preflight.check_model_dir(model_dir, hp)
    init = preflight.check_init_from(config, hp, problem)

    strategy = _make_strategy(config)
    if trainer_lib.is_chief(strategy):  # the one writer of the model dir (`writer_lock`)
      lock.enter_context(writer_lock.hold(model_dir, "train"))
    keras.utils.set_random_seed(config.seed)
    update = {"accum_steps": config.accum_steps, "batch_tokens": hp.batch_tokens,
              "replicas": strategy.num_replicas_in_sync, "mixed_precision": config.mixed_precision,
              "ema_decay": config.ema_decay}
    update_changed = preflight.check_update_settings(config, update)
    tokenizer, vocab_path = preflight.prepare_vocab(config, problem, hp, staging,
                                                    init[1] if init else None)
    data_cache_dir = config.vocab_dir or preflight.staged_corpus_records(model_dir, staging)
    trainer = trainer_lib.Trainer(hp, strategy, model_dir.path, accum_steps=config.accum_steps,
                                  jit_compile=config.jit_compile,
                                  mixed_precision=config.mixed_precision,
                                  keep_checkpoint_max=config.keep_checkpoint_max,
                                  ema_decay=config.ema_decay)
    restored = preflight.restore_checked(trainer, model_dir)
    if init and restored:
      logging.warning("init_from=%s is ignored: %s resumes from %s", config.init_from,
                      model_dir, restored)
    elif init:
      preflight.initialize_weights(trainer, init[0])
    run_info = {"hparams": hparams_lib.changes_text(config.hparams, hp),
                "vocab": model_dir.vocab_path, "restored": restored,
                "init_from": None if restored or not init else init[0],
                "flags": dataclasses.asdict(config), "update_changed": update_changed,
                "import_seconds": imports}

    def commit():
      if trainer.chief:
        preflight.write_model_dir(model_dir, config, hp, vocab_path, update["replicas"], staging)

    try:
      return loop.run(trainer, problem, tokenizer, config, data_cache_dir=data_cache_dir,
                      before_training=commit, run_info=run_info)
    except Exception as e:  # pylint: disable=broad-except
      lost = workers.lost_worker(e, model_dir.path, trainer.step) \
          if trainer.input_context().num_input_pipelines > 1 else None
      if lost is None:
        raise
      raise lost from None
