"""TensorFlow Serving's REST API formats (tensorflow_serving/g3doc/api_rest.md): a predict
request's JSON to input columns (`parse_predict`), outputs to the response's JSON
(`predict_response`), and errors as {"error": message} with TensorFlow Serving's HTTP status
for each canonical error code (`ApiError`; `ToHTTPStatusCode` of
tensorflow_serving/model_servers/http_server.cc).
"""

import base64
import binascii
import json

import numpy as np

# Canonical error code -> HTTP status, as TensorFlow Serving's REST server maps them;
# REQUEST_TOO_LARGE is this server's own body size limit (no canonical code).
HTTP_STATUS = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "NOT_FOUND": 404,
               "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499, "INTERNAL": 500, "UNAVAILABLE": 503,
               "REQUEST_TOO_LARGE": 413}

_FIELDS = ("signature_name", "instances", "inputs")


class ApiError(Exception):
  """A request the server answers with an error: `code` (a key of HTTP_STATUS), `message`,
  `headers` (e.g. Retry-After)."""

  def __init__(self, code, message, headers=None):
    super().__init__(message)
    self.code, self.message, self.headers = code, message, headers or {}

  @property
  def status(self):
    """The HTTP status [int]."""
    return HTTP_STATUS[self.code]

  def body(self):
    """The response body: {"error": message} as JSON bytes."""
    return json.dumps({"error": self.message}).encode("utf-8")


def parse_predict(body, signatures):
  """A predict request's body -> (signature name, {input name: list of rows}, row format).

  Args:
    body: the request body (bytes, JSON): {"signature_name": optional str, and either
      "instances" (row format: a list with one value per row, or one object per row naming
      every input) or "inputs" (columnar: a list for a single input, or an object of lists)}.
    signatures: {name: `servable.Signature`} of the model.

  Returns:
    (signature_name, columns, row_format): columns' lists all have the same length (the
    rows, at least one); string values are str ({"b64": ...} decoded as UTF-8); row_format
    is True for "instances".

  Raises:
    ApiError: INVALID_ARGUMENT (malformed JSON, an unknown field, both or neither of
      instances and inputs, a missing or wrong input, a string that is no Unicode text,
      rows of different counts) or
      FAILED_PRECONDITION (an unknown signature), each with one line naming the problem.
  """
  try:
    request = json.loads(body)
  except json.JSONDecodeError as e:
    raise ApiError("INVALID_ARGUMENT", f"JSON Parse error: {e.msg} at offset: {e.pos}") from None
  except UnicodeDecodeError as e:
    raise ApiError("INVALID_ARGUMENT", f"the request body is not UTF-8 (byte {e.start})") from None
  except RecursionError:
    raise ApiError("INVALID_ARGUMENT", "JSON Parse error: the document is nested too "
                   "deeply") from None
  except ValueError as e:  # e.g. an integer of more than sys.get_int_max_str_digits() digits
    raise ApiError("INVALID_ARGUMENT", f"JSON Parse error: {e}") from None
  if not isinstance(request, dict):
    raise ApiError("INVALID_ARGUMENT", "the request body must be a JSON object with "
                   "'instances' or 'inputs'")
  unknown = sorted(set(request) - set(_FIELDS))
  if unknown:
    raise ApiError("INVALID_ARGUMENT", f"unknown field '{unknown[0]}' in the request; a predict "
                   f"request has {', '.join(_FIELDS)}")
  name = request.get("signature_name") or "serving_default"  # "" too, as TensorFlow Serving
  if not isinstance(name, str) or name not in signatures:
    raise ApiError("FAILED_PRECONDITION", f"Serving signature name: \"{name}\" not found in "
                   f"signature def (signatures: {', '.join(sorted(signatures))})")
  if ("instances" in request) == ("inputs" in request):
    raise ApiError("INVALID_ARGUMENT", "Missing 'inputs' or 'instances' key" if "inputs" not in
                   request else "Not formatted correctly: expecting only one of 'inputs' or "
                   "'instances' keys")
  signature = signatures[name]
  row_format = "instances" in request
  if row_format:
    columns = _rows_to_columns(request["instances"], list(signature.inputs))
  else:
    columns = _columns(request["inputs"], list(signature.inputs))
  for input_name, (dtype, rank) in signature.inputs.items():
    columns[input_name] = [_value(v, input_name, index, dtype, rank)
                           for index, v in enumerate(columns[input_name])]
  return name, columns, row_format


def _rows_to_columns(instances, names):
  if not isinstance(instances, list) or not instances:
    raise ApiError("INVALID_ARGUMENT", "'instances' must be a non-empty list")
  if all(isinstance(row, dict) and not _is_b64(row) for row in instances):
    for index, row in enumerate(instances):
      if set(row) != set(names):
        raise ApiError("INVALID_ARGUMENT", f"instance {index}: expected the inputs "
                       f"{', '.join(names)}; got {', '.join(sorted(row)) or 'none'}")
    return {name: [row[name] for row in instances] for name in names}
  if len(names) > 1:
    raise ApiError("INVALID_ARGUMENT", f"this signature has several inputs ({', '.join(names)}): "
                   "each instance must be an object naming them")
  return {names[0]: instances}


def _is_b64(value):
  """A {"b64": "..."} object: one value, not an instance naming its inputs."""
  return isinstance(value, dict) and set(value) == {"b64"}


def _columns(inputs, names):
  if not isinstance(inputs, dict):
    if len(names) > 1:
      raise ApiError("INVALID_ARGUMENT", f"this signature has several inputs ({', '.join(names)}):"
                     " 'inputs' must be an object naming them")
    inputs = {names[0]: inputs}
  if set(inputs) != set(names):
    raise ApiError("INVALID_ARGUMENT", f"expected the inputs {', '.join(names)}; got "
                   f"{', '.join(sorted(inputs)) or 'none'}")
  for name in names:
    if not isinstance(inputs[name], list) or not inputs[name]:
      raise ApiError("INVALID_ARGUMENT", f"input '{name}' must be a non-empty list (shape [batch])")
  sizes = {len(inputs[name]) for name in names}
  if len(sizes) > 1:
    raise ApiError("INVALID_ARGUMENT", f"the inputs {', '.join(names)} have different batch sizes "
                   f"({', '.join(str(len(inputs[name])) for name in names)})")
  return {name: inputs[name] for name in names}


def _value(value, name, index, dtype, rank):
  """One row's value of input `name`, checked against its dtype and rank."""
  if dtype.name == "string" and rank == 1:
    if _is_b64(value) and isinstance(value["b64"], str):
      try:
        return base64.b64decode(value["b64"], validate=True).decode("utf-8")
      except (binascii.Error, UnicodeDecodeError):
        raise ApiError("INVALID_ARGUMENT", f"instance {index}: input '{name}': invalid base64 "
                       "or not UTF-8 text") from None
    if isinstance(value, str):
      try:
        value.encode("utf-8")
      except UnicodeEncodeError as e:  # a lone surrogate, e.g. "\\ud800"
        raise ApiError("INVALID_ARGUMENT", f"instance {index}: input '{name}' is not Unicode "
                       f"text (a lone surrogate \\u{ord(value[e.start]):04x} at character "
                       f"{e.start})") from None
      return value
    raise ApiError("INVALID_ARGUMENT", f"instance {index}: input '{name}' must be a string, got "
                   f"{json.dumps(value)[:40]}")
  if dtype.is_integer and rank == 2:
    if isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                       for i in value):
      return value
    raise ApiError("INVALID_ARGUMENT", f"instance {index}: input '{name}' must be a list of "
                   "integer token ids")
  raise ApiError("INVALID_ARGUMENT", f"input '{name}': {dtype.name} of rank {rank} is not served")


def predict_response(outputs, row_format):
  """The predict response's JSON object: {"predictions": [one object per row]} for the row
  format, {"outputs": {name: list}} for the columnar one (a single output without its name,
  as TensorFlow Serving does). Strings are decoded as UTF-8; -inf stays -Infinity (the REST
  API's JSON allows NaN and Infinity)."""
  values = {name: _json(array) for name, array in sorted(outputs.items())}
  if not row_format:
    return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
  rows = len(next(iter(values.values())))
  if len(values) == 1:
    return {"predictions": next(iter(values.values()))}
  return {"predictions": [{name: column[i] for name, column in values.items()}
                          for i in range(rows)]}


def _json(array):
  if array.dtype == object:
    return np.vectorize(lambda b: b.decode("utf-8", errors="replace"), otypes=[object])(
        array).tolist() if array.size else array.tolist()
  return array.tolist()
