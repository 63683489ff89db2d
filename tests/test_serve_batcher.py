"""The server's batching (t2t_repro.serving.batcher) with a stand-in decoder: how requests
are merged and split within max_batch_size and max_batch_tokens, the order of each
request's rows, the full queue, cancelled requests, a batch's timeout counted from when a
decoding thread became free, num_batch_threads and the intra-op threads they split. The
tests of order run one decoding thread (num_batch_threads=1; the default is one per core)."""

import asyncio
import subprocess
import sys
import threading

import numpy as np
import pytest

from t2t_repro.config.serving import batch_threads, intra_op_threads
from t2t_repro.serving.batcher import Batcher, BatchingOptions, QueueFull, RequestTooLarge


class _Recorder:
  """A decoder that records each batch it gets and answers each row with its text
  upper-cased; waits for `gate` first when one is given."""

  def __init__(self, gate=None):
    self.batches, self.gate = [], gate

  def __call__(self, key, columns):
    if self.gate is not None:
      assert self.gate.wait(30)
    self.batches.append((key, list(columns["sentences"])))
    return {"translations": np.array([s.upper().encode() for s in columns["sentences"]],
                                     dtype=object),
            "lengths": np.array([len(s) for s in columns["sentences"]], np.int32)}


def _run(coroutine):
  return asyncio.run(coroutine)


async def _serve(options, requests, decoder):
  """Submits `requests` [(key, sentences, row_tokens)] at once; returns their outputs."""
  batcher = Batcher(decoder, options)
  batcher.start()
  futures = [batcher.submit(key, {"sentences": rows}, tokens) for key, rows, tokens in requests]
  results = await asyncio.gather(*futures)
  await batcher.stop()
  return results


def test_requests_are_merged_within_the_row_and_token_bounds_and_split_back():
  options = BatchingOptions(max_batch_size=4, max_batch_tokens=20, batch_timeout_micros=50_000,
                            num_batch_threads=1)
  requests = [(("m", "a"), ["x1", "x2"], [5, 5]),  # batch 1
              (("m", "a"), ["y1", "y2", "y3"], [4, 4, 4]),  # y1, y2 fit batch 1 (18 tokens)
              (("m", "b"), ["z1"], [3]),  # another signature: a batch of its own
              (("m", "a"), ["w1"], [30])]  # over the token budget: alone
  recorder = _Recorder()
  results = _run(_serve(options, requests, recorder))
  # Batches are decoded in the order they were opened.
  assert recorder.batches == [(("m", "a"), ["x1", "x2", "y1", "y2"]), (("m", "a"), ["y3"]),
                              (("m", "b"), ["z1"]), (("m", "a"), ["w1"])]
  for (_, rows, _), result in zip(requests, results):
    assert [t.decode() for t in result["translations"]] == [r.upper() for r in rows]
    assert result["lengths"].tolist() == [len(r) for r in rows]


def test_a_request_larger_than_a_batch_is_split_and_rejoined_in_order():
  options = BatchingOptions(max_batch_size=3, max_batch_tokens=100, batch_timeout_micros=0,
                            num_batch_threads=1)
  rows = [f"s{i}" for i in range(8)]
  recorder = _Recorder()
  (result,) = _run(_serve(options, [(("m", "a"), rows, [2] * 8)], recorder))
  assert [len(batch) for _, batch in recorder.batches] == [3, 3, 2]
  assert [t.decode() for t in result["translations"]] == [r.upper() for r in rows]


def test_a_full_queue_refuses_at_once_and_a_too_large_request_always():
  options = BatchingOptions(max_batch_size=2, max_batch_tokens=100, batch_timeout_micros=0,
                            max_enqueued_batches=2, num_batch_threads=1)
  gate = threading.Event()

  async def scenario():
    batcher = Batcher(_Recorder(gate), options)
    batcher.start()
    first = batcher.submit(("m", "a"), {"sentences": ["busy"]}, [1])
    await asyncio.sleep(0.2)  # taken by the decoding thread, which waits at the gate
    queued = [batcher.submit(("m", "a"), {"sentences": ["q1", "q2"]}, [1, 1]),
              batcher.submit(("m", "a"), {"sentences": ["q3"]}, [1])]  # 2 batches: full
    with pytest.raises(QueueFull, match="2 of 2 batches"):
      batcher.submit(("m", "a"), {"sentences": ["q4", "q5"]}, [1, 1])
    with pytest.raises(RequestTooLarge, match="5 rows"):
      batcher.submit(("m", "a"), {"sentences": ["r"] * 5}, [1] * 5)
    assert batcher.queued_rows() == 3
    gate.set()
    results = await asyncio.gather(first, *queued)
    await batcher.stop()
    return results

  results = _run(scenario())
  assert [[t.decode() for t in r["translations"]] for r in results] == [["BUSY"], ["Q1", "Q2"],
                                                                        ["Q3"]]


def test_a_cancelled_request_is_not_decoded():
  options = BatchingOptions(max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1)
  gate = threading.Event()
  recorder = _Recorder(gate)

  async def scenario():
    batcher = Batcher(recorder, options)
    batcher.start()
    busy = batcher.submit(("m", "a"), {"sentences": ["busy"]}, [1])
    await asyncio.sleep(0.2)
    gone = batcher.submit(("m", "a"), {"sentences": ["gone"]}, [1])
    kept = batcher.submit(("m", "b"), {"sentences": ["kept"]}, [1])
    gone.cancel()
    gate.set()
    results = await asyncio.gather(busy, kept)
    await batcher.stop()
    return results

  _run(scenario())
  assert recorder.batches == [(("m", "a"), ["busy"]), (("m", "b"), ["kept"])]


def test_a_failing_batch_fails_its_requests_only():
  calls = []

  def decoder(key, columns):
    calls.append(key)
    if key == ("m", "bad"):
      raise ValueError("broken input")
    return {"lengths": np.array([len(s) for s in columns["sentences"]])}

  async def scenario():
    batcher = Batcher(decoder, BatchingOptions(batch_timeout_micros=0, num_batch_threads=1))
    batcher.start()
    bad = batcher.submit(("m", "bad"), {"sentences": ["x"]}, [1])
    good = batcher.submit(("m", "good"), {"sentences": ["abc"]}, [1])
    with pytest.raises(ValueError, match="broken input"):
      await bad
    result = await good
    await batcher.stop()
    return result

  assert _run(scenario())["lengths"].tolist() == [3]
  assert calls == [("m", "bad"), ("m", "good")]


def test_the_queues_of_two_models_take_turns_and_fill_up_alone():
  """A flood of model A fills A's queue only: B's request is queued while A's are refused,
  and B's batch is decoded right after the batch under way, before A's queued ones (the
  round robin of TensorFlow Serving's SharedBatchScheduler)."""
  options = BatchingOptions(max_batch_size=1, batch_timeout_micros=0, max_enqueued_batches=3,
                            num_batch_threads=1)
  gate = threading.Event()
  recorder = _Recorder(gate)

  async def scenario():
    batcher = Batcher(recorder, options)
    batcher.start()
    busy = batcher.submit(("A", "s"), {"sentences": ["a0"]}, [1])
    await asyncio.sleep(0.2)  # taken by the decoding thread, which waits at the gate
    flood = [batcher.submit(("A", "s"), {"sentences": [f"a{i}"]}, [1]) for i in range(1, 4)]
    with pytest.raises(QueueFull, match="model A's batch queue is full"):
      batcher.submit(("A", "s"), {"sentences": ["a4"]}, [1])
    other = batcher.submit(("B", "s"), {"sentences": ["b0"]}, [1])
    more = batcher.submit(("B", "s"), {"sentences": ["b1"]}, [1])
    gate.set()
    await asyncio.gather(busy, *flood, other, more)
    await batcher.stop()

  _run(scenario())
  assert [rows[0] for _, rows in recorder.batches] == ["a0", "a1", "b0", "a2", "b1", "a3"]


def test_options_are_checked():
  with pytest.raises(ValueError, match="max_batch_size"):
    BatchingOptions(max_batch_size=0)
  with pytest.raises(ValueError, match="batch_timeout_micros"):
    BatchingOptions(batch_timeout_micros=-1)


def test_a_batch_waits_for_the_clients_just_answered_up_to_its_timeout():
  """A batch opened while the decoding thread was busy waits batch_timeout_micros from the
  moment the thread became free, so the client answered by the batch just decoded joins it
  (before, the expired batch was taken at once and the client's row made a batch alone)."""
  options = BatchingOptions(max_batch_size=8, batch_timeout_micros=300_000, num_batch_threads=1)
  gate = threading.Event()
  recorder = _Recorder(gate)

  async def scenario():
    batcher = Batcher(recorder, options)
    batcher.start()
    first = batcher.submit(("m", "s"), {"sentences": ["a"]}, [1])
    await asyncio.sleep(0.5)  # "a" is decoding (at the gate)
    waiting = batcher.submit(("m", "s"), {"sentences": ["b"]}, [1])
    await asyncio.sleep(0.5)  # "b"'s batch is past its timeout while the thread is busy
    gate.set()
    await first
    await asyncio.sleep(0.05)  # the answer's way to the client and its next request's back
    answered = batcher.submit(("m", "s"), {"sentences": ["c"]}, [1])  # the client sends again
    await asyncio.gather(waiting, answered)
    await batcher.stop()

  _run(scenario())
  assert [rows for _, rows in recorder.batches] == [["a"], ["b", "c"]]


def test_num_batch_threads_decode_batches_at_the_same_time():
  """With two decoding threads, two batches are decoded at once (each waits for the other to
  start); with one, the second starts only after the first ends."""
  def decoder_meeting(parties):
    barrier = threading.Barrier(parties, timeout=3)
    met = []

    def decode(key, columns):
      try:
        barrier.wait()
        met.append(True)
      except threading.BrokenBarrierError:
        met.append(False)
      return {"translations": np.array(columns["sentences"], dtype=object)}
    return decode, met

  for threads, expected in ((2, [True, True]), (1, [False, False])):
    decode, met = decoder_meeting(2)
    options = BatchingOptions(max_batch_size=1, batch_timeout_micros=0,
                              num_batch_threads=threads)
    requests = [(("A", "s"), ["a"], [1]), (("B", "s"), ["b"], [1])]
    _run(_serve(options, requests, decode))
    assert met == expected


def test_intra_op_threads_split_the_cores():
  assert [intra_op_threads(n, cores=8) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
  # 0: one decoding thread per core, at most 4, each with its share of the cores.
  assert [batch_threads(0, cores=c) for c in (1, 2, 3, 8, 64)] == [1, 2, 3, 4, 4]
  assert [intra_op_threads(0, cores=c) for c in (1, 2, 3, 8, 64)] == [1, 1, 1, 2, 16]
  assert batch_threads(3, cores=64) == 3


def test_the_servers_tensorflow_threads_are_the_cores_split_between_the_batch_threads():
  code = ("import os, tensorflow as tf\n"
          "from t2t_repro.serving import batcher, servable\n"
          "servable.configure_threads(batcher.BatchingOptions(num_batch_threads=2))\n"
          "print(tf.config.threading.get_intra_op_parallelism_threads(), os.cpu_count())\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
  threads, cores = map(int, result.stdout.split())
  assert threads == max(1, cores // 2)
