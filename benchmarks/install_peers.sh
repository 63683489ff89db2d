#!/usr/bin/env bash
# Installs the peers measured by benchmarks/peers.py next to the project's
# TensorFlow 2.21 / Keras 3 without changing them (see benchmarks/README.md,
# section "peers").
#
# tf-models-official 2.20's metadata pins tensorflow~=2.20.0 and
# tensorflow-text~=2.20.0 (and pulls opencv, pycocotools, kaggle, ...), so it
# is installed with --no-deps; what its Seq2SeqTransformer actually imports
# (tf_keras, gin, scipy, six, tensorflow_text) comes from the lines below and
# the project's own requirements. Model Garden uses `import tf_keras` directly:
# TF_USE_LEGACY_KERAS is NOT needed and must not be set globally.
#
# torch: on this machine pip finds the local CPU wheel 2.13.0+cpu for
# torch==2.13.0; elsewhere add --index-url https://download.pytorch.org/whl/cpu
# or pip fetches the (multi-GB) CUDA build.
set -euo pipefail
PIP="${PIP:-python -m pip}"
$PIP install --no-deps "tf-models-official==2.20.0"
$PIP install "tf-keras==2.21.0" "gin-config>=0.5" "scipy>=1.10" "pyyaml>=6" "six>=1.16"
$PIP install "torch==2.13.0"
python - <<'PY'
import os
assert os.environ.get("TF_USE_LEGACY_KERAS") in (None, "", "0"), "unset TF_USE_LEGACY_KERAS"
import keras, tf_keras, torch
from official.nlp.modeling.models import seq2seq_transformer  # noqa: F401
print(f"peers OK: keras {keras.__version__}, tf_keras {tf_keras.__version__}, torch {torch.__version__}")
PY
