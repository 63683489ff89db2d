"""The Transformer (Vaswani et al. 2017) in TensorFlow 2 / Keras 3: the library's public API.

Every name of `__all__` is importable from `t2t_repro` itself and imported on first use
(PEP 562), so `import t2t_repro` stays as light as before (no TensorFlow until a name that
needs it is used). The commands are `t2t_repro.commands` (`python -m t2t_repro.<name>`);
examples/library/ shows the API end to end:

  >>> import t2t_repro as t
  >>> hp = t.get_hparams("tiny")
  >>> config = t.TrainConfig(model_dir="runs/lib", hparams="tiny", problem="parallel_text",
  ...                        train_src="train.en", train_tgt="train.de", train_steps=20)
  >>> result = t.train(config)                           # doctest: +SKIP
  >>> model, hp, tokenizer = t.load_for_inference("runs/lib")   # doctest: +SKIP
  >>> t.Translator(model, tokenizer, t.DecodeConfig.resolve(hp)).translate(["A dog."])
  ... # doctest: +SKIP
"""

import importlib

# Public name -> the module that defines it.
_API = {
    # the model and its settings
    "Transformer": "t2t_repro.model.transformer",
    "ModelConfig": "t2t_repro.config.model",
    "HParams": "t2t_repro.config.hparams",
    "get_hparams": "t2t_repro.config.hparams",
    "list_hparams": "t2t_repro.config.hparams",
    "OptimizationConfig": "t2t_repro.config.optimization",
    "DataConfig": "t2t_repro.config.data",
    "SearchConfig": "t2t_repro.config.decode",
    # data
    "get_problem": "t2t_repro.data.problems",
    "Tokenizer": "t2t_repro.data.vocab",
    # training
    "TrainConfig": "t2t_repro.config.train",
    "TrainResult": "t2t_repro.config.train",
    "train": "t2t_repro.training.api",
    "average_checkpoints": "t2t_repro.training.averaging",
    # decoding and scoring
    "DecodeConfig": "t2t_repro.config.decode",
    "load_for_inference": "t2t_repro.decoding.loading",
    "Translator": "t2t_repro.decoding.translator",
    "beam_search": "t2t_repro.decoding.beam_search",
    "sample": "t2t_repro.decoding.sampling",
    "Scorer": "t2t_repro.decoding.scoring",
    "tune_decoding": "t2t_repro.decoding.tuning",
    "score": "t2t_repro.evaluation",
    # export
    "export_model": "t2t_repro.serving.saved_model",
}

__all__ = sorted(_API)


def __getattr__(name):
  """Imports a public name's module on first use (PEP 562)."""
  if name not in _API:
    raise AttributeError(f"module 't2t_repro' has no attribute {name!r}")
  value = getattr(importlib.import_module(_API[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(__all__))
