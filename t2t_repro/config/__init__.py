"""Configuration, the bottom floor above `errors`: every setting declared once, as a dataclass
field with its help, default and range (`settings.setting`), and no TensorFlow.

* `settings`: how a field is declared and checked;
* the four groups of the hparams, each field declared once: `model.ModelConfig`,
  `optimization.OptimizationConfig`, `data.DataConfig`, `decode.SearchConfig`;
* `hparams`: `HParams`, the four groups composed (as fairseq's `FairseqConfig` composes its
  groups; flat fields, since hparam sets, hparams.json and `--hparams_override` are flat), each
  group's invariants kept, and the registry of named sets (configs/*.json);
* `train.TrainConfig` (a training run) and `decode.DecodeConfig` (a decoding);
* `describe`: the tables of every setting (`train --describe`, docs/CONFIG.md).

Every other package imports from here; nothing here imports another package of t2t_repro.
"""
