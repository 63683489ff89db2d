"""What the benchmarks share: one measurement in a fresh process, peers that may be absent,
medians over rounds as a markdown table, and the CPU a timing ran on.

Every measurement of `decode_throughput.py`, `train_throughput.py` and `peers.py` runs in its
own process (`run_isolated`): TF_ENABLE_ONEDNN_OPTS is read when TensorFlow is imported, and
a process's peak RSS is its own. The child is the same script with `--child=...`; it prints
its result dict as one line `BENCH_RESULT {json}` (`print_result`), which the parent reads.
"""

import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys

from t2t_repro.logs import cpu_name  # pylint: disable=unused-import  (benchlib.cpu_name)

RESULT_PREFIX = "BENCH_RESULT "

# Modules a peer needs, and how to install them (benchmarks/README.md).
PEER_MODULES = {
    "model_garden": (("official", "tf_keras"), "bash benchmarks/install_peers.sh"),
    "torch": (("torch",), "bash benchmarks/install_peers.sh"),
    "ctranslate2": (("ctranslate2",), 'pip install -e ".[ctranslate2]"'),
    "litert": (("ai_edge_litert",), 'pip install -e ".[litert]"'),
}


def missing_peer(peer):
  """None when `peer` ("model_garden", "torch", "ctranslate2", "litert") can be imported, else the one
  line that says it is skipped and how to install it."""
  modules, install = PEER_MODULES[peer]
  absent = [m for m in modules if importlib.util.find_spec(m) is None]
  if not absent:
    return None
  return f"skipped {peer}: {', '.join(absent)} not installed ({install})"


def run_isolated(script, flags, onednn=True, timeout=3600):
  """Runs `python script --child... flags` in a fresh process and returns its result dict.

  Args:
    script: path of the benchmark script (its `--child` flag selects the measurement).
    flags: list of str command-line flags of the child.
    onednn: TF_ENABLE_ONEDNN_OPTS of the child ("1"/"0"), in force when it imports TensorFlow.
    timeout: seconds before the child is killed.

  Returns:
    The dict the child printed with `print_result`.

  Raises:
    RuntimeError: the child printed no result line (its exit status and stderr tail).
    subprocess.TimeoutExpired: it ran longer than `timeout`.
  """
  env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1" if onednn else "0")
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  cmd = [sys.executable, os.path.abspath(script), *flags]
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                        check=False)
  for line in reversed(proc.stdout.splitlines()):
    if line.startswith(RESULT_PREFIX):
      return json.loads(line[len(RESULT_PREFIX):])
  raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} without a result line; "
                     f"stderr tail:\n{proc.stderr[-3000:]}")


def print_result(result):
  """The child's side of `run_isolated`: prints `result` (a JSON-able dict) as its line."""
  print(RESULT_PREFIX + json.dumps(result), flush=True)


def onednn_enabled():
  """Whether TF_ENABLE_ONEDNN_OPTS leaves oneDNN on (TensorFlow's default on x86 Linux)."""
  return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") not in ("0", "false")


def peak_rss_bytes():
  """This process's peak resident set size [bytes] (Linux ru_maxrss is in KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def summarize(results, group_by, columns):
  """Markdown table of medians over rounds: one row per group of results.

  Args:
    results: list of result dicts.
    group_by: keys whose values make a group (in first-seen order), shown as the first columns.
    columns: list of (header, key, format) or (header, key, format, aggregate): the median
      (or `aggregate`, e.g. min) over the group of `r[key]`, formatted with `format` (e.g.
      "{:.1f}"); a key absent from a group's results gives "-".

  Returns:
    str, the table: the group keys, "runs", then the columns.
  """
  groups = {}
  for r in results:
    groups.setdefault(tuple(r[k] for k in group_by), []).append(r)
  lines = ["| " + " | ".join([*group_by, "runs", *(c[0] for c in columns)]) + " |",
           "|" + "---|" * (len(group_by) + 1 + len(columns))]
  for key, rs in groups.items():
    cells = [str(v) for v in key] + [str(len(rs))]
    for _, field, fmt, *aggregate in columns:
      values = [r[field] for r in rs if r.get(field) is not None]
      cells.append(fmt.format((aggregate or [statistics.median])[0](values)) if values else "-")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)

