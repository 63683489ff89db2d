"""The registry of named hyperparameter sets (tensor2tensor style).

Every set is a JSON file in the top-level ``configs/`` folder (shipped inside the
package as ``t2t_repro.configs``). A set may name a ``parent`` set and give only
the fields it changes, so the Table 3 variants are one line each on top of
``base``. ``get_hparams("base", "dropout=0.3,num_layers=4")`` resolves a set,
applies typed overrides and validates the result. The `HParams` dataclass (its fields
declared once each in four groups: model, optimization, data, decoding) has the paper's
base model (Table 3 "base") as defaults, written only there:
``configs/base.json`` holds just its description, and a registered set without
a parent starts from the dataclass defaults (so every set resolves through
them, as if base.json listed them all).

Sources: Vaswani et al. 2017, Table 3 (base, big and rows A-E), §5 (training),
§6.1 (decoding, checkpoint averaging), §6.3 (parsing); tensor2tensor
``transformer_base`` (v3) for the ``t2t_base`` set.
"""

import dataclasses
import json
import os
from importlib import resources

from absl import logging

from t2t_repro import errors
from t2t_repro.config import settings
from t2t_repro.config.data import DataConfig
from t2t_repro.config.decode import SearchConfig
from t2t_repro.config.model import ModelConfig
from t2t_repro.config.settings import setting
from t2t_repro.config.optimization import OptimizationConfig

_CONFIG_PACKAGE = "t2t_repro.configs"


class HParamsError(errors.UsageError):
  """An unknown hparam set, key or value, or a value out of range (a usage error: the
  message names the set, `hparams` / `hparams_override`, or the file)."""


@dataclasses.dataclass(frozen=True)
class HParams(SearchConfig, DataConfig, OptimizationConfig, ModelConfig):
  """One resolved hyperparameter set, frozen; the defaults are Transformer base (Table 3).

  It composes the four groups (`GROUPS`), each declared once in its own class, as fairseq's
  `FairseqConfig` composes its groups: the model (`config.model.ModelConfig`), optimization
  and schedule (`config.optimization.OptimizationConfig`), data and batching
  (`config.data.DataConfig`) and decoding (`config.decode.SearchConfig`), plus
  `description`. The fields are flat, as hparam sets, hparams.json and `--hparams_override`
  are (`hp.d_model`); each group is also an attribute (`hp.model` is the `ModelConfig`).
  Each group is built on construction, so its own checks and resolutions hold here too:
  d_k and d_v of 0 become d_model // num_heads (a `replace` of d_model or num_heads keeps
  them; give d_k=0, d_v=0 to derive them again). Each field's help says what it is, in which
  units and from which section of the paper. docs/CONFIG.md lists them all
  (`t2t_repro.config.describe`).

  Example:

  >>> hp = get_hparams("base", "dropout=0.3")
  >>> (hp.d_model, hp.dropout, hp.warmup_steps, hp.beam_size, hp.d_k, hp.model.d_k)
  (512, 0.3, 4000, 4, 64, 64)

  Raises:
    HParamsError (a ValueError): a value outside its choices or range, or a combination
      that does not fit (max_positions < max_length, ...), naming the fields.
  """

  description: str = setting("", "What the set is and where its values come from.")

  def __post_init__(self):
    try:
      settings.check(self)
      for _, group in GROUPS:  # each group's own checks and resolved values (d_k, d_v)
        built = self.group(group)
        for field in dataclasses.fields(group):
          object.__setattr__(self, field.name, getattr(built, field.name))
    except errors.UsageError as e:
      raise HParamsError(errors.marked(e)) from None
    if self.max_positions < self.max_length:
      raise HParamsError(f"max_positions={self.max_positions} must be >= max_length="
                         f"{self.max_length} (training examples must fit the position table)")
    if self.lr_schedule in ("inverse_sqrt", "constant") and not self.peak_learning_rate > 0:
      raise HParamsError(f"lr_schedule={self.lr_schedule!r} needs a positive "
                         f"peak_learning_rate, got {self.peak_learning_rate}")
    if self.cooldown_steps > self.train_steps:
      raise HParamsError(f"cooldown_steps={self.cooldown_steps} must be in [0, train_steps="
                         f"{self.train_steps}]")
    if self.subword_nbest in (0, 1):
      raise HParamsError(f"subword_nbest={self.subword_nbest} must be -1 (all segmentations; "
                         "BPE-dropout for BPE models) or > 1")

  def group(self, group):
    """The `group` (one class of `GROUPS`) of these hparams, built from their fields."""
    return group(**{field.name: getattr(self, field.name) for field in dataclasses.fields(group)})

  @property
  def model(self):
    """The model group, a `ModelConfig` (what `Transformer` takes)."""
    return self.group(ModelConfig)

  @property
  def optimization(self):
    """The optimization and schedule group, an `OptimizationConfig`."""
    return self.group(OptimizationConfig)

  @property
  def data(self):
    """The data and batching group, a `DataConfig`."""
    return self.group(DataConfig)

  @property
  def search(self):
    """The decoding group, a `SearchConfig` (the defaults of `DecodeConfig`)."""
    return self.group(SearchConfig)

  def to_dict(self):
    return dataclasses.asdict(self)

  def to_json(self):
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  def replace(self, **changes):
    """Returns a validated copy with `changes` applied (keys checked)."""
    _check_keys(changes, "replace()")
    return _built(lambda: dataclasses.replace(self, **changes), "replace()")

  @classmethod
  def from_dict(cls, values, origin="<dict>"):
    """Builds HParams from a plain dict; unknown keys raise HParamsError naming `origin`."""
    values = _renamed(values, origin)
    values.pop("parent", None)
    if "max_positions" not in values and values.get("position_encoding") == "learned":
      # hparams.json of a run older than max_positions: its learned table had this size.
      values["max_positions"] = (values.get("max_length", cls.max_length)
                                 + values.get("decode_extra_length", cls.decode_extra_length))
    _check_keys(values, origin)
    return _built(lambda: cls(**values), origin)


# The groups HParams composes: (attribute, class), in the order docs/CONFIG.md shows them.
GROUPS = (("model", ModelConfig), ("optimization", OptimizationConfig), ("data", DataConfig),
          ("search", SearchConfig))

_FIELDS = {f.name: f for f in dataclasses.fields(HParams)}
_DEFAULTS = {name: f.default for name, f in _FIELDS.items()}

# Names of the previous release, accepted for one more (with a warning line) in hparam sets,
# --hparams_override and the hparams.json of older model dirs: {old name: new name}.
RENAMED = {"checkpoint_average": "average_last", "learning_rate": "learning_rate_constant"}


_WARNED = set()  # (origin, old name): warned once per process


def _renamed(values, origin):
  """`values` with each old name of `RENAMED` replaced by its new one; one warning line for
  each old name of each origin."""
  values = dict(values)
  for old, new in RENAMED.items():
    if old in values:
      if (origin, old) not in _WARNED:
        _WARNED.add((origin, old))
        logging.warning("%s: hparam %s is deprecated, read as %s (rename it; the old name goes "
                        "in the next release)", origin, old, new)
      value = values.pop(old)
      values.setdefault(new, value)
  return values


def _check_keys(values, origin):
  unknown = sorted(set(values) - set(_FIELDS))
  if unknown:
    raise HParamsError(f"{origin}: "
                       + errors.unknown("hparam", unknown[0], sorted(_FIELDS), "valid hparams are"))


def _built(make, origin):
  """`make()` (a new `HParams`), its error prefixed with `origin`."""
  try:
    return make()
  except HParamsError as e:
    raise HParamsError(f"{origin}: {e}") from None


def _config_dir():
  return resources.files(_CONFIG_PACKAGE)


def list_hparams():
  """Names of the registered sets (the JSON files in configs/), sorted."""
  return sorted(p.name[:-5] for p in _config_dir().iterdir() if p.name.endswith(".json"))


def read_set(name):
  """The JSON object of registered set `name` as written: its own fields, "parent" and
  "description" (no values merged from the parent). Raises ValueError for an unknown name."""
  path = _config_dir() / f"{name}.json"
  if not path.is_file():
    raise ValueError(errors.unknown("hparam set", name, list_hparams(), "registered sets are"))
  return json.loads(path.read_text(encoding="utf-8"))


def _load_raw(name_or_path, seen=()):
  """Reads a set as a dict with its parents' values merged in."""
  if name_or_path.endswith(".json") or os.sep in name_or_path:
    if not os.path.exists(name_or_path):
      raise HParamsError(f"`hparams`: file {name_or_path!r} does not exist")
    with open(name_or_path, encoding="utf-8") as f:
      text, origin = f.read(), name_or_path
  else:
    path = _config_dir() / f"{name_or_path}.json"
    if not path.is_file():
      raise HParamsError("`hparams`: " + errors.unknown("hparam set", name_or_path,
                                                        list_hparams(), "registered sets are"))
    text, origin = path.read_text(encoding="utf-8"), f"configs/{name_or_path}.json"
  try:
    values = json.loads(text)
  except json.JSONDecodeError as e:
    raise HParamsError(f"{origin}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
  if not isinstance(values, dict):
    raise HParamsError(f"{origin}: expected a JSON object")
  values = _renamed(values, origin)
  parent = values.pop("parent", None)
  if parent:
    if parent in seen:
      raise HParamsError(f"{origin}: parent cycle through {parent!r}")
    merged = _load_raw(parent, seen + (parent,))
    merged.update(values)
    values = merged
  elif origin.startswith("configs/"):  # a registered root set (base): the dataclass defaults
    values = {**_DEFAULTS, **values}
  _check_keys(values, origin)
  return values


def _parse_value(name, text):
  """Parses one override value with the type of field `name`."""
  kind = type(_FIELDS[name].default)
  try:
    if kind is bool:
      if text.lower() not in ("true", "false", "1", "0"):
        raise HParamsError(text)
      return text.lower() in ("true", "1")
    if kind is int:
      return int(text)
    if kind is float:
      return float(text)
    return text
  except ValueError:
    raise HParamsError(f"`hparams_override`: {name}={text!r} is not a valid {kind.__name__}") \
        from None


def parse_overrides(overrides):
  """Parses "k=v,k2=v2" (--hparams_override) into a typed dict; a dict (the library's way,
  {"dropout": 0.3}) is taken as it is, its keys checked. Raises HParamsError naming a bad key
  or value."""
  if isinstance(overrides, dict):
    values = _renamed(overrides, "`hparams_override`")
    _check_keys(values, "`hparams_override`")
    return values
  result = {}
  for item in filter(None, (s.strip() for s in (overrides or "").split(","))):
    if "=" not in item:
      raise HParamsError(f"`hparams_override`: {item!r} is not of the form key=value")
    key, value = (s.strip() for s in item.split("=", 1))
    key = next(iter(_renamed({key: None}, "`hparams_override`")))
    _check_keys({key: None}, "`hparams_override`")
    result[key] = _parse_value(key, value)
  return result


def changes_text(name_or_path, hp):
  """"name, k=v, ...": the set (or file) `hp` was resolved from and, in field order, the
  values of `hp` that differ from it (what --hparams_override and the train command's
  --train_steps / --batch_tokens changed), for the startup block."""
  own = HParams.from_dict(_load_raw(name_or_path), origin=name_or_path).to_dict()
  return ", ".join([name_or_path] + [f"{k}={v}" for k, v in hp.to_dict().items() if own[k] != v])


def get_hparams(name_or_path="base", overrides="", **values):
  """Resolves a registered set (or a JSON file) and applies overrides.

  Args:
    name_or_path: a name from `list_hparams()` or a path to a .json file.
    overrides: "key=value,..." with values parsed to each field's type (--hparams_override),
      or a dict of values ({"dropout": 0.3}).
    **values: typed field values applied last, as they are (the train command's
      --train_steps, --batch_tokens and --average_last; None values are skipped).

  Returns:
    A validated `HParams`.

  Raises:
    HParamsError (a ValueError): unknown set, unreadable file, unknown key
      (the message lists the valid keys), a value of the wrong type, or an
      invalid value.
  """
  merged = _load_raw(name_or_path)
  merged.update(parse_overrides(overrides))
  merged.update({k: v for k, v in values.items() if v is not None})
  return HParams.from_dict(merged, origin=f"hparam set {name_or_path!r}")
