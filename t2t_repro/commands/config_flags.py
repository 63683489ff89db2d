"""The one generator of flags from config fields: `define` makes an absl flag of each field
of `TrainConfig`, `DecodeConfig`, the server's `BatchingOptions` and `ServerConfig` (or any
dataclass declared with `settings.setting`), and `values` reads them back for building the
config.

A field's metadata holds its help, choices and range (fairseq's convention); the flag has
the field's name, type, default (or None: "not given", for the decoding settings the
hparams resolve), help, choices (an enum flag) and range (a validator, so a bad value is
absl's one-line flag error when the command line is parsed, before anything is loaded).
A setting named in a help or error text between backticks, `beam_size`, is written as the
flag, --beam_size (`flag_text`; the runner does the same for errors).

`COMMAND_ONLY_FLAGS` lists the flags that are no config field (files, output formats,
modes): tests/test_settings.py checks that every flag of every command is one or the
other.
"""

import dataclasses

from absl import flags
from absl import logging

from t2t_repro import errors
from t2t_repro.config import settings

# Flags of the commands that are not a field of HParams, TrainConfig or DecodeConfig: where
# the input and output go, what to print, modes of one command.
COMMAND_ONLY_FLAGS = frozenset({
    # shared_flags
    "checkpoint_path", "inference_dtype",
    # train
    "list_hparams", "describe",
    # translate
    "input_file", "output_file", "alignments", "alignment_layer", "alignment_file", "progress",
    "buffer_size", "buffer_seconds", "target_prefix_file", "evaluate", "ref", "tgt_lang",
    # evaluate, validate, score, tune
    "hyp", "src", "tgt", "split", "output_json", "normalized", "per_piece", "header", "beam_sizes",
    "metric",
    # export
    "export_dir", "overwrite", "format", "quantization",
    # summary
    "length",
    # average
    "output_dir", "checkpoints",
    # parse
    "mode", "ptb_dir", "gold", "test", "splits", "augment_copies", "augment_rate", "alphas",
    "train_flags", "decode_splits", "bracket_vocab", "constrained", "leaves", "max_sentences",
    "output", "per_sentence", "predictions", "prm", "source", "xx_tags",
    # plot_attention
    "target", "layer", "head",
    # download, stats
    "force", "source_url_base", "tfds", "throughput_epochs",
    # serve (tensorflow_model_server's names; its settings are config.serving's fields)
    "model_base_path", "model_name", "model_config_file",
})


# Flags renamed since the previous release, kept for one more as aliases of their new names
# (absl's DEFINE_alias: same value, same checks), each giving one warning line when given:
# {old name: new name}. `define` adds the alias of a field it defines; `average` its own.
DEPRECATED_ALIASES = {"batch_tokens": "decode_batch_tokens", "num_last": "average_last",
                      "seed": "sampling_seed"}


# (id of a FlagValues, old name) of each alias `define_deprecated_alias` defined: a command
# may define a flag of an old name as its own (train's --seed is the training seed).
_DEFINED_ALIASES = set()


def define_deprecated_alias(old, flag_values=flags.FLAGS):
  """Defines --old as an alias of its new name (`DEPRECATED_ALIASES`)."""
  flags.DEFINE_alias(old, DEPRECATED_ALIASES[old], flag_values=flag_values)
  _DEFINED_ALIASES.add((id(flag_values), old))


def warn_deprecated(flag_values=flags.FLAGS):
  """Logs one warning line for each deprecated alias given on the command line (only the
  aliases `define_deprecated_alias` defined, not a command's own flag of the same name)."""
  for old, new in DEPRECATED_ALIASES.items():
    if ((id(flag_values), old) in _DEFINED_ALIASES and old in flag_values
        and flag_values[old].present):
      logging.warning("--%s is deprecated: use --%s (the old name goes in the next release)",
                      old, new)


# Flags that cannot both be given, each pair with why: refused (one line, exit 2) before the
# command runs when both are on the command line and neither is 0 (off).
CONFLICTS = {
    ("save_checkpoints_steps", "save_checkpoints_secs"):
        "checkpoints are saved by steps or by time: give one (the other 0: off)",
    ("batch_tokens", "decode_batch_tokens"):
        "--batch_tokens is the deprecated name of --decode_batch_tokens: give only the latter",
    ("checkpoints", "average_last"):
        "--checkpoints names the checkpoints to average, --average_last takes the last ones of "
        "--model_dir: give one"}


def given(argv):
  """{name: the flag as written, "--name=value"} of the flags on the command line `argv`
  (argv[0] is the program), up to "--"."""
  written = {}
  for arg in argv[1:]:
    if arg == "--":
      break
    if arg.startswith("-") and len(arg) > 1:
      written[arg.lstrip("-").split("=", 1)[0]] = "--" + arg.lstrip("-")
  return written


def check_conflicts(argv, flag_values=flags.FLAGS):
  """Refuses the `CONFLICTS` given together on `argv`.

  Raises:
    flags.IllegalFlagValueError: "--a=x and --b=y cannot both be given: <why>".
  """
  written = given(argv)
  for (first, second), why in CONFLICTS.items():
    if first in written and second in written and flag_values[first].value \
        and flag_values[second].value:
      raise flags.IllegalFlagValueError(
          f"{written[first]} and {written[second]} cannot both be given: {why}")


def flag_text(text, is_flag):
  """`text` with each setting marked `name` written as --name when `is_flag(name)`, else
  as the plain name."""
  return errors.SETTING_MARK.sub(lambda m: f"--{m[1]}" if is_flag(m[1]) else m[1], text)


def define(config_class, names=None, none_defaults=False, help_overrides=None,
           extra_help=None, defaults=None, flag_values=flags.FLAGS):
  """Defines one absl flag per field of `config_class`.

  Args:
    config_class: a dataclass whose fields are `settings.setting`s.
    names: the fields to define (default: all, in field order).
    none_defaults: every flag's default is None ("not given") instead of the field's.
    help_overrides: {name: help} replacing a field's help for this command.
    extra_help: {name: text} appended to a field's help.
    defaults: {name: value} replacing a field's default for this command (parse trains
      `parsing_small`).
    flag_values: the absl FlagValues to define them in.
  """
  fields = {f.name: f for f in dataclasses.fields(config_class)}
  for name in names or fields:
    field = fields[name]
    help_text = (help_overrides or {}).get(name, field.metadata["help"])
    help_text = flag_text(help_text + (extra_help or {}).get(name, ""), fields.__contains__)
    default = (defaults or {}).get(name, None if none_defaults else field.default)
    kind = settings.field_kind(field)
    if "choices" in field.metadata:
      flags.DEFINE_enum(name, default, list(field.metadata["choices"]), help_text,
                        flag_values=flag_values)
      continue
    define_flag = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
                   float: flags.DEFINE_float}.get(kind, flags.DEFINE_string)
    define_flag(name, default, help_text, flag_values=flag_values)
    if settings.range_text(field):
      flags.register_validator(name, _validator(field), flag_values=flag_values)
  for old, new in DEPRECATED_ALIASES.items():
    if new in (names or fields) and new in fields and old not in flag_values:
      define_deprecated_alias(old, flag_values)


def _validator(field):
  def check(value):
    try:
      settings.check_value(field, value)
    except ValueError as e:
      raise flags.ValidationError(str(e)) from None
    return True
  return check


def values(config_class, flag_values=flags.FLAGS):
  """{field name: parsed flag value} of the fields of `config_class` that have a flag."""
  return {f.name: flag_values[f.name].value for f in dataclasses.fields(config_class)
          if f.name in flag_values}
