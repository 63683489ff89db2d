"""`python -m t2t_repro <command> [flags]`: any command of `commands.launch.COMMANDS`."""

if __name__ == "__main__":
  from t2t_repro.commands import launch
  launch.package_main()
