"""Atomic file output: never a partly written file, never over an input of the run, created with
the user's umask."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional



def _umask() -> int:
    """The process's umask (read by setting and restoring it: :func:`os.umask` has no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str, *, protect: Optional[str | Path] = None,
                      mode: Optional[int] = None) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder and ``os.replace``.

    ``protect``: a path that must not be written (the user's original recipe); any file the run
    read through :mod:`primus_launch.inputs` is refused too (real path or hard link).
    A symbolic link is written through: the file it leads to is replaced, the link stays (``os.replace`` over the
    link would put a regular file in its place and leave its target as it was).
    ``mode``: permission bits for the new file (e.g. keep a script's executable bit); by default
    ``0o666`` less the umask, as ``open()`` would create it (``mkstemp`` makes 0600).
    A signal during the write leaves no temp file and no partial output.
    """
    from primus_launch import inputs, interrupt
    from primus_launch.errors import OutputError

    out = Path(path)
    extra = [("the original recipe", protect)] if protect is not None else []
    inputs.refuse_input(out, "output", extra)
    if os.path.islink(out):  # written where the link leads, the link kept (a rename would replace the link itself)
        out = Path(os.path.realpath(out))
    data = text.encode("utf-8")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with interrupt.deferred():  # a signal here is raised once the file is whole (or gone)
            fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
                os.replace(tmp, out)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
    except OSError as e:  # one line naming the file (the CLI checked the folder before any work; it can still fill)
        raise OutputError(e.errno, f"output={str(out)!r}: cannot write: {e.strerror or e}") from None
    return out


def write_beside_original(path: str | Path, text: str, original: str | Path) -> Path:
    """:func:`atomic_write_text` of a tuned recipe: never over ``original``, with its permission bits (a launch
    script stays executable).  An ``original`` gone since it was read: one line naming the output."""
    import stat

    from primus_launch.errors import UserError

    try:
        mode = stat.S_IMODE(Path(original).stat().st_mode)
    except OSError as e:
        raise UserError(f"{path}: cannot write: {e.strerror or e}") from None
    return atomic_write_text(path, text, protect=original, mode=mode)


def read_recipe_text(path: str | Path, field: str = "recipe") -> str:
    """The text of a user's recipe file through the input boundary (:func:`primus_launch.inputs.read_text`:
    size, encoding, one-line errors; remembered as an input of the run)."""
    from primus_launch import inputs

    return inputs.read_text(path, field)
