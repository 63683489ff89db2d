"""The settings of one training run as a typed value: `TrainConfig`.

`python -m t2t_repro.train` defines one flag per field (same name, same default) and
builds a `TrainConfig` from them; a library caller (e.g. `parsing.pipeline`) builds
one directly and calls `training.api.train(config)`, like fairseq's `main(cfg)` or
Model Garden's `run_experiment(params)`. `flags.json` in the model dir records
`dataclasses.asdict(config)`.
"""

import dataclasses
from typing import Optional

# Smallest accepted value of each numeric field (None values mean "the hparam set's").
FIELD_MINIMUM = {"train_steps": 1, "batch_tokens": 1, "accum_steps": 1, "num_gpus": 0,
                 "num_cpu_replicas": 0, "save_checkpoints_steps": 0, "save_checkpoints_secs": 0,
                 "keep_checkpoint_max": 1, "eval_every_steps": 0, "dev_bleu_lines": 0,
                 "test_bleu_lines": -1, "train_minutes": 0, "log_every_steps": 1,
                 "cache_examples_mb": 0, "early_stopping": 0, "min_improvement": 0,
                 "average_last": 0, "ema_decay": 0}
DISTRIBUTIONS = ("auto", "one_device", "mirrored", "multi_worker")
MIXED_PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")
BEST_METRICS = ("loss", "bleu", "none")


@dataclasses.dataclass
class TrainConfig:
  """Every setting of a training run; the field docs are the train command's flag help.

  Units: `*_steps` optimizer updates, `save_checkpoints_secs` seconds,
  `train_minutes` minutes, `cache_examples_mb` MiB, `batch_tokens` tokens per
  replica per micro-batch. None means "the hparam set's value" for train_steps and
  batch_tokens, "all visible" for num_gpus and $T2T_DATA_DIR for data_dir.
  """
  model_dir: Optional[str] = None
  hparams: str = "base"
  hparams_override: str = ""
  problem: str = "translate_ende_wmt14"
  data_dir: Optional[str] = None
  vocab_dir: Optional[str] = None
  cache_examples_mb: int = 1024
  train_steps: Optional[int] = None
  batch_tokens: Optional[int] = None
  distribution: str = "auto"
  num_gpus: Optional[int] = None
  num_cpu_replicas: int = 0
  accum_steps: int = 1
  mixed_precision: str = "none"
  jit_compile: bool = False
  save_checkpoints_steps: int = 1000
  save_checkpoints_secs: int = 600
  keep_checkpoint_max: int = 20
  eval_every_steps: int = 1000
  eval_at_start: bool = False
  dev_bleu_lines: int = 200
  test_bleu_lines: int = 0
  train_minutes: float = 0
  log_every_steps: int = 10
  seed: int = 1234
  train_src: Optional[str] = None
  train_tgt: Optional[str] = None
  dev_src: Optional[str] = None
  dev_tgt: Optional[str] = None
  test_src: Optional[str] = None
  test_tgt: Optional[str] = None
  allow_update_change: bool = False
  best_metric: str = "loss"
  early_stopping: int = 0
  min_improvement: float = 0.0
  average_last: int = 0
  init_from: Optional[str] = None
  ema_decay: float = 0.0

  def split_files(self):
    """{"train_src": ..., "dev_tgt": ...}: the explicit files of each split (None: the
    problem's)."""
    return {f"{s}_{side}": getattr(self, f"{s}_{side}")
            for s in ("train", "dev", "test") for side in ("src", "tgt")}


def _convert(field, text):
  """The value of `--name=text` for `field` (a dataclasses.Field of TrainConfig)."""
  kind = field.type if isinstance(field.type, type) else \
      next(t for t in field.type.__args__ if t is not type(None))
  if text.lower() in ("none", "") and field.default is None:
    return None
  if kind is bool:
    if text.lower() not in ("true", "false", "1", "0"):
      raise ValueError(f"--{field.name}={text}: expected true or false")
    return text.lower() in ("true", "1")
  try:
    return kind(text)
  except ValueError:
    raise ValueError(f"--{field.name}={text}: expected {kind.__name__}") from None


def with_args(config, args):
  """A copy of `config` with command-line style settings applied.

  Args:
    config: a `TrainConfig`.
    args: strings "--name=value", "--name" (true) or "--noname" (false), as the
      train command takes them.

  Returns:
    A new `TrainConfig`.

  Raises:
    ValueError: an unknown name or a value of the wrong type (the message names it).
  """
  fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
  changes = {}
  for arg in args:
    name, _, value = arg.lstrip("-").partition("=")
    if "=" not in arg and name.startswith("no") and name[2:] in fields:
      name, value = name[2:], "false"
    elif "=" not in arg:
      value = "true"
    if name not in fields:
      raise ValueError(f"{arg}: not a setting of the train command")
    changes[name] = _convert(fields[name], value)
  return dataclasses.replace(config, **changes)


@dataclasses.dataclass
class TrainResult:
  """What `training.api.train` returns.

  Attributes:
    step: the optimizer step reached.
    checkpoint: the last checkpoint written or restored (prefix), or None.
    train: stats of the last update ("loss", "nll", "grad_norm", ...), {} if none ran.
    dev: stats of the last dev evaluation ("step", "loss", "nll", "ppl" [, "bleu",
      "bleu_lines"]), {} if none ran.
    test: `evaluation.score` of the test BLEU (of the averaged model with
      average_last), or None.
    test_description: what `test` was computed on, "" if none.
    stopped: the signal name ("SIGINT"/"SIGTERM") that stopped training, or None.
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
