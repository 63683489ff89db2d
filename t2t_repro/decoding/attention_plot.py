r"""Attention heatmaps of one sentence, like the paper's Figures 3-5 (Vaswani et al. 2017).

The command (`t2t-plot-attention`, `python -m t2t_repro.plot_attention`):

  python tools/plot_attention.py --model_dir=runs/base \
      --source="The Law will never be perfect, but its application should be just." \
      --layer=5 --head=1 --output_dir=/tmp/attention

prints the target it plotted and writes three PNGs per layer into --output_dir:

  encoder_self_L{layer}_H{head}.png      rows: source queries, columns: source keys
  decoder_self_L{layer}_H{head}.png      rows: target positions, columns: decoder inputs
  encoder_decoder_L{layer}_H{head}.png   rows: target positions, columns: source keys

Layers and heads count from 1, in the file names, the titles and the flags, as the paper's
"layer 5 of 6" (Figure 3). --layer is one layer (default: the last) or -1 for every layer (a
set of files per layer); --head is one head or -1 for every head of the layer side by side
(one panel per head). The target is --target, or else the model's own translation (the
project's decoding path, `t2t_repro.decoding.translator.Translator`, with --beam_size /
--alpha / --decode_extra_length; default hparams). Rows of the decoder plots are labelled
with the target piece each position predicts; the columns of the decoder self-attention with
the decoder inputs, i.e. the target shifted right ("<s>" = the start symbol, id 0). Labels
are the sentencepiece pieces ("▁" marks a word start); EOS is "</s>". The weights are
`Transformer.attention_weights` (a teacher-forced forward pass, no dropout).
The trainer's TensorBoard images (`training.summaries`) are drawn by `attention_pngs`.
"""

import io
import os

from t2t_repro.config import decode as decode_config

KINDS = ("encoder_self", "decoder_self", "encoder_decoder")
_NAMES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
          "encoder_decoder": "encoder-decoder attention"}
# (rows: queries, columns: keys) of each kind, the axis titles.
_AXES = {"encoder_self": ("queries: source pieces", "keys: source pieces"),
         "decoder_self": ("queries: target pieces (each row predicts its piece)",
                          "keys: decoder inputs (the target shifted right)"),
         "encoder_decoder": ("queries: target pieces (each row predicts its piece)",
                             "keys: source pieces")}


def pieces(tokenizer, ids):
  """Token labels: sentencepiece pieces of int ids; 0 -> "<pad>", 1 -> "</s>"."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  processor = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto)
  return [processor.id_to_piece(int(i)) for i in ids]


def draw_heatmap(weights, row_labels, col_labels, title, axis_titles):
  """One heatmap figure as PNG bytes.

  Args:
    weights: float [heads, rows, cols] attention weights in [0, 1] (one panel per head).
    row_labels: list of str, one per row (queries).
    col_labels: list of str, one per column (keys).
    title: str, figure title; panels get "head h" subtitles (from 1) when several.
    axis_titles: (y title, x title): what the rows and the columns are.

  Returns:
    bytes of a PNG image.
  """
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  heads, rows, cols = weights.shape
  cell = 0.32
  fig, axes = plt.subplots(1, heads, squeeze=False,
                           figsize=(heads * (cols * cell + 1.5) + 0.5, rows * cell + 2.4))
  for h, ax in enumerate(axes[0]):
    image = ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks(range(cols))
    ax.set_xticklabels(col_labels, rotation=90, fontsize=7)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(row_labels if h == 0 else [""] * rows, fontsize=7)
    ax.set_xlabel(axis_titles[1], fontsize=7)
    if h == 0:
      ax.set_ylabel(axis_titles[0], fontsize=7)
    if heads > 1:
      ax.set_title(f"head {h + 1}", fontsize=8)
  fig.colorbar(image, ax=list(axes[0]), fraction=0.02)
  fig.suptitle(title, fontsize=9)
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
  plt.close(fig)
  return buffer.getvalue()


def attention_maps(model, tokenizer, source, target=None, config=decode_config.DecodeConfig()):
  """The attention weights of one sentence pair and their labels.

  Args:
    model: a `Transformer`; tokenizer: its `data.vocab.Tokenizer`.
    source: str source sentence.
    target: str target sentence, or None to use the model's beam-search translation.
    config: `DecodeConfig` of the translation when target is None.

  Returns:
    (target text, {kind: (weights, row labels, column labels)}), weights a list over layers
    of float32 numpy [heads, rows, cols].

  Raises:
    ValueError: an empty source.
  """
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.translator import Translator  # pylint: disable=import-outside-toplevel
  if not source.strip():
    raise ValueError("the source sentence is empty")
  if target is None:
    best = Translator(model, tokenizer, config).nbest([source], return_ids=True)[0][0]
    src, tgt, target = tf.constant([best.source_ids]), tf.constant([best.ids]), best.text
  else:
    src = tokenizer.encode(tf.constant([source.strip()])).to_tensor()
    tgt = tokenizer.encode(tf.constant([target.strip()])).to_tensor()
  weights = model.attention_weights(src, tgt)
  src_labels = pieces(tokenizer, src[0].numpy())
  tgt_labels = pieces(tokenizer, tgt[0].numpy())
  labels = {"encoder_self": (src_labels, src_labels),
            "decoder_self": (tgt_labels, ["<s>"] + tgt_labels[:-1]),
            "encoder_decoder": (tgt_labels, src_labels)}
  return target, {kind: ([np.asarray(w[0].numpy(), np.float32) for w in weights[kind]],
                         *labels[kind]) for kind in KINDS}


def attention_pngs(maps, layer):
  """{kind: PNG bytes} of every head of `layer` (from 1) of `attention_maps`'s maps."""
  out = {}
  for kind in KINDS:
    weights, rows, cols = maps[kind]
    out[kind] = draw_heatmap(weights[layer - 1], rows, cols,
                             f"{_NAMES[kind]}, layer {layer} of {len(weights)}, all heads",
                             _AXES[kind])
  return out


def plot_attention(model, tokenizer, source, output_dir, target=None, layer=None, head=1,
                   config=decode_config.DecodeConfig()):
  """Renders the three attention heatmaps of one sentence for a layer (or every layer).

  Args:
    model: a `Transformer`; tokenizer: its `data.vocab.Tokenizer`.
    source: str source sentence.
    output_dir: folder for the PNGs (created).
    target: str target sentence, or None to use the model's beam-search translation.
    layer: layer number from 1, None for the last, or -1 for every layer.
    head: head number from 1, or -1 for every head side by side.
    config: `DecodeConfig` of the translation when target is None.

  Returns:
    (target text plotted, list of PNG paths: per layer, the kinds "encoder_self",
    "decoder_self", "encoder_decoder" in that order).

  Raises:
    ValueError: layer or head out of range, empty source.
  """
  num_layers, num_heads = model.num_layers, model.num_heads
  layer = num_layers if layer is None else layer
  if not (layer == -1 or 1 <= layer <= num_layers):
    raise ValueError(f"`layer`={layer} is out of range: 1 to {num_layers} (-1: every layer)")
  if not (head == -1 or 1 <= head <= num_heads):
    raise ValueError(f"`head`={head} is out of range: 1 to {num_heads} (-1: every head)")
  target, maps = attention_maps(model, tokenizer, source, target, config)
  os.makedirs(output_dir, exist_ok=True)
  head_name = "all" if head == -1 else str(head)
  paths = []
  for number in range(1, num_layers + 1) if layer == -1 else (layer,):
    for kind in KINDS:
      weights, rows, cols = maps[kind]
      w = weights[number - 1] if head == -1 else weights[number - 1][head - 1:head]
      title = (f"{_NAMES[kind]}, layer {number} of {num_layers}, "
               + ("all heads" if head == -1 else f"head {head} of {num_heads}"))
      path = os.path.join(output_dir, f"{kind}_L{number}_H{head_name}.png")
      with open(path, "wb") as f:
        f.write(draw_heatmap(w, rows, cols, title, _AXES[kind]))
      paths.append(path)
  return target, paths
