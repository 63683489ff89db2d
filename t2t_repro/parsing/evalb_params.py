"""EVALB's parameter file (.prm, EVALB README §[6] "THE PARAMETER FILE") and the values of
its COLLINS.prm; the scorer is `t2t_repro.parsing.evalb`."""

import dataclasses
import warnings

from t2t_repro import errors
from t2t_repro.data import text_files

# The values of EVALB's COLLINS.prm (shared/data/ptb_sample/evalb/COLLINS.prm).
COLLINS_DELETE_LABELS = ("TOP", "-NONE-", ",", ":", "``", "''", ".")


@dataclasses.dataclass
class EvalbParams:
  """The settings of an EVALB parameter (.prm) file.

  Attributes:
    debug: DEBUG (kept for completeness; unused).
    max_error: MAX_ERROR, error sentences tolerated before aborting.
    cutoff_len: CUTOFF_LEN [words], bound of the second summary.
    labeled: LABELED, True for labeled bracketing.
    delete_labels: DELETE_LABEL values (tags whose words are dropped; phrase
      labels whose brackets are dropped).
    delete_labels_for_length: DELETE_LABEL_FOR_LENGTH values.
    quote_labels: QUOTE_LABEL values (not implemented, must stay empty).
    eq_labels: EQ_LABEL pairs, non-directional.
    eq_words: EQ_WORD pairs, non-directional.
  """

  debug: int = 0
  max_error: int = 10
  cutoff_len: int = 40
  labeled: bool = True
  delete_labels: tuple = ()
  delete_labels_for_length: tuple = ()
  quote_labels: tuple = ()
  eq_labels: tuple = ()
  eq_words: tuple = ()

  def label_equal(self, a, b):
    """evalb.c ``label_comp``: equal strings or an EQ_LABEL pair."""
    return a == b or (a, b) in self.eq_labels or (b, a) in self.eq_labels

  def word_equal(self, a, b):
    """evalb.c ``word_comp``: equal strings or an EQ_WORD pair."""
    return a == b or (a, b) in self.eq_words or (b, a) in self.eq_words


COLLINS = EvalbParams(
    max_error=10, cutoff_len=40, labeled=True,
    delete_labels=COLLINS_DELETE_LABELS,
    delete_labels_for_length=("-NONE-",),
    eq_labels=(("ADVP", "PRT"),))


def parse_prm(text):
  """Parses the text of an EVALB parameter file.

  Lines starting with ``#`` and lines shorter than 3 characters are ignored;
  otherwise the first word is the keyword and the rest the value (evalb.c
  ``read_parameter_file`` / ``set_param``). Unknown keywords are warned about
  and skipped, as evalb.c does.

  Args:
    text: str, the file's content.

  Returns:
    EvalbParams (defaults of evalb.c for keywords not given: MAX_ERROR 10,
    CUTOFF_LEN 40, LABELED 1, nothing deleted).

  Raises:
    ValueError: a numeric value is not an integer, or EQ_LABEL / EQ_WORD does
      not have exactly two values.
  """
  values = {"DELETE_LABEL": [], "DELETE_LABEL_FOR_LENGTH": [],
            "QUOTE_LABEL": [], "EQ_LABEL": [], "EQ_WORD": []}
  numbers = {"DEBUG": 0, "MAX_ERROR": 10, "CUTOFF_LEN": 40, "LABELED": 1}
  for number, line in enumerate(text.splitlines(), 1):
    line = line.rstrip()
    if line.startswith("#") or len(line) < 3:
      continue
    parts = line.split(None, 1)
    key, value = parts[0], (parts[1].strip() if len(parts) > 1 else "")
    if key in numbers:
      try:
        numbers[key] = int(value)
      except ValueError:
        raise ValueError(f"line {number}: {key} needs an integer, got {value!r}") from None
    elif key in ("EQ_LABEL", "EQ_WORD"):
      pair = value.split()
      if len(pair) != 2:
        raise ValueError(f"line {number}: {key} requires two values")
      values[key].append(tuple(pair))
    elif key in values:
      values[key].append(value)
    else:
      warnings.warn(f"EVALB parameter line {number}: unknown keyword {key!r}")
  return EvalbParams(
      debug=numbers["DEBUG"], max_error=numbers["MAX_ERROR"],
      cutoff_len=numbers["CUTOFF_LEN"], labeled=bool(numbers["LABELED"]),
      delete_labels=tuple(values["DELETE_LABEL"]),
      delete_labels_for_length=tuple(values["DELETE_LABEL_FOR_LENGTH"]),
      quote_labels=tuple(values["QUOTE_LABEL"]),
      eq_labels=tuple(values["EQ_LABEL"]), eq_words=tuple(values["EQ_WORD"]))


def load_prm(path):
  """Reads an EVALB parameter file such as COLLINS.prm.

  Args:
    path: str.

  Returns:
    EvalbParams.

  Raises:
    errors.DataError: the file is missing or not UTF-8, or a value is
      invalid (see ``parse_prm``); the message is ``{path}:{line}: ...``.
  """
  try:
    return parse_prm("\n".join(text_files.read_lines(path)))
  except errors.DataError:
    raise
  except ValueError as e:
    raise errors.DataError(f"{path}:{str(e).removeprefix('line ')}") from None


# ---------------------------------------------------------------- one sentence
