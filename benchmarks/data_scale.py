r"""Data at the paper's scale: synthetic WMT14-sized corpora and what they cost.

  python benchmarks/data_scale.py build   --out=scratch/b13/data [--data_dir=shared/data]
  python benchmarks/data_scale.py measure --out=scratch/b13/data --work=scratch/b13/work

`build` writes, deterministically (seeded permutations; nothing downloaded, nothing committed):

* `{out}/wmt14/train.en-de.{en,de}`: 4,500,000 pairs (WMT14 En-De, paper §5.1), made from the
  offline En-De text: Multi30k train (29,000), the WMT news test sets 2008-2012 and 2015-2018
  (24,241) and newstest2013 (3000): 56,241 distinct pairs, each round a new seeded permutation.
* `{out}/wmt14/train.en-fr.{en,fr}`: 36,000,000 pairs (WMT14 En-Fr), from newstest2013 and
  newstest2014 En-Fr (6003 distinct pairs), the same way.
* `{out}/wmt14/newstest2013.*`, `newstest2014-full.*` and `{out}/multi30k`: symbolic links to the
  real files, so `--problem=translate_en{de,fr}_wmt14 --data_dir={out}` has its dev and test sets.

`measure` runs, once each, in fresh processes, and prints a markdown table with `uptime`'s load:
vocabulary learning (wall time, peak RSS), `python -m t2t_repro.train --hparams=tiny ...
--train_steps=1 --eval_every_steps=0` with the vocabulary already learned (first run: validation
record written; second run: record reused), and the training pipeline's target tokens/s with 1 and
2 cores (`taskset`).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ENDE_PAIRS = 4_500_000
ENFR_PAIRS = 36_000_000
ENDE_SOURCES = ([("multi30k/train.en", "multi30k/train.de"),
                 ("wmt14/newstest2013.en", "wmt14/newstest2013.de")]
                + [(f"wmt_news_other_years/newstest{y}.en", f"wmt_news_other_years/newstest{y}.de")
                   for y in (2008, 2009, 2010, 2011, 2012, 2015, 2016, 2017, 2018)])
ENFR_SOURCES = [("wmt14/newstest2013.en", "wmt14/newstest2013.fr"),
                ("wmt14/newstest2014-full.en-fr.en", "wmt14/newstest2014-full.en-fr.fr")]
LINKED = ["wmt14/newstest2013.en", "wmt14/newstest2013.de", "wmt14/newstest2013.fr",
          "wmt14/newstest2014-full.en-de.en", "wmt14/newstest2014-full.en-de.de",
          "wmt14/newstest2014-full.en-fr.en", "wmt14/newstest2014-full.en-fr.fr", "multi30k"]


def _read(path):
  with open(path, "rb") as f:
    return f.read().split(b"\n")[:-1]


def build_corpus(data_dir, sources, num_pairs, src_out, tgt_out, seed):
  """Writes `num_pairs` lines to each of src_out / tgt_out: rounds of seeded permutations of the
  pairs of `sources` (data_dir-relative (src, tgt) paths). Skips when both files exist."""
  if os.path.exists(src_out) and os.path.exists(tgt_out):
    print(f"exists: {src_out}, {tgt_out}", flush=True)
    return
  src, tgt = [], []
  for s, t in sources:
    a, b = _read(os.path.join(data_dir, s)), _read(os.path.join(data_dir, t))
    assert len(a) == len(b), (s, t)
    src += a
    tgt += b
  rng = np.random.default_rng(seed)
  written = 0
  with open(src_out + ".tmp", "wb") as fs, open(tgt_out + ".tmp", "wb") as ft:
    while written < num_pairs:
      order = rng.permutation(len(src))[:num_pairs - written]
      fs.write(b"\n".join(src[i] for i in order) + b"\n")
      ft.write(b"\n".join(tgt[i] for i in order) + b"\n")
      written += len(order)
  os.replace(src_out + ".tmp", src_out)
  os.replace(tgt_out + ".tmp", tgt_out)
  print(f"wrote {written} pairs: {src_out} ({os.path.getsize(src_out):,} bytes), {tgt_out} "
        f"({os.path.getsize(tgt_out):,} bytes)", flush=True)


def build(args):
  os.makedirs(os.path.join(args.out, "wmt14"), exist_ok=True)
  for rel in LINKED:
    link = os.path.join(args.out, rel)
    if not os.path.lexists(link):
      os.symlink(os.path.join(os.path.abspath(args.data_dir), rel), link)
  out = os.path.join(args.out, "wmt14")
  build_corpus(args.data_dir, ENDE_SOURCES, round(ENDE_PAIRS * args.pairs_fraction),
               os.path.join(out, "train.en-de.en"), os.path.join(out, "train.en-de.de"), seed=13)
  build_corpus(args.data_dir, ENFR_SOURCES, round(ENFR_PAIRS * args.pairs_fraction),
               os.path.join(out, "train.en-fr.en"), os.path.join(out, "train.en-fr.fr"), seed=14)


CORPORA = (  # name, problem, data dir ("shared": --data_dir, else --out)
    ("Multi30k (29k)", "translate_ende_multi30k", "shared"),
    ("WMT14 En-De size (4.5M)", "translate_ende_wmt14", "out"),
    ("WMT14 En-Fr size (36M)", "translate_enfr_wmt14", "out"),
)
VOCAB_SIZE = 2000  # the `tiny` hparams' vocabulary, so `train --hparams=tiny` can use it
BASE_TARGET_TOKENS_PER_S = 469  # a `base` step on this 2-core CPU (8.70 s/step, studies/earlier_code)

_VALIDATE = """
import sys
from t2t_repro.data import problems
corpus = problems.get_problem(sys.argv[1], sys.argv[2]).corpus("train", sys.argv[3])
print(len(corpus), "line pairs,", len(corpus.chunks), "chunks")
"""
_VOCAB = """
import sys
from t2t_repro.data import problems, vocab
print(vocab.get_or_learn_vocab(problems.get_problem(sys.argv[1], sys.argv[2]), int(sys.argv[4]),
                               sys.argv[3]))
"""
_PIPELINE = """
import sys, time
import numpy as np
from t2t_repro.data import batching, problems, vocab
problem = problems.get_problem(sys.argv[1], sys.argv[2])
tokenizer = vocab.Tokenizer.from_file(vocab.vocab_path(problem, int(sys.argv[4]), sys.argv[3]))
start = time.perf_counter()
iterator = iter(batching.make_dataset(problem.corpus("train", sys.argv[3]), tokenizer,
                                      batch_tokens=3125, max_length=256, training=True, seed=1))
next(iterator)
first = time.perf_counter() - start
start, target = time.perf_counter(), 0
while time.perf_counter() - start < float(sys.argv[5]):
  target += int(np.count_nonzero(next(iterator)["targets"]))
print(f"RESULT {first:.2f} {target / (time.perf_counter() - start):.0f}")
"""


_PREPARE = """
import sys, time
import numpy as np
import tensorflow as tf
from t2t_repro.data import batching, corpus, problems, vocab
problem = problems.get_problem(sys.argv[1], sys.argv[2])
tokenizer = vocab.Tokenizer.from_file(vocab.vocab_path(problem, int(sys.argv[4]), sys.argv[3]))
pairs, record = int(sys.argv[5]), sys.argv[6]
text = problem.corpus("train", sys.argv[3])
# The alternative: a one-time `prepare` writing tokenized tf.train.Examples (t2t-datagen style).
start = time.perf_counter()
with tf.io.TFRecordWriter(record) as writer:
  for ex in batching.tokenize_pairs(text, tokenizer).take(pairs).as_numpy_iterator():
    writer.write(tf.train.Example(features=tf.train.Features(feature={
        k: tf.train.Feature(int64_list=tf.train.Int64List(value=v)) for k, v in ex.items()}))
                 .SerializeToString())
prepare = time.perf_counter() - start
spec = {k: tf.io.VarLenFeature(tf.int64) for k in ("inputs", "targets")}
parse = lambda r: {k: tf.cast(tf.sparse.to_dense(v), tf.int32)
                   for k, v in tf.io.parse_single_example(r, spec).items()}
def rate(ds):
  start, target = time.perf_counter(), 0
  for batch in ds.as_numpy_iterator():
    target += int(np.count_nonzero(batch["targets"]))
  return target / (time.perf_counter() - start)
lengths = batching.bucket_lengths(256)
prepared = rate(batching._bucket_by_length(  # pylint: disable=protected-access
    tf.data.TFRecordDataset(record).map(parse, num_parallel_calls=tf.data.AUTOTUNE), lengths, 3125))
streamed = rate(batching._bucket_by_length(  # pylint: disable=protected-access
    batching.tokenize_pairs(text, tokenizer).take(pairs), lengths, 3125))
print(f"RESULT {pairs / prepare:.0f} {prepared:.0f} {streamed:.0f}")
"""


def _load():
  with open("/proc/loadavg", encoding="ascii") as f:
    return f.read().split()[0]


def run(cmd, log):
  """Runs `cmd`; returns (wall seconds, peak RSS MiB of the process, its stdout)."""
  start = time.perf_counter()
  with open(log, "w", encoding="utf-8") as err:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
  wall = time.perf_counter() - start
  if status != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed ({status}); see {log}")
  return wall, usage.ru_maxrss / 1024, out


def measure(args):
  work = args.work or os.path.join(os.path.dirname(os.path.abspath(args.out)), "work")
  os.makedirs(work, exist_ok=True)
  python = sys.executable
  rows = []
  for name, problem, where in CORPORA:
    if problem not in args.problems.split(","):
      continue
    data_dir = args.data_dir if where == "shared" else args.out
    key = problem
    cache = os.path.join(work, f"cache_{key}")
    shutil.rmtree(cache, ignore_errors=True)
    row = {"corpus": name}
    log = os.path.join(work, f"{key}.log")
    row["load_validate"] = _load()
    row["validate"] = run([python, "-c", _VALIDATE, problem, data_dir,
                           os.path.join(work, "v_" + key)], log)
    shutil.rmtree(os.path.join(work, "v_" + key), ignore_errors=True)
    row["load_vocab"] = _load()
    row["vocab"] = run([python, "-c", _VOCAB, problem, data_dir, cache, str(VOCAB_SIZE)], log)
    model_dir = os.path.join(work, f"model_{key}")
    shutil.rmtree(model_dir, ignore_errors=True)
    row["load_train"] = _load()
    row["train"] = run([python, "-m", "t2t_repro.train", "--hparams=tiny", f"--problem={problem}",
                        f"--data_dir={data_dir}", f"--vocab_dir={cache}",
                        f"--model_dir={model_dir}",
                        "--train_steps=1", "--eval_every_steps=0"], log)
    for cores in ("0", "0,1"):
      row[f"load_pipe{cores}"] = _load()
      out = run(["taskset", "-c", cores, python, "-c", _PIPELINE, problem, data_dir, cache,
                 str(VOCAB_SIZE), str(args.pipeline_seconds)], log)[2]
      first, rate = out.split("RESULT")[1].split()
      row[f"pipe{cores}"] = (float(first), float(rate))
    if problem == "translate_ende_wmt14":
      row["load_prepare"] = _load()
      out = run([python, "-c", _PREPARE, problem, data_dir, cache, str(VOCAB_SIZE),
                 str(args.prepare_pairs),
                 os.path.join(work, "prepared.tfrecord")], log)[2]
      prepare_rate, prepared, streamed = map(float, out.split("RESULT")[1].split())
      print(f"prepare probe ({args.prepare_pairs:,} pairs of {name}, 2 cores, load {row['load_prepare']}): "
            f"writing tokenized TFRecords {prepare_rate:,.0f} pairs/s (36M pairs: "
            f"{36e6 / prepare_rate / 3600:.1f} h); reading them + bucketing {prepared:,.0f} target "
            f"tok/s; tokenizing on the fly + bucketing {streamed:,.0f} target tok/s", flush=True)
    rows.append(row)
    print(row, flush=True)
  print(table(rows))


def table(rows):
  """The markdown table of `measure`'s rows."""
  lines = ["| corpus | validate: s / peak MiB (load) | learn 2000-piece BPE: s / peak MiB (load) | "
           "`train --train_steps=1`: s / peak MiB (load) | pipeline 1 core: first batch s, target "
           "tok/s (load) | 2 cores (load) | 2 cores / base step |",
           "|---|---|---|---|---|---|---|"]
  for r in rows:
    cells = [r["corpus"]]
    for part in ("validate", "vocab", "train"):
      wall, rss, _ = r[part]
      cells.append(f"{wall:.1f} / {rss:.0f} ({r['load_' + part]})")
    for cores in ("0", "0,1"):
      first, rate = r[f"pipe{cores}"]
      cells.append(f"{first:.1f}, {rate:,.0f} ({r['load_pipe' + cores]})")
    cells.append(f"{r['pipe0,1'][1] / BASE_TARGET_TOKENS_PER_S:.0f}x")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("mode", choices=["build", "measure"])
  parser.add_argument("--data_dir", default=os.environ.get("T2T_DATA_DIR", "../shared/data"),
                      help="the real offline text (shared/data)")
  parser.add_argument("--out", required=True, help="scratch folder of the synthetic corpora")
  parser.add_argument("--work", default=None, help="scratch folder of vocabularies and model dirs "
                      "(default: work/ next to --out)")
  parser.add_argument("--pairs_fraction", type=float, default=1.0,
                      help="build: this fraction of the paper's corpus sizes (a smoke test's "
                      "small corpora)")
  parser.add_argument("--problems", default=",".join(p for _, p, _ in CORPORA),
                      help="measure: these of the corpora's problems")
  parser.add_argument("--prepare_pairs", type=int, default=200_000,
                      help="measure: pairs written by the tokenized-TFRecord probe")
  parser.add_argument("--pipeline_seconds", type=float, default=20,
                      help="time the training pipeline this long after its first batch [s]")
  args = parser.parse_args()
  if args.mode == "build":
    build(args)
  else:
    measure(args)


if __name__ == "__main__":
  sys.exit(main())
