"""`python tools/average_checkpoints.py`: the command `t2t_repro.commands.average` (`t2t-average`)."""

from t2t_repro.commands import launch

if __name__ == "__main__":
  launch.launch("average")
