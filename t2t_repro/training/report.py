"""What the training loop reports besides its progress lines: the startup and closing
blocks (stderr). TensorBoard's summaries are `training.summaries`."""

import keras

from t2t_repro import logs
from t2t_repro.errors import MissingDataError


def split_sizes(problem, train, dev):
  """Pair counts of the train, dev and test splits for the startup block.

  Args:
    problem: the `Problem`; its test split is read here when its files exist.
    train: the streamed training corpus (`len`: line pairs, empty ones included).
    dev: the dev ParallelText already read, or None.

  Returns:
    dict split -> int, or None when the split is absent or not read.
  """
  test = None
  try:
    if "test" in problem.splits and problem.has_local_files("test"):
      test = len(problem.text_pairs("test"))
  except MissingDataError:  # e.g. no data dir: every other split was given as files
    pass
  return {"train": len(train), "dev": len(dev) if dev is not None else None, "test": test}


def startup_rows(trainer, problem, tokenizer, sizes, run_info):
  """(key, value) rows of the startup block (logs.block)."""
  from t2t_repro.model.summary import count_parameters  # pylint: disable=import-outside-toplevel
  hp, strategy = trainer.hparams, trainer.strategy
  replicas = strategy.num_replicas_in_sync
  resolver = getattr(strategy, "cluster_resolver", None)
  workers = len(resolver.cluster_spec().as_dict().get("worker", [])) if resolver and \
      resolver.task_type else 1
  devices = ", ".join(d.rsplit("/", 1)[-1].replace("device:", "")
                      for d in strategy.extended.worker_devices)
  data = ", ".join(f"{split} {count:,}" if count is not None else f"{split} -"
                   for split, count in sizes.items())
  precision = keras.mixed_precision.global_policy().name
  restored = run_info.get("restored")
  return [
      ("problem", f"{problem.name} ({problem.source_lang}->{problem.target_lang})"),
      ("pairs", data),
      ("vocabulary", f"{tokenizer.vocab_size:,} pieces, {run_info.get('vocab', '')}"),
      ("hparams", run_info.get("hparams", "")),
      ("parameters", f"{count_parameters(trainer.model):,}"),
      ("devices", f"{type(strategy).__name__}: {replicas} replica(s) on {devices}; "
                  f"{workers} worker(s)"),
      ("tokens/update", f"{hp.batch_tokens:,} batch_tokens x {replicas} replica(s) x "
                        f"{trainer.accum_steps} accum_steps = "
                        f"{hp.batch_tokens * replicas * trainer.accum_steps:,}"),
      ("precision", f"{precision}{', XLA' if trainer.jit_compile else ''}"),
      ("model dir", trainer.model_dir),
      ("start", f"resumed from {restored} at step {trainer.step}" if restored
       else f"new run at step {trainer.step}, weights of {run_info['init_from']} (new optimizer)"
       if run_info.get("init_from") else f"new run at step {trainer.step}"),
      ("train steps", f"{hp.train_steps:,}"),
  ] + _startup_time_row(run_info.get("import_seconds", 0.0))


def _startup_time_row(import_seconds):
  """The "start-up" row in a command: the seconds since it started and their imports (the
  command's modules, then TensorFlow and Keras: `import_seconds`); the first update's
  tracing comes after the block (`loop`'s "first update done" line)."""
  so_far, command_imports = logs.startup_times()
  if so_far is None:
    return []
  return [("start-up", f"{so_far:.1f} s so far, of which imports "
                       f"{(command_imports or 0.0) + import_seconds:.1f} s")]


def closing_block(trainer, start_step, phases, wall_time, result):
  """The closing block (logs.block) of a run: steps, times, checkpoints and scores.

  Args:
    trainer: the `Trainer` (its `step` and `model_dir` are read).
    start_step: the step the run started at.
    phases: [(name, seconds)] of the phases that ran, in order (e.g. training, dev, test);
      the wall time names these only.
    wall_time: seconds of the whole run (reading the data and saving included).
    result: the `TrainResult` (`config.TrainResult`).
  """
  if result.stopped:
    done = "stopped by " + result.stopped
  else:
    done = "stopped early (no dev improvement)" if result.early_stopped else "finished"
  rows = [("steps", f"{start_step:,} -> {trainer.step:,} ({trainer.step - start_step:,} this run)"),
          ("wall time", f"{logs.hms(wall_time)} ("
                        + ", ".join(f"{name} {logs.hms(t)}" for name, t in phases) + ")"),
          ("checkpoint", result.checkpoint or "none written")]
  if result.dev:
    rows.append(("dev", dev_message(result.dev)))
  if result.best:
    rows.append(("best", f"dev {result.best['metric']} {result.best['value']:.4f} at step "
                         f"{result.best['step']}: {result.best['dir']}"))
  if result.averaged:
    rows.append(("averaged", result.averaged))
  if result.ema:
    rows.append(("ema", result.ema["checkpoint"] + (
        f" (ema dev {dev_message(result.ema['dev'])})" if result.ema["dev"] else "")))
  if result.test is not None:
    rows.append(("test", f"sacreBLEU {result.test['sacrebleu']:.2f} "
                         f"({result.test_description})"))
  rows.append(("outputs", f"{trainer.model_dir} (checkpoints, hparams.json, flags.json, "
                          f"vocab.model; TensorBoard: tensorboard --logdir={trainer.model_dir})"))
  return logs.block(f"t2t_repro.train {done}", rows)


def dev_message(dev_stats):
  message = (f"step {dev_stats['step']}: loss {dev_stats['loss']:.4f} nll {dev_stats['nll']:.4f} "
             f"ppl {dev_stats['ppl']:.2f}")
  if "bleu" in dev_stats:
    message += (f" BLEU {dev_stats['bleu']:.2f} (sacreBLEU, first {dev_stats['bleu_lines']} "
                "dev lines)")
  return message
