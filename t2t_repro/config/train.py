"""The settings of one training run as a typed value: `TrainConfig`.

`python -m t2t_repro.train` generates one flag per field (same name, type, default, help
and choices) and builds a `TrainConfig` from them; a library caller (e.g. `parsing.pipeline`) builds
one directly and calls `training.api.train_model(config)`, like fairseq's `main(cfg)` or
Model Garden's `run_experiment(params)`. `flags.json` in the model dir records
`dataclasses.asdict(config)`.
"""

import dataclasses
import os
from typing import Optional

from t2t_repro import errors
from t2t_repro.config import settings
from t2t_repro.config.settings import setting as _field

DISTRIBUTIONS = ("auto", "one_device", "mirrored", "multi_worker")
MIXED_PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")
BEST_METRICS = ("loss", "bleu", "none")


@dataclasses.dataclass
class TrainConfig:
  """Every setting of a training run. Each field's metadata (`settings.setting`, as
  fairseq's config fields) holds its help, choices and range: the train command's flags
  are generated from the fields (`t2t_repro.commands.config_flags`), same name, type,
  default, help, choices and range check.

  Units: `*_steps` optimizer updates, `save_checkpoints_secs` seconds,
  `train_minutes` minutes, `cache_examples_mb` MiB, `batch_tokens` tokens per
  replica per micro-batch. None means "the hparam set's value" for train_steps,
  batch_tokens and average_last, "all visible" for num_gpus and $T2T_DATA_DIR for data_dir.

  Raises:
    errors.UsageError (a ValueError), on construction: a field outside its choices or
      range, or settings that do not go together; the message names the fields.
  """
  model_dir: Optional[str] = _field(None, "Output folder: checkpoints, hparams, vocab, TensorBoard.")
  hparams: str = _field("base", "Hparam set name or path to a .json file.")
  hparams_override: str | dict = _field(
      "", "Comma-separated key=value overrides, e.g. dropout=0.3 (in Python also a dict, "
      "{\"dropout\": 0.3}).")
  problem: str = _field("translate_ende_wmt14", "Named data source.")
  data_dir: Optional[str] = _field(None, "Local data folder (default: $T2T_DATA_DIR).")
  vocab_dir: Optional[str] = _field(
      None, "Cache of learned BPE vocabularies, keyed by problem and size, and of the training "
      "text's validation records (default: `model_dir`). Point runs of one problem at one cache.")
  cache_examples_mb: int = _field(
      1024, "Keep the tokenized training examples in memory after the first pass only if they "
      "are estimated to fit in this many MiB (0: never). A WMT-sized corpus is streamed from "
      "disk.", min_value=0)
  train_steps: Optional[int] = _field(None, "Optimizer updates (default: the hparam set's).",
                                      min_value=1)
  batch_tokens: Optional[int] = _field(
      None, "Token budget per replica per micro-batch (default: the hparam set's).", min_value=1)
  distribution: str = _field("auto", "tf.distribute strategy.", choices=DISTRIBUTIONS)
  num_gpus: Optional[int] = _field(None, "GPUs to use (default: all visible).", min_value=0)
  num_cpu_replicas: int = _field(
      0, "Split the CPU into this many logical devices and mirror over them (tests and "
      "CPU-only emulation of several replicas; `distribution`=auto becomes mirrored).",
      min_value=0)
  accum_steps: int = _field(1, "Micro-batches accumulated per update.", min_value=1)
  mixed_precision: str = _field("none", "Keras mixed-precision policy.", choices=MIXED_PRECISIONS)
  jit_compile: bool = _field(False, "XLA-compile the forward/backward computation.")
  save_checkpoints_steps: int = _field(1000, "Save every N updates (0: off).", min_value=0)
  save_checkpoints_secs: int = _field(
      600, "Save every N seconds (0: off); the paper wrote checkpoints at 10-minute intervals "
      "(§6.1).", min_value=0)
  keep_checkpoint_max: int = _field(20, "Checkpoints kept.", min_value=1)
  eval_every_steps: int = _field(
      1000, "Dev loss (and dev BLEU) every N updates and at the end (0: off).", min_value=0)
  eval_at_start: bool = _field(
      False, "Also evaluate dev before the first update (the start of the dev curve; a full "
      "dev pass, slow for big models on a CPU).")
  dev_bleu_lines: int = _field(200, "Dev lines decoded for the periodic dev BLEU (0: off).",
                               min_value=0)
  dev_bleu_every_steps: int = _field(
      0, "Compute the dev BLEU at the dev evaluations of every N updates and at the last one "
      "(0: at every dev evaluation).", min_value=0)
  dev_samples: int = _field(
      10, "At every dev evaluation, TensorBoard's table of the translations of the first N dev "
      "lines (0: none; the dev BLEU's translations when it has them, else decoded).", min_value=0)
  attention_images: bool = _field(
      True, "At every dev evaluation, TensorBoard images of the attention weights of one of the "
      "`dev_samples` lines (every head of the last layer): for `tiny`, 1.4-1.8 s of CPU and "
      "about 250 KB of events per evaluation.")
  test_bleu_lines: int = _field(
      0, "After training, translate this many lines of the test split with beam search and "
      "print sacreBLEU (-1: all, 0: off).", min_value=-1)
  train_minutes: float = _field(
      0, "Stop (and save) after this much wall time even if train_steps is not reached (0: no "
      "limit) [minutes].", min_value=0)
  log_every_steps: int = _field(
      10, "TensorBoard summaries, and a log line when stderr is not a terminal, every N "
      "updates.", min_value=1)
  seed: int = _field(1234, "Seed for initialization, dropout and data shuffling.")
  train_src: Optional[str] = _field(
      None, "Source file of the train split (parallel_text); comma-separated files or glob "
      "patterns for aligned shards.")
  train_tgt: Optional[str] = _field(None, "Target file(s) of the train split, in the order of "
                                    "`train_src`.")
  dev_src: Optional[str] = _field(None, "Source file(s) of the dev split (as `train_src`).")
  dev_tgt: Optional[str] = _field(None, "Target file(s) of the dev split, in the order of "
                                  "`dev_src`.")
  test_src: Optional[str] = _field(None, "Source file(s) of the test split (as `train_src`).")
  test_tgt: Optional[str] = _field(None, "Target file(s) of the test split, in the order of "
                                   "`test_src`.")
  allow_update_change: bool = _field(
      False, "Resume although accum_steps, batch_tokens, the number of replicas or "
      "mixed_precision differ from the run in `model_dir` (the change is logged).")
  best_metric: str = _field(
      "loss", "Dev metric of the best checkpoint: after each dev evaluation that improves it, "
      "model_dir/best/ is a complete model dir of that step (best.json: metric, value, step, "
      "bleu_lines). loss: dev loss (lower is better, as fairseq's default); bleu: dev sacreBLEU "
      "on `dev_bleu_lines`; none: no best/.", choices=BEST_METRICS)
  early_stopping: int = _field(
      0, "Stop after this many dev evaluations in a row without an improvement of `best_metric` "
      "by more than `min_improvement` (0: off).", min_value=0)
  min_improvement: float = _field(
      0.0, "Smallest change of `best_metric` that counts as an improvement (its units: loss or "
      "BLEU points).", min_value=0)
  average_last: Optional[int] = _field(
      None, "At the end of training, average the last N checkpoints into model_dir/averaged/ (a "
      "complete model dir); the test BLEU is then the averaged model's (default: the hparam "
      "set's; paper: 5 base, 20 big; 0: off).", min_value=0)
  init_from: Optional[str] = _field(
      None, "Fine-tune: start from the weights of this model dir (its latest checkpoint) or "
      "checkpoint prefix, at step 0 with a new optimizer and schedule, with its vocabulary; the "
      "hparams must give the same model shape (e.g. `hparams`=DIR/hparams.json). Ignored when "
      "`model_dir` already has checkpoints (the run resumes).")
  ema_decay: float = _field(
      0.0, "Keep an exponential moving average of the weights with this decay per update (e.g. "
      "0.999; 0: off); at the end it is evaluated on dev and written to model_dir/ema/ (a "
      "complete model dir).", min_value=0, below=1)

  def __post_init__(self):
    settings.check(self)
    if self.best_metric == "bleu" and (not self.dev_bleu_lines or self.dev_bleu_every_steps):
      raise errors.UsageError("`best_metric`=bleu needs the dev BLEU at every dev evaluation: set "
                              "`dev_bleu_lines` > 0 and `dev_bleu_every_steps`=0")
    if self.early_stopping and (self.best_metric == "none" or not self.eval_every_steps):
      raise errors.UsageError(f"`early_stopping`={self.early_stopping} needs dev evaluations "
                              "(`eval_every_steps` > 0) and `best_metric`=loss or bleu")
    if self.num_cpu_replicas > 1 and self.distribution not in ("auto", "mirrored"):
      raise errors.UsageError(
          f"`num_cpu_replicas`={self.num_cpu_replicas} mirrors over logical CPUs: it needs "
          f"`distribution`=auto or mirrored, not {self.distribution}")

  @property
  def strategy(self):
    """The `distribution` to build: mirrored for auto with num_cpu_replicas > 1 (the
    logical CPUs are there to mirror over), else `distribution` itself."""
    if self.distribution == "auto" and self.num_cpu_replicas > 1:
      return "mirrored"
    return self.distribution

  def split_files(self):
    """{"train_src": ..., "dev_tgt": ...}: the explicit files of each split (None: the
    problem's)."""
    return {f"{s}_{side}": getattr(self, f"{s}_{side}")
            for s in ("train", "dev", "test") for side in ("src", "tgt")}


@dataclasses.dataclass
class TrainResult:
  """What `training.api.train_model` returns.

  Attributes:
    step: the optimizer step reached.
    checkpoint: the last checkpoint written or restored (prefix), or None.
    train: stats of the last update ("loss", "nll", "grad_norm", ...), {} if none ran.
    dev: stats of the last dev evaluation ("step", "loss", "nll", "ppl" [, "bleu",
      "bleu_lines"]), {} if none ran.
    test: `evaluation.evaluate_translations` of the test BLEU (of the averaged model with
      average_last), or None.
    test_description: what `test` was computed on, "" if none.
    stopped: the signal name ("SIGINT"/"SIGTERM") that stopped training, "another
      worker's signal" on a worker of a multi-worker job that received none itself, or None.
    early_stopped: True when early stopping ended training.
    best: best.json of `{model_dir}/best/` plus "dir", or None.
    averaged: the averaged checkpoint written at the end (average_last), or None.
    ema: with ema_decay, {"checkpoint": the `{model_dir}/ema/` checkpoint written at the
      end, "dev": its dev stats (as `dev`) or {}}; else None.
  """
  step: int
  checkpoint: Optional[str] = None
  train: dict = dataclasses.field(default_factory=dict)
  dev: dict = dataclasses.field(default_factory=dict)
  test: Optional[dict] = None
  test_description: str = ""
  stopped: Optional[str] = None
  early_stopped: bool = False
  best: Optional[dict] = None
  averaged: Optional[str] = None
  ema: Optional[dict] = None

  @property
  def averaged_dir(self):
    """The model dir of `averaged` (`{model_dir}/averaged/`, what `export_model` and
    `Translator.from_model_dir` take), or None."""
    return os.path.dirname(self.averaged) if self.averaged else None
