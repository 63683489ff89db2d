"""Jobs of two worker processes on 127.0.0.1 (TF_CONFIG, MultiWorkerMirroredStrategy)."""

import json
import os
import socket
import subprocess


def free_ports(n):
  """n TCP ports of 127.0.0.1 free at the time of the call."""
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def start_workers(command, log_dir, name):
  """`command` once per worker of a new two-worker cluster (worker 0 is the chief), each
  with its stderr and stdout in `{log_dir}/{name}.w{index}.log`. Returns the Popens."""
  cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
  procs = []
  for index in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster,
                                                 "task": {"type": "worker", "index": index}}),
               CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the command's own default
    with open(log_dir / f"{name}.w{index}.log", "wb") as log:
      procs.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
  return procs


def log(log_dir, name, index):
  """The output of worker `index` of the job `name` so far."""
  return (log_dir / f"{name}.w{index}.log").read_text(encoding="utf-8", errors="replace")
