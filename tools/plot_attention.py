"""`python tools/plot_attention.py`: the command `t2t_repro.commands.plot_attention` (`t2t-plot-attention`)."""

from t2t_repro.commands import launch

if __name__ == "__main__":
  launch.launch("plot_attention")
