"""What the resumable study scripts (`table3/table3.py`, `multi30k/multi30k_levers.py`,
`parsing/parse_levers.py`) share: running one command with its log, showing it as a reader types
it, and the JSON-lines results file that a rerun reads to skip the finished runs."""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from t2t_repro.logs import cpu_name  # pylint: disable=unused-import  (runlib.cpu_name)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, log_path):
  """Runs argv from the repository root with stdout and stderr appended to log_path.

  Returns:
    (wall seconds, CPU seconds of the child, user + system).
  Raises:
    RuntimeError: a non-zero exit (the message names the log).
  """
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.monotonic()
  with open(log_path, "a", encoding="utf-8") as log:
    log.write("$ " + " ".join(argv) + "\n")
    log.flush()
    code = subprocess.call(argv, stdout=log, stderr=log, cwd=REPO)
  wall = time.monotonic() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if code:
    raise RuntimeError(f"exit {code}: {' '.join(argv)} (log: {log_path})")
  return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def train(argv, log_path, model_dir, train_steps):
  """`run` of a training command that must end at update `train_steps`: a trainer stopped by
  SIGINT or SIGTERM saves a checkpoint and exits 0 before the end, and such a run must be
  resumed, not scored. A model_dir with checkpoints resumes, so the times are those of the
  updates this command trained.

  Returns:
    (wall seconds, CPU seconds, the update this command started from: 0 for a run trained whole).
  Raises:
    RuntimeError: a non-zero exit, or the latest checkpoint is not at `train_steps`.
  """
  first_step = _latest_step(model_dir)
  wall, cpu = run(argv, log_path)
  step = _latest_step(model_dir)
  if step != train_steps:
    raise RuntimeError(f"{model_dir}: training stopped at update {step} of {train_steps} "
                       f"(log: {log_path}); rerun to resume it")
  return wall, cpu, first_step


def _latest_step(model_dir):
  """The update of model_dir's latest checkpoint (0: none, or no model_dir)."""
  from t2t_repro.model_dir import ModelDir  # pylint: disable=import-outside-toplevel
  latest = ModelDir(model_dir).latest_checkpoint() if os.path.isdir(model_dir) else None
  return int(latest.rsplit("-", 1)[1]) if latest else 0




def train_time_cell(runs):
  """'wall / CPU min' of training, the mean over `runs` (result dicts with train_wall_s,
  train_cpu_s, train_steps, train_first_step and, where recorded, cpu) trained whole by one
  command on the CPU of the last of them; a resumed run is timed over the updates of its last
  command only, so with none trained whole the cell is those of the last run, marked
  '(updates N-M)', and with some it says how many of the runs it averages. A recorded CPU is
  named after the times."""
  cpu_of_last = runs[-1].get("cpu")
  same_cpu = [r for r in runs if r.get("cpu") == cpu_of_last]
  whole = [r for r in same_cpu if not r.get("train_first_step")]
  timed = whole or same_cpu[-1:]
  wall = sum(r["train_wall_s"] for r in timed) / len(timed) / 60
  cpu = sum(r["train_cpu_s"] for r in timed) / len(timed) / 60
  if not whole:
    note = f" (updates {timed[0]['train_first_step']:,}-{timed[0]['train_steps']:,})"
  elif len(whole) < len(same_cpu):
    note = f" ({len(whole)} of {len(same_cpu)} runs timed whole)"
  else:
    note = ""
  if len(same_cpu) < len(runs):
    note += f" ({len(same_cpu)} of {len(runs)} runs on this CPU)"
  return f"{wall:.1f} / {cpu:.1f}{note}" + (f", {cpu_of_last}" if cpu_of_last else "")


def display(argv):
  """A command as a reader types it: `python -m ...` with repo-relative paths."""
  return " ".join(["python", *argv[1:]]).replace(REPO + os.sep, "")


def python(*args):
  """argv of this interpreter running `args`."""
  return [sys.executable, *args]


def read_results(path):
  """The runs recorded in the JSON-lines file `path` ([] if absent)."""
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def append_result(path, result):
  """Appends one run (a dict) as one line of `path`."""
  with open(path, "a", encoding="utf-8") as f:
    f.write(json.dumps(result, sort_keys=True) + "\n")


def replace_block(doc_path, begin, end, body):
  """Rewrites the text between the markers `begin` and `end` of the doc `doc_path` with
  `body` (the block is appended when the doc lacks the markers; the doc is created when
  absent)."""
  text = ""
  if os.path.exists(doc_path):
    with open(doc_path, encoding="utf-8") as f:
      text = f.read()
  block = f"{begin}\n{body}\n{end}"
  if begin in text and end in text:
    text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
  else:
    text = (text + "\n\n" if text else "") + block + "\n"
  with open(doc_path, "w", encoding="utf-8") as f:
    f.write(text)


class UsageError(Exception):
  """A bad argument of a benchmark script (exit 2, one line)."""


def cli(prog, main):
  """Runs `main(sys.argv[1:])`: a UsageError ends it with one line on stderr and exit 2, a
  RuntimeError (a run that failed or stopped early; its log has the details) with exit 1."""
  try:
    main(sys.argv[1:])
  except UsageError as e:
    print(f"{prog}: error: {e}", file=sys.stderr)
    sys.exit(2)
  except RuntimeError as e:
    print(f"{prog}: error: {e}", file=sys.stderr)
    sys.exit(1)


def lever_names(spec, levers):
  """The lever names of --levers=`spec` ('all' or comma-separated names of `levers`).

  Raises:
    UsageError: an unknown name (the message lists the valid ones).
  """
  names = list(levers) if spec == "all" else [n for n in spec.split(",") if n]
  unknown = [n for n in names if n not in levers]
  if unknown:
    raise UsageError(f"--levers: unknown lever {unknown[0]!r}; levers: {', '.join(levers)}")
  return names


def lever_parser(doc, levers, train_steps, seed, work_dir, results):
  """The argparse parser of a lever script, with the flags all of them share (defaults given);
  the script adds its data flag."""
  parser = argparse.ArgumentParser(description=doc.split("\n\n", 1)[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--levers", default="all",
                      help=f"'all' or names, comma-separated: {', '.join(levers)}.")
  parser.add_argument("--train_steps", type=int, default=train_steps,
                      help="Updates of every lever.")
  parser.add_argument("--seed", type=int, default=seed)
  parser.add_argument("--mixed_precision", default="mixed_bfloat16",
                      choices=["none", "mixed_bfloat16"])
  parser.add_argument("--work_dir", default=work_dir)
  parser.add_argument("--results", default=results)
  parser.add_argument("--doc", default=os.path.join("docs", "RESULTS.md"),
                      help="The doc whose table (between its markers) is rewritten.")
  parser.add_argument("--report_only", action="store_true")
  return parser


def run_levers(args, shared, run_lever, summary, table):
  """Runs each lever of `args.names` that `args.results` does not hold with the settings
  `shared` (a dict), appends its result (`run_lever(name, args)`) and prints `summary(result)`;
  the table between `table`'s markers in `args.doc` is rewritten after each lever and at the end
  (with --report_only, only that).

  Args:
    table: (begin marker, end marker, function: results -> markdown).
  """
  def report():
    results = [r for r in read_results(args.results) if r["settings"] == shared]
    if results:
      replace_block(args.doc, table[0], table[1], table[2](results))
      print(f"wrote the table of {len(results)} levers into {args.doc}", flush=True)

  for name in [] if args.report_only else args.names:
    if any(r["lever"] == name and r["settings"] == shared for r in read_results(args.results)):
      print(f"{name}: done ({args.results})", flush=True)
      continue
    print(f"{name}: training {args.train_steps} updates (load {os.getloadavg()[0]:.2f})",
          flush=True)
    result = run_lever(name, args)
    append_result(args.results, result)
    report()
    print(f"{name}: {summary(result)}", flush=True)
  report()
