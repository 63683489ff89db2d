r"""Attention heatmaps of one sentence, like the paper's Figures 3-5 (Vaswani et al. 2017).

The command (`t2t-plot-attention`, `python -m t2t_repro.plot_attention`):

  python tools/plot_attention.py --model_dir=runs/base \
      --source="The Law will never be perfect, but its application should be just." \
      --layer=5 --head=0 --output_dir=/tmp/attention

writes three PNGs into --output_dir (layer and head in the file names):

  encoder_self_L{layer}_H{head}.png      rows: source queries, columns: source keys
  decoder_self_L{layer}_H{head}.png      rows: target positions, columns: decoder inputs
  encoder_decoder_L{layer}_H{head}.png   rows: target positions, columns: source keys

--layer counts from 0 (-1: the last layer, the default); --head counts from 0, and
--head=-1 draws every head of the layer side by side. The target is --target, or
else the model's own translation (the project's decoding path,
`t2t_repro.decoding.translator.Translator`, with --beam_size / --alpha /
--decode_extra_length; default hparams). Rows of the decoder plots are labelled with the target piece each
position predicts; the columns of the decoder self-attention with the decoder
inputs, i.e. the target shifted right ("<s>" = the start symbol, id 0). Labels are
the sentencepiece pieces ("▁" marks a word start); EOS is "</s>". The weights are
`Transformer.attention_weights` (a teacher-forced forward pass, no dropout).
"""

import os

from t2t_repro.config import decode as decode_config

KINDS = ("encoder_self", "decoder_self", "encoder_decoder")


def pieces(tokenizer, ids):
  """Token labels: sentencepiece pieces of int ids; 0 -> "<pad>", 1 -> "</s>"."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  processor = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto)
  return [processor.id_to_piece(int(i)) for i in ids]


def render_heatmap(weights, row_labels, col_labels, title, path):
  """Writes one PNG heatmap.

  Args:
    weights: float [heads, rows, cols] attention weights in [0, 1] (one panel per head).
    row_labels: list of str, one per row (queries).
    col_labels: list of str, one per column (keys).
    title: str, figure title; panels get "head h" subtitles when several.
    path: output .png path.
  """
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  heads, rows, cols = weights.shape
  cell = 0.32
  fig, axes = plt.subplots(1, heads, squeeze=False,
                           figsize=(heads * (cols * cell + 1.5) + 0.5, rows * cell + 2.0))
  for h, ax in enumerate(axes[0]):
    image = ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks(range(cols))
    ax.set_xticklabels(col_labels, rotation=90, fontsize=7)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(row_labels if h == 0 else [""] * rows, fontsize=7)
    if heads > 1:
      ax.set_title(f"head {h}", fontsize=8)
  fig.colorbar(image, ax=list(axes[0]), fraction=0.02)
  fig.suptitle(title, fontsize=9)
  fig.savefig(path, dpi=110, bbox_inches="tight")
  plt.close(fig)


def plot_attention(model, tokenizer, source, output_dir, target=None, layer=-1, head=0,
                   config=decode_config.DecodeConfig()):
  """Renders the three attention heatmaps of one sentence.

  Args:
    model: a `Transformer`; tokenizer: its `data.vocab.Tokenizer`.
    source: str source sentence.
    output_dir: folder for the PNGs (created).
    target: str target sentence, or None to use the model's beam-search translation.
    layer: layer index (negative counts from the end).
    head: head index, or -1 for all heads.
    config: `DecodeConfig` of the translation when target is None.

  Returns:
    dict kind -> PNG path, kinds "encoder_self", "decoder_self", "encoder_decoder".

  Raises:
    ValueError: layer or head out of range, empty source.
  """
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.translator import Translator  # pylint: disable=import-outside-toplevel
  if not source.strip():
    raise ValueError("the source sentence is empty")
  num_layers = model.num_layers
  if not -num_layers <= layer < num_layers:
    raise ValueError(f"`layer`={layer} is out of range for {num_layers} layers")
  if not -1 <= head < model.num_heads:
    raise ValueError(f"`head`={head} is out of range for {model.num_heads} heads (-1: all)")
  layer %= num_layers
  if target is None:
    best = Translator(model, tokenizer, config).nbest([source], return_ids=True)[0][0]
    src, tgt = tf.constant([best.source_ids]), tf.constant([best.ids])
  else:
    src = tokenizer.encode(tf.constant([source.strip()])).to_tensor()
    tgt = tokenizer.encode(tf.constant([target.strip()])).to_tensor()
  weights = model.attention_weights(src, tgt)
  src_labels = pieces(tokenizer, src[0].numpy())
  tgt_labels = pieces(tokenizer, tgt[0].numpy())
  input_labels = ["<s>"] + tgt_labels[:-1]
  labels = {"encoder_self": (src_labels, src_labels), "decoder_self": (tgt_labels, input_labels),
            "encoder_decoder": (tgt_labels, src_labels)}
  names = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
           "encoder_decoder": "encoder-decoder attention"}
  os.makedirs(output_dir, exist_ok=True)
  head_name = "all" if head == -1 else str(head)
  paths = {}
  for kind in KINDS:
    w = weights[kind][layer][0].numpy()  # [heads, rows, cols]
    w = w if head == -1 else w[head:head + 1]
    path = os.path.join(output_dir, f"{kind}_L{layer}_H{head_name}.png")
    rows, cols = labels[kind]
    render_heatmap(np.asarray(w, np.float32), rows, cols,
                   f"{names[kind]}, layer {layer}, head {head_name}", path)
    paths[kind] = path
  return paths
