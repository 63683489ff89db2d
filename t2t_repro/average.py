"""`python -m t2t_repro.average`: the command `t2t_repro.commands.average`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("average")
