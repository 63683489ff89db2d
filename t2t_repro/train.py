"""`python -m t2t_repro.train`: the command `t2t_repro.commands.train`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("train")
