"""`python -m t2t_repro.translate`: the command `t2t_repro.commands.translate`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("translate")
