"""docs/CONFIG.md is generated from the settings' fields and current; `train --describe`
shows every hparam of a set."""

import dataclasses
import os
import subprocess
import sys

from t2t_repro.config import describe
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.config.hparams import HParams, get_hparams
from t2t_repro.config.train import TrainConfig

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_config_doc_is_current():
  with open(os.path.join(_REPO, "docs", "CONFIG.md"), encoding="utf-8") as f:
    assert f.read() == describe.config_markdown(), "stale: run python tools/config_doc.py"


def test_config_doc_names_every_setting_with_its_default_and_range():
  text = describe.config_markdown()
  hparams, rest = text.split("## Train settings")
  train, decode = rest.split("## Decode settings")
  for config, section in ((HParams, hparams), (TrainConfig, train), (DecodeConfig, decode)):
    for field in dataclasses.fields(config):
      if field.name == "description" or (config is DecodeConfig and field.name in (
          "beam_size", "alpha", "decode_extra_length")):  # the hparams' decoding group
        continue
      row = next(line for line in section.splitlines() if line.startswith(f"| `{field.name}` |"))
      default = "-" if field.default is None else str(field.default).strip("'")
      assert default in row, (field.name, row)
  assert "| `beam_size` | 4 | >= 1 |" in text and "| `dropout` | 0.1 | in [0, 1) |" in text


def test_every_hparam_is_in_exactly_one_group():
  grouped = [f.name for _, group, _ in describe.HPARAM_GROUPS for f in dataclasses.fields(group)]
  assert len(grouped) == len(set(grouped))
  assert set(grouped) | {"description"} == {f.name for f in dataclasses.fields(HParams)}


def test_train_describe_prints_every_hparam_with_value_and_default():
  result = subprocess.run([sys.executable, "-m", "t2t_repro.train", "--hparams=big", "--describe",
                           "--hparams_override=dropout=0.2"], capture_output=True, text=True,
                          cwd=_REPO, timeout=300, check=True)
  lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}
  assert set(lines) == {f.name for f in dataclasses.fields(HParams)} - {"description"}
  big = get_hparams("big", "dropout=0.2")
  assert lines["d_model"].split()[1:4] == ["*1024", "default", "512"]
  assert lines["dropout"].split()[1:4] == ["*0.2", "default", "0.1"]
  assert lines["beam_size"].split()[1:4] == ["4", "default", "4"]
  assert lines["average_last"].split()[1] == f"*{big.average_last}"
