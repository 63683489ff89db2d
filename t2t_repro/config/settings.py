"""One way to describe a setting: a dataclass field whose metadata holds its help, its
choices and its range (fairseq's config convention), and one check of a config's fields.

`HParams` (`t2t_repro.config.hparams`), `TrainConfig` (`config.train`) and `DecodeConfig`
(`config.decode`) declare every field with `setting(...)` and call `check(self)` in
`__post_init__`, then check what involves several fields. The commands generate their
flags from the same fields (`t2t_repro.commands.config_flags`).

A message names a setting between backticks, `beam_size`; the command runner writes it
as the flag, --beam_size (`errors.SETTING_MARK`).
"""

import dataclasses
import types
import typing

from t2t_repro import errors


def setting(default, help_text, choices=None, min_value=None, max_value=None, above=None,
            below=None, why=""):
  """A config field: `dataclasses.field(default=default)` with the metadata

  * "help": `help_text` (the flag's help);
  * "choices": the allowed values (a tuple), if given;
  * "min" / "max": inclusive bounds, "above" / "below": exclusive ones, if given;
  * "why": the reason of a bound, appended to its error message (e.g. " (a token and EOS)").
  """
  metadata = {"help": help_text}
  bounds = {"choices": tuple(choices) if choices is not None else None, "min": min_value,
            "max": max_value, "above": above, "below": below}
  metadata.update({key: value for key, value in bounds.items() if value is not None})
  if why:
    metadata["why"] = why
  return dataclasses.field(default=default, metadata=metadata)


def field_kind(field):
  """The Python type of a field: int for `int`, `Optional[int]` and `int | None`."""
  if isinstance(field.type, type):
    return field.type
  if typing.get_origin(field.type) in (typing.Union, types.UnionType):
    return next(t for t in typing.get_args(field.type) if t is not type(None))
  raise TypeError(f"{field.name}: unsupported field type {field.type!r}")


def range_text(field):
  """The range of a field as text ('>= 1', 'in [0, 1)'), or '' without bounds."""
  meta = field.metadata
  low = ("[", meta["min"]) if "min" in meta else ("(", meta["above"]) if "above" in meta else None
  high = (meta["max"], "]") if "max" in meta else (meta["below"], ")") if "below" in meta else None
  if low and high:
    return f"in {low[0]}{low[1]}, {high[0]}{high[1]}"
  if low:
    return f"{'>=' if low[0] == '[' else '>'} {low[1]}"
  if high:
    return f"{'<=' if high[1] == ']' else '<'} {high[0]}"
  return ""


def check_value(field, value):
  """Checks one value of `field` against its choices and range (None passes: "not given").

  Raises:
    errors.UsageError (a ValueError): naming the field, e.g. "`beam_size` must be >= 1, got 0".
  """
  if value is None:
    return
  meta = field.metadata
  if "choices" in meta and value not in meta["choices"]:
    raise errors.UsageError(f"`{field.name}`={value!r} is not one of {meta['choices']}")
  if "choices" in meta or isinstance(value, (bool, str)):
    return
  inside = (("min" not in meta or value >= meta["min"])
            and ("above" not in meta or value > meta["above"])
            and ("max" not in meta or value <= meta["max"])
            and ("below" not in meta or value < meta["below"]))
  if not inside:
    raise errors.UsageError(f"`{field.name}` must be {range_text(field)}{meta.get('why', '')}, "
                            f"got {value}")


def check(config):
  """Checks every field of the dataclass instance `config` (`check_value`).

  Raises:
    errors.UsageError: the first field outside its choices or range, named.
  """
  for field in dataclasses.fields(config):
    check_value(field, getattr(config, field.name))
