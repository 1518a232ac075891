"""``python -m primus_launch`` and the ``primus-launch`` entry point: the CLI, with SIGINT / SIGTERM
handled from this module's first line -- a signal while the CLI's modules load ends the process at
once with its one line and exit 130 / 143 (nothing is written yet); once ``cli.main`` runs, it
handles them (:mod:`primus_launch.interrupt`)."""

import os
import signal
import sys


def _early(signum: int, _frame: object) -> None:
    line = b"primus-launch: interrupted (SIGINT)\n" if signum == signal.SIGINT else \
        b"primus-launch: terminated (SIGTERM)\n"
    try:
        os.write(2, line)
    finally:
        os._exit(128 + int(signum))


def run() -> int:
    """The CLI as a process's entry point.  Ended by a signal, the process exits at once after its
    line (``os._exit``: the clean-up is done; the interpreter's finalisation would turn a
    ``KeyboardInterrupt`` a C extension once saw into a death by SIGINT, and waits on nothing)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early)
    from primus_launch.cli import main

    rc = main()
    if rc in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(run())
