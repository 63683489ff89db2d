"""Beam search with a length penalty and early termination (Vaswani et al. 2017, §6.1).

The paper decodes with beam size 4, length penalty alpha = 0.6 and a maximum
output length of input length + 50, "terminating early when possible". The
score of a hypothesis Y (token ids ending with EOS) is

  score(Y) = log P(Y | X) / lp(Y),   lp(Y) = ((5 + |Y|) / 6) ** alpha

(GNMT length penalty, Wu et al. 2016, eq. 14; |Y| counts the EOS token, as in
tensor2tensor). Only the length penalty is used, no coverage penalty.

Algorithm (tensor2tensor `beam_search.py` structure: fixed-size "alive" and
"finished" beams in one `tf.while_loop`, the model's fixed-size cache reordered
with `tf.nest.map_structure` + `tf.gather` on axis 0, skipping the encoder-decoder
keys/values, which are equal for all beams of a sentence). Per step and sentence:

1. Every alive hypothesis is extended by every token: beam_size x V candidates,
   ranked by log-probability (all have the same length, hence the same lp).
2. Candidates ending in EOS that rank among the best `beam_size` candidates
   are *finalized*: merged into the finished beam, which keeps the
   `beam_size` best by length-penalized score (fairseq / OpenNMT rule;
   tensor2tensor looks at the best 2 x beam_size).
3. The alive beam becomes the best `beam_size` candidates not ending in EOS.
4. The sentence is done when (a) it has `beam_size` finished hypotheses
   (fairseq), (b) it reached its maximum length, or (c) early termination
   (tensor2tensor's bound): no alive hypothesis can beat the `n_best`-th
   finished one (with n_best = 1: the best finished one). Log-probabilities
   only decrease as a hypothesis grows and lp grows with length (alpha >= 0),
   so best_alive_log_prob / lp(max_length) bounds every future score; (c) is
   exact: it never changes the returned n-best list (tested).

Rule 2 and 4a make beam size 1 exactly greedy argmax decoding (tested); with a
beam at least as wide as the number of candidates it is exhaustive search
(tested against enumeration). A done sentence is frozen while the others in
its batch go on, so batching and padding do not change any result (tested).
With the growing cache a done sentence also leaves the batch at once: its hypotheses
go to the outputs and the loop continues with the other rows only (the removal is
folded into the per-step cache reorder), which on real batches avoids most of the
decoder work (3.1x less CPU on Multi30k test sentences, docs/BENCHMARKS.md section 6).
If a sentence has fewer than `n_best` finished hypotheses at its maximum length,
its best unfinished (truncated, no EOS) hypotheses fill the list, scored with
lp(max_length) (tensor2tensor returns the alive beam in that case too).

Constrained decoding: an optional `constraint` object restricts the tokens each
hypothesis may take next (e.g. `t2t_repro.parsing.constraint.TreeConstraint`:
balanced brackets over exactly the source words). Forbidden tokens get log-probability
NEG_INF before ranking; allowed ones keep the model's log-probability (no renormalisation,
so scores stay log P(Y|X) under the model). The protocol, all tensors with one row per
hypothesis (batch * beam_size rows, the beams of a sentence adjacent):
  `start(inputs, beam_size, max_lengths)` -> state, a nest of tensors
    [batch * beam_size, ...] (max_lengths: int32 [batch], tokens, EOS included);
  `allowed(state)` -> bool [batch * beam_size, vocab];
  `advance(state, tokens)` -> the state after appending tokens (int32 [batch * beam_size]).
The search reorders the state with the beams (tf.gather on axis 0), like the cache.

One search, `search(...)`, builds the graph; everything decodes through it. The
`decoding.translator.Translator` (the translate command, dev BLEU, the parser, the
SavedModel) calls it from its own tf.function; `beam_search(model, inputs, ...)` runs it
eagerly on one padded batch for tests and benchmarks, through a `BeamSearchDecoder`
(a tf.Module with one `tf.function` of fixed input signature, optionally padded to a
static length and compiled with XLA). Greedy decoding is beam_size=1; the uncached
reference is cached=False (the full decoder over the whole prefix at every step).
"""

import typing
import weakref

import tensorflow as tf

from t2t_repro.constants import EOS_ID, NEG_INF, PAD_ID
from t2t_repro.decoding import model_interface
from t2t_repro.decoding.top_k import block_top_k
from t2t_repro.model.attention import non_pad_lengths

# NEG_INF is the log-probability of impossible hypotheses (tensor2tensor uses -1e7); real
# log-probabilities of a hypothesis are many orders of magnitude larger.
_VALID = NEG_INF / 2


def length_penalty(length, alpha):
  """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14).

  Args:
    length: |Y| [tokens, EOS included]; a Python number or a tensor.
    alpha: exponent >= 0 (the paper: 0.6; 0 disables the penalty).

  Returns:
    float32 tensor of the shape of `length` (a float for Python numbers).
  """
  if isinstance(length, (int, float)) and isinstance(alpha, (int, float)):
    return ((5.0 + length) / 6.0) ** alpha
  return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def default_max_decode_length(inputs, extra=50):
  """Per-sentence maximum output length: source length + `extra` (§6.1: input + 50).

  Args:
    inputs: int32 [batch, src_len] source ids, 0-padded.
    extra: int, decode_extra_length [tokens].

  Returns:
    int32 [batch]: number of non-pad source tokens (EOS included) + extra.
  """
  return non_pad_lengths(inputs) + extra


class BeamState(typing.NamedTuple):
  """The search state of each sentence still decoded (b of them), a `tf.while_loop` variable.

  Also the form of the results (one row per sentence of the batch).
  """
  done: tf.Tensor             # bool [b]: frozen (rule 4)
  max_lengths: tf.Tensor      # int32 [b] [tokens, EOS included]
  alive_seq: tf.Tensor        # int32 [b, k, T], 0 after the last written position
  alive_log_probs: tf.Tensor  # float32 [b, k], NEG_INF for impossible hypotheses
  finished_seq: tf.Tensor     # int32 [b, k, T], ending with EOS
  finished_scores: tf.Tensor  # float32 [b, k] log P / lp, descending, NEG_INF when empty
  steps: tf.Tensor            # int32 [b], decoding steps run


class _LoopState(typing.NamedTuple):
  i: tf.Tensor           # int32 scalar, the position decoded next
  rows: tf.Tensor        # int32 [b], the sentence (row of the batch) of each active entry
  active: BeamState      # the b sentences still decoded
  results: BeamState     # the whole batch; a sentence's entry is written when it leaves
  model_state: object    # the model interface's state, b * k rows
  constraint_state: object
  prev_ids: tf.Tensor    # int32 [rows of model_state], the decoder input at position i


class _Candidates(typing.NamedTuple):
  """The best 2k one-token extensions of the alive beams, [b, 2k] each, best first."""
  log_probs: tf.Tensor
  tokens: tf.Tensor
  beams: tf.Tensor
  is_eos: tf.Tensor


class _Search:
  """The loop body's steps (rules 1-4 of the module docstring); see `search` for the args."""

  def __init__(self, decoder, beam_size, n_best, alpha, eos_id, early_stop, compact, max_len,
               constraint):
    self.decoder, self.k, self.n_best, self.alpha = decoder, beam_size, n_best, alpha
    self.eos_id, self.early_stop, self.compact = eos_id, early_stop, compact
    self.constraint = constraint
    self.vocab = decoder.vocab_size
    self.per_hypothesis = min(2 * beam_size, self.vocab)
    self.num_candidates = min(2 * beam_size, beam_size * self.per_hypothesis)
    self.positions = tf.range(max_len)

  def at_position(self, i):
    """bool [1, 1, T]: position i (the mask of `write`, made once per step)."""
    return tf.reshape(tf.equal(self.positions, i), [1, 1, -1])

  @staticmethod
  def write(seqs, at_i, tokens):
    """seqs [b, k, T] with tokens [b, k] written at the position `at_i` marks."""
    return tf.where(at_i, tokens[:, :, None], seqs)

  def grow_alive(self, active, i, model_state, constraint_state, prev_ids):
    """Rule 1: one decoder step on prev_ids (the decoder input at position i); the best 2k
    of the k x V one-token extensions."""
    k = self.k
    log_probs, model_state = self.decoder.step(prev_ids, i, model_state)
    if self.compact:
      # Position 0 is decoded once per sentence (its k beams would all compute the same
      # step); its log-probabilities are repeated for the k beams, of which only beam 0 is
      # alive, and the first reorder expands the model state to k rows per sentence.
      log_probs = tf.cond(tf.equal(i, 0), lambda: tf.repeat(log_probs, k, axis=0),
                          lambda: log_probs)
    if self.constraint is not None:
      log_probs = tf.where(self.constraint.allowed(constraint_state), log_probs, NEG_INF)
    # Two top-k's, exact: the best 2k of the k x V extensions are among the best 2k of each
    # hypothesis's V (taken by blocks, `top_k.block_top_k`), and ties keep the one-top-k
    # order (beam first, then token id).
    n = self.per_hypothesis
    row_log_probs, row_tokens = (tf.reshape(t, [-1, k, n]) for t in
                                 block_top_k(tf.reshape(log_probs, [-1, self.vocab]), n))
    candidates = active.alive_log_probs[:, :, None] + row_log_probs
    top_log_probs, top_index = tf.math.top_k(tf.reshape(candidates, [-1, k * n]),
                                             self.num_candidates)
    top_tokens = tf.gather(tf.reshape(row_tokens, [-1, k * n]), top_index, batch_dims=1)
    return _Candidates(top_log_probs, top_tokens, top_index // n,
                       tf.equal(top_tokens, self.eos_id)), model_state

  def new_finished(self, active, top, i, at_i):
    """Rule 2: EOS candidates among the best k merge into the finished beam (best k kept)."""
    k = self.k
    new_finished = tf.logical_and(top.is_eos[:, :k], top.log_probs[:, :k] > _VALID)
    new_seq = self.write(tf.gather(active.alive_seq, top.beams[:, :k], batch_dims=1), at_i,
                         top.tokens[:, :k])
    new_scores = tf.where(new_finished, top.log_probs[:, :k] / length_penalty(i + 1, self.alpha),
                          NEG_INF)
    merged_scores = tf.concat([active.finished_scores, new_scores], 1)  # old first: ties keep old
    merged_scores, merged_index = tf.math.top_k(merged_scores, k)
    merged_seq = tf.gather(tf.concat([active.finished_seq, new_seq], 1), merged_index,
                           batch_dims=1)
    return merged_seq, merged_scores

  def new_alive(self, active, top, at_i):
    """Rule 3: the best k candidates not ending in EOS (top_k keeps the candidates' order
    on ties, as one top-k over all of them would). Returns (seq, log_probs, beams, tokens)."""
    alive_lp, pick = tf.math.top_k(tf.where(top.is_eos, 2.0 * NEG_INF, top.log_probs), self.k)
    beams = tf.gather(top.beams, pick, batch_dims=1)
    tokens = tf.gather(top.tokens, pick, batch_dims=1)
    seq = self.write(tf.gather(active.alive_seq, beams, batch_dims=1), at_i, tokens)
    return seq, alive_lp, beams, tokens

  def advance(self, active, i, alive, finished):
    """Done sentences stay frozen; the others take the new beams; rule 4 marks the done."""
    keep = active.done[:, None]
    alive_seq = tf.where(keep[:, :, None], active.alive_seq, alive[0])
    alive_log_probs = tf.where(keep, active.alive_log_probs, alive[1])
    finished_seq = tf.where(keep[:, :, None], active.finished_seq, finished[0])
    finished_scores = tf.where(keep, active.finished_scores, finished[1])
    full = finished_scores[:, -1] > _VALID
    at_max = i + 1 >= active.max_lengths
    no_alive = alive_log_probs[:, 0] <= _VALID
    done = active.done | full | at_max | no_alive
    if self.early_stop:
      bound = alive_log_probs[:, 0] / length_penalty(active.max_lengths, self.alpha)
      nth = finished_scores[:, self.n_best - 1]
      done = done | ((nth > _VALID) & (nth > bound))
    return BeamState(done, active.max_lengths, alive_seq, alive_log_probs, finished_seq,
                     finished_scores, active.steps + tf.cast(tf.logical_not(active.done), tf.int32))

  def body(self, loop):
    """One position for every active sentence: rules 1-4, then the state follows the beams."""
    top, model_state = self.grow_alive(loop.active, loop.i, loop.model_state,
                                       loop.constraint_state, loop.prev_ids)
    at_i = self.at_position(loop.i)
    finished = self.new_finished(loop.active, top, loop.i, at_i)
    alive_seq, alive_lp, alive_beam, alive_tokens = self.new_alive(loop.active, top, at_i)
    active = self.advance(loop.active, loop.i, (alive_seq, alive_lp), finished)
    b = tf.shape(active.done)[0]
    beam_rows = (tf.range(b) * self.k)[:, None] + alive_beam  # [b, k] rows of the new beams
    loop = loop._replace(active=active)
    if self.compact:
      # The model state's rows: one per sentence after position 0 (see grow_alive).
      state_rows = tf.where(tf.equal(loop.i, 0), beam_rows // self.k, beam_rows)
      loop, beam_rows, alive_tokens, model_state = self.leave_batch(
          loop, beam_rows, state_rows, alive_tokens, model_state)
    else:
      model_state = self.decoder.reorder(model_state, tf.reshape(beam_rows, [-1]))
    constraint_state = loop.constraint_state
    if self.constraint is not None:
      constraint_state = self.constraint.advance(
          tf.nest.map_structure(lambda t: tf.gather(t, tf.reshape(beam_rows, [-1]), axis=0),
                                constraint_state),
          tf.reshape(alive_tokens, [-1]))
    # The decoder input at position i + 1 of each hypothesis: its token at i.
    return loop._replace(i=loop.i + 1, model_state=model_state, constraint_state=constraint_state,
                         prev_ids=tf.reshape(alive_tokens, [-1]))

  def leave_batch(self, loop, beam_rows, state_rows, alive_tokens, model_state):
    """Sentences that are done go to the results and leave the active batch; the model
    state is reordered with the beams (its rows `state_rows` [b, k] become the new beams)
    and, when some left, with the remaining sentences. A step where none is done costs the
    reorder alone (one branch of a `tf.cond`)."""
    done = loop.active.done

    def leave():
      results = tf.nest.map_structure(
          lambda out, x: tf.tensor_scatter_nd_update(
              out, tf.boolean_mask(loop.rows, done)[:, None], tf.boolean_mask(x, done)),
          loop.results, loop.active)
      stay = tf.cast(tf.reshape(tf.where(tf.logical_not(done)), [-1]), tf.int32)
      kept = tf.nest.map_structure(lambda x: tf.gather(x, stay),
                                   (loop.rows, loop.active, beam_rows, alive_tokens))
      rows = tf.reshape(tf.gather(state_rows, stay), [-1])
      return kept + (results, self.decoder.reorder(model_state, rows, stay))

    def stay_all():
      return (loop.rows, loop.active, beam_rows, alive_tokens, loop.results,
              self.decoder.reorder(model_state, tf.reshape(state_rows, [-1])))

    rows, active, beam_rows, alive_tokens, results, model_state = tf.cond(
        tf.reduce_any(done), leave, stay_all)
    return (loop._replace(rows=rows, active=active, results=results), beam_rows, alive_tokens,
            model_state)

  def n_best_lists(self, results):
    """The finished hypotheses (sorted), then unfinished ones if too few finished:
    (ids int32 [batch, n_best, T], scores float32 [batch, n_best], -inf when missing)."""
    num_finished = tf.reduce_sum(tf.cast(results.finished_scores > _VALID, tf.int32),
                                 axis=1)[:, None]
    slot = tf.range(self.n_best)[None, :]
    pick = tf.where(slot < num_finished, slot, self.k + slot - num_finished)
    alive_scores = results.alive_log_probs / length_penalty(results.max_lengths,
                                                            self.alpha)[:, None]
    scores = tf.gather(tf.concat([results.finished_scores, alive_scores], 1), pick, batch_dims=1)
    ids = tf.gather(tf.concat([results.finished_seq, results.alive_seq], 1), pick, batch_dims=1)
    valid = scores > _VALID
    return tf.where(valid[:, :, None], ids, PAD_ID), tf.where(valid, scores, float("-inf"))


def search(model, inputs, max_decode_length, alpha, beam_size=4, n_best=None, eos_id=EOS_ID,
           early_stop=True, static_max_length=None, cached=True, return_steps=False,
           constraint=None):
  """Builds the beam search graph (call inside a tf.function, or eagerly).

  Speed (no result depends on it, tested): finished sentences leave the batch (not with
  `static_max_length`: XLA needs static shapes); one set of 2 x beam_size candidates
  serves rules 2 and 3 (at most beam_size of them end in EOS, one per hypothesis), taken
  in two top-k's (each hypothesis's best 2 x beam_size, by blocks, then the best of
  those); the encoder-decoder keys/values are projected once per sentence; position 0 is
  decoded once per sentence, not per beam (not with `static_max_length`).
  docs/BENCHMARKS.md section 9 measures each.
  The settings' ranges are checked by `config.decode.DecodeConfig`, not here.

  Args:
    model: a `Transformer`, or an object implementing the model interface itself
      (`decoding.model_interface.decoder_for`, e.g. an ensemble).
    inputs: int32 [batch, src_len] source ids, 0-padded, each ending with EOS.
    max_decode_length: int32 [batch] (or scalar) maximum output length per
      sentence [tokens, EOS included].
    alpha: float32 scalar length-penalty exponent, >= 0.
    beam_size: int k >= 1 (static).
    n_best: int, hypotheses returned per sentence, 1 <= n_best <= beam_size
      (default beam_size); also the rank used by early termination.
    eos_id: int end-of-sequence id.
    early_stop: bool, use the bound of rule 4c (never changes the results).
    static_max_length: None, or an int T: the padded, static output length
      (every tensor has a static size, as XLA needs); max_decode_length is
      clipped to it. Finished sentences then stay in the batch (frozen).
    cached: False recomputes the full decoder over the whole prefix at every step.
    return_steps: also return int32 [batch], the decoding steps run per sentence
      (shows where early termination stopped it).
    constraint: None, or an object with `start` / `allowed` / `advance` (see the
      module docstring) that restricts the next token of every hypothesis.

  Returns:
    ids: int32 [batch, n_best, T], best first, 0-padded after EOS; T is
      static_max_length, else max(max_decode_length).
    scores: float32 [batch, n_best], log P / lp; -inf for missing hypotheses
      (only when fewer than n_best token sequences exist).
    steps: with return_steps.
  """
  k, n_best = beam_size, n_best or beam_size
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  batch = tf.shape(inputs)[0]
  max_lengths = tf.broadcast_to(tf.cast(max_decode_length, tf.int32), [batch])
  if static_max_length is not None:
    max_len = int(static_max_length)
    max_lengths = tf.minimum(max_lengths, max_len)
    seq_shape = [batch, k, max_len]
  else:
    max_len = tf.reduce_max(tf.concat([max_lengths, [1]], 0))
    seq_shape = tf.stack([batch, k, max_len])
  decoder = model_interface.decoder_for(model, cached, fixed_size=static_max_length is not None)
  steps = _Search(decoder, k, n_best, tf.cast(alpha, tf.float32), eos_id, early_stop,
                  static_max_length is None, max_len, constraint)
  # Only beam 0 is real at the start; the others are copies that must not be chosen.
  initial_log_probs = tf.constant([[0.0] + [NEG_INF] * (k - 1)])
  active = BeamState(max_lengths <= 0, max_lengths, tf.zeros(seq_shape, tf.int32),
                     tf.tile(initial_log_probs, [batch, 1]), tf.zeros(seq_shape, tf.int32),
                     tf.fill([batch, k], NEG_INF), tf.zeros([batch], tf.int32))
  state_rows = 1 if steps.compact else k  # per sentence at position 0
  loop = _LoopState(tf.constant(0), tf.range(batch), active, active,
                    decoder.start(inputs, state_rows, max_len),
                    () if constraint is None else constraint.start(inputs, k, max_lengths),
                    tf.fill([batch * state_rows], PAD_ID))  # the start symbol
  # Shapes keep their rank; the batch (and the growing cache's length) may vary.
  invariants = tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), loop)
  loop = tf.while_loop(
      lambda loop: tf.logical_and(loop.i < max_len, tf.logical_not(tf.reduce_all(loop.active.done))),
      lambda loop: (steps.body(loop),), (loop,), shape_invariants=(invariants,),
      maximum_iterations=max_len)[0]
  # Sentences still in the batch (all of them without compaction) go to the outputs.
  results = tf.nest.map_structure(
      lambda out, x: tf.tensor_scatter_nd_update(out, loop.rows[:, None], x),
      loop.results, loop.active)
  ids, scores = steps.n_best_lists(results)
  return (ids, scores, results.steps) if return_steps else (ids, scores)


class BeamSearchDecoder(tf.Module):
  """Beam search over one model as a `tf.function` with a fixed input signature.

  Batches of any shape reuse one trace (with `jit_compile=True`, XLA still
  compiles once per distinct concrete input shape: pad batches to a few fixed
  shapes to bound the number of programs). Holds the model weakly: keep a
  reference to the model while using the decoder.

  Args:
    model: a `Transformer`.
    beam_size, n_best, eos_id, early_stop: see `search` (static).
    static_max_length: None (the output length follows the batch), or an int T
      for fixed-size padded decoding (static shapes, needed by XLA).
    jit_compile: compile with XLA; requires static_max_length.
    cached: False for the uncached reference decoder.
    constraint: None, or a constraint object (see `search`), held by the decoder.

  Call args:
    inputs: int32 [batch, src_len].
    max_decode_length: int32 [batch] (or scalar, broadcast).
    alpha: float32 scalar.

  Returns:
    (ids int32 [batch, n_best, T], scores float32 [batch, n_best]), see `search`.

  Raises:
    ValueError: jit_compile without static_max_length.
  """

  def __init__(self, model, beam_size=4, n_best=None, eos_id=EOS_ID, early_stop=True,
               static_max_length=None, jit_compile=False, cached=True, constraint=None,
               name=None):
    super().__init__(name=name)
    if jit_compile and static_max_length is None:
      raise ValueError("jit_compile=True needs static_max_length (XLA needs static shapes)")
    self._model_ref = weakref.ref(model)  # cached decoders must not keep models alive
    self.beam_size, self.n_best = beam_size, n_best or beam_size
    options = dict(beam_size=beam_size, n_best=self.n_best, eos_id=eos_id, early_stop=early_stop,
                   static_max_length=static_max_length, cached=cached, constraint=constraint)
    signature = [tf.TensorSpec([None, None], tf.int32, name="inputs"),
                 tf.TensorSpec([None], tf.int32, name="max_decode_length"),
                 tf.TensorSpec([], tf.float32, name="alpha")]

    def run(inputs, max_decode_length, alpha):
      return search(self.model, inputs, max_decode_length, alpha, **options)

    self._run = tf.function(run, input_signature=signature, jit_compile=jit_compile or None,
                            autograph=False)

  @property
  def model(self):
    model = self._model_ref()
    if model is None:
      raise RuntimeError("the model of this BeamSearchDecoder was deleted (it is held weakly)")
    return model

  def __call__(self, inputs, max_decode_length, alpha=0.6):
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    lengths = tf.broadcast_to(tf.cast(max_decode_length, tf.int32), tf.shape(inputs)[:1])
    return self._run(inputs, lengths, tf.constant(alpha, tf.float32))


_DECODERS = weakref.WeakKeyDictionary()


def beam_search(model, inputs, beam_size=4, alpha=0.6, max_decode_length=None, eos_id=EOS_ID,
                n_best=None, early_stop=True, decode_extra_length=50, cached=True,
                static_max_length=None, jit_compile=False, constraint=None):
  """Beam search of one padded batch, eagerly: `search` in a `BeamSearchDecoder` kept per
  (model, options), so repeated calls do not retrace. Greedy decoding is beam_size=1
  (exactly argmax, module docstring); the uncached reference is cached=False.

  Args:
    model: a `Transformer` (or an object with the model interface, e.g. an `Ensemble`).
    inputs: int32 [batch, src_len] source ids, 0-padded, ending with EOS.
    beam_size: k (paper 4).
    alpha: length-penalty exponent >= 0 (paper 0.6).
    max_decode_length: None (per sentence: source length + decode_extra_length),
      an int for the whole batch, or int32 [batch] per sentence [tokens, EOS included].
    eos_id: end-of-sequence id.
    n_best: hypotheses returned per sentence (default beam_size).
    early_stop: stop a sentence once no alive hypothesis can beat its n_best-th
      finished one (exact; False only for tests and comparisons).
    decode_extra_length: see max_decode_length (paper 50) [tokens].
    cached: False runs the full decoder over the whole prefix at every step (O(T^2)
      decoder work instead of O(T); the reference for tests and benchmarks).
    static_max_length, jit_compile: fixed-size padded decoding / XLA, see
      `BeamSearchDecoder`.
    constraint: None, or an object restricting the next tokens (see `search`).

  Returns:
    ids: int32 [batch, n_best, T], best first; a hypothesis ends with EOS and is
      0-padded (an unfinished one, cut at its maximum length, has no EOS).
    scores: float32 [batch, n_best], log P(Y|X) / lp(Y), descending.

  Raises:
    ValueError: jit_compile without static_max_length.
  """
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  if max_decode_length is None:
    max_decode_length = default_max_decode_length(inputs, decode_extra_length)
  options = dict(beam_size=beam_size, n_best=n_best, eos_id=eos_id, early_stop=early_stop,
                 cached=cached, static_max_length=static_max_length, jit_compile=jit_compile,
                 constraint=constraint)
  per_model = _DECODERS.setdefault(model, {})
  key = tuple(sorted(options.items()))
  if key not in per_model:
    per_model[key] = BeamSearchDecoder(model, **options)
  return per_model[key](inputs, max_decode_length, alpha)
