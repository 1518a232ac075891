"""The terminal for a passthrough command, as a shell's job control hands it over (bash(1), "JOB CONTROL").

The command runs in its own process group (``launcher.run_command``), so on an interactive terminal it is a
background group: its first read of the terminal (``input()``, a ``breakpoint()``, a password prompt) would
stop it with SIGTTIN, and primus-launch would wait on a stopped child for ever.  So, when primus-launch's own
group holds the terminal, the command's group is made the terminal's foreground group while it runs
(``tcsetpgrp``) and the terminal is taken back when it ends -- Ctrl-C and Ctrl-Z then reach the command from
the terminal itself.  Ctrl-Z stops the command; primus-launch then takes the terminal back and stops itself
(SIGTSTP) so that the shell gets its prompt; ``fg`` continues both.  Only the standard library is used.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Optional


def foreground_terminal() -> Optional[int]:
    """The file descriptor (0, 1 or 2) of the terminal whose foreground group is this process's group, or
    None (no terminal: a pipe, a file, a batch job; or a background job)."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError, ValueError):
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return fd
    return None


def set_foreground(fd: int, pgid: int) -> bool:
    """Make ``pgid`` the terminal's foreground group (SIGTTOU ignored meanwhile: the call is made from a group
    that may be in the background by then); whether it took."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgid)
        return True
    except OSError:
        return False
    finally:
        signal.signal(signal.SIGTTOU, old)


def hand_over(fd: int, pgid: int) -> None:
    """Give the terminal to the command's group and continue it (a read in the instant before the hand-over
    stopped it with SIGTTIN; SIGCONT to a running process changes nothing)."""
    if set_foreground(fd, pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGCONT)


def take_back(fd: int, pgid: int) -> None:
    """The terminal back to this process's group, if the command's group still holds it."""
    with contextlib.suppress(OSError):
        if os.tcgetpgrp(fd) == pgid:
            set_foreground(fd, os.getpgrp())


def wait_in_foreground(fd: int, pid: int) -> int:
    """Wait for the command (its group given the terminal) to end; its wait status.  When it stops
    (Ctrl-Z), the terminal is taken back and this process stops too, as a shell's job does; continued in
    the foreground (``fg``), it hands the terminal over again and continues the command (``bg``: continues
    it in the background).  In an orphaned group -- no shell to continue it -- the kernel discards the
    SIGTSTP and the command is continued at once."""
    while True:
        _, status = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            return status
        take_back(fd, pid)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGTSTP)   # the default action: stop here until the shell continues us
        if foreground_terminal() is not None:
            hand_over(fd, pid)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)
