"""Atomic file output: never a partly written file, never over the user's recipe."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from primus_launch.errors import UserError


def atomic_write_text(path: str | Path, text: str, *, protect: Optional[str | Path] = None,
                      mode: Optional[int] = None) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder and ``os.replace``.

    ``protect``: a path that must not be written (the user's original recipe).
    ``mode``: permission bits for the new file (e.g. keep a script's executable bit).
    """
    out = Path(path)
    if protect is not None and out.resolve() == Path(protect).resolve():
        raise UserError(f"output={str(out)!r}: refusing to overwrite the original recipe; choose another path")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def read_recipe_text(path: str | Path) -> str:
    """The text of a user's recipe file, or a one-line :class:`UserError` naming it."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"recipe={str(p)!r}: no such file")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"recipe={str(p)!r}: cannot read: {e}") from None
