"""User-facing errors: one clear line naming the field, the value and what is allowed."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (file, flag, value). The CLI prints ``str(e)`` and exits 2."""


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
        return "; ".join(parts)
    return " ".join(str(exc).split())
