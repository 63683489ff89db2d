"""The Transformer (Vaswani et al. 2017) in TensorFlow 2 / Keras 3. Commands: `t2t_repro.launch`."""

from t2t_repro import launch as _launch

_launch.setup_if_command()  # `python -m t2t_repro.<command>`: logging set up before TensorFlow
