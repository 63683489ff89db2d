"""The Transformer's sizes and options: `ModelConfig`, the model group of the hparams.

`Transformer`, `EncoderLayer` and `DecoderLayer` take one `ModelConfig` and serialize it
in `get_config`. `t2t_repro.config.hparams.HParams` inherits its fields (with the other groups:
`config.optimization.OptimizationConfig`, `config.data.DataConfig`,
`config.decode.SearchConfig`), so each field is declared once, here, with its help,
default (the paper's base model) and range (`settings.setting`).
"""

import dataclasses

from t2t_repro import errors
from t2t_repro.config import settings
from t2t_repro.config.settings import setting


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Sizes and options of the encoder-decoder (Vaswani et al. 2017, §3, Table 3), frozen.

  d_k and d_v of 0 mean d_model // num_heads and are resolved on construction.

  Example:

  >>> ModelConfig(vocab_size=8000, num_layers=3, d_model=256, num_heads=4).d_k
  64

  Raises:
    errors.UsageError (a ValueError): a field outside its choices or range
      (`settings.check`), e.g. a norm_type other than post or pre; a d_k or d_v of 0 with
      a d_model not divisible by num_heads.
  """

  vocab_size: int = setting(37000, "Size of the shared source/target BPE vocabulary [tokens].",
                            min_value=1)
  num_layers: int = setting(6, "N, encoder layers = decoder layers (§3.1).", min_value=1)
  d_model: int = setting(512, "Model width (§3.1).", min_value=1)
  d_ff: int = setting(2048, "Inner width of the position-wise feed-forward network (§3.3, "
                      "eq. 2).", min_value=1)
  num_heads: int = setting(8, "h, attention heads (§3.2.2).", min_value=1)
  d_k: int = setting(0, "Per-head query/key width; 0 means d_model // num_heads (§3.2.2).",
                     min_value=0)
  d_v: int = setting(0, "Per-head value width; 0 means d_model // num_heads (§3.2.2).",
                     min_value=0)
  dropout: float = setting(
      0.1, "P_drop, on every sub-layer output before the residual add and on the embedding + "
      "positional-encoding sums (§5.4).", min_value=0, below=1)
  attention_dropout: float = setting(
      0.0, "Dropout on attention weights (0 in the paper; t2t 0.1).", min_value=0, below=1)
  relu_dropout: float = setting(
      0.0, "Dropout after the FFN ReLU (0 in the paper; t2t 0.1).", min_value=0, below=1)
  word_dropout: float = setting(
      0.0, "Word dropout (Gal & Ghahramani 2016; Sennrich & Zhang 2019 for low-resource "
      "translation): in training, each source and decoder-input token's embedding is zeroed "
      "with this probability (the whole d_model vector, before the positions are added; kept "
      "ones scaled by 1 / (1 - p)). 0: off.", min_value=0, below=1)
  norm_type: str = setting(
      "post", "post (paper: LayerNorm(x + Sublayer(x))) or pre (t2t v3).",
      choices=("post", "pre"))
  position_encoding: str = setting(
      "sinusoid", "sinusoid (§3.5), learned (Table 3 E) or relative (Shaw et al. 2018; "
      "tensor2tensor's transformer_relative: no absolute positions, relative position "
      "representations in every self-attention).", choices=("sinusoid", "learned", "relative"))
  attention_init: str = setting(
      "glorot", "glorot (Glorot uniform on the [d_model, h * d_k] projection matrices, "
      "tensor2tensor's) or glorot_per_head (Glorot uniform on the per-head kernels [d_model, h, "
      "d_k] and [h, d_v, d_model], as Keras 2's MultiHeadAttention: 5.8x smaller query/key/value "
      "weights at d_model 256, 4 heads).", choices=("glorot", "glorot_per_head"))
  max_positions: int = setting(
      512, "Size of the position table [positions]: the rows of the learned table (Table 3 E, "
      "a weight shape) and the longest sequence the model accepts with either encoding; "
      "decoding checks source length + decode_extra_length against it. A model setting: "
      "decoding settings never change it. Must be >= max_length. hparams.json files written "
      "before it existed get the old rule, max_length + decode_extra_length, for learned tables "
      "(so their checkpoints load).", min_value=1)
  max_relative_position: int = setting(
      16, "k of position_encoding=relative: attention distances clipped to [-k, k] [positions] "
      "(t2t 20, OpenNMT-tf's examples 20, Shaw et al. 16).", min_value=1)

  def __post_init__(self):
    settings.check(self)
    if (not self.d_k or not self.d_v) and self.d_model % self.num_heads:
      raise errors.UsageError(f"d_model={self.d_model} is not divisible by num_heads="
                              f"{self.num_heads}; set d_k and d_v explicitly")
    object.__setattr__(self, "d_k", self.d_k or self.d_model // self.num_heads)
    object.__setattr__(self, "d_v", self.d_v or self.d_model // self.num_heads)

  @classmethod
  def field_names(cls):
    return [field.name for field in dataclasses.fields(cls)]

  @classmethod
  def from_hparams(cls, hparams):
    """The model fields of a `t2t_repro.config.hparams.HParams` (or any object that has them)."""
    return cls(**{name: getattr(hparams, name) for name in cls.field_names()})

  @classmethod
  def of(cls, value):
    """A `ModelConfig` from itself, its `to_dict()` (what `get_config` stores) or an
    `HParams`."""
    if type(value) is cls:  # pylint: disable=unidiomatic-typecheck
      return value
    return cls.from_hparams(value) if isinstance(value, ModelConfig) else cls(**value)

  def to_dict(self):
    return dataclasses.asdict(self)
