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
    """The CLI as a process's entry point."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early)
    from primus_launch.cli import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
