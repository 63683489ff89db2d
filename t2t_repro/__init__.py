"""The Transformer (Vaswani et al. 2017) in TensorFlow 2 / Keras 3: the library's public API.

Every name of `__all__` is importable from `t2t_repro` itself and imported on first use
(PEP 562), so `import t2t_repro` stays as light as before (no TensorFlow until a name that
needs it is used). No public name is the name of a module: `python -m t2t_repro.<command>`
runs a command (`t2t_repro.commands`), and the library call of the same work has its own
name (`train_model` for `train`, `evaluate_translations` for the BLEU of `evaluate`), so
`import t2t_repro.train` changes no name of the API. examples/library/ shows the API end to
end:

  >>> import t2t_repro as t
  >>> hp = t.get_hparams("tiny")
  >>> config = t.TrainConfig(model_dir="runs/lib", hparams="tiny", problem="parallel_text",
  ...                        train_src="train.en", train_tgt="train.de", train_steps=20)
  >>> result = t.train_model(config)                     # doctest: +SKIP
  >>> t.Translator.from_model_dir("runs/lib").translate(["A dog."])  # doctest: +SKIP
"""

import importlib
import typing
import warnings

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
    "train_model": "t2t_repro.training.api",
    "average_checkpoints": "t2t_repro.training.averaging",
    # decoding, scoring and evaluation
    "DecodeConfig": "t2t_repro.config.decode",
    "load_for_inference": "t2t_repro.decoding.loading",
    "Translator": "t2t_repro.decoding.translator",
    "beam_search": "t2t_repro.decoding.beam_search",
    "sample": "t2t_repro.decoding.sampling",
    "Scorer": "t2t_repro.decoding.scoring",
    "tune_decoding": "t2t_repro.decoding.tuning",
    "evaluate_translations": "t2t_repro.evaluation",
    # export
    "export_model": "t2t_repro.serving.saved_model",
}

# Names of the previous release, kept for one more with a warning: {old name: new name}.
# Each is also a command's `python -m` module, which `import t2t_repro.<old name>` binds here.
RENAMED = {"train": "train_model", "score": "evaluate_translations"}

__all__ = sorted(_API)

if typing.TYPE_CHECKING:  # what IDEs and type checkers see; the names load lazily at run time
  from t2t_repro.config.data import DataConfig
  from t2t_repro.config.decode import DecodeConfig, SearchConfig
  from t2t_repro.config.hparams import HParams, get_hparams, list_hparams
  from t2t_repro.config.model import ModelConfig
  from t2t_repro.config.optimization import OptimizationConfig
  from t2t_repro.config.train import TrainConfig, TrainResult
  from t2t_repro.data.problems import get_problem
  from t2t_repro.data.vocab import Tokenizer
  from t2t_repro.decoding.beam_search import beam_search
  from t2t_repro.decoding.loading import load_for_inference
  from t2t_repro.decoding.sampling import sample
  from t2t_repro.decoding.scoring import Scorer
  from t2t_repro.decoding.translator import Translator
  from t2t_repro.decoding.tuning import tune_decoding
  from t2t_repro.evaluation import evaluate_translations
  from t2t_repro.model.transformer import Transformer
  from t2t_repro.serving.saved_model import export_model
  from t2t_repro.training.api import train_model
  from t2t_repro.training.averaging import average_checkpoints


def __getattr__(name):
  """Imports a public name's module on first use (PEP 562); an old name (`RENAMED`) gives
  its new name's value with a FutureWarning."""
  if name in RENAMED:
    warnings.warn(f"t2t_repro.{name} is deprecated: use t2t_repro.{RENAMED[name]} (the old "
                  "name goes in the next release)", FutureWarning, stacklevel=2)
    return __getattr__(RENAMED[name])
  if name not in _API:
    raise AttributeError(f"module 't2t_repro' has no attribute {name!r}")
  value = getattr(importlib.import_module(_API[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(__all__))
