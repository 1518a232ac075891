"""The tuner's live progress bar on stderr: rich's ``Progress`` (a bar, done / total, the best
iteration time and its gain over the recipe, elapsed time), refreshed by the search itself.

No refresh thread (``auto_refresh=False``): the exhaustive search forks its scoring workers, and a
thread holding rich's lock across a fork would leave the child's copy locked; the search calls
:meth:`Progress.update` / :meth:`Progress.advance_to`, throttled to ``min_interval_s``.  On a
terminal the bar redraws in place; elsewhere (a log file, a pipe) rich writes it once, at the end.
The total of a bar never changes while it is shown (the plans of the space for the branch and
bound and the brute force, the scoring budget for the planner), so the bar never moves backwards.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Optional, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, TextColumn
from rich.progress import Progress as RichProgress

from primus_launch.streams import trusted


class Tally(Protocol):
    """What a bar reads of a search: an engine, a memo or a sweep's view (``scored``, the best
    candidate so far and its time)."""

    scored: int

    def best(self) -> Any:
        """The best candidate so far (None: none)."""

    def time_of(self, k: Any) -> Optional[float]:
        """The iteration time of candidate ``k``."""


_OPEN: list["Progress"] = []   # bars shown and not closed (an interrupt ends their line)


def end_lines() -> None:
    """End every bar still shown (before a one-line message, e.g. an interrupt's)."""
    while _OPEN:
        _OPEN.pop().close()


def count_text(n: int) -> str:
    """A count in at most 6 columns: ``9,999``, then three significant digits with K / M / G
    (``997K``, ``64.1M``)."""
    if n < 10_000:
        return f"{n:,}"
    for div, suffix in ((1e3, "K"), (1e6, "M"), (1e9, "G")):
        if n / div < 999.5 or suffix == "G":
            return f"{float(f'{n / div:.3g}'):g}" + suffix
    return str(n)


def elapsed_text(s: float) -> str:
    """Seconds as the tune's answer writes them (``searched: ... in 1.3 s``): ``1.3 s``."""
    return f"{s:.1f} s"


class Progress:
    """``total``: the bar's end (None: a count without a bar); ``unit``: what it counts;
    ``baseline_s``: the recipe's iteration time (the gain's reference); ``start``: the ``time.monotonic()``
    the elapsed time counts from (the tune's start, so that the bar's seconds are the answer's ``searched:
    ... in 1.3 s``, in the same ``1.3 s`` form: rich's own elapsed column counted from the bar's creation
    in whole seconds, "0:00:00" beside a 1.3 s answer); default: now."""

    def __init__(self, total: Optional[int], baseline_s: Optional[float] = None, stream: TextIO | None = None,
                 min_interval_s: float = 0.1, unit: str = "", start: Optional[float] = None):
        self.total = total
        self.start = time.monotonic() if start is None else start
        self.unit = unit
        self.baseline_s = baseline_s
        self.min_interval_s = min_interval_s
        self._last = 0.0
        # its cursor codes are its own: through stderr's unescaped channel (primus_launch.streams.trusted)
        console = Console(file=trusted(stream or sys.stderr), highlight=False)
        columns = [TextColumn("tune")]
        if total:  # done / total in short numbers: a full 64111104 does not fit an 80-column line (rich cut it)
            columns += [BarColumn(bar_width=24), TextColumn("{task.fields[done]}/" + count_text(total))]
        else:
            columns += [TextColumn("scored {task.completed}")]
        columns += [TextColumn("{task.fields[unit]}{task.fields[best]}"), TextColumn("{task.fields[elapsed]}")]
        self._bar = RichProgress(*columns, console=console, auto_refresh=False, transient=False)
        self._task = self._bar.add_task("tune", total=total or None, unit=f"{unit} " if unit else "", best="",
                                        done="0", elapsed=elapsed_text(0.0))
        self._shown = False
        self._closed = False

    def _show(self, n: int, best_s: Optional[float], force: bool) -> None:
        if self._closed:
            return
        now = time.monotonic()
        if not force and now - self._last < self.min_interval_s:
            return
        self._last = now
        best = ""
        if best_s is not None:
            best = f"best {best_s:.3f} s/iter"
            if self.baseline_s:
                best += f" ({100 * (self.baseline_s / best_s - 1):+.1f}%)"
        self._bar.update(self._task, completed=n, best=best, done=count_text(n),
                         elapsed=elapsed_text(now - self.start))
        if not self._shown:
            self._bar.start()
            self._shown = True
            _OPEN.append(self)
        self._bar.refresh()

    def update(self, engine: Tally, force: bool = False) -> None:
        """Show ``engine.scored`` done and the time of ``engine.best()`` (an engine, a memo or a sweep's view)."""
        best = engine.best()
        self._show(engine.scored, engine.time_of(best) if best is not None else None, force)

    def advance_to(self, completed: int, best_s: Optional[float] = None, force: bool = False) -> None:
        """Show ``completed`` of the total (plans resolved by the branch and bound) and ``best_s``."""
        finite = best_s is not None and best_s != float("inf")
        self._show(completed, best_s if finite else None, force)

    def close(self, engine: Optional[Tally] = None) -> None:
        """Draw the last state (``engine``'s, where given) and end the bar's line."""
        if engine is not None:
            self.update(engine, force=True)
        if self._shown and not self._closed:  # the elapsed time as the search ends (the last draw may be older)
            self._bar.update(self._task, elapsed=elapsed_text(time.monotonic() - self.start))
            self._bar.refresh()
            self._bar.stop()
        self._closed = True
        if self in _OPEN:
            _OPEN.remove(self)
