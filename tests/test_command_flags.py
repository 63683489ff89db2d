"""Decoding flags generated from `DecodeConfig`'s fields, range-checked at flag parsing by the
fields' own check."""

import dataclasses
import os
import subprocess
import sys

import pytest
from absl import flags

from t2t_repro.config import settings
from t2t_repro.commands import config_flags
from t2t_repro.config import decode as decode_config

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _define(values):
  config_flags.define(decode_config.DecodeConfig, names=decode_config.SEARCH_FIELDS,
                      none_defaults=True, flag_values=values)


def test_decoding_flag_validators_use_decode_config():
  values = flags.FlagValues()
  _define(values)
  values(["cmd", "--beam_size=2", "--alpha=0", "--max_input_length=2"])
  assert (values.beam_size, values.alpha, values.n_best) == (2, 0.0, None)
  for bad, message in (("--beam_size=0", "beam_size must be >= 1, got 0"),
                       ("--alpha=-0.5", "alpha must be >= 0 (early termination assumes it)"),
                       ("--max_input_length=1", "max_input_length must be >= 2 (a token and EOS)"),
                       ("--decode_extra_length=-1", "decode_extra_length must be >= 0"),
                       ("--decode_batch_tokens=0", "decode_batch_tokens must be >= 1"),
                       ("--batch_tokens=0", "decode_batch_tokens must be >= 1"),  # old name
                       ("--n_best=0", "n_best must be >= 1")):
    values = flags.FlagValues()
    _define(values)
    with pytest.raises(flags.IllegalFlagValueError, match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
      values(["cmd", bad])
    with pytest.raises(ValueError, match=message.split(" (")[0]):
      name, value = bad[2:].split("=")
      name = config_flags.DEPRECATED_ALIASES.get(name, name)
      settings.check_value(next(f for f in dataclasses.fields(decode_config.DecodeConfig)
                                if f.name == name), float(value))


@pytest.mark.parametrize("args, message", [
    (["--model_dir=.", "--beam_size=0"], "translate: error: flag --beam_size=0: beam_size must be >= 1, got 0\n"),
    ([], "translate: error: flag --model_dir=None: Flag --model_dir must have a value other "
         "than None.\n"),
    (["--model_dir=no/such/dir"], "translate: error: flag --model_dir=no/such/dir: is not a "
                                  "folder (or a comma-separated list of folders)\n")])
def test_translate_flag_errors(args, message):
  result = subprocess.run([sys.executable, "-m", "t2t_repro.translate", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, PYTHONPATH=_REPO), cwd=_REPO)
  assert (result.returncode, result.stderr) == (2, message)
