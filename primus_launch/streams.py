r"""Standard output and standard error as the CLI writes them.

- stderr carries diagnostics (notes, warnings, the progress bar, the one error line): a write that
  fails there (``2>/dev/full``, a closed pipe: ``2> >(head -1)``) is dropped, and the run goes on to its
  answer on stdout; a failed diagnostic write is no fault of the run (it ended with ``internal error``
  and exit 70, or a second ``OSError`` while the first was reported).  A stderr the process was started
  without (``2>&-``: Python sets ``sys.stderr`` to None) is a sink: ``print(..., file=None)`` would
  write the notes on stdout, into the ``--json`` document a pipe reads.
- stdout carries the answer: a write that fails there is one line naming it
  (``stdout: cannot write: No space left on device``; a stdout the process was started without, ``>&-``:
  ``Bad file descriptor (stdout is closed)``), as an output file's failed write names the file
  (:class:`~primus_launch.errors.OutputError`), and the descriptor is pointed at ``/dev/null`` so that the
  interpreter's last flush has nothing left to fail on.  A reader that left (``| head -1``,
  ``BrokenPipeError``) is not an error: the CLI ends as a shell tool does (exit 141, no word).
- text read from a recipe (a TOML or YAML key, a bash word, a file name) reaches both streams inside
  notes, warnings, error lines and the text answer; the characters a terminal acts on instead of showing
  (C0 and C1 controls, DEL, the bidirectional overrides and isolates) are written as their escapes
  (:func:`shown`: ``\x1b``, ``\r``, ``\u202e``), so that a recipe cannot clear the screen, retitle the
  window, hide or reorder what follows, or start a line of its own (``"a\rprimus-launch: all good" = 1``
  in a TOML showed as the line ``primus-launch: all good=1: not modelled``).  On stderr a line break
  inside one write is escaped too: a diagnostic is one ``print`` (one write and its ``\n``), so a note
  naming a key with a newline in it stays one line.  The progress bar (rich's own cursor codes) writes
  through :func:`trusted`.  JSON is unaffected (``json.dumps`` escapes every control character itself).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from typing import Any, Iterator

from primus_launch.errors import OutputError


#: what a terminal acts on instead of showing: C0 controls but tab and newline, DEL, C1 controls, the
#: bidirectional marks, embeddings, overrides and isolates (Unicode TR9), the line and paragraph separators
_ACTIVE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_TEXT = re.compile(f"[{_ACTIVE}]")
_IN_LINE = re.compile(f"[\n{_ACTIVE}]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def shown(text: str, one_line: bool = False) -> str:
    r"""``text`` with the characters a terminal acts on (module doc) written as their escapes, as ``repr``
    writes them (``\x1b``, ``\r``, ``\u202e``); ``one_line``: a newline too (``\n``)."""
    pattern = _IN_LINE if one_line else _IN_TEXT
    return pattern.sub(_escape, text) if pattern.search(text) else text


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


class _Closed(_Sink):
    """stdout when the process was started without one (``>&-``: Python sets ``sys.stdout`` to None): the
    answer cannot be written, and is one line saying so (as on a full disk), not dropped with exit 0."""

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "Bad file descriptor (stdout is closed)")

    def fileno(self) -> int:  # the descriptor number is free (or another file's): never pointed at /dev/null
        raise ValueError("stdout is closed")


class Diagnostics:
    """stderr that never fails a run: a write or flush that raises ``OSError`` / ``ValueError`` (a full
    disk, a closed pipe or file) is dropped; everything else is the wrapped stream's."""

    def __init__(self, stream: Any, escape: bool = True):
        self._stream = stream if stream is not None else _Sink()
        self._escape = escape

    def write(self, s: str) -> int:
        if self._escape and isinstance(s, str):  # one diagnostic per write: only its final newline ends it
            body, end = (s[:-1], "\n") if s.endswith("\n") else (s, "")
            text = shown(body, one_line=True) + end
        else:
            text = s
        try:
            self._stream.write(text)
        except (OSError, ValueError):
            pass
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
        self.failed: OutputError | None = None  # the first failed write, for a caller that swallowed it (argparse)

    def _failed(self, e: OSError) -> OutputError:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # the buffered rest is flushed into nothing at exit
            os.close(devnull)
        self.failed = self.failed or OutputError(e.errno, f"stdout: cannot write: {e.strerror or e}")
        return self.failed

    def write(self, s: str) -> int:
        try:
            text = shown(s) if isinstance(s, str) else s
            try:
                self._stream.write(text)
            except UnicodeEncodeError:  # a stdout that cannot take a character of the recipe's (PYTHONIOENCODING=ascii,
                enc = getattr(self._stream, "encoding", None) or "ascii"  # a C locale): its escape, as stderr writes it
                self._stream.write(text.encode(enc, "backslashreplace").decode(enc))
            return len(s)
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


def trusted(stream: Any) -> Any:
    """``stream`` for a writer whose control characters are its own (the progress bar's cursor codes):
    stderr's :class:`Diagnostics` without the escaping, anything else as it is."""
    return Diagnostics(stream._stream, escape=False) if isinstance(stream, Diagnostics) else stream


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """``sys.stdout`` as :class:`Answer` and ``sys.stderr`` as :class:`Diagnostics` while the CLI runs
    (the streams it found are put back after)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = Answer(out if out is not None else _Closed())  # type: ignore[assignment]
    sys.stderr = Diagnostics(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
