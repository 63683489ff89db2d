"""Batching of concurrent requests, as TensorFlow Serving's `SharedBatchScheduler` does
(tensorflow_serving/batching/README.md, tensorflow/core/kernels/batching_util/
shared_batch_scheduler.h): each model has its own queue, requests of one model version and
signature are merged into a batch, and num_batch_threads decoding threads take the ready
batches of the queues in turn (round robin), so a flood of one model neither fills another's
queue nor makes its batches wait behind the whole flood. Each request gets its own rows back.

The settings (`config.BatchingOptions`) keep TensorFlow Serving's names and meanings, per
queue as there:

* max_batch_size: most rows (sentences) in one batch. A larger request is split over
  several batches (TensorFlow Serving's `enable_large_batch_splitting`).
* batch_timeout_micros: how long a batch waits for more rows before it is decoded
  underfull: from the arrival of its first row, or, if a decoding thread was busy then, from
  the moment one became free. A batch is closed when full or when its timeout expires, not
  as soon as a thread is free, so the clients a finished batch just answered can still send
  their next request into it (with one client per row, batches do not alternate between
  the clients answered and the rest).
* num_batch_threads: batches decoded at the same time, each in its own thread
  (`config.serving.intra_op_threads` splits the cores between them); 0: one per core, at
  most `config.serving.MAX_AUTO_BATCH_THREADS`.
* max_enqueued_batches: batches a model's queue holds (open or waiting; not the one being
  decoded). A request that would need more is refused at once (`QueueFull`: HTTP 503,
  gRPC UNAVAILABLE, as TensorFlow Serving answers "the batch scheduling queue ... is full").

and add a token budget, max_batch_tokens: most source tokens (EOS included) in one batch;
a single longer row makes a batch of its own. A batch closes when the next row does not
fit either bound.

Decoding is per sentence (the SavedModel's maximum output length is per sentence and it
sorts and chunks its batch itself), so a request's rows get the same outputs merged with
others as alone, their scores equal to about 1e-5 (float32 sums over a differently padded
batch; tests/test_serve.py checks it). The event loop only queues: all state
here is touched from the loop's thread; the decoding threads only run `run_batch`.
"""

import asyncio
import collections
import concurrent.futures
import time

import numpy as np

from t2t_repro.config.serving import BatchingOptions  # pylint: disable=unused-import
from t2t_repro.config.serving import batch_threads


class QueueFull(Exception):
  """A model's queue has no room for a request (max_enqueued_batches batches are waiting)."""


class RequestTooLarge(Exception):
  """A request has more rows than a whole queue can hold."""


class _Task:
  """One request: its columns, the tokens of each row, its future and its pieces' outputs."""

  def __init__(self, columns, row_tokens, future):
    self.columns, self.row_tokens, self.future = columns, row_tokens, future
    self.parts = {}  # start row -> outputs of that piece
    self.pending = 0


class _Batch:
  """Pieces (task, start, end) of requests of one key, decoded in one call."""

  def __init__(self, key, opened):
    self.key, self.opened = key, opened
    self.pieces, self.rows, self.tokens, self.closed = [], 0, 0, False


class Batcher:
  """Queues requests' rows into batches, a queue per model, and decodes them in one thread.

  Args:
    run_batch: (key, {input: list of rows}) -> {output: numpy array [rows, ...]}, called in
      the decoding thread; key as given to `submit`.
    options: `config.BatchingOptions`, each model's queue's.
    metrics: a `metrics.ServerMetrics` or None.
  """

  def __init__(self, run_batch, options, metrics=None):
    self._run_batch, self.options, self._metrics = run_batch, options, metrics
    self._queues = {}  # model name -> deque of _Batch, oldest first (in first-use order)
    self._open = {}  # key -> the batch that still takes rows
    self._turn = 0  # the queue whose ready batch goes first (round robin)
    self._wakeup = None
    self._worker = None
    threads = batch_threads(options.num_batch_threads)
    self._executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="decode")
    self._free = threads  # decoding threads without a batch
    self._freed = 0.0  # time.monotonic() when a decoding thread last became free
    self._decoding = set()  # tasks of the batches being decoded
    self._stopping = False

  def start(self):
    """Starts the loop that hands batches to the decoding thread (in the running loop)."""
    self._wakeup = asyncio.Event()
    self._worker = asyncio.get_running_loop().create_task(self._serve())

  async def stop(self):
    """Decodes what is queued, then stops the decoding thread."""
    self._stopping = True
    self._wakeup.set()
    await self._worker
    await asyncio.gather(*self._decoding)
    self._executor.shutdown(wait=True)

  def queued_rows(self):
    """Rows waiting in the queues [int]."""
    return sum(batch.rows for queue in self._queues.values() for batch in queue)

  def submit(self, key, columns, row_tokens, batched=True):
    """Queues a request; returns an asyncio.Future of its outputs ({output: numpy array
    [rows, ...]}, rows in request order). Cancel the future to drop the rows not yet
    decoded (a client that went away).

    Args:
      key: (model name, ..., signature name), e.g. (model, version, signature): only
        requests of one key share a batch, and the model name picks the queue.
      columns: {input name: list of rows}.
      row_tokens: list of int, the tokens of each row.
      batched: False: the request is a batch of its own, whatever its size.

    Raises:
      QueueFull: the model's queue lacks the batches the request needs.
      RequestTooLarge: the request is larger than a whole queue.
    """
    now = time.monotonic()
    limit = self.options.max_enqueued_batches
    if len(self._plan(None, row_tokens, batched)) > limit:
      raise RequestTooLarge(
          f"the request has {len(row_tokens)} rows, more than the queue's {limit} batches of "
          f"{self.options.max_batch_size} rows and {self.options.max_batch_tokens} tokens hold")
    queue = self._queues.setdefault(key[0], collections.deque())
    plan = self._plan(self._open.get(key), row_tokens, batched)
    new_batches = sum(1 for batch, _, _ in plan if batch is None)
    if len(queue) + new_batches > limit:
      raise QueueFull(f"model {key[0]}'s batch queue is full ({len(queue)} of {limit} batches "
                      "waiting)")
    task = _Task(columns, row_tokens, asyncio.get_running_loop().create_future())
    for batch, start, end in plan:
      if batch is None:
        batch = _Batch(key, now)
        queue.append(batch)
        if self._open.get(key) is not None:
          self._open[key].closed = True
        self._open[key] = batch if batched else None
        batch.closed = not batched
      batch.pieces.append((task, start, end))
      batch.rows += end - start
      batch.tokens += sum(row_tokens[start:end])
      task.pending += 1
    self._wakeup.set()
    self._report_queue()
    return task.future

  def _plan(self, batch, row_tokens, batched):
    """[(batch or None for a new one, start row, end row)]: the request's rows cut over
    `batch` (the open batch of their key, or None) and new batches, each within
    max_batch_size and max_batch_tokens."""
    if not batched:
      return [(None, 0, len(row_tokens))]
    plan, start = [], 0
    rows, tokens = (batch.rows, batch.tokens) if batch is not None else (0, 0)
    while start < len(row_tokens):
      end = start
      while end < len(row_tokens) and self._fits(rows, tokens, row_tokens[end]):
        rows, tokens, end = rows + 1, tokens + row_tokens[end], end + 1
      if end > start:
        plan.append((batch, start, end))
        start = end
      batch, rows, tokens = None, 0, 0  # the next rows open a new batch
    return plan

  def _fits(self, rows, tokens, row):
    return rows == 0 or (rows < self.options.max_batch_size
                         and tokens + row <= self.options.max_batch_tokens)

  async def _next_batch(self):
    """The next ready batch (closed, or its timeout passed), taking the queues in turn, once a
    decoding thread is free; None once stopped and empty. A batch's timeout runs from its
    first row or from the moment a thread last became free, whichever is later. A queue
    whose head batch is still forming keeps one of the free threads for it: a queue later in
    the turn takes a thread only when one is left (otherwise another model's ready batches
    took every thread that became free, and a forming batch, its timeout restarted at each
    freeing, waited until their queue was empty)."""
    timeout = self.options.batch_timeout_micros / 1e6
    while True:
      names = list(self._queues)
      wait, kept = None, 0  # kept: free threads kept for the forming batches met so far
      for offset in range(len(names) if self._free else 0):
        name = names[(self._turn + offset) % len(names)]
        queue = self._queues[name]
        if not queue:
          continue
        head = queue[0]
        head_wait = max(head.opened, self._freed) + timeout - time.monotonic()
        ready = head.closed or head_wait <= 0 or self._stopping
        if ready and kept < self._free:
          queue.popleft()
          if self._open.get(head.key) is head:
            del self._open[head.key]
          self._turn = (self._turn + offset + 1) % len(names)
          self._report_queue()
          return head
        if not ready:
          kept += 1
          wait = head_wait if wait is None else min(wait, head_wait)
      if self._stopping and not any(self._queues.values()):
        return None
      self._wakeup.clear()
      try:
        await asyncio.wait_for(self._wakeup.wait(), wait)
      except asyncio.TimeoutError:
        pass

  async def _serve(self):
    while (batch := await self._next_batch()) is not None:
      pieces = [piece for piece in batch.pieces if not piece[0].future.done()]  # not cancelled
      if not pieces:
        continue
      self._free -= 1
      task = asyncio.get_running_loop().create_task(self._decode(batch, pieces))
      self._decoding.add(task)
      task.add_done_callback(self._decoding.discard)

  async def _decode(self, batch, pieces):
    """Decodes one batch in a decoding thread and answers its requests."""
    columns = {name: [row for task, start, end in pieces for row in task.columns[name][start:end]]
               for name in pieces[0][0].columns}
    if self._metrics is not None:
      self._metrics.observe_batch(batch.key[0], batch.key[-1],
                                  sum(end - start for _, start, end in pieces),
                                  sum(sum(t.row_tokens[s:e]) for t, s, e in pieces))
    try:
      outputs = await asyncio.get_running_loop().run_in_executor(
          self._executor, self._run_batch, batch.key, columns)
    except Exception as e:  # pylint: disable=broad-except  # the requests' error, not ours
      for task, _, _ in pieces:
        if not task.future.done():
          task.future.set_exception(e)
    else:
      offset = 0
      for task, start, end in pieces:
        task.parts[start] = {name: value[offset:offset + end - start]
                             for name, value in outputs.items()}
        offset += end - start
        task.pending -= 1
        if task.pending == 0 and not task.future.done():
          parts = [task.parts[s] for s in sorted(task.parts)]
          task.future.set_result({name: np.concatenate([part[name] for part in parts])
                                  for name in parts[0]})
    finally:
      self._free += 1
      self._freed = time.monotonic()
      self._wakeup.set()

  def _report_queue(self):
    if self._metrics is not None:
      self._metrics.queue(self.queued_rows(), sum(len(q) for q in self._queues.values()))

