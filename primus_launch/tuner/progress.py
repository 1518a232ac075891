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
    """``total``: the bar's end (the plans of the space for the branch-and-bound and brute-force
    searches, the scoring budget for the planner); ``unit``: what it counts; ``baseline_s``: the
    recipe's iteration time (the gain's reference)."""

    def __init__(self, total: Optional[int], baseline_s: Optional[float] = None, stream: TextIO | None = None,
                 min_interval_s: float = 0.1, unit: str = ""):
        self.total = total
        self.unit = unit
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
            head = f"[{bar}] {n}/{self.total}{' ' + self.unit if self.unit else ''}"
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

    def advance_to(self, completed: int, best_s: Optional[float] = None, force: bool = False) -> None:
        """Show ``completed`` of the total (plans resolved by the branch and bound) and ``best_s``."""
        self.update(_Count(completed, best_s), force=force)

    def close(self, engine=None) -> None:
        if engine is not None:
            self.update(engine, force=True)
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
        if self in _OPEN:
            _OPEN.remove(self)


class _Count:
    """A count and a best time in the shape :meth:`Progress.update` reads."""

    def __init__(self, n: int, best_s: Optional[float]):
        self.scored = n
        self.best_s = best_s if best_s is not None and best_s != float("inf") else None

    def best(self):
        return None if self.best_s is None else 0

    def time_of(self, _):
        return self.best_s
