"""Every script in benchmarks/ runs as docs/BENCHMARKS.md writes it, at its smallest size: the
suite's `tiny` model (`trained_run`), a few lines, one round, the peers installed here (a peer
that is not installed is skipped with one line). Each test checks the exit status and the
fields of the table or JSON that the docs quote; none checks a time."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import _REPO_ROOT

_BENCH = os.path.join(_REPO_ROOT, "benchmarks")
sys.path.insert(0, _BENCH)

import benchlib  # noqa: E402  pylint: disable=wrong-import-position


def run_script(script, *flags, timeout=600):
  """stdout of `python benchmarks/SCRIPT flags...` from the repository root; fails the test
  with the stderr tail when it exits non-zero."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
  proc = subprocess.run([sys.executable, os.path.join(_BENCH, script), *map(str, flags)],
                        cwd=_REPO_ROOT, capture_output=True, text=True, timeout=timeout, env=env,
                        check=False)
  assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
  return proc.stdout


def skip_lines_match(out, peers):
  """Each peer in `peers` is either installed or named by one 'skipped PEER:' line."""
  for peer in peers:
    line = benchlib.missing_peer(peer)
    assert (line is None) or (line in out.splitlines()), (peer, out)


def table_header(out, first_cell):
  """The cells of the markdown header row that starts with `first_cell`."""
  for line in out.splitlines():
    if line.startswith(f"| {first_cell} |"):
      return [cell.strip() for cell in line.strip("|").split("|")]
  raise AssertionError(f"no table starting with {first_cell!r} in:\n{out}")


def test_missing_peer_names_the_module_and_the_install():
  assert benchlib.missing_peer("ctranslate2") is None  # in the test extra
  benchlib.PEER_MODULES["absent_peer"] = (("no_such_module_xyz",), "pip install xyz")
  try:
    assert benchlib.missing_peer("absent_peer") == (
        "skipped absent_peer: no_such_module_xyz not installed (pip install xyz)")
  finally:
    del benchlib.PEER_MODULES["absent_peer"]


def test_summarize_medians_and_aggregates():
  results = [{"mode": "a", "x": 1.0}, {"mode": "a", "x": 5.0}, {"mode": "a", "x": 3.0},
             {"mode": "b", "x": 2.0}, {"mode": "b"}]
  table = benchlib.summarize(results, ("mode",), [("x", "x", "{:.1f}"),
                                                  ("best", "x", "{:.0f}", min)])
  assert table.splitlines() == ["| mode | runs | x | best |", "|---|---|---|---|",
                                "| a | 3 | 3.0 | 1 |", "| b | 2 | 2.0 | 2 |"]


def test_decode_throughput(trained_run, multi30k_slice, tmp_path):
  """Section 4's modes (cached, uncached, SavedModel), Model Garden's equal-work mode and
  section 0's small-batch comparison with CTranslate2 and LiteRT float32 (float16 and
  dynamic_range are the same path with another export), in one run on unsorted rows (sorted
  batches: test_beam_search_before_after; int8 is the same path with another export:
  test_ctranslate2_bleu), two batches at a time (--threads=2x1, translate's
  --num_batch_threads=2)."""
  json_out = tmp_path / "results.json"
  out = run_script("decode_throughput.py", f"--model_dir={trained_run.model_dir}",
                   f"--input_file={multi30k_slice / 'dev.en'}", "--lines=6", "--uncached_lines=2",
                   "--modes=cached,uncached,savedmodel,model_garden_fixed,ctranslate2_float32,"
                   "litert_float32",
                   "--batchings=unsorted", "--unsorted_rows=4", "--rounds=1", "--threads=2x1",
                   f"--json_out={json_out}")
  skip_lines_match(out, ["model_garden"])
  garden = [] if benchlib.missing_peer("model_garden") else ["model_garden_fixed"]
  assert table_header(out, "round")[:6] == ["round", "batching", "threads", "mode", "lines",
                                            "sentences/s"]
  rows = [line for line in out.splitlines() if line.startswith("| 1 | unsorted | 2x1 |")]
  assert [row.split("|")[4].strip() for row in rows] == [
      "cached", "cached (uncached's subset)", "uncached", "savedmodel", *garden,
      "ctranslate2_float32", "litert_float32"]
  assert rows[3].rstrip(" |").endswith("6/6")  # the SavedModel's outputs equal the decoder's
  assert rows[-1].rstrip(" |").endswith("6/6")  # and LiteRT's
  assert re.search(r"cached / uncached on the same 2 lines: [\d.]+x", out)
  assert table_header(out, "batching") == [
      "batching", "threads", "mode", "runs", "tokens/s", "tokens/CPU-s", "CPU/wall", "load",
      "vs CT2 float32 (wall)", "vs CT2 float32 (CPU)"]
  assert re.search(r"^\| unsorted \| 2x1 \| ctranslate2_float32 \| 1 \|.*\| 1\.00x \| 1\.00x \|$",
                   out, re.M)
  results = json.loads(json_out.read_text(encoding="utf-8"))
  assert [(r["mode"], r["batching"], r["threads"], r["lines"]) for r in results] == [
      (m, "unsorted", "2x1", 2 if m == "uncached" else 6)
      for m in ("cached", "uncached", "savedmodel", *garden, "ctranslate2_float32",
                "litert_float32")]
  assert all(r["output_tokens"] > 0 and r["tokens_per_cpu_s"] > 0 for r in results)


def test_profile_decode(trained_run, multi30k_slice, tmp_path):
  out = run_script("profile_decode.py", f"--model_dir={trained_run.model_dir}",
                   f"--input_file={multi30k_slice / 'dev.en'}", "--lines=4", "--beam_size=2",
                   "--rounds=1", "--inter_op=1", "--ablation=1", "--ablation_calls=1",
                   f"--logdir={tmp_path / 'trace'}", f"--json_out={tmp_path / 'profile.json'}")
  result = json.loads((tmp_path / "profile.json").read_text(encoding="utf-8"))
  assert result["lines"] == 4 and result["decode_batch_tokens"] == 4096
  assert {"whole", "steps", "profile", "ablation"} <= set(result)
  assert result["whole"]["tokens"] > 0
  assert "load at the end" in out


def test_beam_search_before_after(trained_run, multi30k_slice):
  if subprocess.run(["git", "rev-parse", "HEAD"], cwd=_REPO_ROOT, capture_output=True,
                    check=False).returncode != 0:
    pytest.skip("not a git checkout: no revision to compare with")
  out = run_script("beam_search_before_after.py", f"--model_dir={trained_run.model_dir}",
                   "--before=HEAD", f"--input_file={multi30k_slice / 'dev.en'}", "--lines=4",
                   "--rounds=1")
  assert table_header(out, "round") == ["round", "kind", "wall [s]", "CPU [s]", "tokens/CPU-s",
                                        "load"]
  assert "same ids: True; largest score difference: 0" in out


def test_ctranslate2_bleu(trained_run, multi30k_slice, tmp_path):
  for lang in ("en", "de"):
    lines = (multi30k_slice / f"dev.{lang}").read_text(encoding="utf-8").splitlines()[:4]
    (tmp_path / f"four.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
  out = run_script("ctranslate2_bleu.py", f"--model_dir={trained_run.model_dir}",
                   f"--input_file={tmp_path / 'four.en'}", f"--ref={tmp_path / 'four.de'}",
                   "--quantization=int8", "--threads=1")
  assert re.search(r"^CTranslate2 float32 \(beam \d+, length_penalty [\d.]+, 4 lines", out, re.M)
  assert re.search(r"^CTranslate2 int8 ", out, re.M)
  assert out.count("BLEU") >= 2


def test_peers_one_measurement_and_the_table(tmp_path):
  out = run_script("peers.py", "--kind=matmul_tf", "--onednn=1")
  result = json.loads(out.splitlines()[-1][len(benchlib.RESULT_PREFIX):])
  assert result["kind"] == "matmul_tf" and result["matmul_peak_gflops"] > 0
  config = json.dumps({"batch": 2, "src_len": 4, "tgt_len": 4, "num_layers": 1, "d_model": 16,
                       "d_ff": 32, "num_heads": 2, "vocab_size": 64})
  out = run_script("peers.py", "--table", "--rounds=1", "--steps=1", "--warmup=0",
                   f"--config={config}", f"--json_out={tmp_path / 'peers.json'}")
  skip_lines_match(out, ["model_garden", "torch"])
  assert table_header(out, "peer")[:4] == ["peer", "oneDNN", "round", "median step [s]"]
  ran = json.loads((tmp_path / "peers.json").read_text(encoding="utf-8"))
  assert {r["kind"] for r in ran} == {p for p in ("model_garden", "torch")
                                      if not benchlib.missing_peer(p)}


def test_train_throughput():
  out = run_script("train_throughput.py", "--sizes=tiny", "--kinds=ours,model_garden,torch",
                   "--onednn=on", "--rounds=1", "--steps=1", "--warmup=1", "--batch=4",
                   "--length=6")
  skip_lines_match(out, ["model_garden", "torch"])
  assert table_header(out, "size")[:4] == ["size", "kind", "oneDNN", "round"]  # per run
  assert "| size | onednn | kind | runs | median target tok/s |" in out  # medians
  assert re.search(r"^\| tiny \| True \| ours \| 1 \| \d+ \|", out, re.M)


def test_profile_step(tmp_path):
  out = run_script("profile_step.py", "--kind=ours", "--size=tiny", "--batch=4", "--length=6",
                   "--warmup=1", "--steps=1", f"--logdir={tmp_path}")
  assert re.search(r"^ours tiny: wall [\d.]+ s/step \(profiled\), op time [\d.]+ s/step$", out,
                   re.M)
  assert table_header(out, "op type") == ["op type", "s/step", "share", "ops"]
  out = run_script("profile_step.py", "--kind=model_garden", "--size=tiny", "--batch=4",
                   "--length=6", "--warmup=1", "--steps=1", f"--logdir={tmp_path}")
  skip_lines_match(out, ["model_garden"])


def test_streaming_latency(trained_run, multi30k_slice):
  out = run_script("streaming_latency.py", f"--model_dir={trained_run.model_dir}",
                   f"--input_file={multi30k_slice / 'dev.en'}", "--lines=3")
  assert re.search(r"^first line \(start-up included\): [\d.]+ s$", out, re.M)
  assert re.search(r"^next 2 lines: median \d+ ms, 90th percentile \d+ ms", out, re.M)


def test_serve_load(trained_run, exported_model, multi30k_slice, tmp_path):
  output = tmp_path / "serve_load.json"
  out = run_script("serve_load.py", f"--model_dir={trained_run.model_dir}",
                   f"--model_base_path={exported_model}",
                   f"--server=wait 1 ms=--model_base_path={exported_model} "
                   "--batch_timeout_micros=1000",
                   f"--input_file={multi30k_slice / 'dev.en'}", "--clients=1,4", "--rounds=1",
                   "--requests_per_client=1", "--min_requests=4", "--equal_lines=4",
                   "--overload_batches=1", "--overload_batch_size=2", "--round_seconds=30",
                   f"--output={output}")
  assert table_header(out, "clients") == [
      "clients", "offline sent/s", "offline, 1024-token batches", "server", "server sent/s",
      "server/offline", "p50 ms", "p99 ms", "mean batch"]
  assert re.search(r"^\| 4 \| [\d.]+ \| [\d.]+ \| wait 1 ms \| [\d.]+ \| [\d.]+x \|", out, re.M)
  assert re.search(r"^offline, one sentence per call \(1 client rounds' lines\): median [\d.]+ ms",
                   out, re.M)
  assert "equality, wait 1 ms: 4/4 answers equal translate's (all 200: True)" in out
  result = json.loads(output.read_text(encoding="utf-8"))
  assert set(result["rounds"]) == {"1", "4"}
  assert result["overload"]["other"] == 0
  assert result["sigterm_exit_status"] == {"wait 1 ms": 0}
  # The table again from the results file (how docs/BENCHMARKS.md's tables are written).
  assert run_script("serve_load.py", f"--table_of={output}").strip() in out


def test_time_to_quality(shared_data_dir, tmp_path):
  out = run_script("time_to_quality.py", f"--data_dir={shared_data_dir}",
                   f"--work_dir={tmp_path / 'ttq'}", "--hparams=tiny", "--cpu_minutes=0.2",
                   "--save_every_steps=1000", "--dev_lines=3", "--test_lines=3", "--average_last=1")
  skip_lines_match(out, ["model_garden"])
  assert table_header(out, "system")[:3] == ["system", "step", "CPU min"]
  assert re.search(r"^\| ours \| \d+ \| [\d.]+ \|", out, re.M)
  assert (tmp_path / "ttq" / "time_to_quality.json").exists()


def test_data_scale(shared_data_dir, tmp_path):
  data = tmp_path / "data"
  out = run_script("data_scale.py", "build", f"--out={data}", f"--data_dir={shared_data_dir}",
                   "--pairs_fraction=0.0004")
  assert "wrote 1800 pairs" in out and "wrote 14400 pairs" in out
  out = run_script("data_scale.py", "measure", f"--out={data}", f"--work={tmp_path / 'work'}",
                   f"--data_dir={shared_data_dir}", "--problems=translate_ende_wmt14",
                   "--pipeline_seconds=0.5", "--prepare_pairs=300")
  assert table_header(out, "corpus")[:2] == ["corpus", "validate: s / peak MiB (load)"]
  assert re.search(r"^\| WMT14 En-De size \(4\.5M\) \|", out, re.M)


def test_install_peers_is_the_readme_block():
  """install_peers.sh installs packages (not run here): its pip commands are the README's."""
  script = os.path.join(_BENCH, "install_peers.sh")
  assert subprocess.run(["bash", "-n", script], check=False).returncode == 0

  def commands(text):
    found = re.findall(r"^\s*(?:\$PIP|pip) install ([^#\n]*)", text, re.M)
    return [" ".join(c.replace('"', "").split()) for c in found]

  with open(script, encoding="utf-8") as f:
    script_commands = commands(f.read())
  with open(os.path.join(_BENCH, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  block = readme[readme.index("which runs"):readme.index("- `--no-deps`")]
  assert script_commands == commands(block) and len(script_commands) == 3


def _documented_commands():
  """(doc, script, [--flag names]) of every `python benchmarks/X.py ...` command in the docs,
  continuation lines joined."""
  found = []
  for doc in ("docs/BENCHMARKS.md", "docs/RESULTS.md", "benchmarks/README.md", "README.md",
              "studies/earlier_code/README.md"):
    with open(os.path.join(_REPO_ROOT, doc), encoding="utf-8") as f:
      text = f.read().replace("\\\n", " ")
    for match in re.finditer(r"python (benchmarks/\w+\.py)([^\n`|]*)", text):
      flags = re.findall(r"(?<!\S)(--\w+)", match[2].split("#")[0])
      found.append((doc, match[1], flags))
  return found


def test_documented_benchmark_flags_exist():
  """Every flag a documented benchmark command gives is one its script accepts (a renamed
  flag, e.g. --batch_tokens -> --decode_batch_tokens, fails here)."""
  commands = _documented_commands()
  assert len({script for _, script, _ in commands}) >= 10
  helps = {}
  for doc, script, flags in commands:
    if script not in helps:
      proc = subprocess.run([sys.executable, os.path.join(_REPO_ROOT, script), "--help"],
                            capture_output=True, text=True, timeout=120, check=False)
      assert proc.returncode == 0, (script, proc.stderr[-2000:])
      helps[script] = set(re.findall(r"(--\w+)", proc.stdout))
    unknown = [flag for flag in flags if flag not in helps[script]]
    assert not unknown, f"{doc}: {script} has no {unknown}"
