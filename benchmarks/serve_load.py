r"""Load test of `python -m t2t_repro.serve` beside offline `translate`, same model, same
machine, one run, on 127.0.0.1 only, with a fixed number of requests and a time limit.

  python benchmarks/serve_load.py --model_dir=runs/bench_tiny \
      --model_base_path=runs/bench_export --output=runs/serve_load.json

Needs the serve extra and aiohttp (the load generator): pip install -e ".[serve]" aiohttp.

The measured servers: one per --server NAME=FLAGS (repeatable), FLAGS the server's own flags
(its --model_base_path among them: a SavedModel export or a CTranslate2 one); without
--server, one server "serve" of --model_base_path with --batch_timeout_micros=20000 (a batch
waits up to 20 ms, counted from when the decoding thread became free, so that the clients
just answered can join it). The levers of docs/SERVER_LOAD.md, for instance:

  --server="no wait=--model_base_path=runs/bench_export --batch_timeout_micros=0"
  --server="wait 20 ms=--model_base_path=runs/bench_export --batch_timeout_micros=20000"
  --server="2 threads=--model_base_path=runs/bench_export --num_batch_threads=2"
  --server="ct2 int8=--model_base_path=runs/bench_ct2 --batch_timeout_micros=20000"

Every server is started before the rounds and stays up (idle between its rounds).
For each client count of --clients (1, 4, 16, 64), alternately over --rounds rounds:

  offline  the translate command's decoding (`Translator.nbest`, sorted by length,
           --decode_batch_tokens source tokens per batch, --num_batch_threads batches at
           once as translate's flag of that name) of the round's lines, in this process
           (model loaded once, outside the timing); again with --small_decode_batch_tokens per
           batch (about the server's batches at 64 clients: what batch size alone costs); at
           one client also one sentence per call (the p50 latency a server can approach)
  server   for each server in turn, the same lines sent one sentence per request by that
           many concurrent clients (aiohttp, asyncio); sentences/s, p50 and p99 latency, and
           the mean batch size (rows per decoding call) from the server's /metrics

The round's lines: --requests_per_client x clients (at least --min_requests) lines of
--input_file from the start, cycling; a round stops early at --round_seconds. Then:

  equality  --equal_lines lines sent at once by 64 clients to each server: how many answers
            equal the translate command's decoding of the same lines (the offline
            `Translator`; a CTranslate2 export differs where its length penalty does)
  overload  a server of --model_base_path with a small queue (--overload_batches batches of
            --overload_batch_size rows) gets 2x its capacity at once: every request
            must get 200 or 503 (none lost, none hanging past --round_seconds)
  http      the HTTP layer, queue and batching alone: the same API with an instant stand-in
            decoder, in a thread of this process, loaded by as many clients as the largest
            count: requests/s and the server threads' CPU per request
  memory    each server's RSS at start, after an untimed warm-up pass (each client count
            once: the first calls of each batch shape), after each round and at the end

Prints a markdown table and writes the results as JSON (--output); --table_of=FILE prints
the table of such a file again (docs/SERVER_LOAD.md's tables).
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # pylint: disable=wrong-import-position

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(*flags):
  """(process, base URL) of `python -m t2t_repro.serve` with `flags` (--model_base_path among
  them) on a free loopback port (REST; its gRPC API on another free port)."""
  process = subprocess.Popen(
      [sys.executable, "-m", "t2t_repro.serve", "--model_name=transformer", "--rest_api_port=0",
       "--port=0", "--rest_api_host=127.0.0.1", *flags],
      cwd=_REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  match = re.search(r"at (http://127\.0\.0\.1:\d+)/", process.stdout.readline())
  if not match:
    process.kill()
    sys.exit("serve_load: the server did not start")
  return process, match[1]


def rss_mib(pid):
  with open(f"/proc/{pid}/status", encoding="utf-8") as f:
    return int(re.search(r"VmRSS:\s+(\d+) kB", f.read())[1]) / 1024


def metric_sum(base, name):
  """The sum over labels of samples `name` in the server's /metrics."""
  with urllib.request.urlopen(f"{base}/metrics") as response:
    text = response.read().decode("utf-8")
  return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith(name + "{") or line.startswith(name + " "))


async def load(base, lines, clients, deadline_seconds):
  """Sends each line as one request from `clients` concurrent clients (aiohttp: a light
  client, so that the clients' own CPU time weighs little beside the server's); returns
  (answers by line, statuses, latencies [s], wall seconds). Stops sending at the deadline."""
  import aiohttp  # pylint: disable=import-outside-toplevel
  answers, statuses, latencies = [None] * len(lines), [], []
  next_line = iter(range(len(lines)))
  started = time.perf_counter()
  connector = aiohttp.TCPConnector(limit=clients)
  timeout = aiohttp.ClientTimeout(total=deadline_seconds + 60)
  async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
    async def one_client():
      for index in next_line:
        if time.perf_counter() - started > deadline_seconds:
          return
        sent = time.perf_counter()
        async with session.post(f"{base}/v1/models/transformer:predict",
                                data=json.dumps({"instances": [lines[index]]})) as response:
          body = await response.read()
        latencies.append(time.perf_counter() - sent)
        statuses.append(response.status)
        if response.status == 200:
          answers[index] = json.loads(body)["predictions"][0]["translations"]
    await asyncio.gather(*(one_client() for _ in range(clients)))
  return answers, statuses, latencies, time.perf_counter() - started


def percentile(values, q):
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def offline_translators(model_dir, num_batch_threads, *decode_batch_tokens):
  """The translate command's Translators of `model_dir` (its hparams' decoding settings, its
  --num_batch_threads threading), one per budget of `decode_batch_tokens`, on one loaded
  model. Call before TensorFlow runs anything (it sets the intra-op threads)."""
  # pylint: disable-next=import-outside-toplevel
  from t2t_repro.config import decode as config
  from t2t_repro.decoding import loading, translator  # pylint: disable=import-outside-toplevel
  threads = translator.configure_threads(num_batch_threads)
  model, hparams, tokenizer, _ = loading.load_models([model_dir], [None])
  return [translator.Translator(model, tokenizer, config.DecodeConfig.resolve(
      hparams, decode_batch_tokens=tokens), num_batch_threads=threads)
          for tokens in decode_batch_tokens]


def server_round(base, lines, clients, round_seconds):
  calls0 = metric_sum(base, "t2t_serve_batch_size_count")
  rows0 = metric_sum(base, "t2t_serve_batch_size_sum")
  _, statuses, latencies, wall = asyncio.run(load(base, lines, clients, round_seconds))
  calls = metric_sum(base, "t2t_serve_batch_size_count") - calls0
  rows = metric_sum(base, "t2t_serve_batch_size_sum") - rows0
  done = sum(1 for s in statuses if s == 200)
  return {"requests": len(statuses), "ok": done, "seconds": wall, "sentences_per_s": done / wall,
          "p50_ms": 1000 * percentile(latencies, 50), "p99_ms": 1000 * percentile(latencies, 99),
          "mean_batch_size": rows / calls if calls else 0.0}


def offline_round(translator, lines):
  started = time.perf_counter()
  translator.nbest(lines)
  wall = time.perf_counter() - started
  return {"sentences": len(lines), "seconds": wall, "sentences_per_s": len(lines) / wall}


def offline_one_round(translator, lines):
  """The translate command's decoding of `lines` one sentence per call: the median call [ms]."""
  times = []
  for line in lines:
    started = time.perf_counter()
    translator.nbest([line])
    times.append(time.perf_counter() - started)
  return {"sentences": len(lines), "p50_ms": 1000 * statistics.median(times)}


class _StandIn:
  """A servable whose decoding is instant (each sentence is its own translation): what the
  HTTP layer, the queue and the batching cost alone."""
  name, version = "transformer", 1

  def __init__(self):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    signature = type("Signature", (), {"inputs": {"sentences": (tf.string, 1)}, "batched": True,
                                       "outputs": ["scores", "translations"]})
    self.signatures = {"serving_default": signature()}

  def row_tokens(self, signature_name, columns):
    del signature_name
    return [len(s.split()) + 1 for s in columns["sentences"]]

  def run(self, signature_name, columns):
    del signature_name
    rows = columns["sentences"]
    return {"translations": np.array([s.encode() for s in rows], dtype=object),
            "scores": np.zeros(len(rows), np.float32)}


def http_layer_round(lines, clients, round_seconds):
  """Requests/s and the server's CPU seconds per request with the instant stand-in decoder,
  served in a thread of this process (uvicorn, as the command runs it)."""
  import uvicorn  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving import batcher, http_app  # pylint: disable=import-outside-toplevel
  app = http_app.create_app(_StandIn(), batcher.BatchingOptions())
  server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None,
                                         access_log=False))
  thread = threading.Thread(target=server.run, daemon=True)
  thread.start()
  while not server.started:
    time.sleep(0.02)
  base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
  before = _server_cpu()
  _, statuses, latencies, wall = asyncio.run(load(base, lines, clients, round_seconds))
  server_cpu = _server_cpu() - before
  server.should_exit = True
  thread.join(30)
  return {"requests": len(statuses), "requests_per_s": len(statuses) / wall,
          "server_cpu_ms_per_request": 1000 * server_cpu / len(statuses),
          "p50_ms": 1000 * percentile(latencies, 50)}


def _server_cpu():
  """CPU seconds of this process's threads but the main one (the clients'): the server's
  event loop and decoding thread (Linux: /proc/self/task/<tid>/stat)."""
  total = 0
  for tid in os.listdir("/proc/self/task"):
    if int(tid) == threading.main_thread().native_id:
      continue
    try:
      with open(f"/proc/self/task/{tid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:  # a thread that just ended
      continue
    total += int(fields[11]) + int(fields[12])
  return total / os.sysconf("SC_CLK_TCK")


def check_equality(translator, base, lines, round_seconds):
  """The server's answers to `lines` sent at once by 64 clients against `translator`'s (the
  translate command's decoding, in this process)."""
  answers, statuses, _, _ = asyncio.run(load(base, lines, 64, round_seconds * 4))
  expected = translator.translate(lines)
  return {"lines": len(lines), "all_200": all(s == 200 for s in statuses),
          "equal": sum(a == e for a, e in zip(answers, expected)), "identical": answers == expected}


def check_overload(args, lines):
  capacity = args.overload_batches * args.overload_batch_size
  process, base = start_server(f"--model_base_path={args.model_base_path}",
                               f"--max_enqueued_batches={args.overload_batches}",
                               f"--max_batch_size={args.overload_batch_size}")
  try:
    burst = [lines[i % len(lines)] for i in range(2 * capacity)]
    _, statuses, latencies, wall = asyncio.run(load(base, burst, len(burst), args.round_seconds))
  finally:
    process.terminate()
    exit_status = process.wait(120)
  return {"capacity_rows": capacity, "sent": len(burst), "answered": len(statuses),
          "ok": statuses.count(200), "unavailable_503": statuses.count(503),
          "other": len(statuses) - statuses.count(200) - statuses.count(503),
          "max_latency_s": max(latencies), "seconds": wall, "sigterm_exit_status": exit_status}


def parse_servers(specs, model_base_path):
  """{name: [flag, ...]} of the --server NAME=FLAGS specs, in order (default: one server
  "serve" of `model_base_path` with --batch_timeout_micros=20000)."""
  specs = specs or [f"serve=--model_base_path={model_base_path} --batch_timeout_micros=20000"]
  servers = {}
  for spec in specs:
    name, sep, flags = spec.partition("=")
    if not sep or not name or name in servers:
      sys.exit(f"serve_load: --server={spec!r}: expected a new NAME=FLAGS")
    servers[name] = flags.split()
  return servers


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model_dir")
  parser.add_argument("--model_base_path",
                      help="its export (<path>/1): the default server's and the overload check's")
  parser.add_argument("--table_of", help="print the table of a results file (an earlier run's "
                      "--output) and measure nothing")
  parser.add_argument("--server", action="append", default=[],
                      help="NAME=FLAGS, a measured server and its flags (repeatable)")
  parser.add_argument("--input_file", default=os.path.join(
      os.path.dirname(_REPO), "shared", "data", "multi30k", "test_2016_flickr.en"))
  parser.add_argument("--clients", default="1,4,16,64")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--requests_per_client", type=int, default=8)
  parser.add_argument("--min_requests", type=int, default=64)
  parser.add_argument("--round_seconds", type=float, default=60.0)
  parser.add_argument("--decode_batch_tokens", type=int, default=4096, help="offline translate's")
  parser.add_argument("--num_batch_threads", type=int, default=0,
                      help="offline translate's (0: its default, one per core, at most 4)")
  parser.add_argument("--small_decode_batch_tokens", type=int, default=1024,
                      help="offline translate again with batches of about the server's size")
  parser.add_argument("--equal_lines", type=int, default=200)
  parser.add_argument("--overload_batches", type=int, default=4)
  parser.add_argument("--overload_batch_size", type=int, default=16)
  parser.add_argument("--output", default=None)
  args = parser.parse_args()
  if args.table_of:
    with open(args.table_of, encoding="utf-8") as f:
      print(table(json.load(f)))
    return
  if not (args.model_dir and args.model_base_path):
    parser.error("--model_dir and --model_base_path are required (or --table_of)")
  servers = parse_servers(args.server, args.model_base_path)
  with open(args.input_file, encoding="utf-8") as f:
    corpus = [line.strip() for line in f if line.strip()]
  clients_list = [int(c) for c in args.clients.split(",")]
  result = {"command": " ".join(sys.argv), "servers": {n: " ".join(f) for n, f in servers.items()},
            "small_decode_batch_tokens": args.small_decode_batch_tokens,
            "offline_num_batch_threads": args.num_batch_threads, "cpu": benchlib.cpu_name(),
            "nproc": os.cpu_count(), "load_start": os.getloadavg(),
            "date": time.strftime("%Y-%m-%d")}
  translator, small_batches = offline_translators(
      args.model_dir, args.num_batch_threads, args.decode_batch_tokens,
      args.small_decode_batch_tokens)
  running = {}
  try:
    for name, flags in servers.items():
      running[name] = start_server(*flags)
    result["rss_mib_started"] = {n: rss_mib(p.pid) for n, (p, _) in running.items()}
    for clients in clients_list:  # untimed: the first calls of each batch shape, both sides
      lines = corpus[-max(args.min_requests, args.requests_per_client * clients):]
      for _, base in running.values():
        server_round(base, lines, clients, args.round_seconds)
      offline_round(translator, lines)
      offline_round(small_batches, lines)
    result["rss_mib_warm"] = {n: rss_mib(p.pid) for n, (p, _) in running.items()}
    rows = {c: {"offline": [], "offline_small": [], "offline_one": [],
                "servers": {n: [] for n in servers}} for c in clients_list}
    for round_index in range(args.rounds):
      for clients in clients_list:
        count = max(args.min_requests, args.requests_per_client * clients)
        lines = [corpus[(round_index * 997 + i) % len(corpus)] for i in range(count)]
        row = rows[clients]
        row["offline"].append(offline_round(translator, lines))
        row["offline_small"].append(offline_round(small_batches, lines))
        if clients == 1:
          row["offline_one"].append(offline_one_round(translator, lines))
        for name, (process, base) in running.items():
          row["servers"][name].append(server_round(base, lines, clients, args.round_seconds))
          row["servers"][name][-1]["rss_mib_after"] = rss_mib(process.pid)
        print(f"round {round_index + 1} clients {clients}: offline "
              f"{row['offline'][-1]['sentences_per_s']:.1f}/s, " + ", ".join(
                  f"{n} {r[-1]['sentences_per_s']:.1f}/s" for n, r in row["servers"].items()),
              file=sys.stderr)
    result["rounds"] = rows
    result["equality"] = {
        name: check_equality(translator, base, corpus[:args.equal_lines], args.round_seconds)
        for name, (_, base) in running.items()}
    result["rss_mib_end"] = {n: rss_mib(p.pid) for n, (p, _) in running.items()}
  finally:
    result["sigterm_exit_status"] = {}
    for name, (process, _) in running.items():
      process.terminate()
      result["sigterm_exit_status"][name] = process.wait(120)
  result["overload"] = check_overload(args, corpus)
  result["http_layer"] = http_layer_round(corpus[:1000], max(clients_list), args.round_seconds)
  result["load_end"] = os.getloadavg()
  if args.output:
    with open(args.output, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
  print(table(result))


def table(result):
  """The results as markdown: one row per client count and server (medians over rounds)."""
  out = [f"CPU: {result['cpu']} ({result['nproc']} cores); load average at start "
         f"{result['load_start'][0]:.2f}, at end {result['load_end'][0]:.2f}", "",
         f"| clients | offline sent/s | offline, {result['small_decode_batch_tokens']}-token batches | "
         "server | server sent/s | server/offline | p50 ms | p99 ms | mean batch |",
         "|---|---|---|---|---|---|---|---|---|"]
  for clients, row in result["rounds"].items():
    offline = statistics.median(r["sentences_per_s"] for r in row["offline"])
    small = statistics.median(r["sentences_per_s"] for r in row["offline_small"])
    for name, runs in row["servers"].items():
      med = lambda key: statistics.median(r[key] for r in runs)  # pylint: disable=cell-var-from-loop
      out.append(f"| {clients} | {offline:.1f} | {small:.1f} | {name} | "
                 f"{med('sentences_per_s'):.1f} | {med('sentences_per_s') / offline:.2f}x | "
                 f"{med('p50_ms'):.0f} | {med('p99_ms'):.0f} | {med('mean_batch_size'):.1f} |")
  over = result["overload"]
  out.append("")
  for clients, row in result["rounds"].items():
    if row["offline_one"]:
      out.append(f"offline, one sentence per call ({clients} client rounds' lines): median "
                 f"{statistics.median(r['p50_ms'] for r in row['offline_one']):.1f} ms")
  out += [f"equality, {name}: {eq['equal']}/{eq['lines']} answers equal translate's "
                 f"(all 200: {eq['all_200']})" for name, eq in result["equality"].items()]
  out += [f"overload: {over['sent']} requests at once to a queue of {over['capacity_rows']} rows: "
          f"{over['ok']} x 200, {over['unavailable_503']} x 503, {over['other']} other, "
          f"{over['sent'] - over['answered']} unanswered; slowest {over['max_latency_s']:.1f} s",
          f"HTTP layer alone (instant stand-in decoder, {result['http_layer']['requests']} requests): "
          f"{result['http_layer']['requests_per_s']:.0f} requests/s, "
          f"{result['http_layer']['server_cpu_ms_per_request']:.2f} ms of the server threads' "
          "CPU per request"]
  for name, started in result["rss_mib_started"].items():
    warm, end = result["rss_mib_warm"][name], result["rss_mib_end"][name]
    after = [r["rss_mib_after"] for row in result["rounds"].values()
             for r in row["servers"][name]]
    out.append(f"server {name} RSS: {started:.0f} MiB started, {warm:.0f} after the warm-up "
               f"pass, {end:.0f} at the end ({100 * (end / warm - 1):+.1f}%), after each round "
               f"{min(after):.0f}-{max(after):.0f}; SIGTERM exit status "
               f"{result['sigterm_exit_status'][name]}")
  return "\n".join(out)


if __name__ == "__main__":
  main()
