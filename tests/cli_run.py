"""Run the primus-launch CLI in-process for the bad-input tests: exit status, stdout, stderr and seconds,
from a given working directory (argparse's SystemExit read as its status, 2 when it carries a message)."""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path

from primus_launch.cli import main


def run_cli(argv: list[str], cwd: Path) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    t0 = time.monotonic()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse
                rc = e.code if isinstance(e.code, int) else 2
    finally:
        os.chdir(old)
    return rc, out.getvalue(), err.getvalue(), time.monotonic() - t0
