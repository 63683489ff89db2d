"""`python tools/parse.py`: the command `t2t_repro.parsing.cli` (console script `t2t-parse`)."""

from t2t_repro import launch

if __name__ == "__main__":
  launch.run("t2t_repro.parsing.cli")
