"""`python -m t2t_repro.evaluate`: the command `t2t_repro.commands.evaluate`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("evaluate")
