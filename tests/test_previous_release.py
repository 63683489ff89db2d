"""What a user of the previous release (0.1.0) keeps: its model dirs translate unchanged, and
its renamed flags and hparams still work for one more release, each with one warning line."""

import os
import shutil
import subprocess
import sys

import pytest

from t2t_repro.config.hparams import HParams, get_hparams

_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _run(command, *args):
  return subprocess.run([sys.executable, "-m", f"t2t_repro.{command}", *args], capture_output=True,
                        text=True, env=_ENV, timeout=300, check=False)


def test_a_model_dir_of_the_previous_release_translates_unchanged(tmp_path):
  """tests/fixtures/model_0.1.0 (hparams.json with checkpoint_average and learning_rate):
  the same 2-best lists, scores to the printed digit, with the old --batch_tokens flag
  (one warning line) and with its new name."""
  model_dir = shutil.copytree(os.path.join(_FIXTURES, "model_0.1.0"), tmp_path / "model")
  expected = open(os.path.join(_FIXTURES, "model_0.1.0.nbest"), encoding="utf-8").read()
  for flag in ("--batch_tokens=4096", "--decode_batch_tokens=4096"):
    out = tmp_path / "out.nbest"
    result = _run("translate", f"--model_dir={model_dir}", "--n_best=2", "--decode_extra_length=10",
                  f"--input_file={os.path.join(_FIXTURES, 'model_0.1.0.en')}", f"--output_file={out}",
                  flag)
    assert result.returncode == 0, result.stderr[-3000:]
    assert out.read_text(encoding="utf-8") == expected
    deprecated = [line for line in result.stderr.splitlines() if "deprecated" in line]
    old_flag = [line for line in deprecated if "--batch_tokens is deprecated: use "
                "--decode_batch_tokens" in line]
    assert len(old_flag) == (1 if flag.startswith("--batch_tokens") else 0), result.stderr
    assert len(deprecated) == len(old_flag) + 2, result.stderr  # hparams.json: 2 old names


def test_old_flag_names_are_aliases_with_one_warning(tmp_path):
  """average --num_last=1 averages like --average_last=1, and says once that it is deprecated."""
  model_dir = os.path.join(_FIXTURES, "model_0.1.0")
  result = _run("average", f"--model_dir={model_dir}", "--num_last=1", f"--output_dir={tmp_path / 'a'}")
  assert result.returncode == 0, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if "--num_last" in line]
  assert len(lines) == 1 and "--num_last is deprecated: use --average_last" in lines[0]
  assert sorted(os.listdir(tmp_path / "a")) == sorted(os.listdir(model_dir))


def test_old_hparam_names_are_read_as_the_new_ones(tmp_path):
  hp = get_hparams("base", "learning_rate=2.0,checkpoint_average=7")
  assert (hp.learning_rate_constant, hp.average_last) == (2.0, 7)
  old = HParams.from_dict({"learning_rate": 0.5, "checkpoint_average": 3})
  assert (old.learning_rate_constant, old.average_last) == (0.5, 3)
  path = tmp_path / "set.json"
  path.write_text('{"parent": "base", "learning_rate": 1.5}', encoding="utf-8")
  assert get_hparams(str(path)).learning_rate_constant == 1.5
  with pytest.raises(ValueError, match="learning_rate_constant"):
    get_hparams("base", "learning_rate=0")


def test_a_commands_own_flag_of_an_old_name_gives_no_warning(caplog):
  """train's --seed is the training seed and parse's, stats' their own seed: no warning; the
  alias --seed of a decoding command (--sampling_seed) warns once."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  from t2t_repro.commands import config_flags  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.decode import DecodeConfig  # pylint: disable=import-outside-toplevel
  own = flags.FlagValues()
  flags.DEFINE_integer("seed", 1234, "the trainer's seed", flag_values=own)
  own(["train", "--seed=1"])
  aliased = flags.FlagValues()
  config_flags.define(DecodeConfig, names=["sampling_seed"], flag_values=aliased)
  aliased(["translate", "--seed=3"])
  with caplog.at_level("WARNING"):
    config_flags.warn_deprecated(own)
    assert not [r for r in caplog.records if "deprecated" in r.getMessage()]
    config_flags.warn_deprecated(aliased)
  warned = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
  assert warned == ["--seed is deprecated: use --sampling_seed (the old name goes in the next "
                    "release)"] and aliased.sampling_seed == 3
