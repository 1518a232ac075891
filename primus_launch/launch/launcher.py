"""Run a training command unchanged, the way a shell would: the ``primus-launch -- CMD`` passthrough.

Contract (issue 7):

- the command runs with the same argv, environment and working directory as given; stdin, stdout
  and stderr are inherited file descriptors (nothing is piped or buffered here, so the child's
  output reaches the terminal / log line by line as the child writes it);
- the child is the leader of its own process group (``setpgid(0, 0)`` in the child, as a shell does
  for a job), so that a signal meant for the job reaches torchrun *and* every worker it spawned; on an
  interactive terminal that group is given the terminal while it runs (:mod:`.terminal`), so that a
  read of it (``breakpoint()``, ``input()``) does not stop it, and Ctrl-C / Ctrl-Z reach it;
- SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 received by primus-launch are forwarded to that
  whole process group (``killpg``); a signal that arrives while the child is being started is delivered
  right after it exists.  SIGUSR1 / SIGUSR2 are what schedulers send ahead of a time limit (Slurm
  ``--signal=USR1@120``, the checkpoint-and-requeue hook of NeMo / Lightning): left at their default
  action they would end primus-launch alone and leave the command running without its parent, so they
  are forwarded like SIGTERM and the command decides.  A SIGHUP primus-launch was started to ignore
  (``nohup primus-launch -- ...``) is neither forwarded nor handled, so the command inherits it ignored,
  as it would from ``nohup cmd``; so is SIGUSR1 / SIGUSR2 when primus-launch was started with it
  ignored;
- the return value is the child's exit status, or ``128 + N`` when it was killed by signal ``N``
  (POSIX shell convention, e.g. 137 for SIGKILL, 143 for SIGTERM); a command that cannot be found
  gives 127 and one that cannot be executed gives 126 (as ``env``, ``nohup`` and shells do).

Only the standard library is imported here, so that the passthrough path does not import torch or
anything else that could touch the environment before the command starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Optional

from primus_launch.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    from primus_launch.projection.result import ProjectionResult

FORWARDED_SIGNALS: tuple[signal.Signals, ...] = (
    signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: forwarded signals whose inherited ``SIG_IGN`` is kept (the command inherits them ignored)
_KEPT_IF_IGNORED: tuple[signal.Signals, ...] = (signal.SIGUSR1, signal.SIGUSR2)

GIB = 1024 ** 3


def exit_code_of(returncode: int) -> int:
    """Shell exit status of a finished child: its code, or ``128 + N`` when killed by signal N.

    ``subprocess`` reports death by signal N as ``-N`` (``os.waitstatus_to_exitcode``); POSIX
    shells report it as ``128 + N`` (bash(1), "EXIT STATUS").
    """
    return 128 - returncode if returncode < 0 else returncode


#: the values CPython's C-locale coercion (PEP 538) writes into ``LC_CTYPE`` at interpreter start-up
_COERCED_LC_CTYPE = frozenset({"C.UTF-8", "C.utf8", "UTF-8"})


def child_environment() -> Optional[dict[str, str]]:
    """The environment the command gets: None (this process's own) unless Python's start-up changed it.
    Under the C / POSIX locale (``LANG`` and ``LC_*`` unset, as in many containers and ``env -i``),
    CPython coerces the locale and exports ``LC_CTYPE=C.UTF-8`` (PEP 538) before any code runs, so the
    command saw a variable its caller never set.  That one is removed when the environment this process
    was started with (``/proc/self/environ``, which later ``setenv`` calls do not rewrite) had no
    ``LC_CTYPE``; anything set in-process is kept.  Without ``/proc`` nothing is changed."""
    value = os.environ.get("LC_CTYPE")
    if value not in _COERCED_LC_CTYPE:
        return None
    try:
        with open("/proc/self/environ", "rb") as f:
            started = f.read().split(b"\0")
    except OSError:
        return None
    if any(e.startswith(b"LC_CTYPE=") for e in started):
        return None
    env = dict(os.environ)
    del env["LC_CTYPE"]
    return env


def run_command(argv: list[str]) -> int:
    """Run ``argv`` unchanged in its own process group, forwarding signals; return its exit code.

    Raises :class:`UserError` only for an empty command line.
    """
    if not argv:
        raise UserError("command: empty; give the training command after '--', e.g. "
                        "primus-launch -- torchrun --nproc-per-node 8 train.py")
    argv = [str(a) for a in argv]
    child: Optional[subprocess.Popen] = None
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            pending.append(signum)
            return
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:  # the group is already gone
            pass

    from primus_launch import interrupt  # standard library only

    previous = {}
    for sig in FORWARDED_SIGNALS:
        if sig == signal.SIGHUP and interrupt.hangup_ignored():  # nohup: the command inherits it ignored
            continue
        if sig in _KEPT_IF_IGNORED and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        try:
            previous[sig] = signal.signal(sig, forward)
        except (ValueError, OSError):  # not the main thread: signals cannot be handled here
            pass
    from primus_launch.launch import terminal

    tty = terminal.foreground_terminal()
    try:
        try:
            if not argv[0]:  # as bash and env: no such command (Popen would try the empty name in every folder)
                raise FileNotFoundError(2, "command not found")
            # env=None and cwd=None: the exact environment and directory of this process (less the
            # LC_CTYPE Python's own start-up added, child_environment).
            # process_group=0: setpgid(0, 0) in the child before exec (Python >= 3.11).
            child = subprocess.Popen(argv, process_group=0, close_fds=False, env=child_environment())
        except FileNotFoundError:
            if os.sep in argv[0] and os.path.isfile(argv[0]):  # the file is there: its #! interpreter is not
                print(f"primus-launch: {argv[0]}: cannot execute: required file not found (the interpreter its "
                      "#! line names, or its loader)", file=sys.stderr)
            else:
                print(f"primus-launch: {argv[0]}: command not found", file=sys.stderr)
            return 127
        except PermissionError as exc:
            print(f"primus-launch: {argv[0]}: cannot execute ({exc.strerror})", file=sys.stderr)
            return 126
        except OSError as exc:
            print(f"primus-launch: {argv[0]}: cannot execute ({exc.strerror or exc})", file=sys.stderr)
            return 126
        if tty is not None:  # an interactive terminal: the command's group reads it, as a shell's job would
            terminal.hand_over(tty, child.pid)
        for signum in pending:
            forward(signum, None)
        pending.clear()
        if tty is not None:
            returncode = os.waitstatus_to_exitcode(terminal.wait_in_foreground(tty, child.pid))
            child.returncode = returncode
            return exit_code_of(returncode)
        while True:
            try:
                returncode = child.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover - only if a handler could not be set
                forward(signal.SIGINT, None)
        return exit_code_of(returncode)
    finally:
        if tty is not None and child is not None:
            terminal.take_back(tty, child.pid)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ensure_fits(result: "ProjectionResult", force: bool) -> None:
    """Refuse to launch a plan whose memory verdict is "does not fit" unless ``force``.

    Raises :class:`UserError` with one line giving the peak, the usable capacity and the way out.
    """
    mem = result.memory
    if mem.fits or force:
        return
    raise UserError(
        f"memory: the plan does not fit: peak {mem.verdict_peak_bytes / GIB:.1f} GiB per GPU "
        "that cannot be released (stage "
        f"{mem.worst_stage}), even its error band's bottom above {mem.capacity_bytes / GIB:.1f} GiB with a "
        f"{mem.margin_fraction:.0%} margin; not launching (pass --force to launch anyway)")


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m primus_launch.launch.launcher [--] CMD ...``: the bare passthrough."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    try:
        return run_command(args)
    except UserError as exc:
        print(f"primus-launch: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
