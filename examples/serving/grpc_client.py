"""Translates sentences with a model served by `python -m t2t_repro.serve` (or
tensorflow_model_server) through TensorFlow Serving's gRPC API, with tensorflow-serving-api's
stock `PredictionServiceStub` (pip install tensorflow-serving-api grpcio).

  python examples/serving/grpc_client.py --server=127.0.0.1:8500 --model_name=en_de \
      "A man is riding a bike." "Two dogs play in the snow."

Prints one line per sentence: the translation, a tab, its score; then the model's versions
and their states (ModelService/GetModelStatus).
"""

import argparse
import sys

import grpc
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc


def translate(channel, model_name, sentences):
  """[(translation, score)] of `sentences` from the model's serving_default signature.

  Raises:
    grpc.RpcError: the server's error (NOT_FOUND, INVALID_ARGUMENT, UNAVAILABLE, ...).
  """
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model_name
  request.model_spec.signature_name = "serving_default"
  request.inputs["sentences"].CopyFrom(tf.make_tensor_proto(sentences, dtype=tf.string))
  response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request,
                                                                             timeout=300)
  translations = tf.make_ndarray(response.outputs["translations"])
  scores = tf.make_ndarray(response.outputs["scores"])
  return [(t.decode("utf-8"), float(s)) for t, s in zip(translations, scores)]


def versions(channel, model_name):
  """[(version, state name)] of the model, newest first."""
  request = get_model_status_pb2.GetModelStatusRequest()
  request.model_spec.name = model_name
  response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(request, timeout=60)
  return [(v.version, get_model_status_pb2.ModelVersionStatus.State.Name(v.state))
          for v in response.model_version_status]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--server", default="127.0.0.1:8500")
  parser.add_argument("--model_name", default="default")
  parser.add_argument("sentences", nargs="+")
  args = parser.parse_args()
  with grpc.insecure_channel(args.server) as channel:
    try:
      answers = translate(channel, args.model_name, args.sentences)
      states = versions(channel, args.model_name)
    except grpc.RpcError as e:
      sys.exit(f"grpc_client: {e.code().name}: {e.details()}")
  for translation, score in answers:
    print(f"{translation}\t{score:.4f}")
  for version, state in states:
    print(f"version {version}: {state}")


if __name__ == "__main__":
  main()
