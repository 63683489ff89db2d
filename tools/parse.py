"""`python tools/parse.py`: the command `t2t_repro.commands.parse` (`t2t-parse`)."""

from t2t_repro.commands import launch

if __name__ == "__main__":
  launch.launch("parse")
