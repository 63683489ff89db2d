"""Scores detokenized translations: sacreBLEU (primary), chrF, and comparable BLEUs.

The command: ``python -m t2t_repro.evaluate --hyp=FILE --ref=FILE [--ref=FILE2 ...] [--tgt_lang=de]``

Four scores, each labelled (SPEC.md, "Where the reference code differs"):

1. **sacreBLEU** (primary): cased, ``13a`` tokenizer, exponential smoothing,
   exactly ``sacrebleu -tok 13a``; printed with its signature
   (``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``).
2. **chrF**: sacrebleu ``CHRF()`` defaults (character 6-grams, beta 2), with
   its signature.
3. **paper-comparable: tokenized BLEU with compound splitting** (the 27.3 / 28.4
   of the paper's Table 2). tensor2tensor's ``get_ende_bleu.sh`` does::

     perl tokenizer.perl -l de < hyp > hyp.tok
     perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g' < ref.tok > ref.atat
     perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g' < hyp.tok > hyp.atat
     perl multi-bleu.perl ref.atat < hyp.atat

   Here: the Moses tokenizer is ``sacremoses.MosesTokenizer(lang=tgt_lang)``
   with tokenizer.perl's defaults (``escape=True``: ``&`` -> ``&amp;``,
   ``"`` -> ``&quot;`` ...; ``aggressive_dash_splits=False``, i.e. no ``-a``),
   applied to the hypothesis AND to the raw reference (t2t read a reference
   that was already Moses-tokenized, ``newstest2014.tok.de``; tokenizing the
   raw newstest file with the same tokenizer is how that file is made).
   Compound splitting is the same regex with ``re.ASCII``, so ``\\S`` means
   "not one of space, \\t, \\n, \\r, \\f, \\v", as in perl's byte-mode
   ``\\S`` (a non-breaking space is not whitespace there either). BLEU is
   ``sacrebleu.BLEU(tokenize="none", smooth_method="none", force=True)`` on
   the tokenized, split text, which is multi-bleu.perl's computation: counts
   of whitespace-separated n-grams (n = 1..4) clipped by the max count over
   the references, geometric mean of the 4 corpus precisions, brevity penalty
   ``exp(1 - r / c)`` with ``r`` the per-sentence closest reference length
   (ties to the shorter), and a score of 0 when any precision is 0 (multi-bleu's
   ``my_log(0) = -9999999999``). It differs from multi-bleu.perl only in
   rounding: multi-bleu prints ``%.2f``; we keep the float (format with 2
   decimals to compare). Known remaining difference: sacremoses is a port of
   tokenizer.perl that may differ from a given Moses release in rare corner
   cases (its own test-suite checks it against tokenizer.perl).
4. **Multi30k-comparable: lowercased, Moses-tokenized BLEU**, the score the
   Multi30k papers (WMT16-18 multimodal task; Wu et al. 2021, Revisit-MMT)
   report. Their data was prepared with Moses ``lowercase.perl |
   normalize-punctuation.perl -l L | tokenizer.perl -l L`` and scored with
   multi-bleu.perl. Here: ``str.lower``, then
   ``sacremoses.MosesPunctNormalizer(lang=L)``, then
   ``sacremoses.MosesTokenizer(lang=L)`` (``escape=False``, no ``-a``) on the
   hypothesis and the raw references, and
   ``sacrebleu.BLEU(tokenize="none", lowercase=True, smooth_method="none",
   force=True)`` (multi-bleu.perl's computation, as in 3).

Python API (used by ``python -m t2t_repro.translate --evaluate``)::

  scores = evaluate_translations(hyps, refs, tgt_lang="de")
  print(format_scores(scores))

Never report tensor2tensor's in-training "approx BLEU" (subwords, teacher
forcing) as BLEU.
"""

import re

import sacrebleu

from t2t_repro import fileio
from t2t_repro.data import text_files

PAPER_LABEL = ("paper-comparable: tokenized BLEU with compound splitting "
               "(t2t get_ende_bleu.sh)")
SACREBLEU_LABEL = "sacreBLEU (primary: detokenized, cased, 13a)"
CHRF_LABEL = "chrF"
LOWERCASED_LABEL = "BLEU (lowercased, Moses-tokenized; Multi30k papers)"

# perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'; re.sub is also global and
# non-overlapping, so "a-b-c" -> "a ##AT##-##AT## b-c" exactly as in perl.
_COMPOUND_RE = re.compile(r"(\S)-(\S)", re.ASCII)


def split_compounds(line):
  """t2t's ATAT compound splitting: "Kaffee-Maschine" -> 3 tokens.

  Args:
    line: one Moses-tokenized sentence (str).

  Returns:
    The line with every ``X-Y`` (X, Y non-whitespace) rewritten as
    ``X ##AT##-##AT## Y``, e.g. "Kaffee ##AT##-##AT## Maschine".
  """
  return _COMPOUND_RE.sub(r"\1 ##AT##-##AT## \2", line)


_TOKENIZERS = {}


def moses_tokenize(line, lang="de"):
  """Moses ``tokenizer.perl -l LANG`` (default options) via sacremoses.

  Args:
    line: one detokenized sentence (str).
    lang: language code for the non-breaking-prefix list (e.g. "de", "fr").

  Returns:
    The tokenized sentence, tokens separated by single spaces, with
    tokenizer.perl's XML escaping (``&amp;``, ``&quot;``, ``&apos;``, ...).
  """
  if lang not in _TOKENIZERS:
    try:
      from sacremoses import MosesTokenizer  # pylint: disable=g-import-not-at-top
    except ImportError as e:  # pragma: no cover - install_requires has it.
      raise ImportError(
          "the paper-comparable BLEU needs sacremoses: pip install sacremoses"
      ) from e
    _TOKENIZERS[lang] = MosesTokenizer(lang=lang)
  return _TOKENIZERS[lang].tokenize(
      line, return_str=True, escape=True, aggressive_dash_splits=False)


def tokenize_for_paper_bleu(line, lang="de"):
  """Moses tokenization followed by compound splitting (get_ende_bleu.sh)."""
  return split_compounds(moses_tokenize(line, lang))


_NORMALIZERS = {}


def tokenize_lowercased(line, lang="de"):
  """Multi30k preprocessing: lowercase, Moses punctuation-normalize, tokenize.

  The Moses pipeline ``lowercase.perl | normalize-punctuation.perl -l LANG |
  tokenizer.perl -l LANG`` via sacremoses (``MosesPunctNormalizer``,
  ``MosesTokenizer`` with ``escape=False``, no aggressive dash splits).

  Args:
    line: one detokenized sentence (str).
    lang: language code of the sentence (e.g. "de", "fr", "cs").

  Returns:
    The lowercased tokenized sentence, tokens separated by single spaces.
  """
  if lang not in _NORMALIZERS:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer  # pylint: disable=g-import-not-at-top
    _NORMALIZERS[lang] = (MosesPunctNormalizer(lang=lang),
                          MosesTokenizer(lang=lang))
  normalizer, tokenizer = _NORMALIZERS[lang]
  return tokenizer.tokenize(
      normalizer.normalize(line.lower()), return_str=True, escape=False,
      aggressive_dash_splits=False)


def _normalize_refs(hyps, refs):
  """Returns refs as a list of reference streams, each len(hyps) long."""
  if isinstance(refs, str):
    raise TypeError("refs must be a list of lines or a list of streams, "
                    "not a str")
  refs = list(refs)
  if not refs or isinstance(refs[0], str):
    streams = [refs]
  else:
    streams = [list(stream) for stream in refs]
  for k, stream in enumerate(streams):
    if len(stream) != len(hyps):
      raise ValueError(
          f"hypotheses have {len(hyps)} lines but reference stream {k} has "
          f"{len(stream)} lines")
  return streams


def evaluate_translations(hyps, refs, tgt_lang="de"):
  """Scores detokenized hypotheses against one or more references.

  Args:
    hyps: list[str], one detokenized hypothesis per sentence.
    refs: either list[str] (one reference per sentence) or list[list[str]]
      in sacrebleu's layout: a list of reference STREAMS, ``refs[k][i]`` is
      the k-th reference of sentence i; each stream has len(hyps) lines.
    tgt_lang: target language, for the Moses tokenizer of the paper BLEU.

  Returns:
    dict with (BLEU and chrF in [0, 100]):
      "sacrebleu": float, corpus sacreBLEU (cased, 13a) - the primary score.
      "sacrebleu_signature": str, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|...".
      "sacrebleu_details": str, sacrebleu's line (n-gram precisions, BP,
        ratio, hyp_len, ref_len).
      "chrf": float; "chrf_signature": str.
      "bleu_tok_compound": float, paper-comparable tokenized BLEU with
        compound splitting; "bleu_tok_compound_label": PAPER_LABEL;
        "bleu_tok_compound_signature": str; "bleu_tok_compound_details": str.
      "bleu_lc_tok": float, lowercased Moses-normalized Moses-tokenized BLEU
        (LOWERCASED_LABEL, the Multi30k papers' score);
        "bleu_lc_tok_signature": str; "bleu_lc_tok_details": str.
      "num_sentences": int; "num_refs": int.

  Raises:
    ValueError: a reference stream's length differs from len(hyps).
  """
  hyps = list(hyps)
  streams = _normalize_refs(hyps, refs)

  bleu = sacrebleu.BLEU()  # cased, 13a, smooth exp: the sacrebleu default.
  bleu_score = bleu.corpus_score(hyps, streams)
  chrf = sacrebleu.CHRF()
  chrf_score = chrf.corpus_score(hyps, streams)

  tok_hyps = [tokenize_for_paper_bleu(h, tgt_lang) for h in hyps]
  tok_streams = [[tokenize_for_paper_bleu(r, tgt_lang) for r in stream]
                 for stream in streams]
  tok_bleu = sacrebleu.BLEU(tokenize="none", smooth_method="none", force=True)
  tok_score = tok_bleu.corpus_score(tok_hyps, tok_streams)
  tok_signature = (f"tok:moses-{tgt_lang}(sacremoses)+atat-compound-split|"
                   + tok_bleu.get_signature().format())

  lc_hyps = [tokenize_lowercased(h, tgt_lang) for h in hyps]
  lc_streams = [[tokenize_lowercased(r, tgt_lang) for r in stream]
                for stream in streams]
  lc_bleu = sacrebleu.BLEU(tokenize="none", lowercase=True,
                           smooth_method="none", force=True)
  lc_score = lc_bleu.corpus_score(lc_hyps, lc_streams)
  lc_signature = (f"tok:lowercase+moses-norm-punct+moses-{tgt_lang}(sacremoses)|"
                  + lc_bleu.get_signature().format())

  return {
      "sacrebleu": float(bleu_score.score),
      "sacrebleu_signature": bleu.get_signature().format(),
      "sacrebleu_details": str(bleu_score),
      "chrf": float(chrf_score.score),
      "chrf_signature": chrf.get_signature().format(),
      "bleu_tok_compound": float(tok_score.score),
      "bleu_tok_compound_label": PAPER_LABEL,
      "bleu_tok_compound_signature": tok_signature,
      "bleu_tok_compound_details": str(tok_score),
      "bleu_lc_tok": float(lc_score.score),
      "bleu_lc_tok_signature": lc_signature,
      "bleu_lc_tok_details": str(lc_score),
      "num_sentences": len(hyps),
      "num_refs": len(streams),
  }


def format_scores(scores):
  """Human-readable, labelled report of a ``score`` dict (several lines)."""
  return "\n".join([
      f"{SACREBLEU_LABEL}: {scores['sacrebleu']:.2f}",
      f"  signature: {scores['sacrebleu_signature']}",
      f"  {scores['sacrebleu_details']}",
      f"{CHRF_LABEL}: {scores['chrf']:.2f}",
      f"  signature: {scores['chrf_signature']}",
      f"{scores['bleu_tok_compound_label']}: "
      f"{scores['bleu_tok_compound']:.2f}",
      f"  signature: {scores['bleu_tok_compound_signature']}",
      f"  {scores['bleu_tok_compound_details']}",
      "  (comparable to the paper's Table 2: 27.3 base / 28.4 big En-De; "
      "never use it as the primary score)",
      f"{LOWERCASED_LABEL}: {scores['bleu_lc_tok']:.2f}",
      f"  signature: {scores['bleu_lc_tok_signature']}",
      f"  {scores['bleu_lc_tok_details']}",
      "  (comparable to Multi30k papers' BLEU; never the primary score)",
      f"sentences: {scores['num_sentences']}, references per sentence: "
      f"{scores['num_refs']}",
  ])


def evaluate_files(hyp_path, ref_paths, tgt_lang="de"):
  """``score`` on files: one hypothesis file, one or more reference files.

  Raises:
    errors.DataError: a file is missing or not UTF-8 text, or a reference
      file's line count differs from the hypothesis file's (LineCountError; the
      message names both files and both counts).
  """
  if isinstance(ref_paths, str):
    ref_paths = [ref_paths]
  if not ref_paths:
    raise ValueError("at least one reference file is needed")
  hyps = fileio.read_lines(hyp_path)
  streams = []
  for ref_path in ref_paths:
    ref = fileio.read_lines(ref_path)
    if len(ref) != len(hyps):
      raise text_files.LineCountError(
          f"line count mismatch: hypothesis file {hyp_path} has {len(hyps)} "
          f"lines, reference file {ref_path} has {len(ref)} lines")
    streams.append(ref)
  return evaluate_translations(hyps, streams, tgt_lang=tgt_lang)
