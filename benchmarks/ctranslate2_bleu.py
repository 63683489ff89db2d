"""BLEU of one model decoded by CTranslate2 (its length^alpha penalty) next to ours (GNMT).

Converts `--model_dir` with `t2t_repro.serving.ctranslate2` (float32 and, with
`--quantization`, also that type) into a temporary folder, translates `--input_file`
with CTranslate2's beam search (beam and alpha of the model's hparams unless given,
max_decoding_length = the batch's longest source + decode_extra_length, batches of
`--batch_size` sentences in input order) and scores every output against `--ref`
with `t2t_repro.evaluation.evaluate_translations` (sacreBLEU). Our own decoder's BLEU is
`python -m t2t_repro.translate ... --evaluate` on the same model dir.

  python benchmarks/ctranslate2_bleu.py --model_dir=runs/m30k_b \
      --input_file=../shared/data/multi30k/test_2016_flickr.en \
      --ref=../shared/data/multi30k/test_2016_flickr.de --quantization=int8
"""

import argparse
import os
import tempfile
import time


def translate_file(ct2_dir, lines, beam_size, alpha, extra, batch_size=64, threads=2):
  """Translations (list of str) of `lines` with a CTranslate2 model dir written by
  `export_ctranslate2` (its sentencepiece.model tokenizes)."""
  import ctranslate2  # pylint: disable=import-outside-toplevel
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  sp = spm.SentencePieceProcessor(model_file=os.path.join(ct2_dir, "sentencepiece.model"))
  translator = ctranslate2.Translator(ct2_dir, device="cpu", inter_threads=1,
                                      intra_threads=threads)
  out = []
  for start in range(0, len(lines), batch_size):
    pieces = sp.encode(lines[start:start + batch_size], out_type=str)
    results = translator.translate_batch(
        pieces, beam_size=beam_size, length_penalty=alpha,
        max_decoding_length=max(len(p) for p in pieces) + 1 + extra)
    out.extend(sp.decode_pieces(r.hypotheses[0]) for r in results)
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--input_file", required=True)
  parser.add_argument("--ref", required=True)
  parser.add_argument("--quantization", default=None, help="also this CTranslate2 type")
  parser.add_argument("--beam_size", type=int, default=0, help="0: the model's hparams")
  parser.add_argument("--alpha", type=float, default=None, help="default: the model's hparams")
  parser.add_argument("--threads", type=int, default=2)
  args = parser.parse_args(argv)

  from t2t_repro import evaluation, fileio  # pylint: disable=import-outside-toplevel
  from t2t_repro.serving.ctranslate2 import export_ctranslate2  # pylint: disable=import-outside-toplevel
  from t2t_repro.config.hparams import HParams  # pylint: disable=import-outside-toplevel
  import json  # pylint: disable=import-outside-toplevel
  with open(os.path.join(args.model_dir, "hparams.json"), encoding="utf-8") as f:
    hparams = HParams.from_dict(json.load(f))
  beam = args.beam_size or hparams.beam_size
  alpha = hparams.alpha if args.alpha is None else args.alpha
  lines, refs = fileio.read_lines(args.input_file), fileio.read_lines(args.ref)
  with tempfile.TemporaryDirectory(prefix="t2t_ct2_") as tmp:
    for quantization in [None] + ([args.quantization] if args.quantization else []):
      out = os.path.join(tmp, quantization or "float32")
      export_ctranslate2(args.model_dir, out, quantization=quantization)
      start = time.perf_counter()
      hyps = translate_file(out, lines, beam, alpha, hparams.decode_extra_length,
                            threads=args.threads)
      wall = time.perf_counter() - start
      scores = evaluation.evaluate_translations(hyps, [refs])
      print(f"CTranslate2 {quantization or 'float32'} (beam {beam}, length_penalty {alpha}, "
            f"{len(lines)} lines, {wall:.1f} s):")
      print(evaluation.format_scores(scores), flush=True)


if __name__ == "__main__":
  main()
