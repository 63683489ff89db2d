"""`python -m t2t_repro.stats`: the command `t2t_repro.commands.stats`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("stats")
