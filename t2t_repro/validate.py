"""`python -m t2t_repro.validate`: the command `t2t_repro.commands.validate`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("validate")
