"""The Transformer encoder-decoder (Vaswani et al. 2017, §3, Figure 1)."""

import keras
import tensorflow as tf

from t2t_repro.constants import NEG_INF, PAD_ID
from t2t_repro.model.attention import causal_bias, padding_bias
from t2t_repro.config.model import ModelConfig
from t2t_repro.model.embedding import SharedEmbedding
from t2t_repro.model.dropout import Dropout
from t2t_repro.model.layer_norm import LayerNormalization
from t2t_repro.model.layers import MEMORY_KEY, DecoderLayer, EncoderLayer
from t2t_repro.model.position import LearnedPositionEmbedding, SinusoidalPositionEncoding


@keras.saving.register_keras_serializable(package="t2t_repro")
class Transformer(keras.Model):
  """Encoder-decoder Transformer with one shared embedding (§3.4).

  Token conventions: int32 ids, pad = 0, every sequence ends with EOS = 1. The
  decoder input is the target shifted right by one position with 0 as the start
  symbol (tensor2tensor's convention), so `call((inputs, targets))` returns the
  logits that predict `targets` themselves.

  Args:
    config: a `config.model.ModelConfig` (sizes and options), or its fields as keyword
      arguments (`Transformer(vocab_size=..., num_layers=...)`, as `get_config` stores
      them). Its fields are also attributes of the model (`model.d_model`, ...).

  Call args:
    inputs: tuple (source ids int32 [batch, src_len], target ids int32 [batch, tgt_len]).
    training: bool, enables dropout.

  Returns:
    logits float32 [batch, tgt_len, vocab_size].
  """

  def __init__(self, config=None, **kwargs):
    fields = {name: kwargs.pop(name) for name in ModelConfig.field_names() if name in kwargs}
    super().__init__(**kwargs)
    self.config = ModelConfig.of(config) if config is not None else ModelConfig(**fields)
    for name, value in self.config.to_dict().items():
      setattr(self, name, value)
    c = self.config
    self.embedding = SharedEmbedding(c.vocab_size, c.d_model, name="shared_embedding")
    if c.position_encoding == "sinusoid":
      self.position = SinusoidalPositionEncoding(c.d_model, name="position")
    elif c.position_encoding == "learned":
      self.position = LearnedPositionEmbedding(c.max_positions, c.d_model, name="position")
    else:  # "relative": positions enter through the self-attentions only
      self.position = None
    self.embedding_dropout = Dropout(c.dropout)
    # Each layer is also an attribute: tf.train.Checkpoint does not look inside Keras's
    # tracked lists, so layers reachable only through a list would not be saved.
    for i in range(c.num_layers):
      setattr(self, f"encoder_{i}", EncoderLayer(c, name=f"encoder_{i}"))
      setattr(self, f"decoder_{i}", DecoderLayer(c, name=f"decoder_{i}"))
    self.encoder_layers = [getattr(self, f"encoder_{i}") for i in range(c.num_layers)]
    self.decoder_layers = [getattr(self, f"decoder_{i}") for i in range(c.num_layers)]
    self.pre_norm = c.norm_type == "pre"
    if self.pre_norm:
      self.encoder_norm = LayerNormalization(epsilon=1e-6, name="encoder_norm")
      self.decoder_norm = LayerNormalization(epsilon=1e-6, name="decoder_norm")
    # Made last and only when used: the other layers' seeds and a checkpoint's variables
    # are then those of a model without it.
    self.word_dropout_layer = Dropout(c.word_dropout) if c.word_dropout else None
    # True: a search reads and casts the step's weights once (`step_weights`, held in the
    # decoder's state); False: every `decode_step` reads them, so a frozen graph holds them
    # as constants inside the search loop (the LiteRT export: XNNPACK takes constant weights).
    self.step_weights_per_search = True

  @classmethod
  def from_hparams(cls, hparams, **kwargs):
    """Builds (and creates the variables of) a model from a `t2t_repro.config.hparams.HParams`."""
    model = cls(ModelConfig.from_hparams(hparams), **kwargs)
    model.build_variables()
    return model

  def build(self, input_shape=None):
    """Creates every variable (shapes do not depend on `input_shape`) with a dummy pass."""
    if self.built:
      return
    self.built = True  # before the call, so that __call__ does not build again
    ids = tf.constant([[3, 1]], tf.int32)
    self.call((ids, ids), training=False)

  def build_variables(self):
    """Creates every variable eagerly (call before any tf.function or checkpoint restore)."""
    self.build()

  def _embed(self, ids, training, start=0):
    x = self.embedding(ids)
    if training and self.word_dropout_layer is not None:
      # One draw per token: [batch, length, 1] of 0 or 1 / (1 - word_dropout).
      keep = self.word_dropout_layer(tf.ones_like(ids[..., None], x.dtype), training=True)
      x = x * keep
    if self.position is not None:
      x = self.position(x, start=start)
    return self.embedding_dropout(x, training=training)

  def encode(self, inputs, training=False, return_attention_scores=False):
    """Runs the encoder stack.

    Args:
      inputs: int32 [batch, src_len] source ids, 0-padded.
      training: bool.
      return_attention_scores: also return a list (one per layer) of float32
        [batch, h, src_len, src_len] self-attention weights.

    Returns:
      (memory float [batch, src_len, d_model], src_bias float32 [batch, 1, 1, src_len])
      and the weights list if asked for.
    """
    bias = padding_bias(inputs)
    x = self._embed(inputs, training)
    weights = []
    for layer in self.encoder_layers:
      x = layer(x, bias=bias, training=training, return_attention_scores=return_attention_scores)
      if return_attention_scores:
        x, w = x
        weights.append(w)
    if self.pre_norm:
      x = self.encoder_norm(x)
    return (x, bias, weights) if return_attention_scores else (x, bias)

  def decoder_hidden(self, targets, memory, src_bias, training=False, return_attention_scores=False):
    """Runs the decoder stack with teacher forcing (targets shifted right).

    Args:
      targets: int32 [batch, tgt_len] target ids, 0-padded, ending with EOS.
      memory: float [batch, src_len, d_model] from `encode`.
      src_bias: float32 [batch, 1, 1, src_len] from `encode`.
      training: bool.
      return_attention_scores: also return two lists (per layer) of float32 weights,
        self [batch, h, tgt_len, tgt_len] and encoder-decoder [batch, h, tgt_len, src_len].

    Returns:
      float [batch, tgt_len, d_model], the states before the pre-softmax projection
      (and the weight lists if asked for).
    """
    shifted = tf.pad(targets[:, :-1], [[0, 0], [1, 0]], constant_values=PAD_ID)  # start symbol
    x = self._embed(shifted, training)
    self_bias = causal_bias(tf.shape(targets)[1])
    self_weights, memory_weights = [], []
    for layer in self.decoder_layers:
      if return_attention_scores:
        x, _, (sw, mw) = layer(x, memory, self_bias=self_bias, memory_bias=src_bias,
                               return_attention_scores=True)
        self_weights.append(sw)
        memory_weights.append(mw)
      else:
        x, _ = layer(x, memory, self_bias=self_bias, memory_bias=src_bias, training=training)
    if self.pre_norm:
      x = self.decoder_norm(x)
    return (x, self_weights, memory_weights) if return_attention_scores else x

  def logits(self, hidden, kernel=None):
    """Pre-softmax projection with the shared embedding (§3.4): float [..., d_model] -> float32
    [..., V]; `kernel`: E^T already read [d_model, V] (`SharedEmbedding.logits`)."""
    return tf.cast(self.embedding.logits(hidden, kernel), tf.float32)

  def decode(self, targets, memory, src_bias, training=False):
    """Teacher-forced decoder: returns logits float32 [batch, tgt_len, vocab_size]."""
    return self.logits(self.decoder_hidden(targets, memory, src_bias, training))

  def call(self, inputs, training=False):
    source, targets = inputs
    memory, src_bias = self.encode(source, training)
    return self.decode(targets, memory, src_bias, training)

  def attention_weights(self, source, targets):
    """All attention weights for one forward pass (for pictures like the paper's Figures 3-5).

    Args:
      source: int32 [batch, src_len]; targets: int32 [batch, tgt_len].

    Returns:
      dict of lists (one entry per layer) of float32 weights: "encoder_self"
      [batch, h, src_len, src_len], "decoder_self" [batch, h, tgt_len, tgt_len],
      "encoder_decoder" [batch, h, tgt_len, src_len].
    """
    memory, src_bias, enc = self.encode(source, False, return_attention_scores=True)
    _, dec_self, dec_mem = self.decoder_hidden(targets, memory, src_bias, False,
                                               return_attention_scores=True)
    return {"encoder_self": enc, "decoder_self": dec_self, "encoder_decoder": dec_mem}

  def init_cache(self, memory, max_decode_length=None, beam_size=1):
    """Cache for `decode_step`: per layer, empty self-attention keys/values for each
    hypothesis and the encoder-decoder keys/values projected once per sentence.

    Args:
      memory: float [batch, src_len, d_model].
      max_decode_length: None for a growing cache (length 0, one position appended
        per step; `decode_step(..., grow_cache=True)`), or an int T [tokens] for a
        fixed-size cache of T zero positions (static shapes, for XLA).
      beam_size: hypotheses per sentence (int >= 1).

    Returns:
      nested dict of tensors, first axis the hypotheses (b x beam_size rows, the beams
      of a sentence adjacent) or the sentences (b rows):
      {"decoder_i": {"self": {"k": [b * beam_size, h, T, d_k], "v": [b * beam_size, h, T, d_v]},
                     MEMORY_KEY: {"k": [b, h, src_len, d_k], "v": [b, h, src_len, d_v]}}}
      with T = 0 for a growing cache (`layers.MEMORY_KEY` = "memory"). The beams of a
      sentence read its one copy of the encoder-decoder keys/values (see `decode_step`).
    """
    memory = tf.cast(memory, self.compute_dtype)  # bfloat16 under a mixed_bfloat16 policy
    rows = tf.shape(memory)[0] * beam_size
    length = 0 if max_decode_length is None else max_decode_length
    cache = {}
    for layer in self.decoder_layers:
      zeros = lambda depth: tf.zeros([rows, self.num_heads, length, depth], memory.dtype)
      cache[layer.name] = {"self": {"k": zeros(self.d_k), "v": zeros(self.d_v)},
                           MEMORY_KEY: layer.memory_attention.memory_kv(memory)}
    return cache

  def reorder_cache(self, cache, rows, sentences=None):
    """The cache of the hypotheses `rows` (beam search's reorder).

    Args:
      cache: from `init_cache` / `decode_step`: "self" entries one row per hypothesis,
        MEMORY_KEY entries one row per sentence.
      rows: int32 [rows']: the self-attention keys/values of row rows[j] become row j.
      sentences: None, or int32 [sentences']: the sentences whose encoder-decoder
        keys/values to keep, given only when sentences leave the batch (None: kept as
        they are, no copy).

    Returns:
      the reordered cache, same structure.
    """
    def pick(tree, index):
      return tf.nest.map_structure(lambda t: tf.gather(t, index, axis=0), tree)

    def layer(value):
      memory = value[MEMORY_KEY] if sentences is None else pick(value[MEMORY_KEY], sentences)
      return {"self": pick(value["self"], rows), MEMORY_KEY: memory}

    return {name: layer(value) for name, value in cache.items()}

  def step_weights(self, length):
    """The weights of `decode_step`, read once per search (outside its loop) and cast to
    the compute dtype: the embedding and its transpose (the output projection's kernel
    [d_model, vocab_size]), the position encodings of positions 0 .. length - 1
    (int32 scalar `length` [tokens]), and each decoder layer's (`DecoderLayer.step_weights`:
    Q, K and V as one kernel). Returns a nest of tensors (the model interface's state holds
    it)."""
    dtype = self.compute_dtype
    embeddings = tf.cast(self.embedding.embeddings, dtype)
    weights = {"embeddings": embeddings, "output_kernel": tf.transpose(embeddings),
               "layers": {layer.name: layer.step_weights() for layer in self.decoder_layers}}
    if self.position is not None:
      weights["positions"] = self.position.step_table(length, dtype)
    if self.pre_norm:
      weights["decoder_norm"] = self.decoder_norm.step_weights()
    return weights

  def decode_step(self, ids, step, cache, src_bias, grow_cache=False, weights=None):
    """One incremental decoding step with cached keys and values.

    Args:
      ids: int32 [rows], the token at position `step` of the decoder input
        (0 at step 0, else the previous output); rows = sentences x g, the g
        hypotheses (beams) of a sentence adjacent.
      step: int32 scalar position.
      cache: from `init_cache` (or the previous step): "self" entries with `rows`
        rows, MEMORY_KEY entries with `sentences` rows (the hypotheses of a sentence
        attend to its encoder-decoder keys/values, read once for all g).
      src_bias: float32 [sentences, 1, 1, src_len].
      grow_cache: True for a growing cache (`init_cache(memory)`): it then holds
        exactly the `step` previous positions, so no mask is needed and a step
        costs O(step); False for a fixed-size one (positions > step masked).
      weights: `step_weights(length)` with length > every step decoded, read once per
        search; None reads them in this step.

    Returns:
      (logits float32 [rows, vocab_size] for position `step`, updated cache).
      Equal to `decode(...)[:, step]` of the full decoder (tested to 1e-5).
    """
    if weights is None:
      weights = self.step_weights(step + 1)
    x = self._step_embed(ids, step, weights)
    self_bias = None
    if not grow_cache:
      max_len = tf.shape(cache[self.decoder_layers[0].name]["self"]["k"])[2]
      self_bias = tf.where(tf.range(max_len) <= step, 0.0, NEG_INF)[None, None, None, :]
    new_cache = {}
    for layer in self.decoder_layers:
      x, new_cache[layer.name] = layer.step(x, cache[layer.name], weights["layers"][layer.name],
                                            self_bias, src_bias, step, grow_cache)
    if self.pre_norm:
      x = self.decoder_norm.normalize(x, weights["decoder_norm"])
    return self.logits(x, weights["output_kernel"]), new_cache

  def _step_embed(self, ids, step, weights):
    """`_embed` of one position without dropout: int32 [rows] -> [rows, d_model]."""
    x = tf.gather(weights["embeddings"], ids) * tf.cast(self.d_model ** 0.5, self.compute_dtype)
    if self.position is not None:
      x += tf.gather(weights["positions"], self.position.step_row(step))
    return x

  def get_config(self):
    return {**super().get_config(), **self.config.to_dict()}
