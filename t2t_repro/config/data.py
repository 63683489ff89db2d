"""The data and batching group of the hparams: `DataConfig`.

How text becomes training batches: lowercasing and subword sampling inside the BPE model
(`data.vocab`), the longest example and the token budget of a batch (`data.batching`).
`t2t_repro.config.hparams.HParams` inherits these fields; no TensorFlow here.
"""

import dataclasses

from t2t_repro.config import settings
from t2t_repro.config.settings import setting

# The validation record of a corpus pair in a cache or staging dir (`data.corpus.record_path`):
# its key is a hash of both paths; key="*" globs them all.
CORPUS_RECORD = "corpus.{key}.json"


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """Text preparation and batching; each field's help, default and range are in its
  `settings.setting`.

  Raises:
    errors.UsageError (a ValueError): a field outside its choices or range.
  """

  lowercase: bool = setting(
      False, "Lowercase all text, source and target, inside the BPE model (a sentencepiece "
      "normalization rule, so training, translation and an exported SavedModel all lowercase "
      "their input the same way; outputs are lowercase). Moses lowercase.perl, as the Multi30k "
      "papers prepare their text (Wu et al. 2021). Score such a model with the lowercased BLEU "
      "of evaluate.")
  subword_alpha: float = setting(
      0.0, "Subword regularization of the training text (0: off): every time a training pair "
      "is read its segmentation is sampled (tf_text's sentencepiece sampling); for this "
      "project's BPE vocabularies BPE-dropout, each merge skipped with this probability "
      "(Provilkov et al. 2020: 0.1). Dev, test and decoding keep the deterministic "
      "segmentation.", min_value=0, below=1)
  subword_nbest: int = setting(
      -1, "sentencepiece's nbest_size of the sampling: -1 samples from all segmentations (what "
      "BPE-dropout needs), > 1 from the n best (unigram models).", min_value=-1)
  max_length: int = setting(256, "Longest training example kept [tokens] (the last batching "
                            "bucket).", min_value=1)
  batch_tokens: int = setting(
      3125, "Token budget of one replica's batch [tokens]: its rows x its padded length, the "
      "longer side's (source or target); a step uses batch_tokens x replicas x accum_steps.",
      min_value=1)

  def __post_init__(self):
    settings.check(self)
