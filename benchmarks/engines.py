"""The decoders of decode_throughput.py's modes that run another engine on our weights:
CTranslate2 (`ctranslate2_decoder`) and LiteRT (`litert_decoder`, `export_litert`)."""

# LiteRT mode -> the export's quantization.
LITERT_QUANTIZATION = {"litert_float32": None, "litert_float16": "float16",
                       "litert_dynamic_range": "dynamic_range"}


def pieces(tokenizer, vocab_size):
  """The vocabulary's pieces in id order, padded with filler pieces to vocab_size."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  sp = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto)
  found = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
  return found + [f"<filler_{i}>" for i in range(len(found), vocab_size)]


def ctranslate2_decoder(ct2_dir, vocabulary, beam, alpha, extra, inter, intra, fixed=False):
  """ids [b, S] -> list of output id lists, with CTranslate2 (`inter_threads`, `intra_threads`):
  EOS appended, or with `fixed` every hypothesis forced to the batch's budget (all its
  positions counted)."""
  import ctranslate2  # pylint: disable=import-outside-toplevel
  ids = {p: i for i, p in enumerate(vocabulary)}
  translator = ctranslate2.Translator(ct2_dir, device="cpu", inter_threads=inter,
                                      intra_threads=intra)

  def decode(inputs):
    sources = [[vocabulary[int(t)] for t in row if t > 1] for row in inputs]
    budget = max(len(x) for x in sources) + 1 + extra
    results = translator.translate_batch(
        sources, beam_size=beam, length_penalty=alpha, num_hypotheses=1,
        max_decoding_length=budget, min_decoding_length=budget if fixed else 0)
    return [[ids[p] for p in r.hypotheses[0]] + ([] if fixed else [1]) for r in results]
  return decode


def export_litert(args, output_dir, mode):
  """The LiteRT export of a LiteRT mode (--beam_size and --decode_extra_length when given)."""
  from t2t_repro.serving import litert  # pylint: disable=import-outside-toplevel
  litert.export_litert(args.model_dir, output_dir, quantization=LITERT_QUANTIZATION[mode],
                       overwrite=True, beam_size=args.beam_size or None,
                       decode_extra_length=args.decode_extra_length)


def litert_decoder(folder, intra):
  """ids [b, S] -> ids [b, T], the export's beam_search signature (an interpreter per calling
  thread, each on `intra` threads)."""
  from t2t_repro.serving.litert_translator import LiteRtTranslator  # pylint: disable=import-outside-toplevel
  translator = LiteRtTranslator(folder, num_threads=intra)
  return lambda inputs: translator.search(inputs)[0][:, 0]
