"""Every setting as its user sees it: tables built from the fields' metadata
(`settings.setting`: help, default, choices, range), so the help lives in one place.

* `hparams_table(hp)`: what `train --hparams=NAME --describe` prints, each hparam of a
  resolved set with its value, default, range and help, by group;
* `config_markdown()`: docs/CONFIG.md, every hparam and every train and decode setting
  (`python tools/config_doc.py` writes it; tests/test_config_doc.py fails when it is stale).

No TensorFlow here.
"""

import dataclasses

from t2t_repro.config import settings
from t2t_repro.config.data import DataConfig
from t2t_repro.config.decode import DecodeConfig, SearchConfig
from t2t_repro.config.hparams import HParams
from t2t_repro.config.model import ModelConfig
from t2t_repro.config.serving import BatchingOptions, ServerConfig
from t2t_repro.config.train import TrainConfig
from t2t_repro.config.optimization import OptimizationConfig

# The groups of HParams, in the order they are shown: (title, class, source file).
HPARAM_GROUPS = (
    ("Model", ModelConfig, "t2t_repro/config/model.py"),
    ("Optimization and schedule", OptimizationConfig, "t2t_repro/config/optimization.py"),
    ("Data and batching", DataConfig, "t2t_repro/config/data.py"),
    ("Decoding defaults", SearchConfig, "t2t_repro/config/decode.py"),
)


def _range(field):
  """'a, b or c' for choices, '>= 1' / 'in [0, 1)' for bounds, '' without either."""
  choices = field.metadata.get("choices")
  if choices:
    return ", ".join(map(str, choices))
  return settings.range_text(field)


def _default(value):
  return "-" if value is None else repr(value) if isinstance(value, str) else str(value)


def _own_fields(config_class, base=None):
  """The fields of `config_class` not inherited from `base`."""
  inherited = {f.name for f in dataclasses.fields(base)} if base else set()
  return [f for f in dataclasses.fields(config_class) if f.name not in inherited]


def hparams_table(hp, name=""):
  """Text: every hparam of `hp` (an `HParams`) by group, with its value (marked * where it
  differs from the default), default, range and help; one line each, help last."""
  lines = [f"hparams {name}".rstrip() + f": {hp.description}".rstrip(": ")]
  defaults = HParams()  # resolved as hp is (d_k = d_model // num_heads)
  for title, group, _ in HPARAM_GROUPS:
    lines.append(f"\n{title}:")
    for field in dataclasses.fields(group):
      value = getattr(hp, field.name)
      mark = "*" if value != getattr(defaults, field.name) else " "
      lines.append(f"  {field.name:<24}{mark}{_default(value):<12} default {_default(field.default):<10}"
                   f" {_range(field):<28} {field.metadata['help']}")
  lines.append("\n* differs from the default (the paper's base model).")
  return "\n".join(lines)


def _markdown_table(fields):
  rows = ["| name | default | range | help |", "|---|---|---|---|"]
  for field in fields:
    text = field.metadata["help"].replace("|", "\\|")
    rows.append(f"| `{field.name}` | {_default(field.default)} | {_range(field)} | {text} |")
  return "\n".join(rows)


def config_markdown():
  """The text of docs/CONFIG.md."""
  parts = [
      "# Configuration reference",
      "",
      "Every setting, from the fields that declare it (help, default and range in one place;",
      "`python tools/config_doc.py` writes this page, and a test fails when it is stale).",
      "Hparams come from a named set (`--hparams=base`, configs/) with `--hparams_override=k=v,...`;",
      "`python -m t2t_repro.train --hparams=NAME --describe` prints a set's values beside these",
      "defaults. Train and decode settings are flags of the same name.",
      "",
      "## Hparams",
      "",
      "The defaults are the paper's base model (Vaswani et al. 2017, Table 3).",
  ]
  for title, group, path in HPARAM_GROUPS:
    parts += ["", f"### {title} (`{group.__name__}`, {path})", "",
              _markdown_table(dataclasses.fields(group))]
  parts += ["", "## Train settings (`TrainConfig`, t2t_repro/config/train.py)", "",
            "Flags of `python -m t2t_repro.train`; a default of - means the hparam set's value "
            "(train_steps, batch_tokens, average_last) or as the help says.", "",
            _markdown_table(dataclasses.fields(TrainConfig)),
            "", "## Decode settings (`DecodeConfig`, t2t_repro/config/decode.py)", "",
            "Flags of `translate` (and, some of them, `score`, `export`, `parse`, "
            "`plot_attention`, `tune`); beam_size, alpha and decode_extra_length default to the "
            "model's hparams (the decoding group above), or to what `tune` chose.", "",
            _markdown_table(_own_fields(DecodeConfig, SearchConfig)),
            "", "## Server settings (`ServerConfig`, `BatchingOptions`, "
            "t2t_repro/config/serving.py)", "", "Flags of `python -m t2t_repro.serve` (tensorflow_model_server's names; "
            "docs/SERVING.md).", "",
            _markdown_table(dataclasses.fields(ServerConfig) + dataclasses.fields(BatchingOptions))]
  return "\n".join(parts) + "\n"
