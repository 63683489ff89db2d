"""Work per beam-search loop iteration, counted (not timed): graph ops and executed op events.

A decoding step's fixed cost at small batches is the number of ops it runs: each op costs
the executor a dispatch whatever its size (docs/BENCHMARKS.md section 9). Three counts, all
deterministic for a given model and input, so they can be compared on a loaded machine and
bounded in a test:

  step graph ops     nodes of the traced graph of one decoding step
                     (`model_interface.CachedDecoder.step`: `Transformer.decode_step` + the
                     log-softmax, growing cache, the translate path), before grappler
  loop body ops      nodes of the beam-search `tf.while_loop` body of the translate command's
                     function (`Translator.decode_batch`) and of the functions it calls (both
                     branches of its conds), before grappler
  op events per iteration
                     op events of the loop body (names under "while/body") in a profiler
                     trace of one decode (`tf.profiler.experimental`, grappler applied: what
                     the executor really runs, as section 9 counts them), divided by the loop
                     iterations; casts per iteration likewise (op type Cast)

  python benchmarks/decode_ops.py --hparams=small --lines=1 --beam_size=4

decodes `--lines` random source sentences (seeded, 11 tokens each; a random model rarely
ends a hypothesis, so each runs its whole length) with a `--hparams` model of random weights,
one sentence per call with --batch=1 (the one-sentence batching), and prints one JSON line.
"""

import argparse
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from traces import trace_events  # noqa: E402  pylint: disable=wrong-import-position

_WHILE_BODY = "while/body"


def _function_ops(graph_def, name, library, seen):
  """Nodes of function `name` and of the functions its nodes call (each counted once)."""
  if name in seen or name not in library:
    return 0
  seen.add(name)
  fdef = library[name]
  return len(fdef.node_def) + sum(_called_ops(node, graph_def, library, seen)
                                  for node in fdef.node_def)


def _called_ops(node, graph_def, library, seen):
  total = _function_ops(graph_def, node.op, library, seen)
  for attr in node.attr.values():
    if attr.HasField("func"):
      total += _function_ops(graph_def, attr.func.name, library, seen)
  return total


def step_graph_ops(model, rows=4, sentences=1):
  """Nodes of the traced graph of one decoding step (decode_step + log-softmax, growing
  cache) with `rows` hypotheses of `sentences` sentences.

  Returns:
    (int total nodes, collections.Counter of op types).
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_repro.decoding import model_interface  # pylint: disable=import-outside-toplevel
  decoder = model_interface.CachedDecoder(model)
  state = decoder.start(tf.fill([sentences, 5], 3), rows // sentences, 8)
  spec = tf.nest.map_structure(lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype), state)
  step = tf.function(decoder.step, autograph=False).get_concrete_function(
      tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32), spec)
  graph_def = step.graph.as_graph_def()
  return len(graph_def.node), collections.Counter(node.op for node in graph_def.node)


def _search_function(model, beam_size):
  """The translate command's concrete search function of `model` (`Translator.decode_batch`)."""
  from t2t_repro.decoding import translator  # pylint: disable=import-outside-toplevel
  config = translator.DecodeConfig(beam_size=beam_size, alpha=0.6, decode_extra_length=10,
                                   n_best=1)
  t = translator.Translator(model, None, config)
  return t, translator._compiled_search(model, config, None, False)  # pylint: disable=protected-access


def loop_body_ops(model, beam_size=4):
  """Nodes of the beam-search while-loop body (and its nested functions) of the translate
  command's search function, before grappler."""
  _, search = _search_function(model, beam_size)
  graph_def = search.graph.as_graph_def()
  library = {f.signature.name: f for f in graph_def.library.function}
  loops = [node for node in graph_def.node if node.op in ("While", "StatelessWhile")]
  return sum(_function_ops(graph_def, loop.attr["body"].func.name, library, set())
             for loop in loops)


def op_events(model, sources, beam_size=4, batch=1):
  """Executed op events of the loop body per iteration, counted in a profiler trace.

  Args:
    model: a `Transformer`.
    sources: int32 numpy [lines, src_len] source ids, each row ending with EOS.
    beam_size: k.
    batch: rows per call (1: one sentence at a time).

  Returns:
    dict: iterations (loop iterations of all calls), events_per_iteration, casts_per_iteration,
    by_type_per_iteration {op type: events per iteration}, events (all events of the calls).
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  t, _ = _search_function(model, beam_size)
  batches = [sources[i:i + batch] for i in range(0, len(sources), batch)]
  for inputs in batches:  # traces and warms up
    t.decode_batch(inputs)
  with tempfile.TemporaryDirectory() as logdir:
    tf.profiler.experimental.start(logdir)
    for inputs in batches:
      t.decode_batch(inputs)[0].numpy()
    tf.profiler.experimental.stop()
    events, _, _ = trace_events(logdir)
  body = [e for e in events if _WHILE_BODY in e[1]]
  by_type = collections.Counter(op_type for _, _, op_type, _, _ in body)
  iterations = by_type["LogSoftmax"]  # one per iteration (the step's log-probabilities)
  return {"iterations": iterations, "events": len(events),
          "events_per_iteration": len(body) / iterations,
          "casts_per_iteration": by_type.get("Cast", 0) / iterations,
          "by_type_per_iteration": {k: v / iterations for k, v in by_type.most_common()}}


def random_model(hparams, seed=1, inference_dtype="float32"):
  """A `Transformer` of the registered hparams set `hparams` with seeded random weights
  (bfloat16: `load_for_inference`'s mixed_bfloat16 policy)."""
  import keras  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.hparams import get_hparams  # pylint: disable=import-outside-toplevel
  from t2t_repro.model.transformer import Transformer  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(seed)
  policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if inference_dtype == "bfloat16" else "float32")
  try:
    return Transformer.from_hparams(get_hparams(hparams))
  finally:
    keras.mixed_precision.set_global_policy(policy)


def random_sources(vocab_size, lines, length=11, seed=0):
  """int32 numpy [lines, length]: seeded random ids in [3, vocab_size), EOS (1) last."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  ids = np.random.default_rng(seed).integers(3, vocab_size, [lines, length]).astype(np.int32)
  ids[:, -1] = 1
  return ids


def count(model, lines=1, beam_size=4, batch=1):
  """All three counts of `model` (see the module docstring) as one dict."""
  total, types = step_graph_ops(model, rows=beam_size)
  events = op_events(model, random_sources(model.vocab_size, lines), beam_size, batch)
  return {"step_graph_ops": total, "step_graph_casts": types.get("Cast", 0),
          "loop_body_ops": loop_body_ops(model, beam_size), **events}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument("--hparams", default="small", help="a registered hparams set")
  parser.add_argument("--inference_dtype", choices=("float32", "bfloat16"), default="float32")
  parser.add_argument("--lines", type=int, default=1)
  parser.add_argument("--batch", type=int, default=1, help="sentences per call")
  parser.add_argument("--beam_size", type=int, default=4)
  args = parser.parse_args(argv)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_inter_op_parallelism_threads(1)
  tf.config.threading.set_intra_op_parallelism_threads(1)
  model = random_model(args.hparams, inference_dtype=args.inference_dtype)
  result = count(model, args.lines, args.beam_size, args.batch)
  print(json.dumps({"hparams": args.hparams, "inference_dtype": args.inference_dtype,
                    "lines": args.lines, "batch": args.batch, "beam_size": args.beam_size,
                    **result}))


if __name__ == "__main__":
  main()
