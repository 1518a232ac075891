"""Standard output and standard error as the CLI writes them.

- stderr carries diagnostics (notes, warnings, the progress bar, the one error line): a write that
  fails there (``2>/dev/full``, a closed pipe: ``2> >(head -1)``) is dropped, and the run goes on to its
  answer on stdout; a failed diagnostic write is no fault of the run (it ended with ``internal error``
  and exit 70, or a second ``OSError`` while the first was reported).  A stderr the process was started
  without (``2>&-``: Python sets ``sys.stderr`` to None) is a sink: ``print(..., file=None)`` would
  write the notes on stdout, into the ``--json`` document a pipe reads.
- stdout carries the answer: a write that fails there is one line naming it
  (``stdout: cannot write: No space left on device``), as an output file's failed write names the file
  (:class:`~primus_launch.errors.OutputError`), and the descriptor is pointed at ``/dev/null`` so that the
  interpreter's last flush has nothing left to fail on.  A reader that left (``| head -1``,
  ``BrokenPipeError``) is not an error: the CLI ends as a shell tool does (exit 141, no word).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

from primus_launch.errors import OutputError


class _Sink:
    """Where diagnostics go when the process has no stderr."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


class Diagnostics:
    """stderr that never fails a run: a write or flush that raises ``OSError`` / ``ValueError`` (a full
    disk, a closed pipe or file) is dropped; everything else is the wrapped stream's."""

    def __init__(self, stream: Any):
        self._stream = stream if stream is not None else _Sink()

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except (OSError, ValueError):
            return len(s)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Answer:
    """stdout whose failed write (other than a reader that left) is one :class:`OutputError` line."""

    def __init__(self, stream: Any):
        self._stream = stream

    def _failed(self, e: OSError) -> OutputError:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # the buffered rest is flushed into nothing at exit
            os.close(devnull)
        return OutputError(e.errno, f"stdout: cannot write: {e.strerror or e}")

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise self._failed(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise self._failed(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """``sys.stdout`` as :class:`Answer` and ``sys.stderr`` as :class:`Diagnostics` while the CLI runs
    (the streams it found are put back after)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = Answer(out) if out is not None else Diagnostics(None)  # type: ignore[assignment]
    sys.stderr = Diagnostics(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
