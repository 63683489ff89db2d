"""Translates sentences with a model served by `python -m t2t_repro.serve` (or
tensorflow_model_server) through TensorFlow Serving's REST API: the standard library only.

  python examples/serving/rest_client.py --server=http://127.0.0.1:8501 --model_name=en_de \
      "A man is riding a bike." "Two dogs play in the snow."

Prints one line per sentence: the translation, a tab, its score (log P(Y|X) / lp(Y)).
"""

import argparse
import json
import sys
import urllib.error
import urllib.request


def translate(server, model_name, sentences):
  """[(translation, score)] of `sentences` from the model's serving_default signature.

  Raises:
    RuntimeError: the server answered an error ({"error": ...} with its HTTP status), or
      cannot be reached.
  """
  body = json.dumps({"instances": sentences}).encode("utf-8")
  request = urllib.request.Request(f"{server}/v1/models/{model_name}:predict", data=body,
                                   headers={"Content-Type": "application/json"})
  try:
    with urllib.request.urlopen(request, timeout=300) as response:
      predictions = json.loads(response.read())["predictions"]
  except urllib.error.HTTPError as e:
    raise RuntimeError(f"HTTP {e.code}: {json.loads(e.read())['error']}") from None
  except urllib.error.URLError as e:
    raise RuntimeError(f"{server}: {e.reason}") from None
  return [(p["translations"], p["scores"]) for p in predictions]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--server", default="http://127.0.0.1:8501")
  parser.add_argument("--model_name", default="default")
  parser.add_argument("sentences", nargs="+")
  args = parser.parse_args()
  try:
    answers = translate(args.server, args.model_name, args.sentences)
  except RuntimeError as e:
    sys.exit(f"rest_client: {e}")
  for translation, score in answers:
    print(f"{translation}\t{score:.4f}")


if __name__ == "__main__":
  main()
