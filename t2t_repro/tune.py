"""`python -m t2t_repro.tune`: the command `t2t_repro.commands.tune`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("tune")
