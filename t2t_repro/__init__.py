"""The Transformer (Vaswani et al. 2017) in TensorFlow 2 / Keras 3. Commands: `t2t_repro.commands`."""
