"""`python -m t2t_repro.plot_attention`: the command `t2t_repro.commands.plot_attention`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.launch("plot_attention")
