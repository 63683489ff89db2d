"""The Transformer's hyperparameters (`ModelConfig`): the model fields of `HParams`.

`Transformer`, `EncoderLayer` and `DecoderLayer` take one `ModelConfig` and serialize it
in `get_config`. Its fields are `MODEL_FIELDS` of `t2t_repro.hparams.HParams`, with their
types, defaults (the paper's base model) and allowed values taken from there, where
each is documented once; only `vocab_size` has no default here (a model needs its
vocabulary). A new model hyperparameter is one `HParams` field and its name here.
"""

import dataclasses

from t2t_repro import settings
from t2t_repro.hparams import HParams

MODEL_FIELDS = ("vocab_size", "num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v",
                "dropout", "attention_dropout", "relu_dropout", "word_dropout", "norm_type",
                "position_encoding", "attention_init", "max_positions", "max_relative_position")


class _ModelConfigBase:
  """Sizes and options of the encoder-decoder (Vaswani et al. 2017, §3, Table 3): the
  `MODEL_FIELDS` of `t2t_repro.hparams.HParams` (documented there), frozen.

  d_k and d_v of 0 mean d_model // num_heads and are resolved on construction.

  Raises:
    ValueError: a field outside its choices or range (`settings.check`), e.g. a norm_type
      other than post or pre.
  """

  def __post_init__(self):
    settings.check(self)
    object.__setattr__(self, "d_k", self.d_k or self.d_model // self.num_heads)
    object.__setattr__(self, "d_v", self.d_v or self.d_model // self.num_heads)

  @classmethod
  def field_names(cls):
    return [field.name for field in dataclasses.fields(cls)]

  @classmethod
  def from_hparams(cls, hparams):
    """The model fields of a `t2t_repro.hparams.HParams`."""
    return cls(**{name: getattr(hparams, name) for name in MODEL_FIELDS})

  @classmethod
  def of(cls, value):
    """A `ModelConfig` from itself or its `to_dict()` (what `get_config` stores)."""
    return value if isinstance(value, cls) else cls(**value)

  def to_dict(self):
    return dataclasses.asdict(self)


def _fields():
  """(name, type, field) of each model field, as `HParams` declares it; vocab_size first
  and without a default."""
  fields = {f.name: f for f in dataclasses.fields(HParams)}
  vocab = fields["vocab_size"]
  return [(vocab.name, vocab.type)] + [
      (name, fields[name].type,
       dataclasses.field(default=fields[name].default, metadata=fields[name].metadata))
      for name in MODEL_FIELDS[1:]]


ModelConfig = dataclasses.make_dataclass("ModelConfig", _fields(), bases=(_ModelConfigBase,),
                                         frozen=True)
ModelConfig.__module__ = __name__
ModelConfig.__doc__ = _ModelConfigBase.__doc__
