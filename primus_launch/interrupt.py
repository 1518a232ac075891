"""SIGINT / SIGTERM during long library calls (the measured projection, tuning).

The CLI installs :func:`handling`: a signal raises ``KeyboardInterrupt`` (SIGINT) or
:class:`Terminated` (SIGTERM) at once -- ``finally`` blocks run, child processes are reaped, cache
writes stay atomic -- and is also remembered, because framework code can swallow the exception
(megatron-core and torch guard optional imports with bare ``except:``).  Long loops call
:func:`check` at safe points, so a swallowed signal still stops the run there; the CLI then ends
with one line and exit 130 (SIGINT) / 143 (SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator, Optional

_received: Optional[int] = None


class Terminated(BaseException):
    """SIGTERM received (unwinds like ``KeyboardInterrupt``)."""


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt()
    raise Terminated()


def _handler(signum: int, _frame: object) -> None:
    global _received
    _received = signum
    _raise(signum)


def received() -> Optional[int]:
    """The signal number received under :func:`handling` (None: none)."""
    return _received


def check() -> None:
    """Raise again if a signal arrived (a checkpoint for long loops); no-op otherwise."""
    if _received is not None:
        _raise(_received)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as above for the block (main thread only; elsewhere a no-op)."""
    global _received
    _received = None
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, _handler)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)


def exit_code(signum: int) -> int:
    """Shell convention: 128 + the signal number (130 SIGINT, 143 SIGTERM)."""
    return 128 + int(signum)
