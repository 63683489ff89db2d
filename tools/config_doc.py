"""Writes docs/CONFIG.md from the settings' fields (`t2t_repro.config.describe.config_markdown`).

  python tools/config_doc.py          # rewrite docs/CONFIG.md
  python tools/config_doc.py --check  # exit 1 when docs/CONFIG.md is stale
"""

import os
import sys

from t2t_repro.config import describe
from t2t_repro import fileio

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "CONFIG.md")


def main(argv):
  text = describe.config_markdown()
  if "--check" in argv[1:]:
    with open(PATH, encoding="utf-8") as f:
      stale = f.read() != text
    print(f"{PATH} is {'stale: run python tools/config_doc.py' if stale else 'current'}")
    return int(stale)
  fileio.write_atomic(PATH, text.encode("utf-8"))
  print(f"wrote {PATH}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
