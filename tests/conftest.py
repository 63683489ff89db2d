"""Shared pytest fixtures."""

import os

import pytest
import tensorflow as tf

# Two logical CPU devices, so MirroredStrategy tests can run 2 replicas on this machine.
# Must happen before TensorFlow initializes its devices, hence at import of conftest.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def shared_data_dir():
  """The real data folder: $T2T_DATA_DIR, else ../shared/data next to the repository.

  Skips the test (with the path in the reason) when the folder is absent.
  """
  path = os.environ.get("T2T_DATA_DIR") or os.path.join(os.path.dirname(_REPO_ROOT), "shared", "data")
  if not os.path.isdir(path):
    pytest.skip(f"real data folder {path} is absent (set T2T_DATA_DIR to a copy of shared/data)")
  return path
