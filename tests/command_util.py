"""Runs a command in a subprocess after injected code (a failure at a named point: a kill, a
full disk, a read-only filesystem), and checks its one error line."""

import os
import subprocess
import sys
import textwrap

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def run_command(code, command, *args, stdin=""):
  """`command` (a t2t_repro command name) with `args` in a new Python process that first runs
  `code`. Returns the CompletedProcess (text)."""
  program = textwrap.dedent(code) + textwrap.dedent(f"""
      import sys
      from t2t_repro.commands import launch
      sys.argv = [{command!r}, *{list(map(str, args))!r}]
      launch.launch({command!r})
      """)
  return subprocess.run([sys.executable, "-c", program], input=stdin, capture_output=True,
                        text=True, timeout=600, env=ENV, check=False)


def error_line(result, code, command):
  """The one `<command>: error: ...` line of a failed run, checked: exit status `code`, no
  traceback, exactly one such line."""
  assert result.returncode == code, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if line.startswith(f"{command}: error: ")]
  assert len(lines) == 1, result.stderr[-3000:]
  return lines[0]
