"""`python -m t2t_repro.download`: the command `t2t_repro.commands.download`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("download")
