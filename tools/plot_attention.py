"""`python tools/plot_attention.py`: the command `t2t_repro.plot_attention` (console script `t2t-plot-attention`)."""

from t2t_repro import launch

if __name__ == "__main__":
  launch.run("t2t_repro.plot_attention")
