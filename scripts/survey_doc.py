"""Write the recipe surveys' results into ``docs/recipe-survey.md`` (one section per survey script).

Used by ``scripts/survey_recipes.py --markdown`` and ``scripts/survey_primus_titan.py --markdown``:
each replaces only its own section (between ``<!-- survey:NAME:begin -->`` and ``<!-- survey:NAME:end -->``),
so the file holds what the last run of each command printed, never hand-typed figures.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primus_launch.fileio import atomic_write_text  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "recipe-survey.md"
HEADER = """# Survey of public recipes

How many public recipe files primus-launch reads right, refuses (and why) or reads wrong.  Every table
below is written by the command named above it (`--markdown`); the upstream trees are read from local
mirrors and never copied into this repository.  *Read right*: a plan comes out and passes the survey's
checks (flags read / neutral / reported, byte-identical rendering of the unchanged plan, a tuned copy that
re-reads as requested, the layout / model numbers the file states).  *Refused*: a one-line error naming
the field, its value and what is allowed.  *Read wrong*: a plan comes out but a check fails.

"""


def table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    """A Markdown table of ``rows`` (dicts) with ``cols`` = [(key, heading)]."""
    out = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(k, "")).replace("|", "\\|") for k, _ in cols) + " |")
    return "\n".join(out) + "\n"


def reasons_table(reasons: dict[str, int]) -> str:
    rows = [{"n": n, "why": why} for why, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))]
    return table(rows, [("n", "files"), ("why", "refused because")]) if rows else "(none)\n"


def write_section(name: str, body: str, path: Path = DOC) -> Path:
    """Replace (or append) section ``name`` of ``path`` with ``body``; atomic."""
    begin, end = f"<!-- survey:{name}:begin -->", f"<!-- survey:{name}:end -->"
    text = path.read_text() if path.is_file() else HEADER
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    pat = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    text = pat.sub(lambda _: block, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + block
    atomic_write_text(path, text)
    return path
