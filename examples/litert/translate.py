"""Translates lines of stdin with a LiteRT export (`python -m t2t_repro.export --format=tflite`)
using only LiteRT, sentencepiece and numpy: no TensorFlow, no t2t_repro.

  python examples/litert/translate.py runs/litert/1 [--greedy] < input.en
"""

import json
import os
import sys

import numpy as np
import sentencepiece as spm
from ai_edge_litert.interpreter import Interpreter


def main(folder, greedy=False):
  with open(os.path.join(folder, "decoding.json"), encoding="utf-8") as f:
    decoding = json.load(f)
  pieces = spm.SentencePieceProcessor(model_file=os.path.join(folder, "sentencepiece.model"))
  search = Interpreter(model_path=os.path.join(folder, "model.tflite"), num_threads=2)
  search = search.get_signature_runner("greedy" if greedy else "beam_search")
  eos, limit = decoding["eos_id"], decoding["max_input_length"]
  lines = [line.strip() for line in sys.stdin]
  sources = [ids[:limit - 1] + [eos] for ids in pieces.encode(lines)]  # ids + EOS, cut
  inputs = np.zeros([len(sources), max(map(len, sources), default=1)], np.int32)  # 0: padding
  for row, ids in enumerate(sources):
    inputs[row, :len(ids)] = ids
  outputs = search(inputs=inputs)  # ids [lines, 1, T], scores [lines, 1]
  for line, ids, score in zip(lines, outputs["ids"][:, 0].tolist(), outputs["scores"][:, 0]):
    ids = ids[:ids.index(eos)] if eos in ids else ids
    print(f"{pieces.decode(ids) if line else ''}\t{score if line else 0.0:.4f}")


if __name__ == "__main__":
  main(sys.argv[1], "--greedy" in sys.argv[2:])
