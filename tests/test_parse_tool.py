"""tools/parse.py --mode=train / --mode=decode end to end (CI, about 30 s).

Trains a 1-layer, d_model 32 parser on 2 replicas (logical CPUs: `parse --mode=train`
builds the trainer's strategy) for 20 steps on the 50 trees of
wsj_0001-0004 (dev wsj_0160: 5 trees, test wsj_0180: 8 trees), decodes dev
and test with beam 2 and input + 10, and checks that every output is a tree
over exactly the input words and that EVALB's F1 is finite; with the default
constrained decoding every raw output is already well formed. Also checks the
bracket-aware vocabulary (every bracket token is one piece, words are pieced as
in the source) and --mode=decode on the trained model dir.
"""

import json
import math
import os
import signal
import subprocess
import sys

import pytest

from conftest import tool_path
from t2t_repro import errors
from t2t_repro.commands import parse as parse_command
from t2t_repro.parsing import bracket_vocab, pipeline, prepare, treebank, trees
from t2t_repro.parsing.constraint import SPACE_PIECE

PARSE_TOOL = tool_path("parse")
SPLITS = "--splits=train=1-4,dev=160-160,test=180-180"
TINY = ("num_layers=1,d_model=32,d_ff=64,num_heads=2,vocab_size=300,"
        "batch_tokens=1024,max_length=256,warmup_steps=10,beam_size=2,"
        "decode_extra_length=200,cooldown_steps=10")


@pytest.fixture(scope="module")
def trained(ptb_dir, tmp_path_factory):
  """(model_dir, completed process) of one --mode=train run."""
  model_dir = str(tmp_path_factory.mktemp("parser"))
  proc = subprocess.run(
      [sys.executable, PARSE_TOOL, "--mode=train", f"--ptb_dir={ptb_dir}",
       f"--model_dir={model_dir}", SPLITS, f"--hparams_override={TINY}",
       "--train_steps=20", "--train_minutes=0", "--eval_every_steps=10", "--augment_copies=1",
       "--train_flags=--save_checkpoints_secs=0,--log_every_steps=10,"
       "--save_checkpoints_steps=10,--average_last=2,--num_cpu_replicas=2"],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
  return model_dir, proc


def _lines(path):
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def test_train_decodes_well_formed_trees_with_finite_f1(trained):
  model_dir, proc = trained
  scores = json.load(open(os.path.join(model_dir, "parse_scores.json")))
  assert scores["train"]["step"] == 20
  assert "MirroredStrategy: 2 replica(s)" in proc.stdout + proc.stderr  # --num_cpu_replicas=2
  assert scores["train"]["config"]["problem"] == "parallel_text"
  # --augment_copies=1: the trainer read the gold pairs plus one SUB2 pair per tree.
  data_dir = os.path.join(model_dir, "data")
  assert scores["train"]["config"]["train_src"] == os.path.join(data_dir, "train_aug.src")
  assert len(_lines(os.path.join(data_dir, "train_aug.src"))) == 2 * len(
      _lines(os.path.join(data_dir, "train.src"))) == 2 * scores["train"]["augment"]["gold_pairs"]
  assert set(scores["wall_seconds"]) == {"train", "decode_and_score", "total"}
  assert scores["decode"]["step"] == 20
  # --average_last: the model decoded is the average of ckpt-10 and ckpt-20.
  assert scores["decode"]["checkpoint"] == os.path.join(model_dir, "averaged", "ckpt-20")
  data_dir = os.path.join(model_dir, "data")
  for split, count in (("dev", 5), ("test", 8)):
    entry = scores["decode"][split]
    assert entry["sentences"] == count
    assert (entry["beam_size"], entry["alpha"], entry["decode_extra_length"]) == (2, 0.3, 200)
    assert entry["constrained"] and entry["well_formed"] == count
    for summary in entry["evalb"].values():
      assert math.isfinite(summary["f1"]) and 0.0 <= summary["f1"] <= 100.0
      assert summary["error_sentences"] == 0
    assert entry["evalb"]["all"]["valid_sentences"] == count
    sources = _lines(os.path.join(data_dir, f"{split}.src"))
    predictions = _lines(os.path.join(model_dir, "decode", f"{split}.pred.tgt"))
    parsed = treebank.read_tree_lines(os.path.join(model_dir, "decode", f"{split}.pred.tree"))
    assert len(sources) == len(predictions) == len(parsed) == count
    for words, prediction in zip(sources, predictions):
      assert trees.is_well_formed(prediction, words, leaves="word"), prediction
    for words, tree in zip(sources, parsed):
      # A well-formed tree over exactly the input words: root TOP, every leaf
      # under an XX preterminal, every phrase non-empty, and it round-trips.
      assert tree.label() == "TOP"
      assert tree.leaves() == words.split()
      assert [tag for _, tag in tree.pos()] == ["XX"] * len(words.split())
      target = trees.linearize(tree)[1]
      assert trees.is_well_formed(target, words)
      assert trees.sequence_to_tree(target, words) == tree
  assert "Bracketing FMeasure" in proc.stdout


def test_bracket_vocabulary_keeps_brackets_whole(trained):
  model_dir, proc = trained
  vocab = os.path.join(model_dir, "vocab.model")
  source = _lines(os.path.join(model_dir, "data", "train.src"))[0]
  target = _lines(os.path.join(model_dir, "data", "train.tgt"))[0]
  pieces = bracket_vocab.pieces(vocab, target)
  brackets = [p for p in pieces if trees.is_bracket(p[1:])]
  assert brackets == [SPACE_PIECE + t for t in target.split() if trees.is_bracket(t)]
  # The words of the target are pieced exactly as the source: the constraint copies them.
  assert [p for p in pieces if p not in brackets] == bracket_vocab.pieces(vocab, source)
  assert " ".join(pieces) in proc.stdout  # the tool prints it

  from t2t_repro.data.vocab import Tokenizer  # pylint: disable=import-outside-toplevel
  tokenizer = Tokenizer.from_file(vocab)  # project ids: pad 0, eos 1, unk 2
  assert tokenizer.vocab_size == 300
  ids = tokenizer.encode(target)
  assert len(ids) == len(pieces) + 1  # + EOS
  assert tokenizer.decode(ids).numpy().decode() == target


def test_plain_bpe_splits_brackets(trained, tmp_path):
  """Why the tool learns its own vocabulary: plain BPE cuts "(NP" in two."""
  from t2t_repro.data import vocab as vocab_lib  # pylint: disable=import-outside-toplevel
  model_dir, _ = trained
  data_dir = os.path.join(model_dir, "data")
  texts = [t for split in ("src", "tgt")
           for t in _lines(os.path.join(data_dir, f"train.{split}"))]
  plain = vocab_lib.learn_vocab(texts, 300, str(tmp_path / "plain"), num_threads=2)
  target = _lines(os.path.join(data_dir, "train.tgt"))[0]
  brackets = " ".join(t for t in target.split() if trees.is_bracket(t))
  assert len(bracket_vocab.pieces(plain, brackets)) == 2 * len(brackets.split())
  assert len(bracket_vocab.pieces(os.path.join(model_dir, "vocab.model"), brackets)) == len(brackets.split())


def test_decode_mode_on_trained_model_dir(trained):
  model_dir, _ = trained
  proc = subprocess.run(
      [sys.executable, PARSE_TOOL, "--mode=decode", f"--model_dir={model_dir}",
       "--decode_splits=test", "--max_sentences=3", "--beam_size=1",
       "--decode_extra_length=5", "--decode_batch_tokens=40"],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
  scores = json.load(open(os.path.join(model_dir, "parse_scores.json")))
  assert "train" in scores  # merged, not overwritten
  test = scores["decode"]["test"]
  assert (test["sentences"], test["beam_size"], test["decode_extra_length"]) == (3, 1, 5)
  assert 0.0 <= test["evalb"]["all"]["f1"] <= 100.0
  assert len(_lines(os.path.join(model_dir, "decode", "test.pred.tree"))) == 3


def test_decode_mode_ensemble_of_a_checkpoint_with_itself(trained):
  model_dir, _ = trained

  def decode(*extra):
    proc = subprocess.run(
        [sys.executable, PARSE_TOOL, "--mode=decode", f"--model_dir={model_dir}",
         "--decode_splits=test", "--max_sentences=3", "--beam_size=1",
         "--decode_extra_length=5", *extra],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return (_lines(os.path.join(model_dir, "decode", "test.pred.tree")),
            json.load(open(os.path.join(model_dir, "parse_scores.json")))["decode"]["step"])

  checkpoint = os.path.join(model_dir, "ckpt-20")
  assert decode(f"--checkpoint_path={checkpoint},{checkpoint}") == (decode()[0], [20, 20])


def _decode(model_dir, *extra):
  return subprocess.run(
      [sys.executable, PARSE_TOOL, "--mode=decode", f"--model_dir={model_dir}",
       "--beam_size=2", "--decode_extra_length=20", *extra],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def test_alpha_chosen_on_dev_scores_every_split_with_it(trained):
  model_dir, _ = trained
  proc = _decode(model_dir, "--decode_splits=dev,test", "--alphas=0,2.5")
  assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
  decode = json.load(open(os.path.join(model_dir, "parse_scores.json")))["decode"]
  sweep = decode["alpha_sweep"]
  assert list(sweep) == ["0", "2.5"]
  chosen = 0.0 if sweep["0"] >= sweep["2.5"] else 2.5  # ties go to the first listed
  assert decode["dev"]["alpha"] == decode["test"]["alpha"] == chosen
  assert decode["dev"]["evalb"]["all"]["f1"] == sweep[f"{chosen:g}"]
  chosen_dir = os.path.join(model_dir, "decode", f"alpha_{chosen:g}")
  assert decode["dev"]["predictions"] == os.path.join(model_dir, "decode", "dev.pred.tgt")
  assert _lines(decode["dev"]["predictions"]) == _lines(os.path.join(chosen_dir, "dev.pred.tgt"))
  swept = _lines(os.path.join(model_dir, "decode", "alpha_2.5", "dev.pred.tgt"))
  # Each value of the sweep decodes exactly as --alpha with that value.
  proc = _decode(model_dir, "--decode_splits=dev", "--alpha=2.5")
  assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
  assert _lines(os.path.join(model_dir, "decode", "dev.pred.tgt")) == swept
  proc = _decode(model_dir, "--alpha=0.3", "--alphas=0,1")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
      "parse: error: --alpha and --alphas: give one"], proc.stderr
  proc = _decode(model_dir, "--alphas=0,-1")
  assert proc.returncode == 2 and "--alphas: numbers >= 0" in proc.stderr


def test_alpha_and_alphas_refused_before_training(ptb_dir, tmp_path):
  model_dir = tmp_path / "never_written"
  proc = subprocess.run(
      [sys.executable, PARSE_TOOL, "--mode=train", f"--ptb_dir={ptb_dir}",
       f"--model_dir={model_dir}", "--alpha=0.3", "--alphas=0,1"],
      capture_output=True, text=True, timeout=120,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
      "parse: error: --alpha and --alphas: give one"], proc.stderr
  assert not model_dir.exists()


def test_data_stats_record_constraint_bounds_and_reject_old_files(trained, tmp_path):
  model_dir, _ = trained
  stats = prepare.read_data_stats(os.path.join(model_dir, "data"))
  assert stats["leaves"] == "word"
  train = stats["splits"]["train"]
  # The bounds are measured on the train targets: recompute them from train.tgt.
  targets = [line.split() for line in _lines(os.path.join(model_dir, "data", "train.tgt"))]
  assert (train["max_depth"], train["max_open_run"]) == (
      max(prepare.bracket_shape(t)[0] for t in targets),
      max(prepare.bracket_shape(t)[1] for t in targets))
  assert prepare.bracket_shape("(S (NP (NP a )NP )NP (VP b )VP )S".split()) == (3, 3)
  (tmp_path / "stats.json").write_text(json.dumps({"splits": {"train": {}}}))
  with pytest.raises(ValueError, match=r"stats.json lacks leaves, splits.train.max_depth.*prepare"):
    prepare.read_data_stats(str(tmp_path))


def test_parse_splits_and_train_config():
  assert prepare.parse_splits([]) is None
  assert prepare.parse_splits(["train=1-4", "test=180-180"]) == {
      "train": (1, 4), "test": (180, 180)}
  for bad in (["train=4-1"], ["train=1"], ["x"]):
    with pytest.raises(ValueError, match="`splits`"):
      prepare.parse_splits(bad)
  # --train_flags: the command turns them into TrainConfig fields, the pipeline applies them.
  changes = parse_command.train_flag_changes(["--seed=3", "--noeval_at_start",
                                              "--save_checkpoints_secs=0"])
  config = pipeline.train_config("/m", "/d", hparams_override="dropout=0.1", train_minutes=45,
                                 train_steps=7, changes=changes)
  assert (config.hparams, config.problem, config.train_src, config.dev_tgt) == (
      "parsing_small", "parallel_text", "/d/train.src", "/d/dev.tgt")
  assert (config.model_dir, config.vocab_dir, config.train_minutes, config.dev_bleu_lines) == (
      "/m", "/m", 45, 0)
  assert (config.hparams_override, config.train_steps, config.seed) == ("dropout=0.1", 7, 3)
  assert (config.eval_at_start, config.save_checkpoints_secs) == (False, 0)
  config = pipeline.train_config("/m", "/d", train_split="train_aug")
  assert (config.train_src, config.train_tgt, config.dev_src) == (
      "/d/train_aug.src", "/d/train_aug.tgt", "/d/dev.src")
  for bad in (["--no_such_setting=1"], ["--seed=x"], ["--jit_compile=maybe"]):
    with pytest.raises(errors.UsageError, match="--train_flags"):
      parse_command.train_flag_changes(bad)


def test_sigterm_during_training_saves_and_ends_without_decoding(ptb_dir, tmp_path):
  """A stopped --mode=train run ends after its checkpoint (it used to go on to decode dev and
  test for minutes with a half-trained model); parse_scores.json records no scores."""
  model_dir = tmp_path / "parser"
  proc = subprocess.Popen(
      [sys.executable, PARSE_TOOL, "--mode=train", f"--ptb_dir={ptb_dir}",
       f"--model_dir={model_dir}", SPLITS, f"--hparams_override={TINY}",
       "--train_steps=100000", "--train_minutes=0", "--eval_every_steps=0",
       "--train_flags=--save_checkpoints_secs=0,--log_every_steps=10"],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1"))
  seen = []
  for line in proc.stdout:
    seen.append(line)
    if line.startswith("step 10/"):
      proc.send_signal(signal.SIGTERM)
      break
  out = "".join(seen) + proc.communicate(timeout=120)[0]
  assert proc.returncode == 0, out[-3000:]
  assert "checkpoint saved at step" in out
  assert "nothing decoded; the same command resumes training" in out
  assert "decoding with" not in out
  with open(model_dir / "parse_scores.json", encoding="utf-8") as f:
    scores = json.load(f)
  assert scores["train"]["step"] >= 10
  assert not any(key in scores for key in ("dev", "test", "wall_seconds"))
  assert any(name.startswith(f"ckpt-{scores['train']['step']}.") for name in os.listdir(model_dir))


def test_prepare_with_an_empty_ptb_dir_leaves_no_output_folder(tmp_path):
  (tmp_path / "empty").mkdir()
  output = tmp_path / "never_written"
  proc = subprocess.run(
      [sys.executable, PARSE_TOOL, "--mode=prepare", f"--ptb_dir={tmp_path / 'empty'}",
       f"--output_dir={output}"], capture_output=True, text=True, timeout=120,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
      f"parse: error: --splits: split 'train' has no file in {tmp_path / 'empty'}; give each split "
      "a range of the files there"], proc.stderr
  assert not output.exists()
