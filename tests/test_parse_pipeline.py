"""parsing.pipeline's steps return their results and print nothing; the files they write into a
model dir go through its ModelDir (the parse command prints and records; tests/test_parse_tool.py
runs it end to end)."""

import dataclasses
import json

from t2t_repro import model_dir as model_dir_lib
from t2t_repro.model_dir import ModelDir
from t2t_repro.parsing import pipeline, treebank, trees

GOLD = ["(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat))))",
        "(TOP (S (NP (PRP It)) (VP (VBD ran) (ADVP (RB away)))))"]


@dataclasses.dataclass
class _Config:
  beam_size: int = 4
  alpha: float = 0.6
  decode_extra_length: int = 50


class _FakeTranslator:
  """Returns the gold targets when alpha is 1, a flat (wrong) tree otherwise."""

  constraint = None

  def __init__(self, targets):
    self.targets, self.config, self.calls = targets, _Config(), []

  def translate(self, sources, progress):
    self.calls.append(self.config.alpha)
    if self.config.alpha == 1:
      return self.targets[:len(sources)]
    return [" ".join(["(S"] + s.split() + [")S"]) for s in sources]


def _data(tmp_path):
  gold = [treebank.parse_trees(line)[0] for line in GOLD]
  pairs = [trees.linearize(tree, "word") for tree in gold]
  data = tmp_path / "data"
  data.mkdir()
  for split in ("dev", "test"):
    (data / f"{split}.src").write_text("".join(src + "\n" for src, _ in pairs))
    (data / f"{split}.tree").write_text("".join(line + "\n" for line in GOLD))
  return str(data), [tgt for _, tgt in pairs]


def test_decode_split_returns_scores_and_writes_through_model_dir(tmp_path, capsys):
  data_dir, targets = _data(tmp_path)
  translator = _FakeTranslator(targets)
  translator.config.alpha = 1
  output = ModelDir(tmp_path / "model").subdir(model_dir_lib.PARSE_DECODE_DIR)
  result, info = pipeline.decode_split(translator, data_dir, "test", output, progress=False)
  assert capsys.readouterr() == ("", "")  # nothing printed
  assert result.all.f1 == 100.0 and info["well_formed"] == info["sentences"] == 2
  assert info["predictions"] == output.file("test.pred.tgt")
  assert output.read_bytes("test.pred.tgt").decode().splitlines() == targets
  parsed = treebank.read_tree_lines(info["trees"])
  gold = treebank.read_tree_lines(f"{data_dir}/test.tree")
  assert [trees.linearize(t, "word") for t in parsed] == [trees.linearize(t, "word") for t in gold]

def test_choose_alpha_returns_the_sweep_and_leaves_the_chosen_alpha(tmp_path, capsys):
  data_dir, targets = _data(tmp_path)
  translator = _FakeTranslator(targets)
  output = ModelDir(tmp_path / "model").subdir(model_dir_lib.PARSE_DECODE_DIR)
  alpha, (result, info), sweep = pipeline.choose_alpha(translator, data_dir, output, [0.5, 1.0, 2.0])
  assert capsys.readouterr() == ("", "")
  assert translator.calls == [0.5, 1.0, 2.0] and translator.config.alpha == alpha == 1.0
  assert sweep["1"] == result.all.f1 == 100.0 and sweep["0.5"] == sweep["2"] < 100.0
  assert list(sweep) == ["0.5", "1", "2"]
  # The chosen value's outputs are also decode/dev.pred.*, the files decode_split writes.
  assert info["predictions"] == output.file("dev.pred.tgt")
  assert output.read_bytes("dev.pred.tgt") == output.subdir("alpha_1").read_bytes("dev.pred.tgt")


def test_train_config_applies_the_changes_last():
  model_dir = ModelDir("/m")
  config = pipeline.train_config(model_dir, "/d", seed=5, changes={"seed": 3, "average_last": 2})
  assert (config.model_dir, config.vocab_dir, config.seed, config.average_last) == (
      "/m", "/m", 3, 2)
  assert json.dumps(dataclasses.asdict(config))  # what parse_scores.json records
