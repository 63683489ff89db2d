"""Decoding settings: `DecodeConfig`, resolved once from flags and hparams (no TensorFlow here,
so a command's --help stays instant).

Vaswani et al. 2017 §6.1: beam 4, alpha 0.6, input length + 50; §6.3 parsing: beam 21,
alpha 0.3, input + 300. `DecodeConfig.resolve`: a value given (a flag of `define_flags`)
wins, else the model's hparams. One flag name per concept in every command:
--beam_size, --alpha, --decode_extra_length, --batch_tokens, --n_best, --max_input_length.
The decoding itself is `t2t_repro.decoding.translator.Translator`.
"""

import dataclasses

from absl import flags


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
  """Beam-search decoding settings.

  Attributes:
    beam_size: k >= 1 (paper 4; parsing 21).
    alpha: GNMT length-penalty exponent >= 0 (Wu et al. 2016 eq. 14; paper 0.6).
    decode_extra_length: maximum output length = source length + this [tokens, EOS
      included on both sides] (paper 50).
    batch_tokens: padded source tokens per batch, rows x padded length [tokens] (a
      longer sentence gets a batch of its own).
    n_best: hypotheses returned per sentence, 1 <= n_best <= beam_size.
    max_input_length: longest source decoded [tokens, EOS included]; a longer one is
      cut to its first max_input_length - 1 tokens + EOS with a logged warning naming
      the line, so no input line can exhaust memory. None: as much as the model's
      position table leaves, max_positions - decode_extra_length.
    sampling_topk, sampling_topp, sampling_temperature: random sampling instead of beam
      search when any is given (`decoding.sampling`): draw from the top-k pieces (0: all),
      from the smallest set of probability >= top_p (1: all), with logits divided by the
      temperature (0: argmax). None: not given.
    n_samples: outputs drawn per sentence when sampling (beam_size and n_best unused).
    seed: seed of the sampling draws.

  Raises:
    ValueError (on construction): a setting out of range.
  """

  beam_size: int = 4
  alpha: float = 0.6
  decode_extra_length: int = 50
  batch_tokens: int = 4096
  n_best: int = 1
  max_input_length: int | None = None
  sampling_topk: int | None = None
  sampling_topp: float | None = None
  sampling_temperature: float | None = None
  n_samples: int = 1
  seed: int = 0

  def __post_init__(self):
    for field in dataclasses.fields(self):
      check_setting(field.name, getattr(self, field.name))
    if self.n_best > self.beam_size:
      raise ValueError(f"n_best must be in [1, beam_size={self.beam_size}], got {self.n_best}")
    if self.n_samples > 1 and not self.sampling:
      raise ValueError("n_samples > 1 needs sampling: give sampling_topk, sampling_topp or "
                       "sampling_temperature")

  @property
  def sampling(self):
    """True when the outputs are drawn at random (`decoding.sampling`), not beam-searched."""
    return any(v is not None for v in (self.sampling_topk, self.sampling_topp,
                                       self.sampling_temperature))

  @property
  def outputs_per_sentence(self):
    """n_samples when sampling, else n_best."""
    return self.n_samples if self.sampling else self.n_best

  @classmethod
  def resolve(cls, hparams, beam_size=None, alpha=None, decode_extra_length=None,
              batch_tokens=None, n_best=None, max_input_length=None, **sampling):
    """The settings: each given value, else the hparams' (beam_size, alpha,
    decode_extra_length), else the class default (batch_tokens 4096, n_best 1; the
    hparam `batch_tokens` is training's). The beam is widened to n_best if narrower.

    Raises:
      ValueError: a setting out of range.
    """
    n_best = n_best or 1
    return cls(beam_size=max(beam_size or hparams.beam_size, n_best),
               alpha=float(hparams.alpha if alpha is None else alpha),
               decode_extra_length=(hparams.decode_extra_length if decode_extra_length is None
                                    else decode_extra_length),
               batch_tokens=batch_tokens or cls.batch_tokens, n_best=n_best,
               max_input_length=max_input_length,
               **{k: v for k, v in sampling.items() if v is not None})

  @classmethod
  def from_flags(cls, hparams, flag_values=None):
    """`resolve` with the flags of `define_flags` (those defined; unset ones are None)."""
    flag_values = flag_values or flags.FLAGS
    given = {name: getattr(flag_values, name) for name in _FLAG_HELP if name in flag_values}
    return cls.resolve(hparams, **given)


# --alignments: Pharaoh "i-j" pairs or one JSON object of weights per line
# (`t2t_repro.decoding.alignment`).
ALIGNMENT_KINDS = ("hard", "soft")

# Smallest value of each setting, and why where it is not obvious.
_MINIMUM = {"beam_size": (1, ""), "alpha": (0, " (early termination assumes it)"),
            "decode_extra_length": (0, ""), "batch_tokens": (1, ""), "n_best": (1, ""),
            "max_input_length": (2, " (a token and EOS)"), "sampling_topk": (0, ""),
            "sampling_topp": (0, ""), "sampling_temperature": (0, ""), "n_samples": (1, ""),
            "seed": (0, "")}
_MAXIMUM = {"sampling_topp": 1.0}
_FLOAT_SETTINGS = ("alpha", "sampling_topp", "sampling_temperature")


def check_setting(name, value):
  """Raises ValueError if the `DecodeConfig` setting `name` is below its minimum (None,
  for max_input_length: unbounded, passes). The one range check of the decoding settings:
  `DecodeConfig` and the flags' validators call it."""
  minimum, why = _MINIMUM[name]
  if value is not None and value < minimum:
    raise ValueError(f"{name} must be >= {minimum}{why}, got {value}")
  if value is not None and name in _MAXIMUM and not (minimum < value <= _MAXIMUM[name]):
    raise ValueError(f"{name} must be in ({minimum}, {_MAXIMUM[name]}], got {value}")


def _validator(name):
  def check(value):
    try:
      check_setting(name, value)
    except ValueError as e:
      raise flags.ValidationError(str(e)) from None
    return True
  return check


_FLAG_HELP = {
    "beam_size": "Beam width (default: hparams.beam_size; paper 4).",
    "alpha": "GNMT length-penalty exponent (default: hparams.alpha; paper 0.6).",
    "decode_extra_length": "Maximum output length = source length + this [tokens] "
                           "(default: hparams.decode_extra_length; paper 50).",
    "batch_tokens": "Padded source tokens per decoding batch, rows x padded length "
                    "(default: 4096).",
    "n_best": "Hypotheses per sentence (default 1); the beam is widened to N if smaller.",
    "max_input_length": "Longest source decoded [tokens, EOS included]; a longer line is cut "
                        "to it with a warning (default: max_positions - decode_extra_length).",
    "sampling_topk": "Sample outputs instead of beam search, from the K most likely pieces "
                     "at each step (0: from all).",
    "sampling_topp": "Sample outputs instead of beam search, from the smallest set of pieces "
                     "whose probability reaches P at each step (nucleus sampling; 1: all).",
    "sampling_temperature": "Sample outputs instead of beam search, with the logits divided by "
                            "T (0: argmax; 1: the model's distribution).",
    "n_samples": "Outputs drawn per sentence when sampling (default 1); written as --n_best's "
                 "'i<TAB>score<TAB>translation' lines when > 1.",
    "seed": "Seed of the sampling draws (default 0): a line's samples depend only on the seed, "
            "its line number and the sample's index, whatever --batch_tokens or file or stdin.",
}

SAMPLING_FLAGS = ("sampling_topk", "sampling_topp", "sampling_temperature", "n_samples", "seed")


DEFAULT_FLAGS = ("beam_size", "alpha", "decode_extra_length", "batch_tokens", "n_best",
                 "max_input_length")


def define_flags(names=DEFAULT_FLAGS,
                 help_overrides=None, flag_values=flags.FLAGS):
  """Defines the decoding flags `names` (absl, default None = from hparams) for a command,
  each validated at parse time by `check_setting`.

  Args:
    names: which of beam_size, alpha, decode_extra_length, batch_tokens, n_best,
      max_input_length (`DEFAULT_FLAGS`) and the sampling settings (`SAMPLING_FLAGS`).
    help_overrides: dict name -> help text, for a command whose use differs.
    flag_values: the absl FlagValues to define them in.
  """
  helps = {**_FLAG_HELP, **(help_overrides or {})}
  for name in names:
    define = flags.DEFINE_float if name in _FLOAT_SETTINGS else flags.DEFINE_integer
    define(name, None, helps[name], flag_values=flag_values)
    flags.register_validator(name, _validator(name), flag_values=flag_values)


def check_positions(max_positions, source_length, decode_extra_length, where="the input"):
  """Raises ValueError when a source's longest output would exceed the position table.

  Args:
    max_positions: the model's `max_positions` (hparams) [positions].
    source_length: int source length [tokens, EOS included].
    decode_extra_length: see `DecodeConfig`.
    where: names the sentence in the message, e.g. "line 12".

  Raises:
    ValueError: naming `where`, the length and the limit.
  """
  if source_length + decode_extra_length > max_positions:
    raise ValueError(
        f"{where}: {source_length} source tokens + decode_extra_length {decode_extra_length} "
        f"= {source_length + decode_extra_length} positions exceed the model's max_positions="
        f"{max_positions}; shorten the sentence or lower --decode_extra_length")
