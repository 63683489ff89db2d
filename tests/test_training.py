"""Loss, learning-rate schedule and the training step against hand-computed values."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_repro.config.hparams import HParamsError, get_hparams
from t2t_repro.training.loss import smoothed_cross_entropy
from t2t_repro.training.schedule import (ConstantSchedule, CooldownSchedule, InverseSqrtSchedule,
                                         TransformerSchedule, make_schedule)
from t2t_repro.training import trainer as trainer_lib
from t2t_repro.training.trainer import PreReducedAdam, Trainer, make_strategy


def _reference_smoothed(logits, labels, eps):
  """-sum_v q(v) log p(v) with q = 1 - eps at the label and eps / (V - 1) elsewhere."""
  logits = logits.astype(np.float64)
  log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  vocab = logits.shape[-1]
  q = np.full_like(log_p, eps / (vocab - 1))
  q[np.arange(len(labels)), labels] = 1 - eps
  return -(q * log_p).sum(-1), -log_p[np.arange(len(labels)), labels]


def test_smoothed_cross_entropy_matches_explicit_distribution():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(5, 7)).astype(np.float32) * 3
  labels = np.array([0, 3, 6, 2, 2])
  weights = np.array([1, 1, 1, 0, 1], np.float32)
  smoothed, nll = smoothed_cross_entropy(tf.constant(logits), tf.eye(logits.shape[1]),
                                         tf.constant(labels, tf.int32),
                                         tf.constant(weights), 0.1)
  ref_smoothed, ref_nll = _reference_smoothed(logits, labels, 0.1)
  np.testing.assert_allclose(smoothed.numpy(), (ref_smoothed * weights).sum(), rtol=1e-5)
  np.testing.assert_allclose(nll.numpy(), (ref_nll * weights).sum(), rtol=1e-5)


def test_smoothed_cross_entropy_gradient_is_softmax_minus_q():
  rng = np.random.default_rng(1)
  logits = tf.constant(rng.normal(size=(4, 6)).astype(np.float32) * 2)
  labels = np.array([5, 0, 2, 2])
  weights = np.array([1, 0, 1, 2], np.float32)
  with tf.GradientTape() as tape:
    tape.watch(logits)
    smoothed, _ = smoothed_cross_entropy(logits, tf.eye(6), tf.constant(labels, tf.int32),
                                         tf.constant(weights), 0.1)
  q = np.full([4, 6], 0.1 / 5)
  q[np.arange(4), labels] = 0.9
  expected = (tf.nn.softmax(logits).numpy() - q) * weights[:, None]
  np.testing.assert_allclose(tape.gradient(smoothed, logits).numpy(), expected, atol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_smoothed_cross_entropy_gradients_of_both_outputs(compiled):
  # d nll / d logits = softmax - onehot; gradients of a mix of both outputs add up.
  rng = np.random.default_rng(2)
  logits = tf.constant(rng.normal(size=(3, 5)).astype(np.float32) * 2)
  labels = np.array([4, 1, 1])
  weights = np.array([1, 1, 0.5], np.float32)

  def grads(logits):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(logits)
      smoothed, nll = smoothed_cross_entropy(logits, tf.eye(5), tf.constant(labels, tf.int32),
                                             tf.constant(weights), 0.2)
      mix = smoothed + 3.0 * nll
    return tape.gradient(nll, logits), tape.gradient(mix, logits)

  d_nll, d_mix = (tf.function(grads) if compiled else grads)(logits)
  p = tf.nn.softmax(logits).numpy()
  onehot = np.eye(5)[labels]
  q = np.full([3, 5], 0.2 / 4)
  q[np.arange(3), labels] = 0.8
  np.testing.assert_allclose(d_nll.numpy(), (p - onehot) * weights[:, None], atol=1e-6)
  np.testing.assert_allclose(d_mix.numpy(), (p - q + 3 * (p - onehot)) * weights[:, None], atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(tf.float32, 1e-5), (tf.bfloat16, 3e-2)])
def test_smoothed_cross_entropy_gradients_equal_autodiff_of_the_projection(dtype, tol):
  # The fused gradient (p into the projection's matmuls, the label and uniform terms added
  # after) against autodiff of logits = hidden @ matrix^T and the explicit smoothed loss.
  rng = np.random.default_rng(3)
  hidden = tf.constant(rng.normal(size=(6, 4)).astype(np.float32))
  matrix = tf.Variable(rng.normal(size=(9, 4)).astype(np.float32))
  labels = tf.constant([8, 0, 3, 3, 5, 1], tf.int32)
  weights = tf.constant([1, 1, 0, 1, 2, 1], tf.float32)
  eps = 0.1
  q = tf.one_hot(labels, 9) * (1 - eps - eps / 8) + eps / 8

  def grads(fused):
    with tf.GradientTape() as tape:
      tape.watch(hidden)
      h = tf.cast(hidden, dtype)
      if fused:
        smoothed, nll = smoothed_cross_entropy(h, matrix, labels, weights, eps)
      else:
        logits = tf.cast(tf.matmul(h, tf.cast(matrix, dtype), transpose_b=True), tf.float32)
        log_p = tf.nn.log_softmax(logits)
        smoothed = tf.reduce_sum(-tf.reduce_sum(q * log_p, -1) * weights)
        nll = tf.reduce_sum(-tf.gather(log_p, labels[:, None], batch_dims=1)[:, 0] * weights)
      total = smoothed + 0.5 * nll
    return [total] + tape.gradient(total, [hidden, matrix])

  for fused, plain in zip(grads(True), grads(False)):
    np.testing.assert_allclose(fused.numpy(), plain.numpy(), rtol=tol, atol=tol)


def test_smoothed_cross_entropy_exact_where_the_true_probability_underflows():
  # p(label) = e^-200 underflows float32; log Z comes from the largest p, so the NLL is
  # still exact (a -log p(label) formulation would give inf or a clamp).
  logits = np.zeros([2, 6], np.float32)
  logits[0, 2] = 200.0  # label 4 is 200 nats below the max
  logits[1] = [1, 2, 3, 4, 5, 6]
  labels = np.array([4, 0])
  smoothed, nll = smoothed_cross_entropy(tf.constant(logits), tf.eye(logits.shape[1]),
                                         tf.constant(labels, tf.int32),
                                         tf.ones([2]), 0.1)
  ref_smoothed, ref_nll = _reference_smoothed(logits, labels, 0.1)
  assert ref_nll[0] == pytest.approx(200.0, abs=1e-6)
  np.testing.assert_allclose(nll.numpy(), ref_nll.sum(), rtol=1e-6)
  np.testing.assert_allclose(smoothed.numpy(), ref_smoothed.sum(), rtol=1e-6)


def test_smoothed_cross_entropy_rejects_out_of_range_labels():
  with pytest.raises(tf.errors.InvalidArgumentError):
    smoothed_cross_entropy(tf.zeros([2, 5]), tf.eye(5), tf.constant([1, 5]), tf.ones([2]), 0.1)


def test_uniform_logits_give_log_vocab():
  # With all logits equal, p = 1/V everywhere, so both losses are log V per token.
  smoothed, nll = smoothed_cross_entropy(tf.zeros([2, 10]), tf.eye(10), tf.constant([1, 4]),
                                       tf.ones([2]), 0.1)
  np.testing.assert_allclose([smoothed.numpy(), nll.numpy()], [2 * np.log(10)] * 2, rtol=1e-6)


@pytest.mark.parametrize("step,expected", [
    # eq. 3 by hand: 512^-0.5 * min(step^-0.5, step * 4000^-1.5)
    (1, 512 ** -0.5 * 1 * 4000 ** -1.5),             # 1.7469e-07, warmup branch
    (4000, 512 ** -0.5 * 4000 ** -0.5),              # 6.9877e-04, the peak
    (100000, 512 ** -0.5 * 100000 ** -0.5),          # 1.3975e-04, decay branch
])
def test_schedule_is_eq3(step, expected):
  schedule = TransformerSchedule(512, 4000, 1.0)
  # Keras passes the 0-based iteration count: update number `step` sees step - 1.
  assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-5)


def test_schedule_values_written_out():
  schedule = TransformerSchedule(512, 4000)
  assert float(schedule(3999)) == pytest.approx(6.9877e-4, rel=1e-4)
  assert float(schedule(99999)) == pytest.approx(1.3975e-4, rel=1e-4)
  assert float(TransformerSchedule(512, 8000, 2.0)(7999)) == pytest.approx(2 * 512 ** -0.5 * 8000 ** -0.5)


@pytest.mark.parametrize("step,expected", [
    # peak * min(step / warmup, sqrt(warmup / step)) by hand, peak 0.005, warmup 2000
    (1, 2.5e-6),        # 0.005 / 2000: linear warmup from 0
    (1000, 0.0025),     # half way up
    (2000, 0.005),      # the peak
    (4500, 0.005 * 2 / 3),  # sqrt(2000 / 4500) = 2/3
    (8000, 0.0025),     # sqrt(1/4)
])
def test_inverse_sqrt_schedule_is_fairseq(step, expected):
  schedule = InverseSqrtSchedule(0.005, 2000)
  assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("step,expected", [
    # peak * min(1, step / warmup) by hand, peak 0.004, warmup 1000
    (1, 4e-6), (500, 0.002), (1000, 0.004), (1001, 0.004), (9000, 0.004),
])
def test_constant_schedule_warms_up_then_holds_the_peak(step, expected):
  schedule = ConstantSchedule(0.004, 1000)
  assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-6)
  # The warmup is inverse_sqrt's: the two agree up to the peak and differ after it.
  if step <= 1000:
    inverse_sqrt = InverseSqrtSchedule(0.004, 1000)
    assert float(schedule(step - 1)) == pytest.approx(float(inverse_sqrt(step - 1)))


def test_constant_schedule_with_cooldown_is_warmup_stable_decay():
  hp = get_hparams("tiny", "lr_schedule=constant,peak_learning_rate=0.004,warmup_steps=100,"
                           "train_steps=1000,cooldown_steps=300")
  schedule = make_schedule(hp)
  assert isinstance(schedule, CooldownSchedule) and isinstance(schedule.base, ConstantSchedule)
  rates = [float(schedule(n - 1)) for n in (50, 100, 700, 701, 850, 1000, 1001)]
  assert rates == pytest.approx([0.002, 0.004, 0.004, 0.004, 0.004 * 151 / 300,
                                 0.004 / 300, 0.0], rel=1e-5, abs=1e-12)
  copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
  assert type(copy.base) is ConstantSchedule and float(copy(849)) == pytest.approx(rates[4])
  with pytest.raises(HParamsError, match="'constant' needs a positive peak_learning_rate"):
    get_hparams("tiny", "lr_schedule=constant,peak_learning_rate=0")


@pytest.mark.parametrize("step,factor", [
    # train_steps 100, cooldown 10: updates 1..90 at the base rate, then 10/10 .. 1/10
    (50, 1.0), (90, 1.0), (91, 1.0), (92, 0.9), (95, 0.6), (100, 0.1), (101, 0.0), (150, 0.0),
])
def test_cooldown_is_linear_to_zero_over_the_last_steps(step, factor):
  base = InverseSqrtSchedule(0.005, 20)
  schedule = CooldownSchedule(base, train_steps=100, cooldown_steps=10)
  assert float(schedule(step - 1)) == pytest.approx(float(base(step - 1)) * factor, rel=1e-6, abs=1e-12)


def test_cooldown_from_hparams_serializes_and_is_checked():
  hp = get_hparams("tiny", "lr_schedule=inverse_sqrt,peak_learning_rate=0.001,train_steps=1000,"
                           "cooldown_steps=400")
  schedule = make_schedule(hp)
  assert isinstance(schedule, CooldownSchedule) and isinstance(schedule.base, InverseSqrtSchedule)
  copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
  assert type(copy) is CooldownSchedule and type(copy.base) is InverseSqrtSchedule
  assert [float(copy(i)) for i in (0, 700, 999)] == [float(schedule(i)) for i in (0, 700, 999)]
  assert float(schedule(799)) == pytest.approx(0.001 * (200 / 800) ** 0.5 * 201 / 400, rel=1e-6)
  with pytest.raises(ValueError, match="cooldown_steps must be positive"):
    CooldownSchedule(schedule.base, train_steps=1000, cooldown_steps=0)
  with pytest.raises(HParamsError, match="cooldown_steps=1001"):
    get_hparams("tiny", "train_steps=1000,cooldown_steps=1001")


def test_make_schedule_and_serialization():
  for name, overrides, kind in (("base", "", TransformerSchedule),
                                ("multi30k_revisit_tiny", "", InverseSqrtSchedule),
                                ("tiny", "lr_schedule=inverse_sqrt,peak_learning_rate=0.001",
                                 InverseSqrtSchedule)):
    schedule = make_schedule(get_hparams(name, overrides))
    assert isinstance(schedule, kind)
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert type(copy) is kind and copy.get_config() == schedule.get_config()
  assert make_schedule(get_hparams("tiny", "lr_schedule=inverse_sqrt,peak_learning_rate=0.001")
                       ).get_config() == {"peak_learning_rate": 0.001, "warmup_steps": 200}


def test_inverse_sqrt_trainer_restores_its_rate(tmp_path):
  hp = get_hparams("tiny", "vocab_size=40,dropout=0,lr_schedule=inverse_sqrt,peak_learning_rate=0.01,"
                           "warmup_steps=4")
  first = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  assert first.learning_rate() == pytest.approx(0.0025)  # update 1: 0.01 * 1/4
  first.train_step(_iterator(first.strategy, [_fixed_batch()]))
  first.save()
  second = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  second.restore()
  assert second.learning_rate() == pytest.approx(0.005)  # update 2: 0.01 * 2/4


def _fixed_batch():
  inputs = np.array([[5, 6, 7, 8, 1], [9, 10, 1, 0, 0]], np.int32)
  targets = np.array([[11, 12, 13, 1, 0, 0], [14, 15, 16, 17, 18, 1]], np.int32)
  return {"inputs": inputs, "targets": targets}


def _iterator(strategy, batches):
  ds = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in batches]) for k in batches[0]})
  del strategy  # train_step deals the batches of one stream to the replicas
  return iter(ds)


def test_first_step_loss_equals_hand_computed(tmp_path):
  hp = get_hparams("tiny", "vocab_size=40,dropout=0")
  strategy = make_strategy("one_device")
  trainer = Trainer(hp, strategy, str(tmp_path))
  batch = _fixed_batch()
  logits = trainer.model((batch["inputs"], batch["targets"])).numpy()
  mask = batch["targets"] != 0
  smoothed, nll = _reference_smoothed(logits[mask], batch["targets"][mask], 0.1)
  stats = trainer.train_step(_iterator(strategy, [batch]))
  assert stats["target_tokens"] == mask.sum() == 10
  assert stats["source_tokens"] == 8  # 5 + 3 non-pad source ids
  assert stats["loss"] == pytest.approx(smoothed.mean(), rel=1e-5)
  assert stats["nll"] == pytest.approx(nll.mean(), rel=1e-5)
  assert stats["applied"] and trainer.step == 1
  # The update moved the weights, by at most ~lr per element (Adam's first step).
  after = trainer.model((batch["inputs"], batch["targets"])).numpy()
  assert not np.allclose(after, logits)


def test_non_finite_step_is_skipped(tmp_path):
  hp = get_hparams("tiny", "vocab_size=40,dropout=0")
  strategy = make_strategy("one_device")
  trainer = Trainer(hp, strategy, str(tmp_path))
  before = [v.numpy().copy() for v in trainer.model.trainable_variables]
  trainer.model.embedding.embeddings.assign(trainer.model.embedding.embeddings * np.inf)
  poisoned = [v.numpy().copy() for v in trainer.model.trainable_variables]
  stats = trainer.train_step(_iterator(strategy, [_fixed_batch()]))
  assert not stats["applied"]
  assert trainer.step == 0  # no update counted
  for a, b in zip(poisoned, [v.numpy() for v in trainer.model.trainable_variables]):
    np.testing.assert_array_equal(a, b)
  assert len(before) == len(poisoned)


def test_save_restore_is_exact_and_training_continues_identically(tmp_path):
  hp = get_hparams("tiny", "vocab_size=40,dropout=0")
  batch = _fixed_batch()
  first = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  for _ in range(2):
    first.train_step(_iterator(first.strategy, [batch]))
  assert first.save().endswith("ckpt-2")
  second = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  assert second.restore().endswith("ckpt-2") and second.step == 2
  assert second.learning_rate() == first.learning_rate()
  for a, b in zip(first.optimizer.variables, second.optimizer.variables):  # moments, step
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  for a, b in zip(first.model.trainable_variables, second.model.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  one = first.train_step(_iterator(first.strategy, [batch]))
  two = second.train_step(_iterator(second.strategy, [batch]))
  assert one["loss"] == two["loss"]
  for a, b in zip(first.model.trainable_variables, second.model.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def _replicated_apply(strategy, optimizer, variables):
  @tf.function
  def apply(grads):
    strategy.run(lambda: optimizer.apply(grads, variables))
  return apply


@pytest.mark.parametrize("replicas", [1, 2])
def test_pre_reduced_adam_equals_keras_adam(replicas):
  # PreReducedAdam (fused ResourceApplyAdam) = Keras's Adam step by step, within float32
  # rounding; with 2 replicas the update runs on each
  # replica's copy of mirrored variables with the gradients counted as already summed (not
  # summed again over replicas) and is compared with Keras's Adam on one device.
  rng = np.random.default_rng(3)
  init = [rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3,)).astype(np.float32)]
  grads = [[rng.normal(size=v.shape).astype(np.float32) for v in init] for _ in range(3)]
  cpus = [d.name for d in tf.config.list_logical_devices("CPU")][:replicas]
  kwargs = dict(learning_rate=0.01, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
  results = []
  for optimizer_class, strategy, copies_expected in (
      (PreReducedAdam, tf.distribute.MirroredStrategy(cpus), replicas),
      (keras.optimizers.Adam, tf.distribute.get_strategy(), 1)):
    with strategy.scope():
      variables = [keras.Variable(v) for v in init]
      optimizer = optimizer_class(**kwargs)
      optimizer.build(variables)
    apply = _replicated_apply(strategy, optimizer, variables)
    for g in grads:
      apply([tf.constant(x) for x in g])
    graph = apply.get_concrete_function([tf.constant(x) for x in grads[0]]).graph.as_graph_def()
    fused = sum(node.op == "ResourceApplyAdam" for node in graph.node) + sum(
        node.op == "ResourceApplyAdam" for f in graph.library.function for node in f.node_def)
    # PreReducedAdam: one fused kernel per weight and replica copy; Keras: none
    assert fused == (len(variables) * replicas if optimizer_class is PreReducedAdam else 0)
    assert int(optimizer.iterations.numpy()) == 3
    replica_copies = [strategy.experimental_local_results(v.value) for v in variables]
    for copies in replica_copies:
      assert len(copies) == copies_expected
      for copy in copies[1:]:
        np.testing.assert_array_equal(copy.numpy(), copies[0].numpy())
    results.append([v.numpy() for v in variables + optimizer.variables[1:]])
  for ours, reference in zip(*results):
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-7)


def test_keras_private_hook_is_present_and_pinned(monkeypatch):
  """PreReducedAdam overrides Keras's private `_all_reduce_sum_gradients`: it must exist, be what
  Keras's update calls, and the Keras pin of setup.cfg must be the supported range."""
  import configparser  # pylint: disable=import-outside-toplevel
  import inspect  # pylint: disable=import-outside-toplevel
  import os  # pylint: disable=import-outside-toplevel
  from packaging.specifiers import SpecifierSet  # pylint: disable=import-outside-toplevel
  from keras.src.backend.tensorflow.optimizer import TFOptimizer  # pylint: disable=import-outside-toplevel
  trainer_lib.check_keras_hook()
  assert "self._all_reduce_sum_gradients(" in inspect.getsource(TFOptimizer._backend_update_step), (
      f"keras {keras.__version__} no longer all-reduces through _all_reduce_sum_gradients: "
      "PreReducedAdam's override would not stop a second sum; see trainer.SUPPORTED_KERAS")
  assert keras.__version__ in SpecifierSet(trainer_lib.SUPPORTED_KERAS)
  config = configparser.ConfigParser()
  config.read(os.path.join(os.path.dirname(os.path.dirname(__file__)), "setup.cfg"))
  assert f"keras{trainer_lib.SUPPORTED_KERAS}" in config["options"]["install_requires"].split()
  monkeypatch.delattr(TFOptimizer, "_all_reduce_sum_gradients")
  with pytest.raises(RuntimeError, match=r"has no _all_reduce_sum_gradients .* summed gradients "
                                         r"again\. This project supports keras>=3\.10,<3\.16"):
    trainer_lib.make_optimizer(get_hparams("tiny"))


def test_attach_input_continues_the_saved_position_or_refuses_another_pipeline(tmp_path):
  hp = get_hparams("tiny", "vocab_size=40")
  numbers = lambda: tf.data.Dataset.range(100).shuffle(100, seed=3)
  first = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  iterator = iter(numbers())
  first.attach_input(iterator)
  head = [int(next(iterator)) for _ in range(7)]
  path = first.save()
  rest = [int(next(iterator)) for _ in range(20)]
  second = Trainer(hp, make_strategy("one_device"), str(tmp_path))
  again = iter(numbers())
  second.attach_input(again, path)
  assert [int(next(again)) for _ in range(20)] == rest
  other = iter(numbers().map(lambda x: x + 1))
  with pytest.raises(ValueError, match="not of this input pipeline"):
    second.attach_input(other, path)
