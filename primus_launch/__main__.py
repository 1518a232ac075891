"""``python -m primus_launch`` and the ``primus-launch`` entry point: the CLI, with SIGINT / SIGTERM /
SIGHUP handled from this module's first lines (after :mod:`primus_launch.interrupt`, standard library only,
whose table of the lines and exit codes both use) -- a signal while the CLI's modules load ends the process
at once with its one line and exit 130 / 143 / 129 (nothing is written yet); once ``cli.main`` runs,
it handles them.  A SIGHUP the process was started to ignore
(``nohup``) stays ignored."""

import os
import signal
import sys

from primus_launch import interrupt  # the standard library only: its signal table and exit codes


def _early(signum: int, _frame: object) -> None:
    try:
        os.write(2, (interrupt.end_line(signum) + "\n").encode())
    finally:
        os._exit(interrupt.exit_code(signum))


def run() -> int:
    """The CLI as a process's entry point.  Ended by a signal, the process exits at once after its
    line (``os._exit``: the clean-up is done; the interpreter's finalisation would turn a
    ``KeyboardInterrupt`` a C extension once saw into a death by SIGINT, and waits on nothing)."""
    nohup = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # a hang-up the user asked to survive
    for sig in interrupt.HANDLED:
        if not (sig == signal.SIGHUP and nohup):
            signal.signal(sig, _early)
    interrupt.note_start(nohup)
    from primus_launch.cli import main

    rc = main()
    if rc in [interrupt.exit_code(s) for s in interrupt.HANDLED]:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(run())
