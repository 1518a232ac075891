"""``python -m primus_launch`` and the ``primus-launch`` entry point: the CLI, with SIGINT / SIGTERM /
SIGHUP handled from this module's first line -- a signal while the CLI's modules load ends the process
at once with its one line and exit 130 / 143 / 129 (nothing is written yet); once ``cli.main`` runs,
it handles them (:mod:`primus_launch.interrupt`).  A SIGHUP the process was started to ignore
(``nohup``) stays ignored."""

import os
import signal
import sys


_LINES = {signal.SIGINT: b"primus-launch: interrupted (SIGINT)\n", signal.SIGTERM: b"primus-launch: terminated (SIGTERM)\n",
          signal.SIGHUP: b"primus-launch: hung up (SIGHUP)\n"}


def _early(signum: int, _frame: object) -> None:
    line = _LINES.get(signum, b"primus-launch: terminated\n")
    try:
        os.write(2, line)
    finally:
        os._exit(128 + int(signum))


def run() -> int:
    """The CLI as a process's entry point.  Ended by a signal, the process exits at once after its
    line (``os._exit``: the clean-up is done; the interpreter's finalisation would turn a
    ``KeyboardInterrupt`` a C extension once saw into a death by SIGINT, and waits on nothing)."""
    nohup = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # a hang-up the user asked to survive
    for sig in _LINES:
        if not (sig == signal.SIGHUP and nohup):
            signal.signal(sig, _early)
    from primus_launch import interrupt

    interrupt.note_start(nohup)
    from primus_launch.cli import main

    rc = main()
    if rc in (128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(run())
