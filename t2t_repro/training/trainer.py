"""The training step under a tf.distribute strategy: model, optimizer, checkpoints, `train_step`.

The outer loop (input, progress bar, saving by steps/time, dev evaluation) is
`t2t_repro.training.loop.run`.

One optimizer update (§5.3) consumes `accum_steps` micro-batches on every replica.
The loss is summed over real target tokens and divided by the GLOBAL number of real
target tokens of the update (all replicas, all micro-batches), so the update is the
same however the batch is split (tested: 2 replicas = 1 replica, accum k x b = 1 x kb).
"""

import contextlib
import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from t2t_repro import errors
from t2t_repro import model_dir as model_dir_lib
from t2t_repro.constants import PAD_ID
from t2t_repro.model.transformer import Transformer
from t2t_repro.model.weights import quiet_restore
from t2t_repro.training import checkpoints
from t2t_repro.training.loss import batch_loss_sums
from t2t_repro.training.schedule import make_schedule

SUM = tf.distribute.ReduceOp.SUM


def checkpoint_children(path):
  """The names of the top-level objects saved in checkpoint `path` ("model", "optimizer",
  "dropout_seeds", "input", ...)."""
  return {name.split("/")[0] for name, _ in tf.train.list_variables(path)}


def _if_rows(batch, compute, empty):
  """compute() if `batch` has rows, else empty() (same structure and dtypes, no forward
  pass). A distributed dataset gives a replica a batch of shape [0, 0] when the data ran
  out before its turn in the last step (a dev set whose last batches are fewer than the
  replicas, a worker whose shard ended first); the model cannot run on it (the decoder's
  start symbol makes its inputs one position longer than its mask). Only per-replica
  computation goes in the branches: the replica still joins every collective after it."""
  return tf.cond(tf.shape(batch["targets"])[0] > 0, compute, empty)


def make_strategy(distribution="auto", num_gpus=None):
  """Chooses the tf.distribute strategy.

  Args:
    distribution: "auto" (MirroredStrategy over the GPUs when more than one,
      otherwise one device), "one_device", "mirrored" or "multi_worker"
      (MultiWorkerMirroredStrategy from TF_CONFIG).
    num_gpus: GPUs to use (None: all visible).

  Returns:
    a tf.distribute.Strategy.

  Raises:
    ValueError: unknown `distribution`, or more GPUs asked for than visible.
  """
  if distribution == "multi_worker":  # must come before anything initializes the TF context
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  if num_gpus is not None:
    if num_gpus > len(gpus):
      raise ValueError(f"`num_gpus`={num_gpus} but only {len(gpus)} GPU(s) are visible")
    gpus = gpus[:num_gpus]
  devices = [d.name for d in gpus] or ["/cpu:0"]
  if distribution == "auto":
    distribution = "mirrored" if len(devices) > 1 else "one_device"
  if distribution == "one_device":
    return tf.distribute.OneDeviceStrategy(devices[0])
  if distribution == "mirrored":
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices if gpus else cpus)
  raise ValueError(f"`distribution`={distribution!r}: expected auto, one_device, mirrored or "
                   "multi_worker")


def is_chief(strategy):
  """True on the worker that writes checkpoints and summaries (task 0, or single process)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                           and "chief" not in resolver.cluster_spec().as_dict())


# The Keras versions whose private `Optimizer._all_reduce_sum_gradients` hook
# `PreReducedAdam` overrides (the same pin as setup.cfg's install_requires).
SUPPORTED_KERAS = ">=3.10,<3.16"
_REDUCE_HOOK = "_all_reduce_sum_gradients"


def _handle(variable):
  """The resource handle of a Keras or tf.Variable (inside `strategy.extended.update`, a
  distributed variable's handle is the current device's copy)."""
  return (variable.value if isinstance(variable, keras.Variable) else variable).handle


class PreReducedAdam(keras.optimizers.Adam):
  """Keras Adam (Kingma & Ba 2015; Keras's slots, schedule, EMA and checkpoint layout)
  that expects gradients already summed over replicas and updates each weight with one
  fused kernel.

  The training step all-reduces the gradients once itself (it needs the summed
  gradient for the global norm, clipping and the finite check), so the optimizer's
  own all-reduce must not sum them again. Keras 3 has no public switch for that
  (tf.keras's `apply_gradients(experimental_aggregate_gradients=False)` is gone), so
  this overrides the private hook `_all_reduce_sum_gradients` of Keras's TensorFlow
  optimizer; `check_keras_hook` refuses a Keras without it rather than let the
  gradients be summed twice.

  `update_step` is Keras's Adam update (m += (g - m)(1 - beta_1), v += (g^2 - v)(1 -
  beta_2), w -= lr_t m / (sqrt(v) + epsilon) with lr_t = lr sqrt(1 - beta_2^t) / (1 -
  beta_1^t), Kingma & Ba's "epsilon hat" form) done by TensorFlow's `ResourceApplyAdam`
  (the kernel of tf.compat.v1's AdamOptimizer): one pass over each weight and its two
  slots instead of Keras's twelve elementwise ops, equal to Keras's update within float32
  rounding (tests/test_training.py). Sparse gradients and amsgrad take Keras's path.
  """

  def _all_reduce_sum_gradients(self, grads_and_vars):
    return grads_and_vars

  def update_step(self, gradient, variable, learning_rate):
    if self.amsgrad or isinstance(gradient, tf.IndexedSlices):
      super().update_step(gradient, variable, learning_rate)
      return
    dtype = variable.dtype
    step = tf.cast(self.iterations + 1, dtype)
    beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
    index = self._get_variable_index(variable)
    tf.raw_ops.ResourceApplyAdam(
        var=_handle(variable), m=_handle(self._momentums[index]),
        v=_handle(self._velocities[index]), beta1_power=tf.pow(beta_1, step),
        beta2_power=tf.pow(beta_2, step), lr=tf.cast(learning_rate, dtype), beta1=beta_1,
        beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype))


def check_keras_hook():
  """Raises RuntimeError unless Keras's Adam still has the private hook `PreReducedAdam`
  overrides (a rename upstream would make every multi-replica update sum twice)."""
  if not callable(getattr(keras.optimizers.Adam, _REDUCE_HOOK, None)):
    raise RuntimeError(
        f"keras {keras.__version__} has no {_REDUCE_HOOK} in its TensorFlow optimizer: "
        "PreReducedAdam would let Keras sum the already summed gradients again. This "
        f"project supports keras{SUPPORTED_KERAS} (setup.cfg); install one of those")


def make_optimizer(hparams, mixed_precision="none", ema_decay=0.0):
  """Adam(beta1, beta2, eps) with the schedule of `hparams.lr_schedule` (eq. 3 of §5.3 by
  default; `schedule.make_schedule`); wrapped in a dynamic LossScaleOptimizer under
  mixed_float16. ema_decay > 0 keeps Keras's exponential moving average of the weights
  (`average = ema_decay * average + (1 - ema_decay) * weight` after every applied update,
  the first update copying the weights; Marian's --exponential-smoothing, OpenNMT-tf's
  moving_average_decay) in optimizer variables, so checkpoints carry it.

  Raises:
    RuntimeError: an unsupported Keras (`check_keras_hook`).
  """
  check_keras_hook()
  optimizer = PreReducedAdam(
      learning_rate=make_schedule(hparams),
      beta_1=hparams.adam_beta1, beta_2=hparams.adam_beta2, epsilon=hparams.adam_epsilon,
      use_ema=ema_decay > 0, ema_momentum=ema_decay or 0.99)
  if mixed_precision == "mixed_float16":
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  return optimizer


class Trainer:
  """Owns the model, optimizer, checkpoints and the compiled training step.

  Args:
    hparams: `HParams`.
    strategy: from `make_strategy`.
    model_dir: where checkpoints and TensorBoard events go (chief only).
    accum_steps: micro-batches per update (gradient accumulation).
    jit_compile: XLA-compile the per-replica forward/backward computation.
    mixed_precision: "none", "mixed_float16" or "mixed_bfloat16" (softmax,
      LayerNorm, logits and the loss stay float32).
    keep_checkpoint_max: checkpoints kept by the CheckpointManager.
    ema_decay: keep an exponential moving average of the weights (0: off), see
      `make_optimizer` and `ema_weights`.
  """

  def __init__(self, hparams, strategy, model_dir, accum_steps=1, jit_compile=False,
               mixed_precision="none", keep_checkpoint_max=20, ema_decay=0.0):
    if accum_steps < 1:
      raise ValueError(f"`accum_steps` must be >= 1, got {accum_steps}")
    if mixed_precision not in ("none", "mixed_float16", "mixed_bfloat16"):
      raise ValueError(f"`mixed_precision`={mixed_precision!r}: expected none, mixed_float16 or "
                       "mixed_bfloat16")
    self.hparams = hparams
    self.strategy = strategy
    self.model_dir = model_dir
    self.accum_steps = accum_steps
    self.jit_compile = jit_compile
    self.chief = is_chief(strategy)
    keras.mixed_precision.set_global_policy("float32" if mixed_precision == "none" else mixed_precision)
    with strategy.scope():
      self.model = Transformer.from_hparams(hparams)
      self.optimizer = make_optimizer(hparams, mixed_precision, ema_decay)
      self.optimizer.build(self.model.trainable_variables)
    self.loss_scaling = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
    # Dropout draws come from Keras seed generators, whose states are model variables that
    # Keras leaves out of checkpoints; saving them lets a resumed run draw the same masks.
    self._seed_states = [v for v in self.model.variables
                         if v.path.endswith("seed_generator_state")]
    self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                          dropout_seeds=self._seed_states)
    self.local_replicas = len(strategy.extended.worker_devices)
    # Non-chief workers of a multi-worker job must take part in saving (collectives), so
    # they write to a scratch folder outside model_dir that is deleted after each save.
    ckpt_dir = model_dir if self.chief else tempfile.mkdtemp(prefix="t2t_worker_ckpt_")
    self.manager = tf.train.CheckpointManager(self.checkpoint, ckpt_dir,
                                              max_to_keep=keep_checkpoint_max,
                                              checkpoint_name=model_dir_lib.CHECKPOINT_PREFIX)
    self._forward = tf.function(self._forward_backward, jit_compile=True) if jit_compile \
        else self._forward_backward
    self._train_step = tf.function(self._distributed_step, autograph=False)
    self._eval_step = tf.function(self._distributed_eval)

  @property
  def step(self):
    """Optimizer updates done so far (int)."""
    return int(self.optimizer.iterations.numpy())

  def restore(self):
    """Restores the latest checkpoint of model_dir, if any: weights, optimizer and the dropout
    generators' states (checkpoints written before those were saved restore without them).
    The input position is restored by `attach_input`. Returns the path or None.

    Raises:
      AssertionError, ValueError, tf.errors.OpError: the checkpoint holds another model.
    """
    path = tf.train.latest_checkpoint(self.model_dir)
    if path:
      tf.train.Checkpoint(model=self.model, optimizer=self.optimizer).restore(
          path).assert_existing_objects_matched().expect_partial()
      if "dropout_seeds" in checkpoint_children(path):
        tf.train.Checkpoint(dropout_seeds=self._seed_states).read(
            path).assert_existing_objects_matched().expect_partial()
    return path

  def input_context(self):
    """The `tf.distribute.InputContext` of this worker's training input: pipeline i of n
    workers (the chief first, then the workers by index, as TensorFlow numbers them)."""
    resolver = getattr(self.strategy, "cluster_resolver", None)
    cluster = resolver.cluster_spec().as_dict() if resolver is not None and resolver.task_type \
        else {}
    workers = len(cluster.get("chief", [])) + len(cluster.get("worker", []))
    if workers <= 1:
      return tf.distribute.InputContext(1, 0, self.strategy.num_replicas_in_sync)
    index = resolver.task_id + (resolver.task_type == "worker" and "chief" in cluster)
    return tf.distribute.InputContext(workers, index, self.strategy.num_replicas_in_sync)

  def attach_input(self, iterator, restore_from=None):
    """Makes `iterator` (this worker's training batches, a tf.data iterator) part of every
    checkpoint written from now on, and with `restore_from` (a checkpoint path that holds
    one, see `checkpoint_children`) continues from the position saved there: the chunk
    order, shuffle buffer, buckets and prefetched batches, so the batches that follow are
    those an uninterrupted run would have read.

    Raises:
      ValueError: the saved position is of another pipeline (other data, cache or
        hparams); `iterator` is then unusable and nothing is attached.
    """
    if restore_from:
      failed = None
      with quiet_restore():  # a failed read warns of every unrestored value when collected
        try:
          tf.train.Checkpoint(input=iterator).read(restore_from) \
              .assert_existing_objects_matched().expect_partial()
        except (AssertionError, tf.errors.OpError) as e:
          failed = str(e).strip().splitlines()[0][:200]
      if failed:
        raise ValueError(f"the input position saved in {restore_from} is not of this input "
                         f"pipeline ({failed})")
    self.checkpoint.input = iterator

  def save(self):
    """Writes a checkpoint (the CheckpointManager writes the `checkpoint` index file last,
    atomically, so a crash mid-save leaves the previous checkpoint as the latest).

    `tf.train.Checkpoint` keeps a count of its saves, `save_counter`, in every checkpoint; it
    is set to the step here, so that the checkpoint of step N is the same tensor for tensor
    however the run was stopped and resumed (a count restarts at 1 in a resumed process, and
    counts the extra save of a SIGTERM stop).

    Raises:
      errors.DiskFullError: the device is full; errors.WriteError: the write is refused
        (permission, read-only filesystem). The partial files are removed, the earlier
        checkpoints are intact; the message names the model dir (and the bytes needed).
    """
    self.checkpoint.save_counter.assign(self.step - 1)  # the manager's save adds 1
    try:
      path = self.manager.save(checkpoint_number=self.optimizer.iterations)
    except (OSError, tf.errors.OpError) as e:
      reason = errors.write_failure(e)
      if reason is None:
        raise
      checkpoints.remove_partial_checkpoints(self.manager.directory)
      name = f"{model_dir_lib.CHECKPOINT_PREFIX}-{self.step}"
      where = f"`model_dir`={self.model_dir}"
      if reason != errors.NO_SPACE:
        raise errors.WriteError(f"{where}: {reason} writing checkpoint {name}; the earlier "
                                "checkpoints are intact", self.model_dir, reason) from None
      raise errors.DiskFullError(
          f"{where}: no space left on device writing checkpoint {name}: it needs about "
          f"{self.checkpoint_bytes()} bytes, {shutil.disk_usage(self.manager.directory).free} "
          "are free; the earlier checkpoints are intact", self.model_dir, reason) from None
    if not self.chief:  # drop the scratch copy, keep the folder for the next save
      shutil.rmtree(self.manager.directory, ignore_errors=True)
      os.makedirs(self.manager.directory, exist_ok=True)
    return path

  def checkpoint_bytes(self):
    """Bytes of one checkpoint: the latest one's files, or the variables' sizes if none yet."""
    latest = self.manager.latest_checkpoint
    if latest and checkpoints.checkpoint_bytes(latest):
      return checkpoints.checkpoint_bytes(latest)
    variables = self.model.weights + self.optimizer.variables
    return int(sum(np.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables))

  # ---- the per-replica computation -------------------------------------------------

  def _token_loss(self, batch, training):
    """Loss sums of one micro-batch: (smoothed_sum, nll_sum, target_tokens, source_tokens)."""
    return batch_loss_sums(self.model, batch, self.hparams.label_smoothing, training,
                           static_shapes=self.jit_compile,
                           rdrop_alpha=self.hparams.rdrop_alpha)

  def _forward_backward(self, batch, global_tokens):
    with tf.GradientTape() as tape:
      smoothed, nll, tgt_tokens, src_tokens = self._token_loss(batch, training=True)
      loss = smoothed / global_tokens
      scaled = self.optimizer.scale_loss(loss) if self.loss_scaling else loss
    grads = tape.gradient(scaled, self.model.trainable_variables)
    return grads, smoothed, nll, tgt_tokens, src_tokens

  def _micro_batch(self, batch, global_tokens):
    """(gradients, float32 [4] loss sums) of one micro-batch of this replica; zeros for a
    batch without rows (see `_if_rows`), whose forward pass never runs."""
    variables = self.model.trainable_variables

    def real():
      grads, *stats = self._forward(batch, global_tokens)
      return [tf.convert_to_tensor(g) for g in grads], tf.stack(stats)

    return _if_rows(batch, real, lambda: ([tf.zeros(v.shape, v.dtype) for v in variables],
                                          tf.zeros([4])))

  def _replica_step(self, batches, stop):
    ctx = tf.distribute.get_replica_context()
    local_tokens = tf.add_n([tf.reduce_sum(tf.cast(tf.not_equal(b["targets"], PAD_ID), tf.float32))
                             for b in batches])
    global_tokens = tf.maximum(ctx.all_reduce(SUM, local_tokens), 1.0)
    grads, sums = None, tf.zeros([4])
    for batch in batches:
      g, stats = self._micro_batch(batch, global_tokens)
      grads = g if grads is None else [a + b for a, b in zip(grads, g)]
      sums += stats
    grads = ctx.all_reduce(SUM, grads)  # the one all-reduce of the step
    grad_norm = tf.linalg.global_norm(grads)
    if self.loss_scaling:
      grad_norm /= tf.cast(self.optimizer.dynamic_scale, tf.float32)
    finite = tf.logical_and(tf.math.is_finite(grad_norm),
                            tf.math.is_finite(ctx.all_reduce(SUM, sums[0])))
    if self.hparams.clip_norm > 0:
      scale = tf.minimum(1.0, self.hparams.clip_norm / tf.maximum(grad_norm, 1e-12))
      grads = [g * tf.cast(scale, g.dtype) for g in grads]
    self._apply_if_finite(grads, finite)
    return tf.concat([sums, [stop]], 0), tf.stack([tf.cast(finite, tf.float32), grad_norm])

  def _apply_if_finite(self, grads, finite):
    """Applies the update unless the loss or a gradient is NaN/Inf (same on every replica,
    since the gradients are already summed). Under mixed_float16 the LossScaleOptimizer
    makes that decision itself (it must also lower its loss scale), so it always gets the
    gradients. The skip is decided in cross-replica context, as Keras's LossScaleOptimizer
    does, because a cond whose branch calls merge_call is not allowed in replica context.
    """
    variables = self.model.trainable_variables
    if self.loss_scaling:
      self.optimizer.apply(grads, variables)
      return

    def cross_replica(distribution, finite, grads):
      def apply():
        distribution.extended.call_for_each_replica(
            lambda g: self.optimizer.apply(g, variables), args=(grads,))
        return tf.constant(True)

      ok = distribution.experimental_local_results(finite)[0]
      return tf.cond(ok, apply, lambda: tf.constant(False))

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(finite, grads))

  def _next_per_replica(self, iterator):
    """The next batch of every local replica: replica r of this worker gets the r-th of the
    next `local_replicas` batches of its stream (as a distributed dataset deals them)."""
    batches = [next(iterator) for _ in range(self.local_replicas)]
    return self.strategy.experimental_distribute_values_from_function(
        lambda ctx: batches[ctx.replica_id_in_sync_group % self.local_replicas])

  def _distributed_step(self, iterator, stop):
    batches = [self._next_per_replica(iterator) for _ in range(self.accum_steps)]
    sums, flags = self.strategy.run(self._replica_step, args=(batches, stop))
    sums = self.strategy.reduce(SUM, sums, axis=None)
    flags = self.strategy.experimental_local_results(flags)[0]  # identical on every replica
    return sums, flags

  def _distributed_eval(self, dist_dataset):
    totals = tf.zeros([4])
    for batch in dist_dataset:  # one trace for every bucket shape
      stats = self.strategy.run(
          lambda b: _if_rows(b, lambda: tf.stack(self._token_loss(b, training=False)),
                             lambda: tf.zeros([4])), args=(batch,))
      totals += self.strategy.reduce(SUM, stats, axis=None)
    return totals

  # ---- public API ----------------------------------------------------------------------

  def train_step(self, iterator, stop=False):
    """Runs one update from `iterator`, this worker's tf.data iterator of training batches
    ({"inputs", "targets"} int32 [batch, length]): accum_steps x local_replicas of them,
    micro-batch k of replica r being the (k * local_replicas + r)-th.

    Args:
      iterator: as above.
      stop: this worker wants training to end after this update (it received a signal).
        The flag goes through the update's own all-reduce, so that every worker of a
        multi-worker job learns it at the same update.

    Returns:
      dict of floats: loss (smoothed, per target token), nll (per target token),
      target_tokens, source_tokens (global counts), grad_norm (global norm of the
      summed, normalized gradient), applied (False if the update was skipped) and stop
      (bool: some worker passed `stop`).
    """
    sums, flags = self._train_step(iterator, tf.constant(float(stop)))
    smoothed, nll, tgt, src, stops = (float(x) for x in sums.numpy())
    finite, grad_norm = (float(x) for x in flags.numpy())
    return {"loss": smoothed / max(tgt, 1.0), "nll": nll / max(tgt, 1.0), "target_tokens": tgt,
            "source_tokens": src, "grad_norm": grad_norm, "applied": finite > 0.5,
            "stop": stops > 0}

  def evaluate(self, dist_dataset):
    """Dev loss over a distributed dataset: dict with loss, nll, ppl per target token."""
    totals = self._eval_step(dist_dataset).numpy()
    tokens = max(totals[2], 1.0)
    nll = totals[1] / tokens
    return {"loss": totals[0] / tokens, "nll": nll, "ppl": float(np.exp(min(nll, 50.0))),
            "target_tokens": totals[2]}

  @contextlib.contextmanager
  def ema_weights(self):
    """Within the block the model holds the moving average of its weights (`ema_decay`),
    after it its own weights again.

    Raises:
      ValueError: the trainer keeps no moving average.
    """
    inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
    if not inner.use_ema:
      raise ValueError("this run keeps no moving average of the weights (`ema_decay`=0)")
    variables = self.model.trainable_variables
    saved = [tf.identity(v) for v in variables]
    inner.finalize_variable_values(variables)
    try:
      yield self.model
    finally:
      for variable, value in zip(variables, saved):
        variable.assign(value)

  def learning_rate(self):
    """The learning rate of the next update (float)."""
    return float(self.optimizer.learning_rate)  # the schedule at the update count


