"""t2t_repro.decoding.attention_plot (the plot_attention command) writes the three heatmaps as PNG files."""

import importlib
import os

import pytest

from model_dir_util import make_model_dir
from t2t_repro.decoding.translator import DecodeConfig
from t2t_repro.decoding.loading import load_for_inference

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tool():
  return importlib.import_module("t2t_repro.decoding.attention_plot")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, shared_data_dir):
  return load_for_inference(
      make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir))


def _check_pngs(paths):
  assert sorted(paths) == ["decoder_self", "encoder_decoder", "encoder_self"]
  for path in paths.values():
    with open(path, "rb") as f:
      data = f.read()
    assert data.startswith(PNG_MAGIC) and len(data) > 2000, path


def test_writes_three_pngs(tmp_path, tool, loaded):
  model, _, tokenizer = loaded
  paths = tool.plot_attention(model, tokenizer, "A man is riding a bike.", str(tmp_path),
                              target="Ein Mann fährt Fahrrad.", layer=1, head=2)
  _check_pngs(paths)
  assert os.path.basename(paths["encoder_decoder"]) == "encoder_decoder_L1_H2.png"
  # All heads of the last layer, target = the model's own translation.
  paths = tool.plot_attention(model, tokenizer, "Two dogs play.", str(tmp_path / "all"), head=-1,
                              config=DecodeConfig(beam_size=2, decode_extra_length=3))
  _check_pngs(paths)
  assert tool.pieces(tokenizer, [0, 1]) == ["<pad>", "</s>"]
  with pytest.raises(ValueError, match="layer"):
    tool.plot_attention(model, tokenizer, "A dog.", str(tmp_path), layer=2)
  with pytest.raises(ValueError, match="head"):
    tool.plot_attention(model, tokenizer, "A dog.", str(tmp_path), head=4)
