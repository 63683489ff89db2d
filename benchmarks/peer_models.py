"""The two peer Transformer implementations the benchmarks train and decode against.

Peers (label smoothing 0.1, Adam, shared embedding / softmax):
  * "model_garden": TF Model Garden
    ``official.nlp.modeling.models.Seq2SeqTransformer`` (tf-models-official
    2.20, built on ``tf_keras``), trained with a ``tf.function`` step and the
    loss of ``official.nlp.tasks.translation`` (re-implemented below: importing
    that module drags in tensorflow_hub via ``official.nlp.tasks``).
  * "torch": PyTorch ``torch.nn.Transformer`` (eager, CPU, post-norm), with
    embedding, sinusoidal positions, tied output projection,
    ``CrossEntropyLoss(label_smoothing=0.1)`` and ``torch.optim.Adam``.

Model Garden imports ``tf_keras`` directly and does NOT need
``TF_USE_LEGACY_KERAS=1``; nothing here sets global Keras state, so keras 3
keeps working in the same process. Install with ``benchmarks/install_peers.sh``
(see benchmarks/README.md, section "peers").

A config is a plain dict (see ``SMALL_CONFIG``)::

  {num_layers, d_model, d_ff, num_heads, vocab_size, dropout, batch, src_len,
   tgt_len}  (+ optional attention_dropout, relu_dropout, label_smoothing,
   learning_rate; default 0.0, 0.0, 0.1, 1e-4)

``dropout`` is the residual / embedding dropout (paper P_drop);
``attention_dropout`` (on attention weights) and ``relu_dropout`` (after the
FFN ReLU) default to 0 as in the paper and in our ``small`` set.

APIs (ids int32, pad 0, EOS 1):
  make_batch(config, seed)             -> {"inputs", "targets"} int32 numpy
  model_garden_model(...)              -> a Model Garden Seq2SeqTransformer
  model_garden_loss(logits, labels, smoothing, vocab_size) -> scalar loss
  model_garden_step_fn(config, batch)  -> zero-arg callable, one training step
  model_garden_decoder(config, ...)    -> callable, Model Garden's beam search
  torch_step_fn(config, batch)         -> zero-arg callable, one training step

The harness that times them is ``benchmarks/peers.py``.
"""

import math

# The benchmark setting: a `small`-like model, 170 sentences x 24 tokens per side.
SMALL_CONFIG = {
    "num_layers": 3,
    "d_model": 256,
    "d_ff": 1024,
    "num_heads": 4,
    "vocab_size": 8000,
    "dropout": 0.1,
    "batch": 170,
    "src_len": 24,
    "tgt_len": 24,
}

_DEFAULTS = {
    "attention_dropout": 0.0,
    "relu_dropout": 0.0,
    "label_smoothing": 0.1,
    "learning_rate": 1e-4,
}

PAD_ID = 0
EOS_ID = 1


def full_config(config=None):
  """SMALL_CONFIG, then _DEFAULTS, overridden by `config` (a dict)."""
  cfg = dict(SMALL_CONFIG)
  cfg.update(_DEFAULTS)
  cfg.update(config or {})
  unknown = set(cfg) - set(SMALL_CONFIG) - set(_DEFAULTS)
  if unknown:
    raise ValueError(f"unknown config keys: {sorted(unknown)}")
  if cfg["d_model"] % cfg["num_heads"]:
    raise ValueError("d_model must be divisible by num_heads")
  return cfg


def make_batch(config=None, seed=0):
  """A synthetic batch with no padding (every position is a real token).

  Args:
    config: config dict (batch, src_len, tgt_len, vocab_size used).
    seed: numpy RNG seed.

  Returns:
    {"inputs": int32 [batch, src_len], "targets": int32 [batch, tgt_len]}
    numpy arrays; ids uniform in [3, vocab_size), last position EOS (=1),
    pad = 0 nowhere (the project's convention: pad 0, eos 1, unk 2).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  cfg = full_config(config)
  rng = np.random.default_rng(seed)
  batch = {}
  for key, length in (("inputs", cfg["src_len"]), ("targets", cfg["tgt_len"])):
    ids = rng.integers(3, cfg["vocab_size"], size=(cfg["batch"], length),
                       dtype=np.int32)
    ids[:, -1] = EOS_ID
    batch[key] = ids
  return batch


# ---------------------------------------------------------- Model Garden --


def model_garden_loss(logits, labels, smoothing, vocab_size):
  """official.nlp.tasks.translation's loss (_padded_cross_entropy_loss).

  Smoothed one-hot (1 - eps on the label, eps / (V - 1) elsewhere), softmax
  cross-entropy minus its minimum, summed over non-pad tokens and divided by
  their count. Same code as Model Garden 2.20, minus the length padding (our
  logits and labels have the same length).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  confidence = 1.0 - smoothing
  low_confidence = (1.0 - confidence) / tf.cast(vocab_size - 1, tf.float32)
  soft_targets = tf.one_hot(tf.cast(labels, tf.int32), depth=vocab_size,
                            on_value=confidence, off_value=low_confidence)
  xentropy = tf.nn.softmax_cross_entropy_with_logits(
      logits=logits, labels=soft_targets)
  normalizing_constant = -(
      confidence * tf.math.log(confidence)
      + tf.cast(vocab_size - 1, tf.float32) * low_confidence
      * tf.math.log(low_confidence + 1e-20))
  xentropy -= normalizing_constant
  weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
  return tf.reduce_sum(xentropy * weights) / tf.reduce_sum(weights)


def model_garden_model(config=None, norm_first=False, dropout=None, beam_size=4,
                       alpha=0.6, decode_extra_length=50, eos_id=EOS_ID):
  """Model Garden's ``Seq2SeqTransformer`` with the config's sizes.

  ``TransformerEncoder`` / ``TransformerDecoder`` with ReLU, no biases
  (``use_bias=False``, Model Garden's translation config), LayerNorm epsilon
  1e-6, shared embedding / softmax and sinusoidal positions.

  Args:
    config: config dict (see module docstring).
    norm_first: True for pre-norm (Model Garden's translation task default),
      False for post-norm (the paper's).
    dropout: None for the config's rates (residual / embedding ``dropout``,
      ``attention_dropout``, ``relu_dropout``), or one rate for all three
      (0.0 to decode).
    beam_size, alpha: beam width and GNMT length-penalty exponent of its beam
      search (called with no targets).
    decode_extra_length: output steps of the beam search = source length + this.
    eos_id: end id; an id outside [0, vocab_size) makes every beam run the full
      source length + decode_extra_length steps (equal work for a comparison).

  Returns:
    An unbuilt ``official.nlp.modeling.models.Seq2SeqTransformer``: called on
    {"inputs", "targets"} int32 [batch, length] it returns logits [batch,
    target_length, vocab_size]; on {"inputs"} alone, {"outputs": int32 [batch,
    output_length], "scores"} from its beam search.

  Raises:
    ValueError: from ``full_config``: an unknown config key, or d_model not
      divisible by num_heads.
    ImportError: the peers are not installed (``benchmarks/install_peers.sh``).
  """
  from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top

  cfg = full_config(config)
  rates = ((cfg["dropout"], cfg["attention_dropout"], cfg["relu_dropout"])
           if dropout is None else (dropout,) * 3)
  block = dict(
      num_layers=cfg["num_layers"], num_attention_heads=cfg["num_heads"],
      intermediate_size=cfg["d_ff"], activation="relu", dropout_rate=rates[0],
      attention_dropout_rate=rates[1], intermediate_dropout=rates[2],
      use_bias=False, norm_first=norm_first, norm_epsilon=1e-6)
  # Positional, in Model Garden's order: vocab_size, embedding_width, dropout_rate,
  # padded_decode, decode_max_length, then its output budget (our decode_extra_length), beam_size
  # and alpha.
  return models.Seq2SeqTransformer(
      cfg["vocab_size"], cfg["d_model"], rates[0], False, None, decode_extra_length, beam_size,
      alpha, encoder_layer=models.TransformerEncoder(**block),
      decoder_layer=models.TransformerDecoder(**block), eos_id=eos_id)


def model_garden_step_fn(config=None, batch=None, batches=None):
  """One Model Garden Seq2SeqTransformer training step as a callable.

  Builds ``model_garden_model(config)`` (post-norm, the config's dropout
  rates), ``tf_keras.optimizers.Adam(lr, 0.9, 0.98, 1e-9)`` and a
  ``tf.function`` step (not XLA-compiled, Model Garden's default) computing
  forward, the label-smoothed loss, gradients and the update.

  Args:
    config: config dict (see module docstring).
    batch: {"inputs", "targets"} int32 arrays; default make_batch(config).
    batches: instead of `batch`, a list of such dicts of varying shapes (padded
      real batches, pad id 0), taken in turn, one per call; the step then has a
      [None, None] input signature (one trace for all shapes).

  Returns:
    A zero-arg callable that runs one step, blocks until it is done (fetches
    the loss) and returns the loss (float). The model and optimizer are built
    eagerly here; the first call traces the tf.function (use warm-up calls).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top

  cfg = full_config(config)
  if batch is None:
    batch = make_batch(cfg)
  model = model_garden_model(cfg)
  optimizer = tf_keras.optimizers.Adam(
      learning_rate=cfg["learning_rate"], beta_1=0.9, beta_2=0.98,
      epsilon=1e-9)
  smoothing = cfg["label_smoothing"]
  vocab_size = cfg["vocab_size"]

  signature = [tf.TensorSpec([None, None], tf.int32)] * 2 if batches else None

  @tf.function(input_signature=signature)
  def train_step(inputs, targets):
    with tf.GradientTape() as tape:
      logits = model({"inputs": inputs, "targets": targets}, training=True)
      loss = model_garden_loss(logits, targets, smoothing, vocab_size)
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  feed = [(tf.constant(b["inputs"], tf.int32), tf.constant(b["targets"], tf.int32))
          for b in (batches or [batch])]
  calls = [0]

  def step():
    inputs, targets = feed[calls[0] % len(feed)]
    calls[0] += 1
    return float(train_step(inputs, targets).numpy())

  return step


def model_garden_decoder(config=None, beam_size=4, alpha=0.6, decode_extra_length=50,
                         eos_id=EOS_ID):
  """Model Garden's beam search (``Seq2SeqTransformer`` with no targets) as a callable.

  ``model_garden_model(config)`` (post-norm, no biases, shared embedding /
  softmax), randomly initialized, in one ``tf.function`` with a
  ``[None, None]`` int32 signature (as Model Garden's translation export module
  serves it): Model Garden's own ``sequence_beam_search``, a ``tf.while_loop`` with
  a K/V cache that grows by concatenation (non-padded decode, as on CPU).

  Args:
    config: config dict (see module docstring); dropout is irrelevant here.
    beam_size, alpha: beam width and GNMT length-penalty exponent.
    decode_extra_length: output steps = source length + this.
    eos_id: end id; an id outside [0, vocab_size) makes every beam run the full
      source length + decode_extra_length steps (equal work for a comparison).

  Returns:
    A callable int32 numpy [batch, source_length] -> int32 numpy
    [batch, output_length], the best beam per sentence.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  model = model_garden_model(config, dropout=0.0, beam_size=beam_size, alpha=alpha,
                             decode_extra_length=decode_extra_length, eos_id=eos_id)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
  def search(inputs):
    return model({"inputs": inputs})["outputs"]

  return lambda inputs: search(tf.constant(inputs, tf.int32)).numpy()


# ----------------------------------------------------------------- torch --


def torch_step_fn(config=None, batch=None):
  """One ``torch.nn.Transformer`` training step (eager, CPU) as a callable.

  Model: ``nn.Embedding`` (scaled by sqrt(d_model)) + sinusoidal positions +
  dropout, ``nn.Transformer(batch_first=True, norm_first=False)`` (post-norm;
  torch adds a final LayerNorm to both stacks), output projection tied to
  the embedding. Decoder input = targets shifted right with pad 0; causal
  mask and key-padding masks passed as float additive masks. Loss
  ``nn.CrossEntropyLoss(label_smoothing, ignore_index=0)``; optimizer
  ``torch.optim.Adam(lr, betas=(0.9, 0.98), eps=1e-9)`` with torch's
  default (for-loop) CPU implementation. nn.Transformer applies its one
  ``dropout`` to residuals, attention weights and the FFN inner activation;
  the attention / FFN-inner rates are then set to the config's
  attention_dropout / relu_dropout (0 by default), like the other models.

  Args:
    config: config dict (see module docstring).
    batch: {"inputs", "targets"} int32 arrays; default make_batch(config).

  Returns:
    A zero-arg callable running forward, loss, backward and the Adam update;
    it returns the loss (float) and, eager CPU torch being synchronous, has
    finished all work when it returns.
  """
  import torch  # pylint: disable=g-import-not-at-top
  from torch import nn  # pylint: disable=g-import-not-at-top

  cfg = full_config(config)
  if batch is None:
    batch = make_batch(cfg)
  d, v = cfg["d_model"], cfg["vocab_size"]
  max_len = max(cfg["src_len"], cfg["tgt_len"])

  class TorchSeq2Seq(nn.Module):
    """Embedding + nn.Transformer + tied pre-softmax projection."""

    def __init__(self):
      super().__init__()
      self.embedding = nn.Embedding(v, d, padding_idx=PAD_ID)
      nn.init.normal_(self.embedding.weight, 0.0, d ** -0.5)
      position = torch.arange(max_len, dtype=torch.float32)[:, None]
      inv_freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32)
                           * (-math.log(10000.0) / d))
      pe = torch.zeros(max_len, d)
      pe[:, 0::2] = torch.sin(position * inv_freq)
      pe[:, 1::2] = torch.cos(position * inv_freq)
      self.register_buffer("pe", pe)
      self.dropout = nn.Dropout(cfg["dropout"])
      self.transformer = nn.Transformer(
          d_model=d, nhead=cfg["num_heads"],
          num_encoder_layers=cfg["num_layers"],
          num_decoder_layers=cfg["num_layers"],
          dim_feedforward=cfg["d_ff"], dropout=cfg["dropout"],
          activation="relu", batch_first=True, norm_first=False)
      for layer in self.transformer.encoder.layers:
        layer.self_attn.dropout = cfg["attention_dropout"]
        layer.dropout.p = cfg["relu_dropout"]
      for layer in self.transformer.decoder.layers:
        layer.self_attn.dropout = cfg["attention_dropout"]
        layer.multihead_attn.dropout = cfg["attention_dropout"]
        layer.dropout.p = cfg["relu_dropout"]

    def embed(self, ids):
      x = self.embedding(ids) * math.sqrt(d) + self.pe[:ids.shape[1]]
      return self.dropout(x)

    def forward(self, src, tgt):
      tgt_in = nn.functional.pad(tgt, (1, 0), value=PAD_ID)[:, :-1]
      neg_inf = float("-inf")
      src_pad = torch.zeros(src.shape, dtype=torch.float32).masked_fill(
          src == PAD_ID, neg_inf)
      tgt_pad = torch.zeros(tgt_in.shape, dtype=torch.float32)
      tgt_pad[:, 1:] = tgt_pad[:, 1:].masked_fill(tgt_in[:, 1:] == PAD_ID,
                                                  neg_inf)
      causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
      out = self.transformer(
          self.embed(src), self.embed(tgt_in), tgt_mask=causal,
          src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
          memory_key_padding_mask=src_pad, tgt_is_causal=True)
      return nn.functional.linear(out, self.embedding.weight)

  model = TorchSeq2Seq()
  model.train()
  loss_fn = nn.CrossEntropyLoss(label_smoothing=cfg["label_smoothing"],
                                ignore_index=PAD_ID)
  optimizer = torch.optim.Adam(model.parameters(), lr=cfg["learning_rate"],
                               betas=(0.9, 0.98), eps=1e-9)
  src = torch.as_tensor(batch["inputs"], dtype=torch.long)
  tgt = torch.as_tensor(batch["targets"], dtype=torch.long)

  def step():
    optimizer.zero_grad(set_to_none=True)
    logits = model(src, tgt)
    loss = loss_fn(logits.reshape(-1, v), tgt.reshape(-1))
    loss.backward()
    optimizer.step()
    return float(loss.item())

  return step
