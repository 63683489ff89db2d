"""Dev evaluation during training: dev loss, dev BLEU and the TensorBoard dev writer."""

from absl import logging

from t2t_repro import evaluation
from t2t_repro.decoding import attention_plot
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.training import report, summaries
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
    config: the `TrainConfig` (dev_bleu_lines, dev_bleu_every_steps, dev_samples,
      attention_images).
    target_lang: the problem's target language.
    progress: the `logs.Progress` that prints the dev line.

  The chief writes the dev scalars, the translations of the first `dev_samples` dev lines
  and the attention images of one of them to `{model_dir}/dev` (TensorBoard,
  `training.summaries`); `close()` closes that writer.
  """

  def __init__(self, trainer, dev, dev_data, tokenizer, config, target_lang, progress):
    self.trainer, self.dev, self.dev_data = trainer, dev, dev_data
    self.tokenizer, self.config, self.target_lang = tokenizer, config, target_lang
    self.progress = progress
    self.best_loss = float("inf")
    self.writer = summaries.writer(trainer.model_dir) if trainer.chief else None

  def _bleu_due(self, step, last):
    every = self.config.dev_bleu_every_steps
    return self.config.dev_bleu_lines and (not every or step % every == 0 or last)

  def __call__(self, step, label="dev", last=False):
    """Dev stats of the trainer's model at `step`: loss, nll, ppl [, bleu, bleu_lines], step.
    The dev BLEU is computed when due (`dev_bleu_every_steps`; `last`: the run's last
    evaluation). SIGINT/SIGTERM end the process at once meanwhile (the caller saved the step
    before); in a job of several workers they stop it at the next update
    (`signals.at_once_alone`). `label` starts the printed line; only "dev" results go to
    TensorBoard (the moving
    average's, "ema dev", are printed and returned)."""
    with at_once_alone(self.trainer.input_context().num_input_pipelines == 1):
      logging.info("dev evaluation at step %d", step)
      trainer = self.trainer
      stats = dict(trainer.evaluate(self.dev_data), step=step)
      hyps = []
      if self._bleu_due(step, last):
        scores, hyps = bleu(trainer.model, trainer.hparams, self.tokenizer, self.dev,
                            self.config.dev_bleu_lines, self.target_lang)
        stats.update(bleu=scores["sacrebleu"],
                     bleu_lines=min(self.config.dev_bleu_lines, len(self.dev)))
      self.progress.line(f"{label} " + report.dev_message(stats))
      if self.writer is not None and label == "dev":
        self.best_loss = min(self.best_loss, stats["loss"])
        self._write(stats, hyps)
      return stats

  def _write(self, stats, hyps):
    """The dev evaluation's TensorBoard summaries; decodes the sample lines that the dev
    BLEU's translations `hyps` (of the first dev lines) do not hold."""
    trainer = self.trainer
    sources = self.dev.sources[:self.config.dev_samples]
    hyps = hyps[:len(sources)]
    if len(hyps) < len(sources):
      hyps += Translator(trainer.model, self.tokenizer, DecodeConfig.resolve(
          trainer.hparams)).translate(sources[len(hyps):])
    attention = None
    if self.config.attention_images and sources:
      line = summaries.attention_line(sources)
      _, maps = attention_plot.attention_maps(trainer.model, self.tokenizer, sources[line],
                                              target=hyps[line])
      attention = attention_plot.attention_pngs(maps, trainer.hparams.num_layers)
    summaries.write_dev(self.writer, stats, self.best_loss,
                        list(zip(sources, self.dev.targets, hyps)), attention)

  def close(self):
    if self.writer is not None:
      self.writer.close()
