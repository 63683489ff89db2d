r"""Fetch a problem's public data into the local layout (`t2t_repro.data.download`).
Needs the internet (statmt.org, github.com, TFDS's sources), or a local mirror given by
--source_url_base.

  python -m t2t_repro.download translate_ende_multi30k --data_dir=DIR   # Multi30k En-De
  python -m t2t_repro.download translate_ende_wmt_news --data_dir=DIR
  python -m t2t_repro.download translate_ende_wmt14 --data_dir=DIR   # + TFDS train
  python -m t2t_repro.download translate_ende_multi30k --data_dir=DIR \
      --source_url_base=file:///path/to/mirror   # offline: {mirror}/{host}/{path}
"""

import os
import urllib.error

from absl import flags

from t2t_repro import errors
from t2t_repro.commands import config_flags
from t2t_repro.config.train import TrainConfig
from t2t_repro.data import download, problems

FLAGS = flags.FLAGS


def define_flags():
  config_flags.define(TrainConfig, names=["data_dir"], help_overrides={
      "data_dir": f"Destination (default: ${problems.DATA_DIR_ENV})."})
  flags.DEFINE_string("source_url_base", None,
                      "Mirror base URL replacing 'scheme://' of every source, e.g. file:///mirror.")
  flags.DEFINE_bool("tfds", True, "Prepare the TFDS training text of the WMT14 problems.")
  flags.DEFINE_bool("force", False, "Fetch again files that already exist.")


def main(argv):
  names = ", ".join(sorted(download.SOURCES))
  if len(argv) != 2:
    raise errors.UsageError(f"usage: python -m t2t_repro.download PROBLEM --data_dir=DIR; "
                            f"problems: {names}")
  if argv[1] not in download.SOURCES:
    raise errors.UsageError(f"{argv[1]} has no public download; problems: {names}")
  data_dir = FLAGS.data_dir or os.environ.get(problems.DATA_DIR_ENV)
  if not data_dir:
    raise errors.UsageError(f"give --data_dir or set ${problems.DATA_DIR_ENV}")
  try:
    written = download.download(argv[1], data_dir, FLAGS.source_url_base, FLAGS.tfds, FLAGS.force)
  except urllib.error.URLError as e:  # offline, or a URL that cannot be fetched
    raise errors.DataError(str(e.reason)) from None
  except OSError as e:  # a write error
    if errors.exit_line(e) is not None:
      raise
    raise errors.DataError(str(e)) from None
  print(f"{len(written)} files written under {data_dir}")
