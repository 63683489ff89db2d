"""TensorFlow Serving's gRPC API over the served models, with tensorflow-serving-api's own
protos and services (grpcio's asyncio server, in the REST server's event loop, uvloop's when
it is installed):

  tensorflow.serving.PredictionService/Predict           PredictRequest -> PredictResponse
  tensorflow.serving.PredictionService/GetModelMetadata  signature_def (SignatureDefMap)
  tensorflow.serving.ModelService/GetModelStatus         each version's state
  tensorflow.serving.ModelService/HandleReloadConfigRequest  the model config changed

so a stock client (`prediction_service_pb2_grpc.PredictionServiceStub`) works unchanged.
Requests go through the same `service.Service` as the REST API's (checks, the batcher,
the versions); an error is the gRPC status of its canonical code, as TensorFlow Serving
returns it (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION, UNAVAILABLE for a full
queue; a message over max_request_bytes is RESOURCE_EXHAUSTED, grpcio's own limit).
Classify, Regress and MultiInference are UNIMPLEMENTED (no log line). Each call is counted
in /metrics as endpoint grpc_predict, grpc_metadata, grpc_status, grpc_reload_config or
grpc_unimplemented, with the gRPC code's name as code.
"""

import asyncio
import functools
import time

from absl import logging
import grpc
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from t2t_repro import errors
from t2t_repro.serving import rest
from t2t_repro.serving import servable as servable_lib

_GRACE_SECONDS = 600  # longest wait for the calls under way at a stop


def create_server(service, host, port, max_request_bytes):
  """A grpc.aio server of `service`'s models on host:port (not started).

  Returns:
    (server, the port bound: `port`, or the free port chosen for 0).

  Raises:
    RuntimeError: the port cannot be bound (grpcio's error).
  """
  server = grpc.aio.server(options=[("grpc.max_receive_message_length", max_request_bytes),
                                    ("grpc.so_reuseport", 0)])
  prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(_Prediction(service),
                                                                      server)
  model_service_pb2_grpc.add_ModelServiceServicer_to_server(_Models(service), server)
  bound = server.add_insecure_port(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
  return server, bound


async def stop(server):
  """Refuses new calls, waits for the calls under way, then stops."""
  await server.stop(_GRACE_SECONDS)


def _call(endpoint):
  """Wraps a servicer method: an ApiError becomes its gRPC status, a TensorFlow argument
  error INVALID_ARGUMENT, and the call is counted and timed in the metrics."""

  def wrap(method):
    @functools.wraps(method)
    async def called(self, request, context):
      started, code = time.perf_counter(), "OK"
      try:
        return await method(self, request, context)
      except rest.ApiError as e:
        code = "RESOURCE_EXHAUSTED" if e.code == "REQUEST_TOO_LARGE" else e.code
        await context.abort(grpc.StatusCode[code], e.message)
      except asyncio.CancelledError:
        code = "CANCELLED"
        raise
      except Exception as e:  # pylint: disable=broad-except  # a server stays up
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        if not isinstance(e, tf.errors.InvalidArgumentError):
          raise
        code = "INVALID_ARGUMENT"
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
      finally:
        self.service.metrics.observe_request(endpoint, code, time.perf_counter() - started)
    return called
  return wrap


def _spec(model_spec):
  """(name, version or None, label or None) of a ModelSpec."""
  version = model_spec.version.value if model_spec.HasField("version") else None
  return model_spec.name, version, model_spec.version_label or None


class _Prediction(prediction_service_pb2_grpc.PredictionServiceServicer):
  """PredictionService: Predict and GetModelMetadata."""

  def __init__(self, service):
    self.service = service

  @_call("grpc_predict")
  async def Predict(self, request, context):  # pylint: disable=invalid-name
    """PredictRequest -> PredictResponse: the signature's inputs (string or int32 tensors
    [batch] / [batch, length]) through the model's batcher queue, every output (or those of
    output_filter) as a TensorProto, as tensorflow_model_server's Predict; errors as its
    status codes (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION, UNAVAILABLE)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    async with self.service.held(*_spec(request.model_spec)) as servable:
      name = request.model_spec.signature_name or "serving_default"
      if name not in servable.signatures:
        raise rest.ApiError("FAILED_PRECONDITION", f"Serving signature name: \"{name}\" not "
                            f"found in signature def (signatures: "
                            f"{', '.join(sorted(servable.signatures))})")
      signature = servable.signatures[name]
      columns = _columns(request.inputs, signature)
      future = self.service.submit(servable, name, columns)
      try:
        outputs = await future
      finally:
        future.cancel()  # a call cancelled by its client: its rows leave the queue
      wanted = list(request.output_filter) or signature.outputs
      unknown = sorted(set(wanted) - set(outputs))
      if unknown:
        raise rest.ApiError("INVALID_ARGUMENT", f"output_filter: '{unknown[0]}' is not an output "
                            f"of {name} ({', '.join(signature.outputs)})")
      response = predict_pb2.PredictResponse()
      response.model_spec.name = servable.name
      response.model_spec.version.value = servable.version
      response.model_spec.signature_name = name
      for output in wanted:
        response.outputs[output].CopyFrom(tf.make_tensor_proto(outputs[output]))
      return response

  @_call("grpc_metadata")
  async def GetModelMetadata(self, request, context):  # pylint: disable=invalid-name
    """The served version's SignatureDefMap under "signature_def", the one metadata field
    tensorflow_model_server supports; any other field is INVALID_ARGUMENT."""
    if list(request.metadata_field) != ["signature_def"]:
      raise rest.ApiError("INVALID_ARGUMENT", "Metadata field signature_def is the one "
                          f"supported; got {list(request.metadata_field)}")
    async with self.service.held(*_spec(request.model_spec)) as servable:
      response = get_model_metadata_pb2.GetModelMetadataResponse()
      response.model_spec.name = servable.name
      response.model_spec.version.value = servable.version
      signatures = get_model_metadata_pb2.SignatureDefMap()
      for key, value in servable.signature_defs().items():
        signatures.signature_def[key].CopyFrom(value)
      response.metadata["signature_def"].Pack(signatures)
      return response


  @_call("grpc_unimplemented")
  async def Classify(self, request, context):  # pylint: disable=invalid-name
    """Not offered (a translation model has no classification signature): UNIMPLEMENTED."""
    raise _unimplemented("Classify")

  @_call("grpc_unimplemented")
  async def Regress(self, request, context):  # pylint: disable=invalid-name
    """Not offered (no regression signature): UNIMPLEMENTED."""
    raise _unimplemented("Regress")

  @_call("grpc_unimplemented")
  async def MultiInference(self, request, context):  # pylint: disable=invalid-name
    """Not offered (it runs Classify and Regress): UNIMPLEMENTED."""
    raise _unimplemented("MultiInference")


def _unimplemented(method):
  """The error of a method the server does not offer: UNIMPLEMENTED, answered without a
  server log line (grpcio logs a traceback for the stubs' NotImplementedError)."""
  return rest.ApiError("UNIMPLEMENTED", f"{method} is not offered by this server: use Predict "
                       "(its signatures: GetModelMetadata)")


class _Models(model_service_pb2_grpc.ModelServiceServicer):
  """ModelService: GetModelStatus and HandleReloadConfigRequest."""

  def __init__(self, service):
    self.service = service

  @_call("grpc_status")
  async def GetModelStatus(self, request, context):  # pylint: disable=invalid-name
    """Each version's state (LOADING, AVAILABLE, UNLOADING, END) and load error, as
    tensorflow_model_server's ModelService answers; an unknown model is NOT_FOUND."""
    response = get_model_status_pb2.GetModelStatusResponse()
    for version, state, error in self.service.status(*_spec(request.model_spec)):
      status = response.model_version_status.add()
      status.version = version
      status.state = get_model_status_pb2.ModelVersionStatus.State.Value(state)
      status.status.error_code = 2 if error else 0  # tensorflow.error.Code UNKNOWN / OK
      status.status.error_message = error
    return response

  @_call("grpc_reload_config")
  async def HandleReloadConfigRequest(self, request, context):  # pylint: disable=invalid-name
    """Serves the request's ModelServerConfig (its model_config_list), as
    tensorflow_model_server's ModelService does (`model_config.ModelConfig.reload`): OK once
    the new config serves. A config the server cannot serve, or a model that does not load,
    changes nothing: INVALID_ARGUMENT and one log line."""
    model_config = self.service.model_config
    if model_config is None:
      raise rest.ApiError("FAILED_PRECONDITION", "this server's models are fixed: it has no "
                          "model config to reload")
    try:
      await model_config.reload(servable_lib.config_models(request.config,
                                                           "ReloadConfigRequest"))
    except errors.DataError as e:
      logging.error("model config of a ReloadConfigRequest not served, the old one serves on: "
                    "%s", e)
      raise rest.ApiError("INVALID_ARGUMENT", str(e)) from None
    response = model_management_pb2.ReloadConfigResponse()
    response.status.error_code = 0  # tensorflow.error.Code OK
    return response


def _columns(inputs, signature):
  """{input name: list of rows} of a PredictRequest's TensorProtos, checked as the REST
  API's (`rest.parse_predict`): strings as UTF-8 text, [batch, len] ids as lists. As
  TensorFlow Serving, a negative dimension and a dtype other than the signature's (int8 or
  int64 ids for int32) are INVALID_ARGUMENT."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if set(inputs) != set(signature.inputs):
    raise rest.ApiError("INVALID_ARGUMENT", f"expected the inputs {', '.join(signature.inputs)}; "
                        f"got {', '.join(sorted(inputs)) or 'none'}")
  columns = {}
  for name, (dtype, rank) in signature.inputs.items():
    dims = [dim.size for dim in inputs[name].tensor_shape.dim]
    if any(size < 0 for size in dims):
      raise rest.ApiError("INVALID_ARGUMENT", f"tensor parsing error: input '{name}' has a "
                          f"negative dimension (shape {dims})")
    try:
      array = tf.make_ndarray(inputs[name])
    except (TypeError, ValueError) as e:
      raise rest.ApiError("INVALID_ARGUMENT", f"input '{name}': {e}") from None
    if array.ndim != rank or inputs[name].dtype != dtype.as_datatype_enum:
      raise rest.ApiError("INVALID_ARGUMENT", f"input '{name}' must be {dtype.name} of rank "
                          f"{rank} (shape [batch{', len' if rank == 2 else ''}]); got "
                          f"{tf.as_dtype(inputs[name].dtype).name} of shape {list(array.shape)}")
    if not len(array):  # pylint: disable=g-explicit-length-test
      raise rest.ApiError("INVALID_ARGUMENT", f"input '{name}' has no rows")
    if rank == 1 and dtype == tf.string:
      try:
        columns[name] = [value.decode("utf-8") for value in array.tolist()]
      except UnicodeDecodeError:
        raise rest.ApiError("INVALID_ARGUMENT", f"input '{name}': a string is not UTF-8 "
                            "text") from None
    else:
      columns[name] = array.tolist()
  if len({len(rows) for rows in columns.values()}) > 1:
    raise rest.ApiError("INVALID_ARGUMENT", f"the inputs {', '.join(columns)} have different "
                        "batch sizes")
  return columns

