"""Reading TensorFlow profiler traces (`tf.profiler.experimental`), for the profiling
benchmarks (`profile_decode.py`, `profile_step.py`)."""

import glob
import os


def trace_events(logdir):
  """The newest trace's op events [(thread, op name, op type, start ps, duration ps)] on the
  tf_Compute (inter-op) lines, its ExecutorState events [(thread, start ps, end ps)], and
  its path. Ops that run inline in the executor (Switch, Merge, Identity, ... of the
  while loop) have no event of their own: their time is inside ExecutorState only."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  path = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                key=os.path.getmtime)[-1]
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  events, executor = [], []
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith("tf_Compute"):
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        start = line.timestamp_ns * 1000 + event.offset_ps
        thread = f"{plane.name}/{line.id}"
        if name.startswith("ExecutorState"):
          executor.append((thread, start, start + event.duration_ps))
        if (":" not in name or name.startswith(("ExecutorState", "ThreadpoolListener"))
            or "Iterator" in name):
          continue
        op_name, op_type = name.rsplit(":", 1)
        events.append((thread, op_name, op_type, start, event.duration_ps))
  return events, executor, path


def busy_ps(intervals):
  """Total length of the union of [start, end) intervals (ps)."""
  total, end_max = 0, None
  for start, end in sorted(intervals):
    if end_max is None or start > end_max:
      total += end - start
      end_max = end
    elif end > end_max:
      total += end - end_max
      end_max = end
  return total
