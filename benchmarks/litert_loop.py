"""Where the search loop of a LiteRT export runs: inside the model (a `While`, the export's
`greedy` signature, `t2t_repro.serving.litert`) or on the host (numpy) around two signatures,
`encode` (inputs -> src_bias and each decoder layer's encoder-decoder keys/values) and `step`
(one token with a fixed-size self-attention cache of the batch's budget, the model's
`decode_step(..., grow_cache=False)`), greedy on the same sorted batches in one process.

The two run alternately, --rounds times, so that load from other jobs hits both alike; the
line per round is the host loop's time over the in-model loop's, and the outputs are checked
equal. The beam search adds its bookkeeping per step to the host side, so greedy is the host
loop's best case.

  python benchmarks/litert_loop.py --model_dir=runs/m30k_tiny \
      --input_file=../shared/data/multi30k/test_2016_flickr.en --lines=200 --rounds=3
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step_model(model, folder):
  """Writes `encode` and `step` (see the module docstring) as one LiteRT model; returns its path."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving import litert  # pylint: disable=import-outside-toplevel
  layers = [layer.name for layer in model.decoder_layers]
  cache = tf.TensorSpec([None, model.num_heads, None, model.d_k], tf.float32)

  def encode(inputs):
    memory, src_bias = model.encode(inputs)
    kv = {f"{n}_m{x}": t for layer, n in zip(model.decoder_layers, layers)
          for x, t in layer.memory_attention.memory_kv(memory).items()}
    return {"src_bias": src_bias, **kv}

  def step(ids, position, src_bias, **tensors):
    state = {n: {"self": {x: tensors[f"{n}_s{x}"] for x in "kv"},
                 "memory": {x: tensors[f"{n}_m{x}"] for x in "kv"}} for n in layers}
    logits, state = model.decode_step(ids, position, state, src_bias, grow_cache=False)
    return {"logits": logits, **{f"{n}_s{x}": state[n]["self"][x] for n in layers for x in "kv"}}

  specs = {f"{n}_{kind}{x}": cache for n in layers for kind in "sm" for x in "kv"}
  with litert.new_axes_as_expand_dims():
    functions = {
        "encode": tf.function(encode, input_signature=[
            tf.TensorSpec([None, None], tf.int32, name="inputs")]).get_concrete_function(),
        "step": tf.function(lambda ids, position, src_bias, **t: step(ids, position, src_bias, **t),
                            autograph=False).get_concrete_function(
            ids=tf.TensorSpec([None], tf.int32), position=tf.TensorSpec([], tf.int32),
            src_bias=tf.TensorSpec([None, 1, 1, None], tf.float32), **specs)}
  from tensorflow.python.framework import convert_to_constants  # pylint: disable=import-outside-toplevel
  frozen = {name: convert_to_constants.convert_variables_to_constants_v2(f)
            for name, f in functions.items()}
  path = os.path.join(folder, "step.tflite")
  with open(path, "wb") as f:
    f.write(litert.convert(frozen))
  # Frozen functions return their outputs as output_<i>, i the index in sorted key order.
  return path, {name: sorted(f.structured_outputs) for name, f in functions.items()}


def named(runner, keys):
  """A signature runner whose outputs carry their names (`keys`, see `step_model`)."""
  return lambda **inputs: {keys[int(name.split("_")[-1])]: value
                           for name, value in runner(**inputs).items()}


def host_greedy(runners, inputs, extra, layers):
  """Greedy decoding of a batch with the host loop: ids [b, T] (0 after EOS)."""
  encoded = runners["encode"](inputs=inputs)
  b, budget = len(inputs), int((inputs > 0).sum(1).max()) + extra
  shape = encoded[f"{layers[0]}_mk"].shape
  state = {f"{n}_s{x}": np.zeros([b, shape[1], budget, shape[3]], np.float32)
           for n in layers for x in "kv"}
  memory = {key: value for key, value in encoded.items() if key != "src_bias"}
  ids, out = np.zeros([b], np.int32), np.zeros([b, budget], np.int32)
  done, limit = np.zeros([b], bool), (inputs > 0).sum(1) + extra
  for position in range(budget):
    result = runners["step"](ids=ids, position=np.int32(position), src_bias=encoded["src_bias"],
                             **state, **memory)
    ids = np.where(done, 0, result.pop("logits").argmax(-1)).astype(np.int32)
    state = result
    out[:, position] = ids
    done |= (ids == 1) | (position + 1 >= limit)
    if done.all():
      break
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--input_file", required=True)
  parser.add_argument("--lines", type=int, default=200)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--decode_batch_tokens", type=int, default=4096)
  args = parser.parse_args()
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding.loading import load_for_inference  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving import litert  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving.litert_translator import LiteRtTranslator, sorted_batches  # pylint: disable=import-outside-toplevel
  model, hparams, _ = load_for_inference(args.model_dir)
  layers = [layer.name for layer in model.decoder_layers]
  with tempfile.TemporaryDirectory() as folder:
    litert.export_litert(args.model_dir, os.path.join(folder, "1"))
    inside = LiteRtTranslator(os.path.join(folder, "1"), num_threads=1)
    path, keys = step_model(model, folder)
    step = Interpreter(model_path=path, num_threads=1)
    runners = {name: named(step.get_signature_runner(name), keys[name]) for name in keys}
    with open(args.input_file, encoding="utf-8") as f:
      lines = [next(f).strip() for _ in range(args.lines)]
    ids = inside.encode(lines)
    batches = []
    for batch in sorted_batches([len(x) for x in ids], args.decode_batch_tokens):
      inputs = np.zeros([len(batch), max(len(ids[j]) for j in batch)], np.int32)
      for row, j in enumerate(batch):
        inputs[row, :len(ids[j])] = ids[j]
      batches.append(inputs)
    for round_ in range(args.rounds):
      start = time.process_time()
      want = [inside.search(x, "greedy")[0][:, 0] for x in batches]
      model_s = time.process_time() - start
      start = time.process_time()
      got = [host_greedy(runners, x, hparams.decode_extra_length, layers) for x in batches]
      host_s = time.process_time() - start
      same = sum(np.array_equal(np.trim_zeros(a[r], "b"), np.trim_zeros(b[r], "b"))
                 for a, b in zip(want, got) for r in range(len(a)))
      print(f"round {round_ + 1}: in the model {model_s:.2f} CPU s, host loop {host_s:.2f} CPU s, "
            f"host / model {host_s / model_s:.2f}; equal outputs {same}/{len(lines)}; load "
            f"{os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
  main()
