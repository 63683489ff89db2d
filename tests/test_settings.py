"""One config convention: every setting of HParams, TrainConfig and DecodeConfig is a field with
its help, choices and range; the configs check themselves and name the field; the commands'
flags come from the fields (or are listed as command-only); the library writes no flag."""

import ast
import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest

from t2t_repro import errors
from t2t_repro.config import settings
from t2t_repro.commands import config_flags, launch
from t2t_repro.data import problems
from t2t_repro.config.decode import DecodeConfig
from t2t_repro.config.hparams import HParams, get_hparams, parse_overrides
from t2t_repro.config.serving import BatchingOptions, ServerConfig
from t2t_repro.training import preflight
from t2t_repro.config.train import TrainConfig

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = pathlib.Path(_REPO) / "t2t_repro"
_ENV = dict(os.environ, PYTHONPATH=_REPO, TF_CPP_MIN_LOG_LEVEL="3")
_CONFIGS = (HParams, TrainConfig, DecodeConfig, BatchingOptions, ServerConfig)


@pytest.mark.parametrize("config", _CONFIGS, ids=lambda c: c.__name__)
def test_every_field_has_help_and_its_range_is_checked_naming_it(config):
  ranged = 0
  for field in dataclasses.fields(config):
    assert len(field.metadata.get("help", "")) > 10, field.name
    low = field.metadata.get("min", field.metadata.get("above"))
    if low is None:
      continue
    ranged += 1
    bad = low - 1 if "min" in field.metadata else low
    with pytest.raises(ValueError, match=rf"\b{field.name}\b.*got {bad}"):
      config(**{field.name: bad})
  assert ranged >= min(8, len(dataclasses.fields(config)) - 1)


def test_choices_are_checked_naming_the_field():
  with pytest.raises(ValueError, match="distribution='two' is not one of"):
    TrainConfig(distribution="two")
  with pytest.raises(ValueError, match="norm_type='sideways' is not one of"):
    HParams(norm_type="sideways")


def _flags_by_command():
  """{command: {flag: defining module}} of every command, each defined alone (a subprocess:
  absl's flags are global)."""
  code = ("import importlib, json\n"
          "from absl import flags\n"
          "from t2t_repro.commands import launch, runner\n"
          "base = set(flags.FLAGS)\n"
          "result = {}\n"
          "for name in launch.COMMANDS:\n"
          "  for flag in list(flags.FLAGS):\n"
          "    if flag not in base: delattr(flags.FLAGS, flag)\n"
          "  importlib.import_module(f't2t_repro.commands.{name}').define_flags()\n"
          "  modules = {f.name: m for m, fs in flags.FLAGS.flags_by_module_dict().items() for f in fs}\n"
          "  result[name] = {f: modules[f] for f in flags.FLAGS if f not in base}\n"
          "print(json.dumps(result))\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_ENV,
                          timeout=300, check=True)
  import json  # pylint: disable=import-outside-toplevel
  return json.loads(result.stdout)


def test_every_flag_comes_from_a_field_or_is_listed_as_command_only():
  by_command = _flags_by_command()
  assert sorted(by_command) == sorted(launch.COMMANDS)
  fields = {f.name for config in _CONFIGS for f in dataclasses.fields(config)}
  used = set()
  for command, flag_modules in by_command.items():
    for flag, module in flag_modules.items():
      if module == config_flags.__name__:
        assert flag in fields or flag in config_flags.DEPRECATED_ALIASES, (command, flag)
      else:
        assert flag in config_flags.COMMAND_ONLY_FLAGS, (command, flag, module)
        used.add(flag)
  assert not config_flags.COMMAND_ONLY_FLAGS - used  # no stale entry
  train = by_command["train"]
  assert {f.name for f in dataclasses.fields(TrainConfig)} <= set(train)
  assert by_command["translate"]["beam_size"] == config_flags.__name__


def test_the_library_defines_no_flag_and_writes_none_in_its_errors():
  """No module outside commands/ imports absl.flags or raises a message with a '--' flag: it
  names settings as `name`, and the runner writes them as flags."""
  offenders = []
  for path in _PACKAGE.rglob("*.py"):
    if "commands" in path.relative_to(_PACKAGE).parts:
      continue
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.module == "absl":
        offenders += [f"{path}: absl.{a.name}" for a in node.names if a.name == "flags"]
      if isinstance(node, ast.Import):
        offenders += [f"{path}: {a.name}" for a in node.names if a.name == "absl.flags"]
      if isinstance(node, ast.Raise) and node.exc is not None:
        offenders += [f"{path}:{node.lineno}: {c.value!r}" for c in ast.walk(node.exc)
                      if isinstance(c, ast.Constant) and isinstance(c.value, str)
                      and "--" in c.value]
  assert not offenders


def test_a_marked_setting_is_the_flag_on_the_command_line_and_plain_in_the_library():
  with pytest.raises(ValueError) as raised:
    TrainConfig(best_metric="bleu", dev_bleu_lines=0)
  assert str(raised.value) == ("best_metric=bleu needs the dev BLEU at every dev evaluation: "
                               "set dev_bleu_lines > 0 and dev_bleu_every_steps=0")
  result = subprocess.run([sys.executable, "-m", "t2t_repro.train", "--model_dir=unused",
                           "--best_metric=bleu", "--dev_bleu_lines=0"], capture_output=True,
                          text=True, env=_ENV, timeout=300, check=False)
  assert (result.returncode, result.stderr) == (
      2, "train: error: --best_metric=bleu needs the dev BLEU at every dev evaluation: set "
      "--dev_bleu_lines > 0 and --dev_bleu_every_steps=0\n")


# Suggestions: the closest names, as absl does for a misspelt flag.
def test_an_unknown_set_problem_or_hparam_suggests_the_closest_names():
  with pytest.raises(ValueError, match=r"unknown hparam set 'tinyy'; did you mean 'tiny'\?$"):
    get_hparams("tinyy")
  with pytest.raises(ValueError, match="unknown problem 'translate_ende_multi30'; did you mean "
                                       "'translate_ende_multi30k'"):
    problems.get_problem("translate_ende_multi30")
  with pytest.raises(ValueError, match="unknown hparam 'dropuot'; did you mean 'dropout'"):
    parse_overrides("dropuot=0.3")
  # Nothing close: every name, as before.
  with pytest.raises(ValueError, match="unknown problem 'zzz'; registered problems are: .*"
                                       "parallel_text"):
    problems.get_problem("zzz")


def test_the_train_command_suggests_a_set_in_one_line():
  result = subprocess.run([sys.executable, "-m", "t2t_repro.train", "--model_dir=unused",
                           "--hparams=tinyy"], capture_output=True, text=True, env=_ENV,
                          timeout=300, check=False)
  assert (result.returncode, result.stderr) == (
      2, "train: error: --hparams: unknown hparam set 'tinyy'; did you mean 'tiny'?\n")


# Small defects.
def test_num_cpu_replicas_mirrors_under_auto_and_is_refused_with_one_device():
  assert TrainConfig(num_cpu_replicas=2).strategy == "mirrored"
  assert TrainConfig(num_cpu_replicas=1).strategy == "auto"
  assert TrainConfig(num_cpu_replicas=2, distribution="mirrored").strategy == "mirrored"
  for distribution in ("one_device", "multi_worker"):
    with pytest.raises(ValueError, match=f"num_cpu_replicas=2 .* not {distribution}"):
      TrainConfig(num_cpu_replicas=2, distribution=distribution)


def test_a_missing_init_from_names_itself(tmp_path):
  (tmp_path / "runs").mkdir()  # a folder, but not a model dir
  source = tmp_path / "runs" / "nope"
  config = TrainConfig(model_dir=str(tmp_path / "m"), init_from=str(source))
  with pytest.raises(errors.UsageError) as raised:
    preflight.check_init_from(config, None, None)
  message = errors.message(raised.value, lambda name: f"--{name}")
  assert message.startswith(f"--init_from={source}: {source} is neither a model dir")
  assert "hparams.json" not in message


def test_beam_settings_given_with_sampling_are_refused():
  hparams = HParams(beam_size=21)
  sampled = DecodeConfig.resolve(hparams, sampling_temperature=1.0, n_samples=3)
  assert (sampled.beam_size, sampled.outputs_per_sentence) == (21, 3)  # the hparams' beam: fine
  for given in ({"beam_size": 4}, {"n_best": 2}):
    name = next(iter(given))
    with pytest.raises(errors.UsageError) as raised:
      DecodeConfig.resolve(hparams, sampling_topk=5, **given)
    message = errors.message(raised.value, lambda n: f"--{n}")
    assert message.startswith(f"--{name}={given[name]} is a beam-search setting") and \
        "--n_samples" in message
  with pytest.raises(ValueError, match="n_best=2 is a beam-search setting"):
    DecodeConfig(sampling_topp=0.9, n_best=2, beam_size=4)
  assert DecodeConfig.resolve(hparams, beam_size=4, n_best=2).n_best == 2  # beam search: fine


def test_settings_range_text():
  fields = {f.name: f for f in dataclasses.fields(DecodeConfig)}
  assert settings.range_text(fields["sampling_topp"]) == "in (0, 1.0]"
  assert settings.range_text(fields["beam_size"]) == ">= 1"
  assert settings.range_text(fields["sampling_seed"]) == ">= 0"


def test_a_name_shared_by_two_configs_has_one_meaning():
  """A field of two of HParams, TrainConfig and DecodeConfig has the same default in both,
  or None in one of them ("inherit")."""
  configs = {c.__name__: {f.name: f.default for f in dataclasses.fields(c)}
             for c in (HParams, TrainConfig, DecodeConfig)}
  names = list(configs)
  shared = []
  for i, first in enumerate(names):
    for second in names[i + 1:]:
      for name in configs[first].keys() & configs[second].keys():
        a, b = configs[first][name], configs[second][name]
        shared.append(name)
        assert a == b or a is None or b is None, (first, second, name, a, b)
  assert {"beam_size", "train_steps", "batch_tokens", "average_last"} <= set(shared)
  assert "seed" not in configs["DecodeConfig"]  # the sampling seed is `sampling_seed`
