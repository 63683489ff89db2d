"""The Transformer's hyperparameters in one place (`ModelConfig`).

`Transformer`, `EncoderLayer` and `DecoderLayer` take one `ModelConfig` and serialize it
in `get_config`, so a new model hyperparameter is one field here (and, if it is
user-facing, one in `t2t_repro.hparams.HParams`, whose field of the same name
`ModelConfig.from_hparams` reads).
"""

import dataclasses

NORM_TYPES = ("post", "pre")
POSITION_ENCODINGS = ("sinusoid", "learned", "relative")
ATTENTION_INITS = ("glorot", "glorot_per_head")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Sizes and options of the encoder-decoder (Vaswani et al. 2017, §3, Table 3).

  Fields:
    vocab_size: shared vocabulary size V [tokens].
    num_layers: N, for the encoder and the decoder.
    d_model, d_ff, num_heads: sizes (§3.1-§3.3).
    d_k, d_v: per-head query/key and value widths (§3.2.2); 0 or None means
      d_model // num_heads (resolved on construction).
    dropout: P_drop, residual and embedding dropout (§5.4).
    attention_dropout, relu_dropout: extra dropouts of tensor2tensor (0 in the paper).
    norm_type: "post" (paper) or "pre" (t2t v3; adds a final LayerNorm to each stack).
    position_encoding: "sinusoid" (§3.5), "learned" (Table 3 E) or "relative" (Shaw et
      al. 2018: no absolute positions, relative position representations in every
      self-attention, as tensor2tensor's `transformer_relative`).
    max_relative_position: k of "relative": distances clipped to [-k, k].
    attention_init: "glorot" or "glorot_per_head", see `attention.MultiHeadAttention`.
    max_positions: size of the position table [positions]: the rows of the learned
      table; with either encoding the longest sequence decoding accepts
      (`decoding.config.check_positions`).

  Raises:
    ValueError: an unknown norm_type, position_encoding or attention_init.
  """
  vocab_size: int
  num_layers: int = 6
  d_model: int = 512
  d_ff: int = 2048
  num_heads: int = 8
  d_k: int = 0
  d_v: int = 0
  dropout: float = 0.1
  attention_dropout: float = 0.0
  relu_dropout: float = 0.0
  norm_type: str = "post"
  position_encoding: str = "sinusoid"
  attention_init: str = "glorot"
  max_positions: int = 512
  max_relative_position: int = 16

  def __post_init__(self):
    if self.norm_type not in NORM_TYPES:
      raise ValueError(f"norm_type must be one of {NORM_TYPES}, got {self.norm_type!r}")
    if self.position_encoding not in POSITION_ENCODINGS:
      raise ValueError(f"position_encoding must be one of {POSITION_ENCODINGS}, got "
                       f"{self.position_encoding!r}")
    if self.attention_init not in ATTENTION_INITS:
      raise ValueError(f"attention_init must be one of {ATTENTION_INITS}, got "
                       f"{self.attention_init!r}")
    object.__setattr__(self, "d_k", self.d_k or self.d_model // self.num_heads)
    object.__setattr__(self, "d_v", self.d_v or self.d_model // self.num_heads)

  @classmethod
  def field_names(cls):
    return [field.name for field in dataclasses.fields(cls)]

  @classmethod
  def from_hparams(cls, hparams):
    """The fields of the same names of a `t2t_repro.hparams.HParams`."""
    return cls(**{name: getattr(hparams, name) for name in cls.field_names()})

  @classmethod
  def of(cls, value):
    """A `ModelConfig` from itself or its `to_dict()` (what `get_config` stores)."""
    return value if isinstance(value, cls) else cls(**value)

  def to_dict(self):
    return dataclasses.asdict(self)
