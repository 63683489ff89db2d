"""`python -m t2t_repro.export`: the command `t2t_repro.commands.export`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("export")
