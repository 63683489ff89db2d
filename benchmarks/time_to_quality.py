r"""Time to quality on Multi30k En-De: ours against TF Model Garden, in the MLPerf manner.

Both systems train on the same data (Multi30k train, one sentencepiece vocabulary learned by
ours, our token-budget batches), with the same model size (layers, d_model, d_ff, heads,
vocabulary of the `--hparams` set), one after the other on the same cores, each for a budget
of PROCESS CPU time (`--cpu_minutes`; a loaded machine stretches the wall time, not the
budget). A checkpoint is written every `--save_every_steps` updates; the driver records the
trainer's CPU seconds (/proc) and wall seconds when each appears. After both runs, outside
the budgets, every checkpoint is decoded on the dev split (`--dev_lines` of `val`, beam 4,
alpha 0.6) and scored; the final model of each system is the average of its last
`--average_last` checkpoints, decoded on test_2016_flickr. Scores come from
`t2t_repro.evaluation.evaluate_translations` for both (cased sacreBLEU, and every other score it prints).

- ours: `python -m t2t_repro.train --hparams=H` (its own recipe: schedule, dropout, ...),
  stopped with SIGTERM at the budget (it saves and exits), averaged with
  `tools/average_checkpoints.py`, decoded with `python -m t2t_repro.translate`.
- Model Garden: `official.nlp.modeling.models.Seq2SeqTransformer` with the defaults of its
  translation task (`official.nlp.tasks.translation.EncDecoder`: pre-norm, no biases, dropout,
  attention and ReLU dropout 0.1, label smoothing 0.1) and the optimizer of its
  `wmt_transformer/large` experiment: Adam(0.9, 0.997, 1e-9), lr = 2.0 * d_model^-0.5 *
  step^-0.5 after a linear warmup from 0 (the warmup is the set's `warmup_steps`, since
  Model Garden's 16000 is longer than this budget); its own beam search for decoding.
  Needs the peers (`bash benchmarks/install_peers.sh`); without them ours runs alone and a
  line says Model Garden was skipped.

Usage (one heavy job at a time; the whole run takes about 2 x cpu_minutes / 2 cores of wall
time plus the decoding):

  python benchmarks/time_to_quality.py --data_dir=../shared/data --work_dir=runs/ttq \
      --hparams=multi30k_cpu_hour --cpu_minutes=120 [--mixed_precision=mixed_bfloat16]

Writes work_dir/time_to_quality.json, .md (the table) and .png (dev BLEU against CPU minutes).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import benchlib  # pylint: disable=wrong-import-position  # noqa: E402
_REPO = os.path.dirname(_HERE)
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
  """User + system CPU seconds of process `pid` (all its threads), from /proc [s]."""
  with open(f"/proc/{pid}/stat", encoding="ascii") as f:
    fields = f.read().rsplit(")", 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def run_budgeted(cmd, budget_s, log_path):
  """Runs `cmd`, sends SIGTERM once its CPU time reaches `budget_s`, and returns the
  checkpoints it reported: [{"path", "step", "cpu_s", "wall_s", "load"}] in order.

  A checkpoint is reported by a stderr line "saved PATH" (ours and the peer role alike);
  its CPU and wall seconds are read when the line arrives."""
  start = time.monotonic()
  points, cpu = [], [0.0]

  def cpu_now():
    try:
      cpu[0] = cpu_seconds(proc.pid)
    except OSError:  # exited and reaped: its last reading
      pass
    return cpu[0]

  with open(log_path, "w", encoding="utf-8") as log:
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=log, text=True, cwd=_REPO)

    def read():
      for line in proc.stderr:
        log.write(line)
        log.flush()
        if line.startswith("saved "):
          path = line.split()[1]
          points.append({"path": path, "step": int(path.rsplit("-", 1)[1]),
                         "cpu_s": cpu_now(), "wall_s": time.monotonic() - start,
                         "load": os.getloadavg()[0]})

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
      while proc.poll() is None:
        if cpu_now() >= budget_s:
          proc.send_signal(signal.SIGTERM)
          break
        time.sleep(0.5)
      proc.wait()
    finally:  # the driver failed or was interrupted: no orphan keeps training
      if proc.poll() is None:
        proc.kill()
    reader.join()
  if proc.returncode != 0:
    raise RuntimeError(f"{cmd[:4]} exited with {proc.returncode}; see {log_path}")
  return points


def _problem(data_dir):
  from t2t_repro.data import problems  # pylint: disable=import-outside-toplevel
  return problems.get_problem("translate_ende_multi30k", data_dir)


def prepare(args):
  """Learns (or finds) the shared vocabulary; returns its path."""
  from t2t_repro.config import hparams as hparams_lib  # pylint: disable=import-outside-toplevel
  from t2t_repro.data import vocab  # pylint: disable=import-outside-toplevel
  hp = hparams_lib.get_hparams(args.hparams)
  return vocab.get_or_learn_vocab(_problem(args.data_dir), hp.vocab_size,
                                  os.path.join(args.work_dir, "vocab"), lowercase=hp.lowercase)


def train_ours(args):
  model_dir = os.path.join(args.work_dir, "ours")
  cmd = [sys.executable, "-m", "t2t_repro.train", f"--hparams={args.hparams}",
         "--problem=translate_ende_multi30k", f"--data_dir={args.data_dir}",
         f"--model_dir={model_dir}", f"--vocab_dir={os.path.join(args.work_dir, 'vocab')}",
         "--train_steps=1000000", "--eval_every_steps=0", "--dev_bleu_lines=0",
         f"--save_checkpoints_steps={args.save_every_steps}", "--save_checkpoints_secs=0",
         "--keep_checkpoint_max=100000", f"--log_every_steps={args.save_every_steps}",
         f"--seed={args.seed}", f"--mixed_precision={args.mixed_precision}"]
  return run_budgeted(cmd, args.cpu_minutes * 60, os.path.join(args.work_dir, "ours.log"))


def train_peer(args, vocab_path):
  cmd = [sys.executable, os.path.abspath(__file__), "--role=peer_train",
         f"--data_dir={args.data_dir}", f"--work_dir={args.work_dir}",
         f"--hparams={args.hparams}", f"--vocab={vocab_path}",
         f"--save_every_steps={args.save_every_steps}", f"--seed={args.seed}",
         f"--mixed_precision={args.mixed_precision}"]
  return run_budgeted(cmd, args.cpu_minutes * 60, os.path.join(args.work_dir, "peer.log"))


# ------------------------------------------------------------------ the peer, in its own process


def _peer_model(hp, decode=False):
  """Model Garden's model with the sizes of `hp`: pre-norm, dropout 0.1 everywhere
  (its translation task's defaults), none to decode; beam 4, alpha 0.6."""
  import peer_models  # pylint: disable=import-outside-toplevel
  config = {"num_layers": hp.num_layers, "d_model": hp.d_model, "d_ff": hp.d_ff,
            "num_heads": hp.num_heads, "vocab_size": hp.vocab_size}
  return peer_models.model_garden_model(config, norm_first=True, dropout=0.0 if decode else 0.1,
                                        beam_size=4, alpha=0.6,
                                        decode_extra_length=hp.decode_extra_length)


def peer_train(args):
  """Model Garden's training with our batches; prints "saved PATH" per checkpoint and
  saves and exits on SIGTERM."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tf_keras  # pylint: disable=import-outside-toplevel
  import peer_models  # pylint: disable=import-outside-toplevel
  from t2t_repro.config import hparams as hparams_lib  # pylint: disable=import-outside-toplevel
  from t2t_repro.data import batching, vocab  # pylint: disable=import-outside-toplevel

  hp = hparams_lib.get_hparams(args.hparams)
  tf.random.set_seed(args.seed)
  if args.mixed_precision != "none":  # Model Garden's runtime.mixed_precision_dtype
    tf_keras.mixed_precision.set_global_policy(args.mixed_precision)
  tokenizer = vocab.Tokenizer.from_file(args.vocab)
  train = _problem(args.data_dir).corpus("train", os.path.join(args.work_dir, "vocab"))
  data = iter(batching.make_dataset(train, tokenizer, batch_tokens=hp.batch_tokens,
                                    max_length=hp.max_length, training=True, seed=args.seed))
  model = _peer_model(hp)
  scale, warmup = 2.0 * hp.d_model ** -0.5, float(hp.warmup_steps)

  class Schedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    """wmt_transformer/large: linear warmup from 0, then scale * step^-0.5."""

    def __call__(self, step):
      step = tf.cast(step, tf.float32) + 1.0
      return scale * tf.minimum(step / warmup * warmup ** -0.5, tf.math.rsqrt(step))

    def get_config(self):
      return {}

  optimizer = tf_keras.optimizers.Adam(Schedule(), beta_1=0.9, beta_2=0.997, epsilon=1e-9)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2)
  def train_step(inputs, targets):
    with tf.GradientTape() as tape:
      logits = model({"inputs": inputs, "targets": targets}, training=True)
      loss = peer_models.model_garden_loss(logits, targets, 0.1, hp.vocab_size)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  stop = []
  signal.signal(signal.SIGTERM, lambda *unused: stop.append(True))
  checkpoint = tf.train.Checkpoint(model=model)
  out = os.path.join(args.work_dir, "peer")
  os.makedirs(out, exist_ok=True)
  step = 0
  while True:
    batch = next(data)
    loss = train_step(batch["inputs"], batch["targets"])
    step += 1
    if step % args.save_every_steps == 0 or stop:
      path = checkpoint.write(os.path.join(out, f"ckpt-{step}"))
      print(f"step {step} loss {float(loss):.4f}", file=sys.stderr)
      print(f"saved {path}", file=sys.stderr, flush=True)
    if stop:
      return


def peer_decode(args):
  """Decodes --input_file with the average of --checkpoints (one = that checkpoint) into
  --output_file, with Model Garden's beam search (beam 4, alpha 0.6, input + extra)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.config import hparams as hparams_lib  # pylint: disable=import-outside-toplevel

  hp = hparams_lib.get_hparams(args.hparams)
  sp = spm.SentencePieceProcessor(model_file=args.vocab)
  model = _peer_model(hp, decode=True)
  model({"inputs": tf.constant([[5, 1]], tf.int32)})  # builds the variables
  paths = args.checkpoints.split(",")
  total = None
  for path in paths:
    tf.train.Checkpoint(model=model).read(path).expect_partial()
    values = [v.numpy() for v in model.variables]
    total = values if total is None else [t + v for t, v in zip(total, values)]
  for variable, value in zip(model.variables, total):
    variable.assign(value / len(paths))
  search = tf.function(lambda x: model({"inputs": x})["outputs"],
                       input_signature=[tf.TensorSpec([None, None], tf.int32)])
  with open(args.input_file, encoding="utf-8") as f:
    ids = [sp.encode(line.strip())[:hp.max_length - 1] + [1] for line in f]
  order = np.argsort([len(x) for x in ids], kind="stable")
  hyps = [""] * len(ids)
  for start in range(0, len(order), 64):
    rows = order[start:start + 64]
    width = max(len(ids[r]) for r in rows)
    batch = np.array([ids[r] + [0] * (width - len(ids[r])) for r in rows], np.int32)
    for r, out in zip(rows, search(tf.constant(batch)).numpy()):
      out = list(out)
      hyps[r] = sp.decode([int(t) for t in out[:out.index(1)] if t > 2] if 1 in out else
                          [int(t) for t in out if t > 2])
  with open(args.output_file, "w", encoding="utf-8") as f:
    f.write("".join(h + "\n" for h in hyps))


# ------------------------------------------------------------------ scoring and the report


def _score(hyp_path, ref_path):
  from t2t_repro import evaluation  # pylint: disable=import-outside-toplevel
  with open(hyp_path, encoding="utf-8") as f:
    hyps = f.read().splitlines()
  with open(ref_path, encoding="utf-8") as f:
    refs = f.read().splitlines()[:len(hyps)]
  return evaluation.evaluate_translations(hyps, [refs], tgt_lang="de")


def _head(path, lines, out):
  with open(path, encoding="utf-8") as f:
    head = f.read().splitlines()[:lines]
  with open(out, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in head))
  return out


def decode(args, system, checkpoints, source, output, vocab_path):
  """Writes `output`: `system`'s translation of `source` with the average of `checkpoints`."""
  if system == "peer":
    cmd = [sys.executable, os.path.abspath(__file__), "--role=peer_decode",
           f"--hparams={args.hparams}", f"--vocab={vocab_path}",
           f"--checkpoints={','.join(checkpoints)}", f"--input_file={source}",
           f"--output_file={output}"]
  else:
    model_dir, checkpoint = os.path.join(args.work_dir, "ours"), checkpoints[-1]
    if len(checkpoints) > 1:
      model_dir = os.path.join(args.work_dir, "ours_averaged")
      subprocess.run([sys.executable, os.path.join(_REPO, "tools", "average_checkpoints.py"),
                      f"--model_dir={os.path.join(args.work_dir, 'ours')}",
                      f"--checkpoints={','.join(checkpoints)}", f"--output_dir={model_dir}"],
                     check=True, cwd=_REPO)
      checkpoint = None
    cmd = [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={model_dir}",
           f"--input_file={source}", f"--output_file={output}", "--beam_size=4", "--alpha=0.6",
           "--noprogress"] + ([f"--checkpoint_path={checkpoint}"] if checkpoint else [])
  subprocess.run(cmd, check=True, cwd=_REPO, stdout=subprocess.DEVNULL)
  return output


def first_reach(points, target):
  """CPU minutes at which the dev BLEU curve first reaches `target` (linear between points),
  or None."""
  previous = (0.0, 0.0)
  for p in points:
    x, y = p["cpu_s"] / 60, p["dev_bleu"]
    if y >= target:
      x0, y0 = previous
      return x0 + (x - x0) * (target - y0) / max(y - y0, 1e-9)
    previous = (x, y)
  return None


def report(args, results):
  """Writes the .json, .md table and .png curves; returns the markdown."""
  systems = [s for s in ("ours", "peer") if s in results]
  target = args.target_bleu or results[systems[-1]]["points"][-1]["dev_bleu"]
  lines = [f"Multi30k En-De, `{args.hparams}` size, budget {args.cpu_minutes} CPU minutes each, "
           f"training precision {args.mixed_precision}, dev = first {args.dev_lines} lines of "
           f"val, target dev BLEU {target:.2f}", "",
           "| system | step | CPU min | wall min | load | dev sacreBLEU |", "|---|---|---|---|---|---|"]
  for system in systems:
    for p in results[system]["points"]:
      lines.append(f"| {system} | {p['step']} | {p['cpu_s'] / 60:.1f} | {p['wall_s'] / 60:.1f} | "
                   f"{p['load']:.1f} | {p['dev_bleu']:.2f} |")
  lines += ["", "| system | CPU min to target | final dev BLEU | test (avg of last "
            f"{args.average_last}) sacreBLEU | test, other scores |", "|---|---|---|---|---|"]
  for system in systems:
    r = results[system]
    r["cpu_minutes_to_target"] = first_reach(r["points"], target)
    reach = r["cpu_minutes_to_target"]
    others = ", ".join(f"{k} {v:.2f}" for k, v in r["test"].items()
                       if isinstance(v, float) and k != "sacrebleu")
    lines.append(f"| {system} | {'not reached' if reach is None else f'{reach:.1f}'} | "
                 f"{r['points'][-1]['dev_bleu']:.2f} | {r['test']['sacrebleu']:.2f} | {others} |")
  ours = results["ours"]["cpu_minutes_to_target"]
  peer = results["peer"]["cpu_minutes_to_target"] if "peer" in results else None
  if ours is not None and peer:
    peer_end = results["peer"]["points"][-1]["cpu_s"] / 60
    lines += ["", f"ours' CPU time to the target: {ours / peer_end:.2f}x Model Garden's whole run "
              f"({peer_end:.1f} min), {ours / peer:.2f}x the time its curve first reached it"]
  markdown = "\n".join(lines)
  base = os.path.join(args.work_dir, "time_to_quality")
  with open(base + ".md", "w", encoding="utf-8") as f:
    f.write(markdown + "\n")
  with open(base + ".json", "w", encoding="utf-8") as f:
    json.dump(dict(results, target_bleu=target, args=vars(args)), f, indent=1)
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=import-outside-toplevel
  figure, axes = plt.subplots(figsize=(7, 4.5))
  for system, label in (("ours", f"t2t_repro ({args.hparams})"), ("peer", "TF Model Garden")):
    if system not in results:
      continue
    pts = results[system]["points"]
    axes.plot([p["cpu_s"] / 60 for p in pts], [p["dev_bleu"] for p in pts], "o-", label=label)
  axes.axhline(target, color="grey", linestyle="--", label=f"target {target:.2f}")
  axes.set_xlabel("process CPU minutes")
  axes.set_ylabel(f"dev sacreBLEU (val, {args.dev_lines} lines)")
  axes.set_title("Multi30k En-De: time to quality on 2 CPU cores")
  axes.legend()
  figure.tight_layout()
  figure.savefig(base + ".png", dpi=120)
  return markdown


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--role", default="driver", choices=["driver", "peer_train", "peer_decode"])
  parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(_REPO), "shared", "data"))
  parser.add_argument("--work_dir", default="runs/ttq")
  parser.add_argument("--hparams", default="multi30k_cpu_hour")
  parser.add_argument("--cpu_minutes", type=float, default=120.0, help="CPU budget per system")
  parser.add_argument("--save_every_steps", type=int, default=250)
  parser.add_argument("--dev_lines", type=int, default=1014)
  parser.add_argument("--test_lines", type=int, default=0,
                      help="decode the first N lines of test_2016_flickr (0: all)")
  parser.add_argument("--average_last", type=int, default=5)
  parser.add_argument("--target_bleu", type=float, default=0.0,
                      help="dev BLEU target (0: Model Garden's final dev BLEU)")
  parser.add_argument("--seed", type=int, default=1234)
  parser.add_argument("--mixed_precision", default="none",
                      choices=["none", "mixed_bfloat16"],
                      help="training precision of both systems (decoding is float32; "
                           "mixed_float16 would need a loss scale in the peer's step)")
  parser.add_argument("--vocab"), parser.add_argument("--checkpoints")
  parser.add_argument("--input_file"), parser.add_argument("--output_file")
  args = parser.parse_args()
  if args.role == "peer_train":
    return peer_train(args)
  if args.role == "peer_decode":
    return peer_decode(args)
  signal.signal(signal.SIGTERM, lambda *unused: sys.exit(143))  # runs run_budgeted's cleanup
  args.work_dir, args.data_dir = os.path.abspath(args.work_dir), os.path.abspath(args.data_dir)
  if os.path.exists(os.path.join(args.work_dir, "ours")):
    sys.exit(f"--work_dir={args.work_dir} holds an earlier run: give a new one")
  os.makedirs(args.work_dir, exist_ok=True)
  vocab_path = prepare(args)
  problem = _problem(args.data_dir)
  (dev_src, dev_ref), = problem.file_pairs("dev")
  (test_src, test_ref), = problem.file_pairs("test")
  dev_src = _head(dev_src, args.dev_lines, os.path.join(args.work_dir, "dev.en"))
  if args.test_lines:
    test_src = _head(test_src, args.test_lines, os.path.join(args.work_dir, "test.en"))
  results = {"ours": {"points": train_ours(args)}}
  skipped = benchlib.missing_peer("model_garden")
  if skipped:
    print(skipped, flush=True)
  else:
    results["peer"] = {"points": train_peer(args, vocab_path)}
  for system, r in results.items():
    for p in r["points"]:
      out = decode(args, system, [p["path"]], dev_src,
                   os.path.join(args.work_dir, f"{system}.dev.{p['step']}.de"), vocab_path)
      p["dev_bleu"] = _score(out, dev_ref)["sacrebleu"]
    last = [p["path"] for p in r["points"][-args.average_last:]]
    out = decode(args, system, last, test_src, os.path.join(args.work_dir, f"{system}.test.de"),
                 vocab_path)
    r["test"] = {k: v for k, v in _score(out, test_ref).items() if isinstance(v, (int, float))}
  print(report(args, results))


if __name__ == "__main__":
  sys.exit(main())
