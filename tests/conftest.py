"""Shared pytest fixtures."""

import importlib.util
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


@pytest.fixture(name="ptb_dir", scope="session")
def fixture_ptb_dir(shared_data_dir):
  """shared/data/ptb_sample/combined; skips when absent."""
  path = os.path.join(shared_data_dir, "ptb_sample", "combined")
  if not os.path.isdir(path):
    pytest.skip(f"PTB sample {path} is absent")
  return path


def tool_path(name):
  """Path of the command-line tool tools/NAME.py."""
  return os.path.join(_REPO_ROOT, "tools", f"{name}.py")


@pytest.fixture(scope="session")
def load_tool():
  """Returns a function that imports tools/NAME.py as a module (tools/ is not a package)."""
  def load(name):
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
  return load
