"""t2t_repro.decoding.attention_plot (the plot_attention command) writes the three heatmaps as
PNG files, layers and heads numbered from 1 in file names and titles, with axis titles."""

import importlib
import os

import matplotlib.figure
import pytest

from model_dir_util import make_model_dir
from t2t_repro.decoding.translator import DecodeConfig, Translator
from t2t_repro.decoding.loading import load_for_inference

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tool():
  return importlib.import_module("t2t_repro.decoding.attention_plot")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, shared_data_dir):
  return load_for_inference(
      make_model_dir(tmp_path_factory.getbasetemp() / "tiny_model_dir", shared_data_dir))


@pytest.fixture(name="figures")
def fixture_figures(monkeypatch):
  """(suptitle, y title, x title, panel titles) of every figure saved."""
  saved, savefig = [], matplotlib.figure.Figure.savefig

  def spy(fig, *args, **kwargs):
    axes = [ax for ax in fig.axes if ax.get_xticks().size]  # not the colorbar
    title = fig._suptitle.get_text()  # pylint: disable=protected-access
    saved.append((title, axes[0].get_ylabel(), axes[0].get_xlabel(),
                  [ax.get_title() for ax in axes]))
    return savefig(fig, *args, **kwargs)

  monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
  return saved


def _check_pngs(paths):
  for path in paths:
    with open(path, "rb") as f:
      data = f.read()
    assert data.startswith(PNG_MAGIC) and len(data) > 2000, path


def test_writes_three_pngs_numbered_from_one(tmp_path, tool, loaded, figures):
  model, _, tokenizer = loaded
  target, paths = tool.plot_attention(model, tokenizer, "A man is riding a bike.", str(tmp_path),
                                      target="Ein Mann fährt Fahrrad.", layer=1, head=2)
  _check_pngs(paths)
  assert target == "Ein Mann fährt Fahrrad."
  assert [os.path.basename(p) for p in paths] == [
      "encoder_self_L1_H2.png", "decoder_self_L1_H2.png", "encoder_decoder_L1_H2.png"]
  assert figures[2] == ("encoder-decoder attention, layer 1 of 2, head 2 of 4",
                        "queries: target pieces (each row predicts its piece)",
                        "keys: source pieces", [""])
  assert figures[1][2] == "keys: decoder inputs (the target shifted right)"
  assert tool.pieces(tokenizer, [0, 1]) == ["<pad>", "</s>"]
  with pytest.raises(ValueError, match="layer"):
    tool.plot_attention(model, tokenizer, "A dog.", str(tmp_path), layer=3)
  with pytest.raises(ValueError, match="layer"):
    tool.plot_attention(model, tokenizer, "A dog.", str(tmp_path), layer=0)
  with pytest.raises(ValueError, match="head"):
    tool.plot_attention(model, tokenizer, "A dog.", str(tmp_path), head=5)


def test_every_layer_and_head_of_the_models_translation(tmp_path, tool, loaded, figures):
  model, _, tokenizer = loaded
  config = DecodeConfig(beam_size=2, decode_extra_length=3)
  target, paths = tool.plot_attention(model, tokenizer, "Two dogs play.", str(tmp_path),
                                      layer=-1, head=-1, config=config)
  assert target == Translator(model, tokenizer, config).translate(["Two dogs play."])[0]
  _check_pngs(paths)
  assert sorted(os.path.basename(p) for p in paths) == sorted(
      f"{kind}_L{layer}_Hall.png" for kind in tool.KINDS for layer in (1, 2))
  assert figures[0][0] == "encoder self-attention, layer 1 of 2, all heads"
  assert figures[-1][3] == ["head 1", "head 2", "head 3", "head 4"]
  # The default layer is the last.
  _, paths = tool.plot_attention(model, tokenizer, "Two dogs play.", str(tmp_path / "last"),
                                 config=config)
  assert [os.path.basename(p) for p in paths][0] == "encoder_self_L2_H1.png"
