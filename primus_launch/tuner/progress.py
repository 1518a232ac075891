"""A one-line live progress bar on stderr while the tuner searches (throttled, no dependencies)."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


_OPEN: list["Progress"] = []   # bars shown and not closed (an interrupt ends their line)


def end_lines() -> None:
    """End the line of every bar still shown (before a one-line message, e.g. an interrupt's)."""
    while _OPEN:
        _OPEN.pop().close()


class Progress:
    def __init__(self, total: Optional[int], baseline_s: Optional[float] = None, stream: TextIO | None = None,
                 min_interval_s: float = 0.1):
        self.total = total
        self.baseline_s = baseline_s
        self.stream = stream or sys.stderr
        self.min_interval_s = min_interval_s
        self.t0 = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, engine, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval_s:
            return
        self._last = now
        n = engine.scored
        best = engine.best()
        best_s = engine.time_of(best) if best is not None else None
        width = 24
        if self.total:
            frac = min(1.0, n / self.total)
            bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
            head = f"[{bar}] {n}/{self.total}"
        else:
            head = f"scored {n}"
        tail = ""
        if best_s is not None:
            tail = f" best {best_s:.3f} s/iter"
            if self.baseline_s:
                tail += f" ({100 * (self.baseline_s / best_s - 1):+.1f}%)"
        self.stream.write(f"\rtune {head}{tail} {now - self.t0:.0f}s ")
        self.stream.flush()
        if not self._shown:
            _OPEN.append(self)
        self._shown = True

    def close(self, engine=None) -> None:
        if engine is not None:
            self.update(engine, force=True)
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
        if self in _OPEN:
            _OPEN.remove(self)
