"""Constrained beam search for parsing: every output is a tree over exactly the source words.

A sequence-to-sequence parser may write trees with too few or too many leaves,
unbalanced brackets or a closing label that does not match its phrase
(docs/PARSING.md: an unconstrained model wrote 10.9 leaves for 24.3 words on
average). `TreeConstraint` plugs into
`t2t_repro.decoding.beam_search.search(constraint=...)` and allows, at every
step, only the tokens that keep the output the prefix of a well-formed
linearization (`t2t_repro.parsing.trees.linearize`) over the source words:

* a leaf (the next source word's next piece with ``leaves="word"``; ``XX``
  with ``leaves="xx"``) only inside an open phrase and while words are left;
  inside a word (its next piece does not start with the word-boundary mark
  ``▁``) only that piece;
* ``(LABEL`` only between words, while words are left (no empty phrase),
  below `max_depth` open phrases, after fewer than `max_open_run` opening
  brackets in a row, and while the maximum output length still leaves room to
  finish (the remaining leaves, a closer per open phrase and EOS), so every
  hypothesis can end within it;
* ``)LABEL`` only between words, only the label of the innermost open phrase,
  not right after its ``(LABEL`` (no empty phrase), and the outermost phrase
  only after the last word (one root);
* EOS only after the last word with every phrase closed.

Every other token (pad, unk as an output, pieces of other words) is
forbidden. The model still chooses the structure; the constraint only removes
outputs that `sequence_to_tree` would have to repair, and degenerate ones
(unbounded unary chains). Forbidden tokens get log-probability
-1e9 in the search; scores stay the model's log-probabilities.

Leaf pieces are copied from the source ids, so with ``leaves="word"`` the
target pieces of a word must be its source pieces: true for the joint
sentencepiece vocabulary of tools/parse.py, which splits text on whitespace
before BPE (a word is tokenized the same way wherever it appears).
"""

import tensorflow as tf

from t2t_repro.constants import PAD_ID
from t2t_repro.parsing import trees

SPACE_PIECE = "\u2581"  # sentencepiece's word-boundary mark
LEAVES = ("word", "xx")


def _is_bracket(piece):
  """'▁(NP' / '▁)NP' -> True: a bracket token (`trees.is_bracket`) as one piece; '▁((' is not."""
  body = piece[1:] if piece.startswith(SPACE_PIECE) else piece
  return trees.is_bracket(body) and body[1] not in "()"


class TreeConstraint:
  """Beam-search constraint (protocol of `beam_search.search`) for linearized trees.

  Args:
    pieces: list[str], the vocabulary's pieces by id (sentencepiece
      ``id_to_piece``): bracket tokens must be single pieces ``▁(LABEL`` /
      ``▁)LABEL`` (tools/parse.py `learn_bracket_vocab`).
    leaves: "word" (targets hold the words, `trees.linearize(leaves="word")`)
      or "xx" (the Vinyals et al. placeholder ``XX`` per word; needs the piece
      ``▁XX``).
    eos_id: int, end-of-sequence id (its piece is not a bracket).
    max_depth: int, most phrases open at once (the PTB sample's train
      targets: 28).
    max_open_run: int, most opening brackets in a row, i.e. phrases starting
      at the same word (train targets: 6). Without this bound a weak model
      under the length penalty writes unary loops such as 30 x ``(NX`` before
      one word (seen with `parsing_small` after 4,000 updates), which cost a
      bracket error each and many decoding steps.

  State per hypothesis (rows = batch * beam): ``leaves`` int32 [rows, S] (the
  leaf piece sequence), ``n_leaves`` int32 [rows], ``pos`` int32 [rows] (leaf
  pieces written), ``depth`` int32 [rows] (open phrases), ``stack`` int32
  [rows, max_depth] (closing-token id of each open phrase), ``opened`` bool
  [rows] (the last token opened a phrase), ``run`` int32 [rows] (opening
  brackets in a row at the end), ``left`` int32 [rows] (tokens that may still
  be written, EOS included).

  Raises:
    ValueError: no bracket piece in ``pieces``, an opening bracket without its
      closing piece, ``leaves`` unknown, or ``XX`` missing with leaves="xx".
  """

  def __init__(self, pieces, leaves="word", eos_id=1, max_depth=40, max_open_run=8):
    if leaves not in LEAVES:
      raise ValueError(f"leaves must be one of {LEAVES}, got {leaves!r}")
    index = {piece: i for i, piece in enumerate(pieces)}
    close_of = [0] * len(pieces)
    is_open = [False] * len(pieces)
    is_close = [False] * len(pieces)
    for i, piece in enumerate(pieces):
      if not _is_bracket(piece):
        continue
      body = piece[len(SPACE_PIECE):] if piece.startswith(SPACE_PIECE) else piece
      if body[0] == "(":
        closer = index.get(SPACE_PIECE + ")" + body[1:], index.get(")" + body[1:]))
        if closer is None:
          raise ValueError(f"vocabulary has {piece!r} but no closing piece for it")
        is_open[i], close_of[i] = True, closer
      else:
        is_close[i] = True
    if not any(is_open):
      raise ValueError("the vocabulary has no bracket pieces such as '\u2581(NP' "
                       "(learn it with tools/parse.py's learn_bracket_vocab)")
    self.leaves, self.eos_id = leaves, eos_id
    self.max_depth, self.max_open_run = max_depth, max_open_run
    self.vocab_size = len(pieces)
    self._is_open = tf.constant(is_open)
    self._is_close = tf.constant(is_close)
    self._close_of = tf.constant(close_of, tf.int32)
    self._word_start = tf.constant([p.startswith(SPACE_PIECE) and not _is_bracket(p)
                                    for p in pieces])
    if leaves == "xx":
      if SPACE_PIECE + "XX" not in index:
        raise ValueError("leaves='xx' needs the piece '\u2581XX' in the vocabulary")
      self._xx_id = index[SPACE_PIECE + "XX"]

  def leaf_sequences(self, inputs):
    """The leaf pieces the output must contain, in order.

    Args:
      inputs: int32 [batch, S] source ids, 0-padded, ending with EOS.

    Returns:
      (leaves int32 [batch, S] 0-padded, n_leaves int32 [batch]): the source
      pieces without EOS (leaves="word"), or ``XX`` once per source word,
      i.e. per piece starting with ``▁`` (leaves="xx").
    """
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    real = tf.logical_and(tf.not_equal(inputs, PAD_ID), tf.not_equal(inputs, self.eos_id))
    if self.leaves == "word":
      return tf.where(real, inputs, 0), tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
    starts = tf.logical_and(real, tf.gather(self._word_start, inputs))
    n_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    leaves = tf.where(tf.range(tf.shape(inputs)[1])[None, :] < n_words[:, None],
                      self._xx_id, 0)
    return leaves, n_words

  def start(self, inputs, beam_size, max_lengths):
    """Initial state, one row per hypothesis (see the class docstring).

    Args:
      inputs: int32 [batch, S] source ids.
      beam_size: int.
      max_lengths: int32 [batch], maximum output lengths [tokens, EOS included].
    """
    leaves, n_leaves = self.leaf_sequences(inputs)
    rows = tf.shape(leaves)[0] * beam_size
    return {"leaves": tf.repeat(leaves, beam_size, axis=0),
            "n_leaves": tf.repeat(n_leaves, beam_size, axis=0),
            "left": tf.repeat(max_lengths, beam_size, axis=0),
            "pos": tf.zeros([rows], tf.int32), "depth": tf.zeros([rows], tf.int32),
            "stack": tf.zeros([rows, self.max_depth], tf.int32),
            "opened": tf.zeros([rows], tf.bool), "run": tf.zeros([rows], tf.int32)}

  def allowed(self, state):
    """bool [rows, vocab]: the tokens each hypothesis may write next."""
    pos, depth, n_leaves = state["pos"], state["depth"], state["n_leaves"]
    width = tf.shape(state["leaves"])[1]
    more = pos < n_leaves
    next_leaf = tf.gather(state["leaves"], tf.minimum(pos, width - 1), batch_dims=1)
    between_words = tf.logical_or(tf.logical_not(more), tf.gather(self._word_start, next_leaf))
    inside = depth > 0
    can_leaf = more & inside
    # An opening bracket, then the remaining leaves, depth + 1 closers and EOS must fit.
    room = state["left"] >= n_leaves - pos + depth + 3
    can_open = (more & between_words & (depth < self.max_depth)
                & (state["run"] < self.max_open_run) & room)
    can_close = (between_words & inside & tf.logical_not(state["opened"])
                 & ((depth > 1) | tf.logical_not(more)))
    can_eos = tf.logical_not(more) & tf.logical_not(inside)
    innermost = tf.gather(state["stack"], tf.maximum(depth - 1, 0), batch_dims=1)
    vocab = self.vocab_size

    def one_hot(ids, ok):
      return tf.logical_and(tf.one_hot(ids, vocab, on_value=True, off_value=False), ok[:, None])

    return (tf.logical_and(self._is_open[None, :], can_open[:, None])
            | one_hot(innermost, can_close) | one_hot(next_leaf, can_leaf)
            | one_hot(tf.fill(tf.shape(pos), self.eos_id), can_eos))

  def advance(self, state, tokens):
    """The state after appending ``tokens`` (int32 [rows]) to each hypothesis."""
    opens = tf.gather(self._is_open, tokens)
    closes = tf.gather(self._is_close, tokens)
    leaf = ~opens & ~closes & tf.not_equal(tokens, self.eos_id)
    depth = state["depth"]
    push = opens[:, None] & tf.equal(tf.range(self.max_depth)[None, :],
                                     tf.minimum(depth, self.max_depth - 1)[:, None])
    return dict(state,
                pos=state["pos"] + tf.cast(leaf, tf.int32),
                depth=depth + tf.cast(opens, tf.int32) - tf.cast(closes, tf.int32),
                stack=tf.where(push, tf.gather(self._close_of, tokens)[:, None], state["stack"]),
                opened=opens, run=tf.where(opens, state["run"] + 1, 0),
                left=state["left"] - 1)
