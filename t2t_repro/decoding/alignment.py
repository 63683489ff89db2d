"""Source-target alignments from the decoder's encoder-decoder (cross) attention.

For a source x and a returned hypothesis y (sentencepiece pieces, both ending in EOS),
the alignment is the cross-attention of one decoder layer, averaged over its heads, in
one teacher-forced decoder pass over y (recomputed after the search, which is exact: the
weights are those the decoder computes for exactly the returned hypothesis). Row j is
the attention while predicting y_j, as fairseq's `extract_features(alignment_layer=...)`,
whose default layer is the last decoder layer (fairseq's transformer_align architecture
of Garg et al. 2019 uses layer 4 of 6 instead). An ensemble averages its models'
attention (as fairseq's `EnsembleModel`).

Formats (indices 0-based, over sentencepiece pieces; EOS excluded on both sides):
  hard: Pharaoh "i-j" pairs (source index - target index, fast_align / fairseq
    `--print-alignment=hard`), for every target piece j its argmax source piece i;
  soft: per sentence a JSON object {"source": [pieces], "target": [pieces],
    "alignment": [[weight of source i for target j] for each target j]} (one line
    of a JSON-lines file; rows are the attention weights over the non-EOS pieces,
    not renormalized).
"""

import json

import numpy as np
import sentencepiece as spm
import tensorflow as tf

from t2t_repro.constants import EOS_ID
from t2t_repro.data import batching
from t2t_repro.config.decode import ALIGNMENT_KINDS
_CHUNK = 32  # sentence pairs per teacher-forced pass


def _members(model):
  return getattr(model, "models", [model])


def check_layer(model, layer):
  """The decoder layer index to use: `layer` (negative counts from the end, -1 = last).

  Raises:
    ValueError: a model of `model` (one or an ensemble) has no such decoder layer.
  """
  for member in _members(model):
    if not -member.num_layers <= layer < member.num_layers:
      raise ValueError(f"`alignment_layer`={layer}: the model has {member.num_layers} "
                       f"decoder layers (0..{member.num_layers - 1}, or -1 for the last)")
  return layer


def cross_attention(model, sources, targets, layer=-1):
  """Head-averaged encoder-decoder attention of one decoder layer, teacher-forced.

  Args:
    model: a `Transformer` or an `Ensemble` (its models' weights are averaged).
    sources: int32 [batch, src_len], 0-padded; targets: int32 [batch, tgt_len], 0-padded.
    layer: decoder layer index (negative from the end).

  Returns:
    float32 numpy [batch, tgt_len, src_len]; rows sum to 1 over the source tokens.
  """
  weights = [tf.reduce_mean(tf.cast(m.attention_weights(sources, targets)["encoder_decoder"][layer],
                                    tf.float32), 1) for m in _members(model)]
  return tf.reduce_mean(tf.stack(weights), 0).numpy()


def _drop_eos(ids):
  return ids[:-1] if len(ids) and ids[-1] == EOS_ID else ids


def sentence_weights(model, pairs, layer=-1):
  """Alignment weights of (source ids, target ids) pairs, EOS rows and columns removed.

  Args:
    model: as `cross_attention`.
    pairs: list of (source int32 [S] ending with EOS, target int32 [T]).
    layer: decoder layer index.

  Returns:
    list of float32 numpy [T', S'] (T', S': the lengths without EOS).
  """
  out = []
  for start in range(0, len(pairs), _CHUNK):
    chunk = pairs[start:start + _CHUNK]
    sources = batching.pad_rows([s for s, _ in chunk])
    targets = batching.pad_rows([t for _, t in chunk])
    weights = cross_attention(model, sources, targets, layer)
    for row, (source, target) in enumerate(chunk):
      out.append(weights[row, :len(_drop_eos(target)), :len(_drop_eos(source))])
  return out


def hard_alignment(weights):
  """float [T', S'] -> "i-j" Pharaoh pairs (argmax source i for every target j), by j."""
  if weights.size == 0:
    return ""
  return " ".join(f"{i}-{j}" for j, i in enumerate(np.argmax(weights, axis=1)))


def soft_alignment(weights, source_pieces, target_pieces):
  """One JSON line {"source", "target", "alignment"} (weights rounded to 1e-4)."""
  return json.dumps({"source": source_pieces, "target": target_pieces,
                     "alignment": np.round(weights.astype(float), 4).tolist()},
                    ensure_ascii=False)


def alignment_lines(translator, nbest, kind, layer=-1):
  """The alignment line of every n-best hypothesis, in the order of `format_nbest`.

  Args:
    translator: the `Translator` that decoded the lines.
    nbest: its `nbest(..., return_ids=True)` result (`Hypothesis` tuples, each with the
      encoded source it was decoded from: the sources are not encoded again).
    kind: "hard" or "soft" (`ALIGNMENT_KINDS`).
    layer: decoder layer index.

  Returns:
    list of str, one per hypothesis (blank input lines: "" hard, an empty soft object).
  """
  pairs = [(hyp.source_ids, hyp.ids) for hyps in nbest for hyp in hyps]
  weights = sentence_weights(translator.model, pairs, layer)
  if kind == "hard":
    return [hard_alignment(w) for w in weights]
  pieces = spm.SentencePieceProcessor(model_proto=translator.tokenizer.model_proto)
  return [soft_alignment(w, pieces.id_to_piece(_drop_eos(s).tolist()),
                         pieces.id_to_piece(_drop_eos(t).tolist()))
          for w, (s, t) in zip(weights, pairs)]
