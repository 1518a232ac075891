"""SIGINT / SIGTERM / SIGHUP during long library calls (the measured projection, tuning).

The CLI installs :func:`handling`: the first signal raises ``KeyboardInterrupt`` (SIGINT) or
:class:`Terminated` (SIGTERM) at once -- ``finally`` blocks run, child processes are reaped, cache
writes stay atomic -- and is also remembered, because framework code can swallow the exception
(megatron-core and torch guard optional imports with bare ``except:``).  Long loops call
:func:`check` at safe points, so a swallowed signal still stops the run there; the CLI then ends
with one line and exit 130 (SIGINT) / 143 (SIGTERM).  SIGHUP (the terminal or the ssh session
closed) ends the run as SIGTERM does, with exit 129.  Further signals while the run unwinds are
remembered, not raised, so that the clean-up they would interrupt (a worker pool's termination, a
temp file's removal) completes.

A hang-up the process was started to ignore (``nohup``) stays ignored (:func:`hangup_ignored`):
nothing here handles it, and the passthrough neither forwards it nor hands the command a handler in
its place.  (SIGINT and SIGTERM are handled whatever the process inherited, as before.)

:func:`deferred` marks a section a signal must not cut in two (an atomic write's temp file and
rename, forking a worker pool): a signal inside it is raised when the section ends.  A process
forked inside it inherits the deferral, so a signal that reaches a new worker before the worker
sets its own handling (:func:`worker_init`) raises nothing there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any, Iterator, Optional

_received: Optional[int] = None
_deferring = 0

#: the signals a run ends on, one line each (:func:`end_line`); SIGHUP as SIGTERM
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_ENDINGS = {signal.SIGINT: "interrupted (SIGINT)", signal.SIGTERM: "terminated (SIGTERM)",
            signal.SIGHUP: "hung up (SIGHUP)"}
_HANGUP_IGNORED: Optional[bool] = None


def note_start(hangup_was_ignored: Optional[bool] = None) -> None:
    """Record whether the process was started with SIGHUP ignored (``nohup``): as the entry point read it
    before installing its own handlers, else read now.  Later calls keep the first record."""
    global _HANGUP_IGNORED
    if _HANGUP_IGNORED is None:
        _HANGUP_IGNORED = (signal.getsignal(signal.SIGHUP) == signal.SIG_IGN if hangup_was_ignored is None
                           else hangup_was_ignored)


def hangup_ignored() -> bool:
    """Whether the process was started with SIGHUP ignored (``nohup``); without a :func:`note_start`
    record, whether it is ignored now."""
    if _HANGUP_IGNORED is None:
        return signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    return _HANGUP_IGNORED


#: how many :func:`handling` blocks are running (:func:`check` raises only inside one)
_active = 0


class Terminated(BaseException):
    """SIGTERM received (unwinds like ``KeyboardInterrupt``)."""


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt()
    raise Terminated()


def _handler(signum: int, _frame: object) -> None:
    global _received
    if _received is not None:   # already unwinding: let the clean-up finish
        return
    _received = signum
    if not _deferring:
        _raise(signum)


def received() -> Optional[int]:
    """The signal number received under :func:`handling` (None: none)."""
    return _received


def check() -> None:
    """Raise again if a signal arrived under the :func:`handling` block now running (a checkpoint for long
    loops); no-op otherwise (a signal of an ended block is spent: :func:`received` still tells it)."""
    if _received is not None and _active:
        _raise(_received)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A section a signal does not cut: a signal inside it is raised when it ends (outermost)."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring:
        check()


def _unraisable(hook: Any) -> Any:
    """``sys.unraisablehook`` under :func:`handling`: the signal's exception raised where Python can only
    report it (a ``__del__``, a weakref callback run by the garbage collector -- torch's
    ``WeakIdKeyDictionary``) is not printed (the run ends at the next :func:`check` with its one line);
    anything else goes to ``hook``."""

    def unraisable(u: Any) -> None:
        if _received is not None and isinstance(u.exc_value, (KeyboardInterrupt, Terminated)):
            return
        hook(u)

    return unraisable


def worker_init() -> None:
    """In a worker process forked under :func:`handling` (a pool's initializer): SIGINT ignored (a
    terminal's Ctrl-C reaches the whole process group; the parent decides and ends the pool),
    SIGTERM kills (how the parent ends it); a worker forked while a signal was pending, or signalled
    before this ran, exits at once (the parent is ending the pool).  No deferral is inherited.

    A signal of a :func:`handling` block that had ended before the fork is spent (:func:`check`): it does not end the
    worker.  (It did: a library caller that caught one interrupted search and started another -- a notebook, the test
    suite -- got workers that exited on start, which ``multiprocessing.Pool`` replaces without end: a hang.)"""
    global _deferring, _received
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if signal.getsignal(signal.SIGHUP) not in (signal.SIG_IGN, signal.SIG_DFL):  # the parent's handler: die on a
        signal.signal(signal.SIGHUP, signal.SIG_DFL)                            # hang-up as on SIGTERM
    if _received is not None and _active:  # a signal reached the parent's run as it forked, or this worker before
        os._exit(exit_code(signal.SIGTERM))  # now: the pool is being ended (its SIGTERM may have been swallowed)
    _deferring = 0
    _received = None


@contextlib.contextmanager
def handling(keep: bool = False) -> Iterator[None]:
    """Handle SIGINT, SIGTERM and SIGHUP as above for the block (main thread only; elsewhere a no-op); a
    hang-up the process was started to ignore stays ignored (:func:`hangup_ignored`).

    ``keep``: when the block ends, ignore the signals instead of restoring the previous handlers
    (the CLI process's entry point: the run is over, and a signal between its end and the
    interpreter's exit must not raise a traceback there)."""
    global _received, _deferring, _active
    _received = None
    _deferring = 0
    _active += 1
    previous = {}
    for sig in HANDLED:
        if sig == signal.SIGHUP and hangup_ignored():
            continue
        try:
            previous[sig] = signal.signal(sig, _handler)
        except ValueError:  # not the main thread
            pass
    hook = sys.unraisablehook
    if previous:
        sys.unraisablehook = _unraisable(hook)
    try:
        yield
    finally:
        _active -= 1
        if previous:
            sys.unraisablehook = hook
        for sig, h in previous.items():
            signal.signal(sig, signal.SIG_IGN if keep else h)


def exit_code(signum: int) -> int:
    """Shell convention: 128 + the signal number (130 SIGINT, 143 SIGTERM, 129 SIGHUP)."""
    return 128 + int(signum)


def end_line(signum: int) -> str:
    """The one line a run ended by signal ``signum`` prints on stderr, from the entry point's early handler
    (``__main__``, while the CLI's modules load) and from ``cli.main`` alike: ``primus-launch: interrupted
    (SIGINT)``, ``terminated (SIGTERM)``, ``hung up (SIGHUP)``; another signal: ``stopped (N)``."""
    return f"primus-launch: {_ENDINGS.get(signum, f'stopped ({int(signum)})')}"
