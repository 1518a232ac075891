"""The lines a tuned recipe changed, as the tune's answer prints them under "tuned recipe written to".

The tune's ``changes:`` line names the plan's fields; the written file can differ in more lines than those
fields: the settings a changed knob needs to start (Megatron-FSDP's ``--ckpt-format fsdp_dtensor``, which
Megatron-LM's ``validate_args`` asserts, ``megatron/training/arguments.py``; the launch environment of
``plan/legality.py`` ``megatron_env_fixes``) and a flag added where the original had none.  A user who diffs
the two files found lines the answer never named; the answer now shows them (``difflib``'s line opcodes:
each replaced, deleted or inserted line once, ``-`` the original's, ``+`` the tuned one's).
"""

from __future__ import annotations

import difflib

#: changed lines shown before the rest is counted (the answer stays on a screen or two)
MAX_SHOWN = 16
#: a line is cut to this many columns (under the answer's 80, after the two-space indent and the sign)
LINE_WIDTH = 76


#: a longer line is wrapped onto at most this many lines before it is cut
WRAPPED_LINES = 3


def _cut(line: str) -> list[str]:
    """``line`` stripped, within :data:`LINE_WIDTH` columns: a longer one wrapped at its spaces onto at most
    :data:`WRAPPED_LINES` lines (the continuations indented two more), the rest cut with "...": cut at one line,
    a TorchTitan launch line's "--co..." hid the word the tune added at its end (user14)."""
    import textwrap

    s = line.strip()
    if len(s) <= LINE_WIDTH:
        return [s]
    lines = textwrap.wrap(s, LINE_WIDTH, subsequent_indent="  ", break_long_words=True, break_on_hyphens=False)
    if len(lines) > WRAPPED_LINES:
        last = lines[WRAPPED_LINES - 1]
        lines = lines[:WRAPPED_LINES - 1] + [(last if len(last) <= LINE_WIDTH - 4 else last[:LINE_WIDTH - 4]) + " ..."]
    return lines


def _blocks(original: str, tuned: str) -> list[tuple[list[str], list[str]]]:
    """``(lines of original, lines of tuned)`` of each block ``difflib``'s line opcodes do not call equal, in
    file order (whitespace-only differences included)."""
    a, b = original.splitlines(), tuned.splitlines()
    return [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2
            in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if tag != "equal"]


def changed_lines(original: str, tuned: str, blocks: list | None = None) -> list[tuple[str, str]]:
    """``(sign, line)`` for each line of ``original`` replaced or deleted (``-``) and each line of ``tuned``
    replaced or inserted (``+``), in file order; whitespace-only differences included.  ``blocks``: the pair's
    :func:`_blocks`, where the caller has them."""
    return [(sign, ln) for old, new in (_blocks(original, tuned) if blocks is None else blocks)
            for sign, lines in (("-", old), ("+", new)) for ln in lines]


def change_counts(original: str, tuned: str, blocks: list | None = None) -> dict[str, int]:
    """Lines ``changed`` (a line of ``original`` replaced by one of ``tuned``), ``added`` and ``removed``: per
    replaced block the pairs are changes and the surplus on either side added or removed."""
    n = {"changed": 0, "added": 0, "removed": 0}
    for old, new in (_blocks(original, tuned) if blocks is None else blocks):
        pairs = min(len(old), len(new))
        n["changed"] += pairs
        n["added"] += len(new) - pairs
        n["removed"] += len(old) - pairs
    return n


def diff_lines(original: str, tuned: str, original_name: str, tuned_name: str) -> list[str]:
    """The answer's block: a heading with the counts, at most :data:`MAX_SHOWN` changed lines, and what was
    left out with the command that shows it."""
    blocks = _blocks(original, tuned)   # one line match for the lines and the counts
    ch = changed_lines(original, tuned, blocks)
    if not ch:
        return [f"the tuned recipe is the same text as {original_name} (the recipe's own plan is the best)"]
    counts = ", ".join(f"{v} {k}" for k, v in change_counts(original, tuned, blocks).items() if v)
    out = [f"lines that differ from {original_name}: {counts}"]
    out += [f"  {s if i == 0 else ' '} {part}" for s, ln in ch[:MAX_SHOWN] for i, part in enumerate(_cut(ln))]
    if len(ch) > MAX_SHOWN:
        out.append(f"  ... {len(ch) - MAX_SHOWN} more: diff {original_name} {tuned_name}")
    return out
