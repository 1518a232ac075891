"""What a ``primus-launch`` command prints and writes beside its answer: a written file's path and size as the
user reads them, a line wrapped at the tune's width, the Chrome trace, the reader's notes and the not-modelled
settings on stderr; shared by the CLI's projection (``cli.py``) and its tune (``cli_tune.py``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from primus_launch.plan import Plan
    from primus_launch.projection.result import ProjectionResult


def fit(line: str) -> str:
    """``line`` wrapped at 80 columns (the tune's answer's width), continuation lines indented by two; a path
    longer than a line is left whole (a path broken across lines cannot be pasted)."""
    import textwrap

    from primus_launch.report.text import glue_units

    # a number keeps its unit: "trial log written to ....trials.json (37.4" / "KB)" was split
    return "\n".join(w.replace("\u00a0", " ") for w in textwrap.wrap(
        glue_units(line), 80, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)) or line


def file_size(path: str | Path) -> int:
    """``path``'s size in bytes; 0 where it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def human(n: Optional[int]) -> str:
    """A file size for a person: ``3.0 KB``, ``1.2 MB``."""
    n = n or 0
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def shown(p: str | Path) -> str:
    """A written file's path as the user reads it: relative to the working folder where it lies under it
    (a wrapper's recipe path is resolved to an absolute one; the tuned wrapper beside it was relative)."""
    try:
        return os.path.relpath(p) if Path(p).resolve().is_relative_to(Path.cwd().resolve()) else str(p)
    except (OSError, ValueError):
        return str(p)


def write_trace(path: str, result: ProjectionResult) -> None:
    """``result``'s simulated pipeline timeline written to ``path`` as a Chrome / Perfetto trace."""
    from primus_launch.fileio import atomic_write_text
    from primus_launch.projection.pipeline.simulate import chrome_trace

    atomic_write_text(path, json.dumps(chrome_trace(result.timeline, title=result.plan.model.name)))


def print_reader_lines(result: ProjectionResult, plan: Plan) -> None:
    """The settings ``result`` does not model and what the reader of ``plan`` assumed (a GPU, a vocabulary), one
    line each on stderr: where the answer on stdout does not list them (``--json``, a tune)."""
    for w in result.warnings:
        print(f"primus-launch: warning: {w.flag}={w.value}: not modelled ({w.effect})", file=sys.stderr)
    for n in (plan.source.notes if plan.source else []):
        print(f"primus-launch: note: {n}", file=sys.stderr)
