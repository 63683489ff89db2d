"""The hparam registry: paper values, typed overrides, errors that name the problem."""

import dataclasses
import json

import pytest

from t2t_repro.config.model import ModelConfig
from t2t_repro.config.hparams import (HParamsError, get_hparams, list_hparams, parse_overrides,
                                      read_set)


def test_base_is_the_paper():
  hp = get_hparams("base")
  c = ModelConfig.from_hparams(hp)
  assert (hp.num_layers, hp.d_model, hp.d_ff, hp.num_heads, c.d_k, c.d_v) == \
      (6, 512, 2048, 8, 64, 64)
  assert (hp.dropout, hp.label_smoothing, hp.vocab_size, hp.norm_type) == (0.1, 0.1, 37000, "post")
  assert (hp.adam_beta1, hp.adam_beta2, hp.adam_epsilon) == (0.9, 0.98, 1e-9)
  assert (hp.learning_rate_constant, hp.warmup_steps, hp.train_steps) == (1.0, 4000, 100000)
  assert hp.batch_tokens * 8 == 25000 and hp.average_last == 5
  assert (hp.beam_size, hp.alpha, hp.decode_extra_length) == (4, 0.6, 50)
  assert (hp.attention_dropout, hp.relu_dropout) == (0.0, 0.0)


def test_big_and_enfr():
  big = get_hparams("big")
  assert (big.d_model, big.d_ff, big.num_heads, big.dropout, big.train_steps, big.average_last) == \
      (1024, 4096, 16, 0.3, 300000, 20)
  enfr = get_hparams("big_enfr")
  assert (enfr.dropout, enfr.vocab_size, enfr.d_model) == (0.1, 32000, 1024)


def test_t2t_base_is_separate_and_differs_only_where_t2t_does():
  paper, t2t = get_hparams("base").to_dict(), get_hparams("t2t_base").to_dict()
  changed = {k for k in paper if paper[k] != t2t[k]} - {"description"}
  assert changed == {"norm_type", "adam_beta2", "warmup_steps", "learning_rate_constant", "attention_dropout",
                     "relu_dropout", "vocab_size", "decode_extra_length"}
  assert (t2t["norm_type"], t2t["adam_beta2"], t2t["warmup_steps"], t2t["learning_rate_constant"]) == \
      ("pre", 0.997, 8000, 2.0)


@pytest.mark.parametrize("name,field,value", [
    ("base_a_heads1", "d_k", 512), ("base_a_heads4", "d_k", 128),
    ("base_a_heads16", "d_k", 32), ("base_a_heads32", "d_v", 16),
    ("base_b_dk16", "d_k", 16), ("base_b_dk32", "d_k", 32),
    ("base_c_layers2", "num_layers", 2), ("base_c_layers8", "num_layers", 8),
    ("base_c_dmodel256", "d_k", 32), ("base_c_dmodel1024", "d_k", 128),
    ("base_c_dff1024", "d_ff", 1024), ("base_c_dff4096", "d_ff", 4096),
    ("base_d_dropout0", "dropout", 0.0), ("base_d_dropout02", "dropout", 0.2),
    ("base_d_ls0", "label_smoothing", 0.0), ("base_d_ls02", "label_smoothing", 0.2),
    ("base_e_learned_pos", "position_encoding", "learned"),
])
def test_table3_rows(name, field, value):
  hp = get_hparams(name)
  config = ModelConfig.from_hparams(hp)  # d_k, d_v resolved (0: d_model // num_heads)
  assert getattr(config if field in ("d_k", "d_v") else hp, field) == value
  assert config.d_v == (64 if name.startswith("base_b") else config.d_k)


def test_parsing_set_is_section_6_3():
  hp = get_hparams("parsing")
  assert (hp.num_layers, hp.d_model, hp.beam_size, hp.alpha, hp.decode_extra_length) == \
      (4, 1024, 21, 0.3, 300)


def test_every_registered_set_resolves():
  names = list_hparams()
  assert {"base", "big", "big_enfr", "t2t_base", "parsing", "parsing_small", "small", "tiny"} <= set(names)
  for name in names:
    get_hparams(name)


# Resolved values of every set before configs/base.json stopped repeating the dataclass defaults:
# base in full, the others as their differences from base.
_PINNED_BASE = {
    "num_layers": 6, "d_model": 512, "d_ff": 2048, "num_heads": 8, "d_k": 0, "d_v": 0,
    "dropout": 0.1, "attention_dropout": 0.0, "relu_dropout": 0.0, "label_smoothing": 0.1,
    "vocab_size": 37000, "norm_type": "post", "position_encoding": "sinusoid", "max_length": 256,
    "max_positions": 512, "learning_rate_constant": 1.0, "warmup_steps": 4000, "adam_beta1": 0.9,
    "adam_beta2": 0.98, "adam_epsilon": 1e-09, "clip_norm": 0.0, "train_steps": 100000,
    "cooldown_steps": 0,
    "batch_tokens": 3125, "average_last": 5, "beam_size": 4, "alpha": 0.6,
    "decode_extra_length": 50}
_PINNED_CHANGES = {
    "base": {},
    "base_a_heads1": {"num_heads": 1}, "base_a_heads4": {"num_heads": 4},
    "base_a_heads16": {"num_heads": 16}, "base_a_heads32": {"num_heads": 32},
    "base_b_dk16": {"d_k": 16}, "base_b_dk32": {"d_k": 32},
    "base_c_dff1024": {"d_ff": 1024}, "base_c_dff4096": {"d_ff": 4096},
    "base_c_dmodel256": {"d_model": 256}, "base_c_dmodel1024": {"d_model": 1024},
    "base_c_layers2": {"num_layers": 2}, "base_c_layers4": {"num_layers": 4},
    "base_c_layers8": {"num_layers": 8},
    "base_d_dropout0": {"dropout": 0.0}, "base_d_dropout02": {"dropout": 0.2},
    "base_d_ls0": {"label_smoothing": 0.0}, "base_d_ls02": {"label_smoothing": 0.2},
    "base_e_learned_pos": {"position_encoding": "learned"},
    "base_enfr": {"vocab_size": 32000},
    "big": {"d_model": 1024, "d_ff": 4096, "num_heads": 16, "dropout": 0.3, "train_steps": 300000,
            "average_last": 20},
    "big_enfr": {"d_model": 1024, "d_ff": 4096, "num_heads": 16, "vocab_size": 32000,
                 "train_steps": 300000, "average_last": 20},
    "parsing": {"num_layers": 4, "d_model": 1024, "d_ff": 4096, "num_heads": 16, "dropout": 0.3,
                "vocab_size": 16000, "max_length": 512, "max_positions": 1024, "beam_size": 21,
                "alpha": 0.3, "decode_extra_length": 300, "average_last": 0},
    "parsing_small": {"num_layers": 4, "d_model": 256, "d_ff": 1024, "num_heads": 4, "dropout": 0.2,
                      "attention_dropout": 0.1, "relu_dropout": 0.1, "norm_type": "pre",
                      "adam_beta2": 0.997, "vocab_size": 4000, "max_length": 512,
                      "position_encoding": "relative",
                      "max_positions": 1024, "warmup_steps": 800, "train_steps": 10400,
                      "cooldown_steps": 2000, "batch_tokens": 2048, "beam_size": 21, "alpha": 0.3,
                      "decode_extra_length": 300, "average_last": 0},
    "small": {"num_layers": 3, "d_model": 256, "d_ff": 1024, "num_heads": 4, "vocab_size": 8000,
              "warmup_steps": 800, "train_steps": 5000, "batch_tokens": 2048},
    "t2t_base": {"attention_dropout": 0.1, "relu_dropout": 0.1, "vocab_size": 32768,
                 "norm_type": "pre", "learning_rate_constant": 2.0, "warmup_steps": 8000,
                 "adam_beta2": 0.997, "decode_extra_length": 100},
    "tiny": {"num_layers": 2, "d_model": 64, "d_ff": 256, "num_heads": 4, "vocab_size": 2000,
             "warmup_steps": 200, "train_steps": 400, "batch_tokens": 2048, "average_last": 0},
}


@pytest.mark.parametrize("name", sorted(_PINNED_CHANGES))
def test_resolved_values_are_pinned(name):
  """Every set resolves to the values it had when base.json repeated the dataclass defaults."""
  resolved = get_hparams(name).to_dict()
  expected = {**_PINNED_BASE, **_PINNED_CHANGES[name]}
  for width in ("d_k", "d_v"):  # 0 in a set: resolved to d_model // num_heads, as the model does
    expected[width] = expected[width] or expected["d_model"] // expected["num_heads"]
  assert {k: resolved[k] for k in _PINNED_BASE} == expected


def test_hparams_keep_every_groups_invariants():
  """HParams builds its four groups: ModelConfig's d_k and d_v resolve (base: 512 / 8 = 64),
  its divisibility rule holds, and each group is the hparams' own values."""
  hp = get_hparams("base")
  assert (hp.d_k, hp.d_v) == (64, 64) == (hp.model.d_k, hp.model.d_v)
  assert ModelConfig.from_hparams(hp) == hp.model
  dk16 = get_hparams("base_b_dk16")
  assert (dk16.d_k, dk16.d_v) == (16, 64)
  assert (get_hparams("big").d_k, get_hparams("tiny").d_k) == (64, 16)
  with pytest.raises(ValueError, match="d_model=512 is not divisible by num_heads=7"):
    ModelConfig(num_heads=7)
  with pytest.raises(HParamsError, match="hparam set 'base': d_model=512 is not divisible"):
    get_hparams("base", "num_heads=7")
  assert get_hparams("base", "num_heads=7,d_k=64,d_v=64").d_k == 64
  assert (hp.optimization.warmup_steps, hp.data.max_length, hp.search.beam_size) == \
      (hp.warmup_steps, hp.max_length, hp.beam_size)


def test_base_json_holds_only_the_description():
  assert set(read_set("base")) == {"description"}


def test_small_data_recipes():
  tiny = get_hparams("multi30k_revisit_tiny")
  assert (tiny.num_layers, tiny.d_model, tiny.d_ff, tiny.num_heads, tiny.norm_type) == \
      (4, 128, 256, 4, "post")
  assert (tiny.dropout, tiny.label_smoothing, tiny.vocab_size, tiny.lowercase) == (0.3, 0.1, 10000, True)
  assert (tiny.adam_beta1, tiny.adam_beta2) == (0.9, 0.98)
  assert (tiny.lr_schedule, tiny.warmup_steps, tiny.peak_learning_rate) == ("inverse_sqrt", 2000, 0.005)
  assert (tiny.batch_tokens, tiny.train_steps, tiny.average_last, tiny.beam_size) == \
      (8192, 8000, 10, 5)
  assert "lowercase" in tiny.description and "Wu et al. 2021" in tiny.description
  hour = get_hparams("multi30k_cpu_hour")
  assert hour.lr_schedule == "inverse_sqrt" and hour.peak_learning_rate > 0
  assert (hour.norm_type, hour.peak_learning_rate, hour.adam_beta2) == ("pre", 0.004, 0.997)
  assert hour.dropout == 0.2 and hour.attention_dropout > 0 and hour.relu_dropout > 0
  assert 6000 <= hour.vocab_size <= 8000
  assert "starting point" in hour.description and "dev" in hour.description
  assert (hour.beam_size, hour.alpha) == (4, 1.0)  # chosen on val (docs/RESULTS.md)
  fixed = get_hparams("multi30k_10k")  # the 10,000-update recipe: the hour's with 3 changes
  assert (fixed.position_encoding, fixed.max_relative_position) == ("relative", 16)
  assert (fixed.cooldown_steps, fixed.train_steps, fixed.dropout) == (3000, 10000, 0.3)
  assert (fixed.beam_size, fixed.alpha) == (5, 1.0)  # chosen on val (docs/RESULTS.md)
  assert dataclasses.replace(fixed, description=hour.description,
                             position_encoding="sinusoid", cooldown_steps=0,
                             train_steps=hour.train_steps, dropout=0.2,
                             beam_size=4) == hour
  parser = get_hparams("parsing_small")
  assert (parser.lr_schedule, parser.peak_learning_rate) == ("inverse_sqrt", 0.004)
  # relative positions chosen on dev (docs/RESULTS.md)
  assert (parser.position_encoding, parser.max_relative_position) == ("relative", 16)


def test_lr_schedule_choice_is_validated():
  assert get_hparams("base").lr_schedule == "noam"  # eq. 3 stays the default
  with pytest.raises(ValueError, match="lr_schedule='cosine' is not one of"):
    get_hparams("base", "lr_schedule=cosine")
  with pytest.raises(ValueError, match="needs a positive peak_learning_rate, got 0.0"):
    get_hparams("base", "lr_schedule=inverse_sqrt")


def test_overrides_are_typed():
  hp = get_hparams("base", "dropout=0.3, num_layers=4,norm_type=pre")
  assert (hp.dropout, hp.num_layers, hp.norm_type) == (0.3, 4, "pre")
  assert isinstance(hp.num_layers, int)
  assert parse_overrides("adam_epsilon=1e-8") == {"adam_epsilon": 1e-8}


@pytest.mark.parametrize("overrides,message", [
    ("dropuot=0.3", "unknown hparam 'dropuot'; did you mean 'dropout' or 'word_dropout' or 'relu_dropout'?"),
    ("qqq=1", "unknown hparam 'qqq'; valid hparams are: adam_beta1"),
    ("num_layers=four", "num_layers='four' is not a valid int"),
    ("dropout", "is not of the form key=value"),
    ("norm_type=sideways", "norm_type='sideways' is not one of"),
    ("dropout=1.5", "dropout must be in [0, 1)"),
    ("num_heads=3", "not divisible by num_heads=3"),
])
def test_bad_overrides_name_the_problem(overrides, message):
  with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
    get_hparams("base", overrides)


def test_json_file_with_parent(tmp_path):
  path = tmp_path / "mine.json"
  path.write_text(json.dumps({"parent": "big", "dropout": 0.2}))
  hp = get_hparams(str(path))
  assert (hp.d_model, hp.dropout) == (1024, 0.2)
  # The registered base values reach a file's set through its parents (a learned table of 512).
  path.write_text(json.dumps({"parent": "base", "position_encoding": "learned"}))
  assert get_hparams(str(path)).max_positions == 512
  bad = tmp_path / "bad.json"
  bad.write_text('{"parent": "base",\n "dropout": }')
  with pytest.raises(ValueError, match=r"bad.json: invalid JSON at line 2"):
    get_hparams(str(bad))
  with pytest.raises(ValueError, match="unknown hparam set 'nope'; registered sets are: base"):
    get_hparams("nope")


def test_max_positions_is_a_model_setting_independent_of_decoding():
  from t2t_repro.config.hparams import HParams  # pylint: disable=import-outside-toplevel
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel
  assert get_hparams("base").max_positions == 512 and get_hparams("parsing").max_positions == 1024
  learned = "position_encoding=learned,vocab_size=50,decode_extra_length="
  short, long_ = (Transformer.from_hparams(get_hparams("tiny", learned + n)) for n in ("5", "300"))
  assert short.position.table.shape == long_.position.table.shape == (512, 64)
  with pytest.raises(ValueError, match="max_positions=100 must be >= max_length=256"):
    get_hparams("base", "max_positions=100")
  # hparams.json of a learned-position run from before max_positions: its table had
  # max_length + decode_extra_length rows, so its checkpoints keep loading.
  old = get_hparams("base_e_learned_pos").to_dict()
  del old["max_positions"]
  assert HParams.from_dict(old).max_positions == 256 + 50
  old["position_encoding"] = "sinusoid"
  assert HParams.from_dict(old).max_positions == 512
