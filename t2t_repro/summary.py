"""`python -m t2t_repro.summary`: the command `t2t_repro.commands.summary`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("summary")
