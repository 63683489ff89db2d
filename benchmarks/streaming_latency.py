r"""Latency of interactive `translate`: one line in, its translation out, through a pipe.

Starts `python -m t2t_repro.translate --model_dir=M` with stdin and stdout pipes (its
streaming mode, as `producer | translate | consumer`), writes one line, waits for its
translation, and repeats with the next line, so every line is translated alone. The first
line's time includes the process start-up (TensorFlow import, model load, tracing); the
others are the steady-state latency of one line, whose parts are `--buffer_seconds` (the
wait for a second line that does not come) and the decoding itself.

  python benchmarks/streaming_latency.py --model_dir=runs/m30k_hour_s1/averaged \
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=50
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--input_file", required=True)
  parser.add_argument("--lines", type=int, default=50)
  parser.add_argument("--translate_flags", default="", help="extra flags, space-separated")
  args = parser.parse_args()
  with open(args.input_file, encoding="utf-8") as f:
    lines = [line.strip() for line, _ in zip(f, range(args.lines))]
  cmd = [sys.executable, "-m", "t2t_repro.translate", f"--model_dir={args.model_dir}",
         *args.translate_flags.split()]
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, bufsize=1, cwd=_REPO)
  latencies = []
  for line in lines:
    sent = time.perf_counter()
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    if not proc.stdout.readline():
      sys.exit(f"translate exited with {proc.wait()} (run it by hand to see why)")
    latencies.append(time.perf_counter() - sent)
  proc.stdin.close()
  proc.wait()
  with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as f:  # reaped child's CPU
    fields = f.read().rsplit(")", 1)[1].split()
  child_cpu = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
  steady = sorted(latencies[1:])
  print(f"{' '.join(cmd[1:])}: {len(lines)} lines, one at a time, load "
        f"{os.getloadavg()[0]:.2f}")
  print(f"first line (start-up included): {latencies[0]:.2f} s")
  print(f"next {len(steady)} lines: median {statistics.median(steady) * 1000:.0f} ms, "
        f"90th percentile {steady[int(0.9 * (len(steady) - 1))] * 1000:.0f} ms, "
        f"max {steady[-1] * 1000:.0f} ms")
  print(f"translate process: {time.perf_counter() - start:.1f} s wall, {child_cpu:.1f} s CPU")


if __name__ == "__main__":
  main()
