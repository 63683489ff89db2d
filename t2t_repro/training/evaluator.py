"""Dev evaluation during training: dev loss, dev BLEU and the TensorBoard dev writer."""

import tensorflow as tf
from absl import logging

from t2t_repro import evaluation
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.model_dir import ModelDir
from t2t_repro.training import report
from t2t_repro.training.signals import at_once_alone


def bleu(model, hparams, tokenizer, split, num_lines, target_lang):
  """Beam search over the first `num_lines` pairs of `split` and its sacreBLEU.

  Args:
    model: a `Transformer`.
    hparams: its `HParams` (decoding settings: `DecodeConfig.resolve`).
    tokenizer: the model's `Tokenizer`.
    split: a `ParallelText`.
    num_lines: lines decoded (<= 0: all of them).
    target_lang: language code for sacreBLEU's tokenizer choice.

  Returns:
    (scores (`evaluation.evaluate_translations`), translations: list[str]).
  """
  sources = split.sources[:num_lines] if num_lines > 0 else split.sources
  references = split.targets[:num_lines] if num_lines > 0 else split.targets
  hyps = Translator(model, tokenizer, DecodeConfig.resolve(hparams)).translate(sources)
  return evaluation.evaluate_translations(hyps, [references], tgt_lang=target_lang), hyps


class Evaluator:
  """Evaluates the trainer's model on dev: `evaluator(step)` -> dev stats.

  Args:
    trainer: the `Trainer`.
    dev: the dev `ParallelText`.
    dev_data: its distributed dataset (pairs cut to max_length).
    tokenizer: the model's `Tokenizer`.
    bleu_lines: dev lines decoded for the dev BLEU (0: no BLEU).
    target_lang: the problem's target language.
    progress: the `logs.Progress` that prints the dev line.

  The chief writes the dev scalars and a few sample translations to
  `{model_dir}/dev` (TensorBoard); `close()` closes that writer.
  """

  def __init__(self, trainer, dev, dev_data, tokenizer, bleu_lines, target_lang, progress):
    self.trainer, self.dev, self.dev_data = trainer, dev, dev_data
    self.tokenizer, self.bleu_lines, self.target_lang = tokenizer, bleu_lines, target_lang
    self.progress = progress
    self.writer = tf.summary.create_file_writer(
        ModelDir(trainer.model_dir).file(model_dir_lib.DEV_EVENTS_DIR)) \
        if trainer.chief else None

  def __call__(self, step, label="dev"):
    """Dev stats of the trainer's model at `step`: loss, nll, ppl [, bleu, bleu_lines], step.
    SIGINT/SIGTERM end the process at once meanwhile (the caller saved the step before); in
    a job of several workers they stop it at the next update (`signals.at_once_alone`).
    `label` starts the printed line; only "dev" results go to TensorBoard (the moving
    average's, "ema dev", are printed and returned)."""
    with at_once_alone(self.trainer.input_context().num_input_pipelines == 1):
      logging.info("dev evaluation at step %d", step)
      trainer = self.trainer
      stats = dict(trainer.evaluate(self.dev_data), step=step)
      if self.bleu_lines:
        scores, hyps = bleu(trainer.model, trainer.hparams, self.tokenizer, self.dev,
                            self.bleu_lines, self.target_lang)
        stats.update(bleu=scores["sacrebleu"], bleu_lines=min(self.bleu_lines, len(self.dev)))
        if self.writer is not None and label == "dev":
          report.write_samples(self.writer, step, self.dev.sources, self.dev.targets, hyps)
      self.progress.line(f"{label} " + report.dev_message(stats))
      if self.writer is not None and label == "dev":
        with self.writer.as_default(step=step):
          for key in ("loss", "nll", "ppl", "bleu"):
            if key in stats:
              tf.summary.scalar(key, stats[key])
          self.writer.flush()
      return stats

  def close(self):
    if self.writer is not None:
      self.writer.close()
