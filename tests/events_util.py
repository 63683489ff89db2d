"""Reads the TensorBoard event files a run wrote, as TensorBoard's own loader does."""

import collections
import os

import tensorflow as tf


def read_events(folder):
  """{tag: [(step, tensor as numpy, plugin name, plugin content)]} of the summaries in
  `folder`'s event files (not its subfolders), in write order."""
  found = collections.defaultdict(list)
  for name in sorted(os.listdir(folder)):
    if not name.startswith("events.out.tfevents"):
      continue
    for record in tf.data.TFRecordDataset(os.path.join(folder, name)):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        tensor = tf.make_ndarray(value.tensor) if value.HasField("tensor") else None
        plugin = value.metadata.plugin_data
        found[value.tag].append((event.step, tensor, plugin.plugin_name, plugin.content))
  return found


def scalars(events, tag):
  """{step: float} of a scalar tag."""
  return {step: float(tensor) for step, tensor, _, _ in events[tag]}
