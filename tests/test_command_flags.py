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


_BOTH_CHECKPOINT_FLAGS = ("train: error: --save_checkpoints_steps=5 and --save_checkpoints_secs=60 "
                          "cannot both be given: checkpoints are saved by steps or by time: give one "
                          "(the other 0: off)\n")
_BOTH_BATCH_FLAGS = ("{command}: error: --batch_tokens=100 and --decode_batch_tokens=200 cannot "
                     "both be given: --batch_tokens is the deprecated name of "
                     "--decode_batch_tokens: give only the latter\n")


@pytest.mark.parametrize("command, args, message", [
    ("train", ["--save_checkpoints_steps=5", "--save_checkpoints_secs=60"], _BOTH_CHECKPOINT_FLAGS),
    ("translate", ["--batch_tokens=100", "--decode_batch_tokens=200"], _BOTH_BATCH_FLAGS),
    ("score", ["--src=a", "--tgt=b", "--batch_tokens=100", "--decode_batch_tokens=200"],
     _BOTH_BATCH_FLAGS),
    ("tune", ["--batch_tokens=100", "--decode_batch_tokens=200"], _BOTH_BATCH_FLAGS),
    ("export", ["--export_dir=e", "--batch_tokens=100", "--decode_batch_tokens=200"],
     _BOTH_BATCH_FLAGS),
    ("average", ["--checkpoints=model/ckpt-120", "--average_last=1", "--output_dir=out"],
     "average: error: --checkpoints=model/ckpt-120 and --average_last=1 cannot both be given: "
     "--checkpoints names the checkpoints to average, --average_last takes the last ones of "
     "--model_dir: give one\n")])
def test_flags_that_cannot_both_be_given_are_refused_before_anything_runs(tmp_path, command,
                                                                          args, message):
  model_dir = tmp_path / "model"
  if command != "train":  # an existing folder: the decoding commands' flag check
    model_dir.mkdir()
  result = subprocess.run([sys.executable, "-m", f"t2t_repro.{command}",
                           f"--model_dir={model_dir}", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, PYTHONPATH=_REPO), cwd=tmp_path)
  assert (result.returncode, result.stderr) == (2, message.format(command=command))
  assert os.listdir(tmp_path) == ([] if command == "train" else ["model"])
  assert not model_dir.exists() or os.listdir(model_dir) == []


def test_a_flag_set_to_off_does_not_conflict():
  values = flags.FlagValues()
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "", flag_values=values)
  flags.DEFINE_integer("save_checkpoints_secs", 600, "", flag_values=values)
  for argv in (["cmd", "--save_checkpoints_steps=0", "--save_checkpoints_secs=60"],
               ["cmd", "--save_checkpoints_steps=5"], ["cmd", "--save_checkpoints_secs=5"]):
    values(argv)
    config_flags.check_conflicts(argv, values)
  argv = ["cmd", "--save_checkpoints_steps", "5", "--save_checkpoints_secs=9"]
  values(argv)
  with pytest.raises(flags.IllegalFlagValueError, match="^--save_checkpoints_steps and "
                     "--save_checkpoints_secs=9 cannot both be given"):
    config_flags.check_conflicts(argv, values)
