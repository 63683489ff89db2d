"""`python -m t2t_repro.serve`: the command `t2t_repro.commands.serve`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("serve")
