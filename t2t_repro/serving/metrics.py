"""The server's Prometheus metrics (prometheus_client), served at GET /metrics.

  t2t_serve_requests_total{endpoint, code}      requests answered: REST endpoints (predict,
                                                status, metadata, metrics, page, other) by
                                                HTTP status, gRPC ones (grpc_predict,
                                                grpc_metadata, grpc_status) by code name
  t2t_serve_request_latency_seconds{endpoint}   arrival to response, seconds
  t2t_serve_batch_size{model, signature}        rows (sentences) per decoding call
  t2t_serve_batch_tokens{model, signature}      source tokens (EOS included) per decoding call
  t2t_serve_queue_rows, t2t_serve_queue_batches rows and batches waiting to be decoded
  t2t_serve_client_disconnects_total            clients gone before their answer

Each server has its own registry, so several can live in one process (tests).
"""

import prometheus_client

_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_TOKEN_BUCKETS = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServerMetrics:
  """The metrics above, in a registry of their own (`registry`)."""

  def __init__(self):
    self.registry = prometheus_client.CollectorRegistry()
    r = self.registry
    self.requests = prometheus_client.Counter(
        "t2t_serve_requests",
        "Requests answered, by endpoint and status (HTTP, or the gRPC code's name).",
        ["endpoint", "code"], registry=r)
    self.latency = prometheus_client.Histogram(
        "t2t_serve_request_latency_seconds", "Time from a request's arrival to its response [s].",
        ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r)
    self.batch_size = prometheus_client.Histogram(
        "t2t_serve_batch_size", "Rows (sentences) per decoding call.", ["model", "signature"],
        buckets=_SIZE_BUCKETS, registry=r)
    self.batch_tokens = prometheus_client.Histogram(
        "t2t_serve_batch_tokens", "Source tokens (EOS included) per decoding call.",
        ["model", "signature"], buckets=_TOKEN_BUCKETS, registry=r)
    self.queue_rows = prometheus_client.Gauge(
        "t2t_serve_queue_rows", "Rows waiting to be decoded.", registry=r)
    self.queue_batches = prometheus_client.Gauge(
        "t2t_serve_queue_batches", "Batches waiting to be decoded.", registry=r)
    self.disconnects = prometheus_client.Counter(
        "t2t_serve_client_disconnects", "Clients that went away before their answer.", registry=r)

  def observe_request(self, endpoint, code, seconds):
    self.requests.labels(endpoint, str(code)).inc()
    self.latency.labels(endpoint).observe(seconds)

  def observe_batch(self, model, signature, rows, tokens):
    self.batch_size.labels(model, signature).observe(rows)
    self.batch_tokens.labels(model, signature).observe(tokens)

  def queue(self, rows, batches):
    self.queue_rows.set(rows)
    self.queue_batches.set(batches)

  def exposition(self):
    """(body bytes, content type) of the text exposition format."""
    return prometheus_client.generate_latest(self.registry), prometheus_client.CONTENT_TYPE_LATEST
