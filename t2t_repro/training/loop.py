"""The outer training loop: input, checkpoints, dev evaluation, the best checkpoint,
early stopping, averaging at the end, TensorBoard; what it prints goes through `logs`
(progress) and `report` (startup and closing blocks)."""

import os
import sys
import time

from absl import logging

from t2t_repro import evaluation, logs
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.data import batching
from t2t_repro.errors import DataError
from t2t_repro.training import averaging, report, summaries
from t2t_repro.training.best import BestCheckpoint
from t2t_repro.config.train import TrainResult
from t2t_repro.training.evaluator import Evaluator, bleu
from t2t_repro.model_dir import ModelDir
from t2t_repro.training.signals import StopSignal, exit_at_once

# Training pairs (in file order) whose lengths are counted at the start of a run; only when
# none of them fits max_length (or none has text) is the check extended to CHECK_PAIRS before
# refusing to train, so a normal start tokenizes a small sample only.
SAMPLE_PAIRS = 1000
CHECK_PAIRS = 30000


def _train_data(trainer, pairs, tokenizer, seed, cache_mb):
  """This worker's training batches (with subword sampling when hparams.subword_alpha > 0):
  a tf.data dataset whose iterator `Trainer.train_step` reads and checkpoints save."""
  hp = trainer.hparams
  sampling = tokenizer.sampling(hp.subword_nbest, hp.subword_alpha) if hp.subword_alpha > 0 \
      else None
  return batching.make_dataset(
      pairs, tokenizer, batch_tokens=hp.batch_tokens, max_length=hp.max_length, training=True,
      seed=seed, input_context=trainer.input_context(), cache_mb=cache_mb,
      sampling_tokenizer=sampling)


def _dev_data(trainer, pairs, tokenizer):
  """Dev batches, every side cut to max_length tokens (see `_warn_long`), distributed."""
  hp = trainer.hparams
  return batching.make_distributed_dataset(
      trainer.strategy, pairs, tokenizer, batch_tokens=hp.batch_tokens, max_length=hp.max_length,
      training=False, truncate_length=hp.max_length)


def _new_order(trainer, config, restored, reason):
  """Logs the one warning line of a resume whose input restarts; returns its seed (seed + step)."""
  logging.warning("resuming at step %d with a new input order (seed %d + step): the input "
                  "position of %s is not restored (%s)", trainer.step, config.seed, restored,
                  reason)
  return config.seed + trainer.step


def _train_iterator(trainer, train, tokenizer, config, run_info):
  """The training input's iterator, attached to the trainer's checkpoints. A fresh run starts
  at config.seed; a resume continues from the restored checkpoint's input position (the
  uninterrupted run's batches) when it can, and otherwise starts a new order (seed + step).
  Each case a resume cannot make exact is one warning line."""
  restored = run_info.get("restored")
  single = trainer.input_context().num_input_pipelines == 1
  changed = run_info.get("update_changed") or []
  seed, restore_from = config.seed, None
  if restored:
    from t2t_repro.training.trainer import checkpoint_children  # pylint: disable=import-outside-toplevel
    if not single:
      seed = _new_order(trainer, config, restored, "a multi-worker run does not save each "
                        "worker's position")
    elif "input" not in checkpoint_children(restored):
      seed = _new_order(trainer, config, restored, "it was written before checkpoints held it")
    elif "batch_tokens" in changed:
      seed = _new_order(trainer, config, restored, "batch_tokens changed")
    else:
      restore_from = restored

  def make(seed):
    return logs.keep_until_exit(  # its destructor would wait for the prefetch threads
        iter(_train_data(trainer, train, tokenizer, seed, config.cache_examples_mb)))

  iterator = make(seed)
  if not single:
    return iterator
  if restore_from:
    try:
      trainer.attach_input(iterator, restore_from)
    except ValueError:
      seed = _new_order(trainer, config, restored, "it is the position of another input "
                        "pipeline: other training data, --cache_examples_mb or hparams")
      iterator = make(seed)
      restore_from = None
  inexact = [k for k in changed if k in ("replicas", "accum_steps", "mixed_precision")]
  if restore_from and (inexact or trainer.hparams.subword_alpha > 0):
    logging.warning("resuming at step %d where the input stopped, but not as the uninterrupted run: "
                    "%s", trainer.step, f"{', '.join(inexact)} changed" if inexact else
                    "the subword sampling (subword_alpha) draws anew")
  if not restore_from:
    trainer.attach_input(iterator)
  return iterator


def _lengths(pairs, tokenizer):
  """max(source, target) length of each tokenized pair [tokens, EOS included]: int list."""
  return [max(len(ex["inputs"]), len(ex["targets"]))
          for ex in batching.tokenize_pairs(pairs, tokenizer).as_numpy_iterator()]


def _warn_long(dev, tokenizer, max_length):
  """Logs the dev pairs that the dev loss and dev BLEU cut to max_length tokens."""
  long = [i + 1 for i, n in enumerate(_lengths(dev.pairs, tokenizer)) if n > max_length]
  if long:
    logging.warning("dev: %d pairs are longer than max_length=%d tokens and are cut to it for the "
                    "dev loss and dev BLEU: pairs %s (1-based, among the non-empty pairs of %s)",
                    len(long), max_length, ", ".join(map(str, long[:10])) + " ..." * (len(long) > 10),
                    dev.origin)


def run(trainer, problem, tokenizer, config, *, data_cache_dir=None, before_training=None,
        run_info=None):
  """Trains until `hparams.train_steps` updates, saving and evaluating on the way.

  Prints (stderr) a startup block, progress (logs.Progress), dev results and a
  closing block with the last checkpoint and the scores.

  Args:
    trainer: a `Trainer` (restored or fresh).
    problem: a `data.problems.Problem` with train (and dev/test) splits.
    tokenizer: `data.vocab.Tokenizer` of the model dir.
    config: the `TrainConfig`; this reads seed (shuffling; a resumed run continues the
      input from the position saved in its checkpoint, see `_train_iterator`),
      save_checkpoints_steps/_secs,
      eval_every_steps, eval_at_start, dev_bleu_lines, log_every_steps,
      test_bleu_lines, train_minutes, cache_examples_mb, best_metric,
      early_stopping, min_improvement, average_last.
    data_cache_dir: where the training text's validation record is kept (None: not kept).
    before_training: called once the data passed its checks, before the first
      write to the model dir (`training.api` writes the model dir's files there).
    run_info: dict for the startup block and TensorBoard: "hparams" (set + overrides),
      "vocab" (path), "restored" (checkpoint path or None), "flags" (dict),
      "update_changed" (the update settings a resume changed, `preflight.check_update_settings`).

  Returns:
    A `TrainResult`.

  Raises:
    DataError: no training pair, every training pair longer than max_length,
      or no dev pair (eval_every_steps > 0); the message names the files.

  Signals: while reading data and during each dev evaluation SIGINT/SIGTERM end
  the process at once (`signals.exit_at_once`: the current step is saved before
  an evaluation); during the steps, and the dev evaluations of a job of several
  workers, they save and stop (`signals.StopSignal`).
  """
  run_info = run_info or {}
  run_start = time.monotonic()
  hp = trainer.hparams
  with exit_at_once():
    logging.info("reading the %s data", problem.name)
    train = problem.corpus("train", data_cache_dir)
    _check_train(train, tokenizer, hp.max_length)
    dev = problem.text_pairs("dev") if config.eval_every_steps else None
    if dev is not None and not len(dev):
      raise DataError(f"the dev files have no line pair with text on both sides ({dev.origin}, "
                      f"{dev.dropped_empty} empty pairs): give other `dev_src`/`dev_tgt`, or "
                      "`eval_every_steps`=0 to train without dev evaluation")
    if dev:
      _warn_long(dev, tokenizer, hp.max_length)
    if trainer.chief:
      rows = report.startup_rows(trainer, problem, tokenizer,
                                 report.split_sizes(problem, train, dev), run_info)
      print(logs.block("t2t_repro.train", rows), file=sys.stderr, flush=True)
    iterator = _train_iterator(trainer, train, tokenizer, config, run_info)
    dev_data = _dev_data(trainer, dev.pairs, tokenizer) if dev else None
  with StopSignal() as stop:
    if before_training is not None:
      before_training()
    if stop.received:
      return TrainResult(step=trainer.step, checkpoint=run_info.get("restored"),
                         stopped=stop.received)
    with summaries.hparams_row(trainer, tokenizer, run_info) as outcome:
      result = _Run(trainer, problem, tokenizer, config, stop, run_info, run_start).train(
          iterator, dev, dev_data)
      outcome["stopped"] = result.stopped
    return result


def _check_train(train, tokenizer, max_length):
  """Logs the pairs training drops among the first SAMPLE_PAIRS line pairs and raises
  DataError when it would drop every one of the first CHECK_PAIRS (all of a small corpus).

  A sample with at least one pair that fits max_length proves the training input is not
  empty after `batching`'s length filter, which would otherwise wait forever on a
  repeated empty dataset; only a sample without one is extended to CHECK_PAIRS.

  Args:
    train: a streamed corpus (`data.corpus`), `len` = line pairs.
    tokenizer: the model's `Tokenizer`.
    max_length: longest example kept [tokens, EOS included].
  """
  head = train.dataset(training=False)
  scanned = SAMPLE_PAIRS
  lengths = _lengths(head.take(scanned), tokenizer)
  if not lengths or min(lengths) > max_length:
    scanned = CHECK_PAIRS
    lengths = _lengths(head.take(scanned), tokenizer)
  too_long = sum(n > max_length for n in lengths)
  whole = len(train) <= scanned
  scope = "" if whole else f" (of the first {len(lengths)} non-empty pairs)"
  logging.info("train: %s", _dropped_message(len(train), train.origin, too_long, len(lengths),
                                             whole, max_length))
  if not lengths:
    raise DataError(f"no training pair with text on both sides in the first {CHECK_PAIRS} line "
                    f"pairs of {train.origin}" if not whole else
                    f"no training pair with text on both sides in {train.origin}")
  if too_long == len(lengths):
    raise DataError(f"all {too_long} training pairs{scope} of {train.origin} are longer than "
                    f"max_length={max_length} tokens (the shortest has {min(lengths)} tokens, "
                    "EOS included), so training would drop every one; raise it with "
                    "`hparams_override`=max_length=N")


def _dropped_message(pairs, origin, too_long, checked, whole, max_length):
  """The startup line of the training pairs max_length drops: "29,000 line pairs in F;
  dropped 0 of the first 1,000 pairs: longer than 256 tokens" (of all N when `whole`)."""
  scope = f"{checked:,}" if whole else f"the first {checked:,}"
  return (f"{pairs:,} line pairs in {origin}; dropped {too_long:,} of {scope} pairs: longer "
          f"than {max_length} tokens")


class _Run:
  """The steps of `run` (inside its StopSignal), then averaging, the test BLEU and the
  closing block. `save` is the one place checkpoints are written and recorded."""

  def __init__(self, trainer, problem, tokenizer, config, stop, run_info, run_start):
    self.trainer, self.problem, self.tokenizer, self.config = trainer, problem, tokenizer, config
    self.stop, self.run_info, self.run_start = stop, run_info, run_start
    # Only the chief reports; the other workers' progress goes nowhere.
    self.progress = logs.Progress(
        trainer.hparams.train_steps, trainer.step, config.log_every_steps,
        stream=None if trainer.chief else open(os.devnull, "w", encoding="utf-8"))  # pylint: disable=consider-using-with
    self.result = TrainResult(step=trainer.step, checkpoint=run_info.get("restored"))
    self.saved_step, self.saved_time = trainer.step, time.monotonic()
    # Whether to save and stop after the last update. One process acts on its own signal at
    # once; the workers of a multi-worker job act only on a stop they agreed on at the last
    # update (`Trainer.train_step`'s "stop"), so that all of them stop at the same update.
    self.stopping = False
    self.one_worker = trainer.input_context().num_input_pipelines == 1
    self.skipped = 0  # updates skipped for a non-finite loss or gradient
    self.phases = {}  # phase name -> seconds spent in it (the closing block names these)

  def timed(self, phase, function, *args, **kwargs):
    """function(*args, **kwargs), its time added to `phase`."""
    start = time.monotonic()
    try:
      return function(*args, **kwargs)
    finally:
      self.phases[phase] = self.phases.get(phase, 0.0) + time.monotonic() - start

  def save(self):
    """Writes a checkpoint of the current step and records it (path, step, time)."""
    self.result.checkpoint = self.trainer.save()
    self.saved_step, self.saved_time = self.trainer.step, time.monotonic()
    if self.trainer.chief:
      self.progress.line(f"saved {self.result.checkpoint}")

  def _save_due(self, step, last):
    config = self.config
    return (last or self.stopping
            or (config.save_checkpoints_steps  # the grid N, 2N, ... (a dev save is extra)
                and step % config.save_checkpoints_steps == 0)
            or (config.save_checkpoints_secs
                and time.monotonic() - self.saved_time >= config.save_checkpoints_secs))

  def train(self, iterator, dev, dev_data):
    """The training steps; returns the `TrainResult` (see `run`)."""
    trainer, config, progress, result = self.trainer, self.config, self.progress, self.result
    start_step = trainer.step
    writer = summaries.writer(trainer.model_dir, model_dir_lib.TRAIN_EVENTS_DIR) \
        if trainer.chief else None
    evaluator = Evaluator(trainer, dev, dev_data, self.tokenizer, config,
                          self.problem.target_lang, progress) if dev_data is not None else None
    best = BestCheckpoint(trainer.model_dir, config.best_metric, config.early_stopping,
                          config.min_improvement, trainer.chief) \
        if evaluator is not None and config.best_metric != "none" else None
    window = _Throughput()
    deadline = time.monotonic() + config.train_minutes * 60 if config.train_minutes else None
    if evaluator is not None and config.eval_at_start and trainer.step == 0:
      result.dev = self.timed("dev", evaluator, 0)
    if best is not None and trainer.step > 0 and best.resume(trainer.model, trainer.step) \
        and self._eval_due(trainer.step):  # a run stopped before its evaluation's end
      result.dev = self.timed("dev", evaluator, trainer.step,
                              last=trainer.step >= trainer.hparams.train_steps)
      self._record_best(best, result.dev)
    result.best = best.summary if best is not None else None
    if best is not None and best.exhausted:  # a resumed run that had stopped early
      progress.line(f"early stopping: this run had stopped early ({best.state_path}); raise "
                    "early_stopping to train on.")
      result.early_stopped = True
    loop_start = time.monotonic()
    self.first_step, self.first_start = trainer.step, loop_start
    while trainer.step < trainer.hparams.train_steps and not result.early_stopped:
      with summaries.trace_graph(writer if trainer.step == self.first_step else None,
                                 trainer.step + 1):
        step = self._step(iterator, writer, window)
      out_of_time = deadline is not None and time.monotonic() >= deadline
      last = step >= trainer.hparams.train_steps or out_of_time
      if self._save_due(step, last):
        self.save()
      if evaluator is not None and (self._eval_due(step) or last) and not self.stopping:
        if self.saved_step != step:  # an interrupted evaluation loses nothing
          self.save()
        result.dev = self.timed("dev", evaluator, step, last=last)
        self._record_best(best, result.dev)
      if self._stopping(step, out_of_time, best):
        break
    result.step = trainer.step
    self.phases = {"training": time.monotonic() - loop_start - self.phases.get("dev", 0.0),
                   **self.phases}
    if config.ema_decay and result.stopped is None:  # every worker: the dev loss is collective
      with exit_at_once():
        self.timed("moving average", self._write_ema, evaluator)
    for closable in (writer, evaluator):
      if closable is not None:
        closable.close()
    self._finish(start_step)
    return result

  def _eval_due(self, step):
    """True when a dev evaluation is due at `step`: every eval_every_steps and the last step
    (also the step where --train_minutes ends the run, which the caller adds)."""
    return step % self.config.eval_every_steps == 0 or step >= self.trainer.hparams.train_steps

  def _step(self, iterator, writer, window):
    """One update, its progress line and (every log_every_steps) its summaries; returns the step."""
    trainer, result = self.trainer, self.result
    lr = trainer.learning_rate()
    result.train = trainer.train_step(iterator, stop=self.stop.received is not None)
    self.stopping = result.train["stop"] or (self.one_worker and self.stop.received is not None)
    step = trainer.step
    if not result.train["applied"]:
      self.skipped += 1
      self.progress.line(f"update skipped at step {step}: non-finite loss "
                         f"({result.train['loss']:.4g}) or gradient norm "
                         f"({result.train['grad_norm']:.4g}); {self.skipped} skipped so far")
    window.add(result.train)
    if step == self.first_step + 1:
      self._first_update_line()
    self.progress.update(step, result.train["loss"], result.train["nll"], lr, window.rate())
    if step % self.config.log_every_steps == 0:
      if writer is not None:
        summaries.write_train(writer, step, result.train, lr, window.rate(), self.skipped)
      window.reset()
    return step

  def _first_update_line(self):
    """In a command, when the first update is done: the time since the command started and
    the first update's part (tracing the step's graph, then running it)."""
    so_far, _ = logs.startup_times()
    if so_far is not None and self.trainer.chief:
      self.progress.line(f"first update done {so_far:.1f} s after the start (tracing and running "
                         f"it {time.monotonic() - self.first_start:.1f} s)")

  def _record_best(self, best, dev_stats):
    if best is None:
      return
    if best.update(self.trainer.model, dev_stats):
      self.progress.line(f"best dev {best.patience.metric} so far: {best.patience.best:.4f} at "
                         f"step {dev_stats['step']}, written to {best.dir}")
    self.result.best = best.summary

  def _stopping(self, step, out_of_time, best):
    """Logs why training ends at `step` (a signal, the time budget, early stopping), if it does."""
    if self.stopping:
      self.result.stopped = self.stop.received or "another worker's signal"
      self.progress.line(f"{self.result.stopped} received: checkpoint saved at step {step}, "
                         "exiting.")
      if not self.trainer.chief:  # its progress goes nowhere
        logging.info("%s received: stopping at step %d", self.result.stopped, step)
    elif out_of_time:
      self.progress.line(f"train_minutes reached at step {step}: checkpoint saved.")
    elif best is not None and best.exhausted:
      if self.saved_step != step:
        self.save()
      self.progress.line(f"early stopping at step {step}: no dev {best.patience.metric} "
                         f"improvement by more than {self.config.min_improvement:g} in "
                         f"{best.patience.patience} evaluations (best {best.patience.best:.4f} "
                         f"at step {best.info['step']}).")
      self.result.early_stopped = True
    else:
      return False
    return True

  def _finish(self, start_step):
    """Averaging (average_last), the test BLEU and the closing block, unless a signal stopped."""
    trainer, config, result = self.trainer, self.config, self.result
    model, averaged_note = trainer.model, ""
    if trainer.hparams.average_last and result.stopped is None and trainer.chief:
      with exit_at_once():
        model, count = self.timed("averaging", self._average_last)
      averaged_note = f", averaged model of the last {count} checkpoints"
    if config.test_bleu_lines and result.stopped is None:
      test = self.problem.text_pairs("test")
      with exit_at_once():  # after the last save
        scores, _ = self.timed("test", bleu, model, trainer.hparams, self.tokenizer, test,
                               config.test_bleu_lines, self.problem.target_lang)
      n = len(test) if config.test_bleu_lines < 0 else min(config.test_bleu_lines, len(test))
      hp = trainer.hparams
      result.test_description = (f"{self.problem.name}, first {n} lines, beam {hp.beam_size}, "
                                 f"alpha {hp.alpha}{averaged_note}")
      self.progress.line(f"\ntest ({result.test_description}):\n"
                         f"{evaluation.format_scores(scores)}")
      result.test = scores
      if trainer.chief:
        summaries.write_scalars(trainer.model_dir, trainer.step,
                                {"quality/test_bleu": scores["sacrebleu"]})
    if trainer.chief:
      self.progress.line(report.closing_block(trainer, start_step, list(self.phases.items()),
                                              time.monotonic() - self.run_start, result))

  def _average_last(self):
    """Averages the last `average_last` checkpoints (fewer if fewer are kept) into
    `{model_dir}/averaged/`, replacing an earlier one. Returns (model, count)."""
    model_dir = ModelDir(self.trainer.model_dir)
    average_last = self.trainer.hparams.average_last
    paths = model_dir.checkpoint_paths()[-average_last:]
    if len(paths) < average_last:
      self.progress.line(f"average_last={average_last}: only {len(paths)} "
                         "checkpoints are kept; averaging those")
    self.result.averaged, model = averaging.average_checkpoints(
        paths, model_dir.subdir(model_dir_lib.AVERAGED_DIR), model_dir, replace=True)
    self.progress.line(f"averaged {len(paths)} checkpoints into {self.result.averaged}")
    return model, len(paths)

  def _write_ema(self, evaluator):
    """Writes the moving average of the weights as `{model_dir}/ema/` (replacing an earlier
    one; the chief) and evaluates it on dev (every worker); records both in `result.ema`."""
    trainer = self.trainer
    model_dir = ModelDir(trainer.model_dir)
    ema_dir = model_dir.subdir(model_dir_lib.EMA_DIR)
    path = None
    with trainer.ema_weights() as model:
      if trainer.chief:
        ema_dir.write_dir(lambda staging: staging.write_weights(
            model, trainer.step, model_dir, model_dir_lib.EMA_INFO_FILE,
            {"ema_decay": self.config.ema_decay, "step": trainer.step}))
        path = ema_dir.latest_checkpoint()
        self.progress.line(f"wrote the moving average of the weights (decay "
                           f"{self.config.ema_decay:g}) to {path}")
      dev = evaluator(trainer.step, label="ema dev") if evaluator is not None else {}
    self.result.ema = {"checkpoint": path, "dev": dev}


class _Throughput:
  """Target tokens per second over the updates since the last `reset`."""

  def __init__(self):
    self.tokens, self.start = 0.0, time.monotonic()

  def add(self, stats):
    self.tokens += stats["target_tokens"]

  def rate(self):
    return self.tokens / max(time.monotonic() - self.start, 1e-9)

  def reset(self):
    self.tokens, self.start = 0.0, time.monotonic()
