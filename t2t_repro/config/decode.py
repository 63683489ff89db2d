"""Decoding settings: `DecodeConfig`, resolved once from flags and hparams (no TensorFlow here,
so a command's --help stays instant).

Vaswani et al. 2017 §6.1: beam 4, alpha 0.6, input length + 50; §6.3 parsing: beam 21,
alpha 0.3, input + 300. `DecodeConfig.resolve`: a value given (a flag generated from the
field by `t2t_repro.commands.config_flags`) wins, else the model's hparams. One flag name
per concept in every command:
--beam_size, --alpha, --decode_extra_length, --decode_batch_tokens, --n_best, --max_input_length.
The decoding itself is `t2t_repro.decoding.translator.Translator`.
"""

import dataclasses

from t2t_repro import errors
from t2t_repro.config import settings
from t2t_repro.config.settings import setting


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """The decoding group of the hparams: what a model's decoding defaults to (Vaswani et al.
  2017, §6.1 translation, §6.3 parsing). `t2t_repro.config.hparams.HParams` and `DecodeConfig`
  both inherit these fields, so each has one help, default and range.

  Raises:
    errors.UsageError (a ValueError): a field outside its range.
  """

  beam_size: int = setting(
      4, "Beam width of decoding (§6.1: 4; §6.3 parsing: 21). A decoding command's default: the "
      "model's hparams.", min_value=1)
  alpha: float = setting(
      0.6, "GNMT length-penalty exponent, Wu et al. 2016 eq. 14 (§6.1: 0.6; §6.3 parsing: 0.3). "
      "A decoding command's default: the model's hparams.", min_value=0,
      why=" (early termination assumes it)")
  decode_extra_length: int = setting(
      50, "Maximum output length = source length + this [tokens, EOS included on both sides] "
      "(§6.1: 50; §6.3 parsing: 300). A decoding command's default: the model's hparams.",
      min_value=0)

  def __post_init__(self):
    settings.check(self)


@dataclasses.dataclass(frozen=True)
class DecodeConfig(SearchConfig):
  """Beam-search (or sampling) settings: `SearchConfig`'s and those of one decoding run.
  Each field's metadata (`settings.setting`) holds
  its help, the flag's, and its range; the commands generate their decoding flags from
  the fields (`t2t_repro.commands.config_flags`), each None by default ("resolve": the
  hparams' value).

  Sampling draws random outputs instead of beam search when any of sampling_topk,
  sampling_topp or sampling_temperature is given (`decoding.sampling`); beam_size and
  n_best are then unused, n_samples outputs are drawn per sentence.

  Raises:
    errors.UsageError (a ValueError), on construction: a setting out of range, n_best >
      beam_size, n_samples > 1 without sampling, or n_best > 1 with sampling; the message
      names the fields.
  """

  decode_batch_tokens: int = setting(
      4096, "Padded source tokens per decoding batch, rows x padded length (default: 4096); a "
      "longer sentence gets a batch of its own. `score` counts the longer side (it knows "
      "both).", min_value=1)
  n_best: int = setting(
      1, "Hypotheses per sentence (default 1); the beam is widened to N if smaller.",
      min_value=1)
  max_input_length: int | None = setting(
      None, "Longest source decoded [tokens, EOS included]; a longer line is cut to its first "
      "max_input_length - 1 tokens + EOS with a warning naming the line, so no input line can "
      "exhaust memory (default: max_positions - decode_extra_length).", min_value=2,
      why=" (a token and EOS)")
  sampling_topk: int | None = setting(
      None, "Sample outputs instead of beam search, from the K most likely pieces at each step "
      "(0: from all).", min_value=0)
  sampling_topp: float | None = setting(
      None, "Sample outputs instead of beam search, from the smallest set of pieces whose "
      "probability reaches P at each step (nucleus sampling; 1: all).", above=0, max_value=1.0)
  sampling_temperature: float | None = setting(
      None, "Sample outputs instead of beam search, with the logits divided by T (0: argmax; 1: "
      "the model's distribution).", min_value=0)
  n_samples: int = setting(
      1, "Outputs drawn per sentence when sampling (default 1); written as `n_best`'s "
      "'i<TAB>score<TAB>translation' lines when > 1.", min_value=1)
  sampling_seed: int = setting(
      0, "Seed of the sampling draws (default 0): a line's samples depend only on the seed, "
      "its line number and the sample's index, whatever `decode_batch_tokens` and whether read "
      "from a "
      "file or stdin.", min_value=0)

  def __post_init__(self):
    settings.check(self)
    if self.n_best > self.beam_size:
      raise errors.UsageError(f"`n_best` must be in [1, beam_size={self.beam_size}], got "
                              f"{self.n_best}")
    if self.n_samples > 1 and not self.sampling:
      raise errors.UsageError("`n_samples` > 1 needs sampling: give `sampling_topk`, "
                              "`sampling_topp` or `sampling_temperature`")
    if self.sampling and self.n_best > 1:
      raise errors.UsageError(_NOT_WITH_SAMPLING.format(name="n_best", value=self.n_best))

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
  def check_given(cls, beam_size=None, n_best=None, **sampling):
    """The checks that need no model: the sampling settings' ranges, and no beam_size or
    n_best given with sampling. A command calls it before loading the model.

    Returns:
      A `DecodeConfig` with the given sampling settings (the others at their defaults).

    Raises:
      errors.UsageError: as `resolve`.
    """
    config = cls(**{k: v for k, v in sampling.items() if v is not None})
    if config.sampling:
      for name, value in (("beam_size", beam_size), ("n_best", n_best)):
        if value is not None:
          raise errors.UsageError(_NOT_WITH_SAMPLING.format(name=name, value=value))
    return config

  @classmethod
  def resolve(cls, hparams, beam_size=None, alpha=None, decode_extra_length=None,
              decode_batch_tokens=None, n_best=None, max_input_length=None, **sampling):
    """The settings: each given value (not None), else the hparams' (beam_size, alpha,
    decode_extra_length), else the class default (decode_batch_tokens 4096, n_best 1). The beam is widened to n_best if narrower.

    Raises:
      errors.UsageError: a setting out of range, or a beam_size or n_best given with
        sampling (whose outputs per sentence are n_samples).
    """
    config = cls.check_given(beam_size=beam_size, n_best=n_best, **sampling)
    n_best = n_best or 1
    return dataclasses.replace(
        config, beam_size=max(beam_size or hparams.beam_size, n_best),
        alpha=float(hparams.alpha if alpha is None else alpha),
        decode_extra_length=(hparams.decode_extra_length if decode_extra_length is None
                             else decode_extra_length),
        decode_batch_tokens=decode_batch_tokens or cls.decode_batch_tokens, n_best=n_best,
        max_input_length=max_input_length)


_NOT_WITH_SAMPLING = ("`{name}`={value} is a beam-search setting, unused when sampling "
                      "(`sampling_topk`, `sampling_topp` or `sampling_temperature`): give "
                      "`n_samples` for several outputs per sentence")

# Compute types of a model loaded for decoding (`decoding.loading.load_for_inference`).
INFERENCE_DTYPES = ("float32", "bfloat16")

# --alignments: Pharaoh "i-j" pairs or one JSON object of weights per line
# (`t2t_repro.decoding.alignment`).
ALIGNMENT_KINDS = ("hard", "soft")

# The fields of the decoding flags of translate (and, some of them, the other commands):
# beam search's, and sampling's.
SEARCH_FIELDS = ("beam_size", "alpha", "decode_extra_length", "decode_batch_tokens", "n_best",
                 "max_input_length")
SAMPLING_FIELDS = ("sampling_topk", "sampling_topp", "sampling_temperature", "n_samples",
                   "sampling_seed")


def check_positions(max_positions, source_length, decode_extra_length, where="the input"):
  """Raises ValueError when a source's longest output would exceed the position table.

  Args:
    max_positions: the model's `max_positions` (hparams) [positions].
    source_length: int source length [tokens, EOS included].
    decode_extra_length: see `DecodeConfig`.
    where: names the sentence in the message, e.g. "line 12".

  Raises:
    errors.UsageError (a ValueError): naming `where`, the length and the limit.
  """
  if source_length + decode_extra_length > max_positions:
    raise errors.UsageError(
        f"{where}: {source_length} source tokens + decode_extra_length {decode_extra_length} "
        f"= {source_length + decode_extra_length} positions exceed the model's max_positions="
        f"{max_positions}; shorten the sentence or lower `decode_extra_length`")
