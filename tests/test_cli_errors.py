"""Every bad invocation docs/RELIABILITY.md lists, run as a subprocess.

Each must exit with the stated status (2 usage, 1 data), print exactly one
`<command>: error: ...` line that names the flag / file / line, print no traceback,
and leave the model dir byte-for-byte as it was (or absent). The training cases
fail in validation, before TensorFlow is imported, except the few marked (TF) in
the table, which need the vocabulary or the strategy.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from model_dir_util import HPARAMS, make_model_dir, make_trainer_dir

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
_WORDS = ("the cat a dog sees runs big small house tree red green blue walks over under "
          "in on man woman child plays with ball").split()


def _text(lines, words_per_line=6, seed=0):
  rows = []
  for i in range(lines):
    rows.append(" ".join(_WORDS[(seed + i * 7 + j * 3) % len(_WORDS)]
                         for j in range(words_per_line)))
  return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Small synthetic parallel files plus bad ones: empty, blank, invalid UTF-8, a folder."""
  d = tmp_path_factory.mktemp("cli_data")
  (d / "train.src").write_text(_text(200), encoding="utf-8")
  (d / "train.tgt").write_text(_text(200, seed=3), encoding="utf-8")
  (d / "dev.src").write_text(_text(20, seed=1), encoding="utf-8")
  (d / "dev.tgt").write_text(_text(20, seed=4), encoding="utf-8")
  (d / "empty.src").write_bytes(b"")
  (d / "empty.tgt").write_bytes(b"")
  (d / "blank.src").write_text("\n \n\n", encoding="utf-8")
  (d / "blank.tgt").write_text("\n\n\n", encoding="utf-8")
  (d / "bad_utf8.src").write_bytes(_text(3).encode() + b"caf\xe9 au lait\n")
  (d / "bad_utf8.tgt").write_text(_text(4), encoding="utf-8")
  (d / "nul.src").write_bytes(_text(150).encode() + b"a \x00 b\n" + _text(49).encode())
  (d / "too_long.src").write_text(("x" * 4200 + "\n") * 200, encoding="utf-8")
  (d / "too_long.tgt").write_text(("y" * 4200 + "\n") * 200, encoding="utf-8")
  (d / "folder").mkdir()
  (d / "a_file").write_text("not a folder\n", encoding="utf-8")
  return d


def _snapshot(path):
  """{relative path: sha1 of the bytes} of a folder (a file: its own hash), None if absent."""
  path = str(path)
  if not os.path.exists(path):
    return None
  if os.path.isfile(path):
    with open(path, "rb") as f:
      return hashlib.sha1(f.read()).hexdigest()
  result = {}
  for root, _, files in os.walk(path):
    for name in files:
      full = os.path.join(root, name)
      with open(full, "rb") as f:
        result[os.path.relpath(full, path)] = hashlib.sha1(f.read()).hexdigest()
  return result


def _run(command, *args, stdin=b""):
  if command.endswith(".py"):
    cmd = [sys.executable, os.path.join(_REPO, command), *args]
  else:
    cmd = [sys.executable, "-m", f"t2t_repro.{command}", *args]
  return subprocess.run(cmd, input=stdin, capture_output=True, timeout=600, env=_ENV, check=False)


def _assert_error(result, code, command, *names):
  stderr = result.stderr.decode("utf-8", "replace")
  assert result.returncode == code, stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  lines = [line for line in stderr.splitlines() if line.startswith(f"{command}: error: ")]
  assert len(lines) == 1, stderr[-3000:]
  for name in names:
    assert str(name) in lines[0], (name, lines[0])
  return lines[0]


def _train_args(data, model_dir, *extra):
  return ["--hparams=tiny", "--problem=parallel_text", f"--model_dir={model_dir}",
          f"--train_src={data / 'train.src'}", f"--train_tgt={data / 'train.tgt'}",
          f"--dev_src={data / 'dev.src'}", f"--dev_tgt={data / 'dev.tgt'}", *extra]


# (flags, exit status, strings the error line must contain); all fail before TensorFlow.
FAST_TRAIN_CASES = [
    (["--train_steps=-5"], 2, ["--train_steps=-5"]),
    (["--accum_steps=0"], 2, ["--accum_steps=0"]),
    (["--batch_tokens=8"], 2, ["--batch_tokens=8", "max_length"]),
    (["--save_checkpoints_steps=-1"], 2, ["--save_checkpoints_steps=-1"]),
    (["--eval_every_steps=-3"], 2, ["--eval_every_steps=-3"]),
    (["--keep_checkpoint_max=0"], 2, ["--keep_checkpoint_max=0"]),
    (["--hparams_override=beam_size=0"], 2, ["beam_size"]),
    (["--hparams_override=alpha=-1"], 2, ["alpha"]),
    (["--hparams_override=max_length=0"], 2, ["max_length"]),
    (["--hparams_override=warmup_steps=0"], 2, ["warmup_steps"]),
    (["--hparams_override=cooldown_steps=500", "--train_steps=100"], 2,
     ["cooldown_steps=500", "train_steps=100"]),
    (["--hparams_override=nope=1"], 2, ["'nope'"]),
    (["--hparams=nope"], 2, ["--hparams", "'nope'", "tiny"]),
    (["--problem=nope"], 2, ["--problem=nope", "parallel_text"]),
    (["--nope=1"], 2, ["nope"]),
    (["--train_steps=abc"], 2, ["--train_steps"]),
    (["--train_src={d}/folder"], 1, ["{d}/folder", "directory"]),
    (["--train_src={d}/empty.src", "--train_tgt={d}/empty.tgt"], 1,
     ["{d}/empty.src", "{d}/empty.tgt", "empty"]),
    (["--train_src={d}/missing.src"], 1, ["{d}/missing.src"]),
    (["--dev_src={d}/folder"], 1, ["{d}/folder"]),
]


@pytest.mark.parametrize("existing", [False, True], ids=["new_dir", "existing_dir"])
@pytest.mark.parametrize("flags,code,names", FAST_TRAIN_CASES,
                         ids=[" ".join(c[0]).replace("{d}/", "") for c in FAST_TRAIN_CASES])
def test_train_rejects_before_writing(data, tmp_path, shared_data_dir, existing, flags, code, names):
  model_dir = tmp_path / "model"
  if existing:
    shutil.copytree(make_trainer_dir(tmp_path.parent / "trainer_dir", shared_data_dir), model_dir)
  before = _snapshot(model_dir)
  flags = [f.replace("{d}", str(data)) for f in flags]
  result = _run("train", *_train_args(data, model_dir), *flags)
  _assert_error(result, code, "train", *(n.replace("{d}", str(data)) for n in names))
  assert _snapshot(model_dir) == before
  assert not any(p.name.startswith(".model") for p in tmp_path.iterdir())  # no staging leftovers


@pytest.mark.parametrize("command", ["train", "parse"])
def test_usage_errors_do_not_import_tensorflow(data, tmp_path, request, command):
  """The FAST_TRAIN_CASES and the parser's training settings fail before TensorFlow is
  imported (an answer in about a second, not the ~8 s of importing it): the import log of
  such a run has no `tensorflow`."""
  if command == "train":
    args = ["-m", "t2t_repro.train", *_train_args(data, tmp_path / "model"), "--problem=nope"]
  else:
    ptb_dir = request.getfixturevalue("ptb_dir")  # skips the parse case without the PTB sample
    args = [os.path.join(_REPO, "tools", "parse.py"), "--mode=train", f"--ptb_dir={ptb_dir}",
            f"--model_dir={tmp_path / 'parser'}", "--augment_rate=0"]
  result = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                          timeout=600, env=_ENV, check=False)
  stderr = result.stderr.decode("utf-8", "replace")
  assert result.returncode == 2 and f"{command}: error: " in stderr, stderr[-3000:]
  imported = {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
              if line.startswith("import time:")}
  assert "t2t_repro.config.hparams" in imported and "tensorflow" not in imported


def test_model_dir_is_a_file(data):
  before = _snapshot(data / "a_file")
  result = _run("train", *_train_args(data, data / "a_file"))
  _assert_error(result, 2, "train", "--model_dir", "a_file")
  assert _snapshot(data / "a_file") == before


def test_debug_shows_the_traceback(data, tmp_path):
  # (A value out of its range, --train_steps=-5, is absl's flag error, before main runs.)
  result = _run("train", *_train_args(data, tmp_path / "model"), "--best_metric=bleu",
                "--dev_bleu_lines=0", "--debug")
  assert result.returncode != 0
  assert b"Traceback" in result.stderr and b"--best_metric=bleu" in result.stderr


# ---- cases that need TensorFlow (vocabulary, strategy or checkpoints) ------------------

def test_train_data_errors_after_vocab(data, tmp_path):
  """Dev lines all blank, every example too long (for max_length, for BPE learning), a NUL byte in
  the streamed training text: exit 1, nothing written."""
  small = ["--hparams_override=vocab_size=60", f"--vocab_dir={tmp_path / 'vocab'}"]
  cases = [
      (["--dev_src={d}/blank.src", "--dev_tgt={d}/blank.tgt"], ["{d}/blank.src", "dev"]),
      (["--hparams_override=vocab_size=60,max_length=3,batch_tokens=64"],
       ["all 200 training pairs", "max_length=3"]),
      (["--train_src={d}/nul.src"], ["{d}/nul.src:151", "NUL byte"]),
      (["--train_src={d}/too_long.src", "--train_tgt={d}/too_long.tgt"],
       ["{d}/too_long.src", "all 400 sentences are longer than 4192 bytes"]),
  ]
  for flags, names in cases:
    model_dir = tmp_path / "model"
    flags = [f.replace("{d}", str(data)) for f in small + flags]
    result = _run("train", *_train_args(data, model_dir), *flags)
    _assert_error(result, 1, "train", *(n.replace("{d}", str(data)) for n in names))
    assert not model_dir.exists()


def test_resume_refuses_other_hparams_and_update_settings(data, tmp_path, shared_data_dir):
  """Checkpoints of another d_model (hparams.json missing), and a changed accum_steps."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_trainer_dir(tmp_path.parent / "trainer_dir", shared_data_dir), model_dir)
  os.remove(model_dir / "hparams.json")
  before = _snapshot(model_dir)
  result = _run("train", *_train_args(data, model_dir),
                f"--hparams_override={HPARAMS.replace('d_model=32', 'd_model=64')}")
  _assert_error(result, 2, "train", f"--model_dir={model_dir}", "checkpoints of another model",
                "32)", "64)")
  assert _snapshot(model_dir) == before

  shutil.rmtree(model_dir)
  shutil.copytree(make_trainer_dir(tmp_path.parent / "trainer_dir", shared_data_dir), model_dir)
  with open(model_dir / "flags.json", "w", encoding="utf-8") as f:
    json.dump({"accum_steps": 1, "replicas": 1, "mixed_precision": "none"}, f)
  before = _snapshot(model_dir)
  result = _run("train", *_train_args(data, model_dir), f"--hparams_override={HPARAMS}",
                "--accum_steps=2")
  _assert_error(result, 2, "train", "accum_steps: saved 1 vs now 2", "--allow_update_change")
  assert _snapshot(model_dir) == before


def test_resume_refuses_a_vocabulary_of_the_other_case(data, tmp_path, shared_data_dir):
  """The model dir's vocab.model keeps case; lowercase=true is refused before anything is written."""
  model_dir = tmp_path / "model"
  shutil.copytree(make_trainer_dir(tmp_path.parent / "trainer_dir", shared_data_dir), model_dir)
  os.remove(model_dir / "hparams.json")
  before = _snapshot(model_dir)
  result = _run("train", *_train_args(data, model_dir), f"--hparams_override={HPARAMS},lowercase=true")
  _assert_error(result, 2, "train", f"{model_dir / 'vocab.model'}", "keeps the case",
                "lowercase=True")
  assert _snapshot(model_dir) == before


def test_translate_errors(data, tmp_path, shared_data_dir):
  model_dir = make_model_dir(tmp_path.parent / "trained", shared_data_dir)
  before = _snapshot(model_dir)
  _assert_error(_run("translate", f"--model_dir={model_dir}", f"--input_file={data}/missing.txt"),
                1, "translate", f"{data}/missing.txt")
  _assert_error(_run("translate", f"--model_dir={model_dir}", stdin=b"ok\nbad \xff\n"),
                1, "translate", "<stdin>:2", "UTF-8")
  _assert_error(_run("translate", f"--model_dir={data}/a_file"), 2, "translate", "--model_dir")
  assert _snapshot(model_dir) == before


def test_flag_combinations_are_refused_before_the_model_loads(tmp_path):
  """Sampling refuses --beam_size before anything is loaded: here the model dir is an
  empty folder, and the error names the flag, not the folder's missing files."""
  line = _assert_error(_run("translate", f"--model_dir={tmp_path}", "--sampling_topk=2",
                            "--beam_size=4", stdin=b"a\n"), 2, "translate", "--beam_size=4")
  assert "hparams" not in line


def test_a_misspelt_problem_gets_the_closest_name(tmp_path):
  for command, extra in (("stats", []), ("train", [f"--model_dir={tmp_path / 'model'}"])):
    _assert_error(_run(command, "--problem=translate_ende_multi30", *extra), 2, command,
                  "did you mean 'translate_ende_multi30k'")


def test_evaluate_errors(data, tmp_path):
  hyp = tmp_path / "hyp.txt"
  hyp.write_bytes(b"a b\nc \x00 d\n")
  _assert_error(_run("evaluate", f"--hyp={hyp}", f"--ref={data}/dev.src"), 1, "evaluate",
                f"{hyp}:2", "NUL")
  _assert_error(_run("evaluate", f"--hyp={data}/bad_utf8.src", f"--ref={data}/bad_utf8.src"), 1,
                "evaluate", f"{data}/bad_utf8.src:4")
  _assert_error(_run("evaluate", f"--hyp={data}/dev.src", f"--ref={data}/train.src"), 1,
                "evaluate", f"{data}/train.src", "200 lines")
  _assert_error(_run("evaluate", f"--hyp={data}/dev.src"), 2, "evaluate", "--ref")


def test_evaluate_splits_on_newline_only(tmp_path):
  """'a\\rb' is one line, as sacreBLEU and stdin read it (universal newlines made it two)."""
  hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
  hyp.write_bytes(b"a\rb c d\ne f g h\n")
  ref.write_bytes(b"a\rb c d\ne f g h\n")
  result = _run("evaluate", f"--hyp={hyp}", f"--ref={ref}")
  assert result.returncode == 0, result.stderr.decode()[-2000:]
  assert b"sentences: 2" in result.stdout


def test_parse_evaluate_errors(tmp_path):
  gold, test = tmp_path / "gold.tree", tmp_path / "test.tree"
  gold.write_text("(TOP (S (NP (DT the) (NN cat)) (VP (VBZ sits))))\n(TOP (X (P this) (Q is)))\n",
                  encoding="utf-8")
  test.write_text("(TOP (S (NP (DT the) (NN cat)) (VP (VBZ sits))))\n(P this) (Q is)\n",
                  encoding="utf-8")
  result = _run("tools/parse.py", "--mode=evaluate", f"--gold={gold}", f"--test={test}")
  assert result.returncode == 0, result.stderr.decode()[-2000:]  # EVALB reads line 2 as one sentence
  test.write_text("(TOP (S (NP (DT the) (NN cat)) (VP (VBZ sits))))\n(S (NP (P this)\n",
                  encoding="utf-8")
  _assert_error(_run("tools/parse.py", "--mode=evaluate", f"--gold={gold}", f"--test={test}"), 1,
                "parse", f"{test}:2")
  test.write_text("(TOP (S (NP (DT the) (NN cat)) (VP (VBZ sits))))\n", encoding="utf-8")
  _assert_error(_run("tools/parse.py", "--mode=evaluate", f"--gold={gold}", f"--test={test}"), 1,
                "parse", str(gold), str(test))


def test_parse_train_checks_hparams_before_writing(ptb_dir, tmp_path):
  model_dir = tmp_path / "parser"
  # parsing_small cools down over its last 2,000 updates: 100 updates cannot hold them.
  _assert_error(_run("tools/parse.py", "--mode=train", f"--ptb_dir={ptb_dir}",
                     f"--model_dir={model_dir}", "--train_steps=100"), 2,
                "parse", "cooldown_steps=2000", "train_steps=100")
  assert not model_dir.exists()
  _assert_error(_run("tools/parse.py", "--mode=train", f"--ptb_dir={ptb_dir}",
                     f"--model_dir={model_dir}", "--augment_copies=1",
                     "--splits=dev=160-160,test=180-180"), 2, "parse", "--augment_copies", "'train'")
  assert not model_dir.exists()
  for flag in ("--augment_rate=0", "--augment_rate=1.5", "--augment_copies=-1"):
    _assert_error(_run("tools/parse.py", "--mode=train", f"--ptb_dir={ptb_dir}",
                       f"--model_dir={model_dir}", flag), 2, "parse", flag.split("=")[0])
    assert not model_dir.exists()


def test_other_commands_report_hparams_and_model_dir_errors(tmp_path):
  _assert_error(_run("summary", "--hparams=nope"), 2, "summary", "'nope'", "tiny")
  _assert_error(_run("export", f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'out'}"), 1,
                "export", f"{tmp_path}/hparams.json")
  assert not (tmp_path / "out").exists()
