"""`python -m t2t_repro.parse`: the command `t2t_repro.commands.parse`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("parse")
