"""`python tools/average_checkpoints.py`: the command `t2t_repro.average_checkpoints` (console script `t2t-average`)."""

from t2t_repro import launch

if __name__ == "__main__":
  launch.run("t2t_repro.average_checkpoints")
