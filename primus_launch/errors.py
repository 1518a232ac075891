"""User-facing errors: one clear line naming the field, the value and what is allowed."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (file, flag, value). The CLI prints ``str(e)`` and exits 2."""


class OutputError(UserError, OSError):
    """An output that could not be written (a full disk, a folder gone or made read-only during the run):
    a :class:`UserError` for the CLI's one line, an :class:`OSError` for callers that tolerate a failed
    write (the caches).  Built as ``OutputError(errno, line)``; ``str()`` is the line."""

    def __str__(self) -> str:
        return self.strerror if isinstance(self.strerror, str) else super().__str__()


def one_line(exc: BaseException) -> str:
    """Render an exception as the single line the CLI prints (no traceback)."""
    from pydantic import ValidationError

    from primus_launch.plan import PlanError

    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors():
            ctx_err = (err.get("ctx") or {}).get("error")
            if isinstance(ctx_err, PlanError):
                parts.append(str(ctx_err))
                continue
            loc = ".".join(str(x) for x in err.get("loc", ()))
            inp = err.get("input")
            shown = "" if isinstance(inp, dict) else f"={inp!r}"
            parts.append(f"{loc}{shown}: {err.get('msg')}" if loc else str(err.get("msg")))
        return clip_words("; ".join(parts))
    return clip_words(" ".join(str(exc).split()))


#: a word of an error line longer than this is shown as its head and its size (as PlanError shows a value)
WORD_CHARS = 200
#: an error line past this many characters keeps its two ends (the field and value, then what is allowed)
LINE_CHARS = 500


def _clip(word: str) -> str:
    if len(word) <= WORD_CHARS:
        return word
    body = word.rstrip(":;,")  # the separator after a value stays: "field='xxx...' (5,000 characters):"
    return f"{body[:60]}... ({len(body):,} characters){word[len(body):]}"


def clip_words(line: str) -> str:
    """``line`` readable as one line: each word past :data:`WORD_CHARS` characters shown as its first 60
    and its length (a 5,000-digit number, a pasted path), and a line still past :data:`LINE_CHARS` (a
    mapping's repr as a value) without its middle: its start names the field, its end what is allowed."""
    if len(line) <= WORD_CHARS:
        return line
    line = " ".join(_clip(w) for w in line.split(" "))
    if len(line) > LINE_CHARS:
        cut = len(line) - LINE_CHARS
        line = f"{line[:LINE_CHARS // 2]} ... ({cut:,} characters) ... {line[-LINE_CHARS // 2:]}"
    return line
