"""`python -m t2t_repro.score`: the command `t2t_repro.commands.score`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("score")
