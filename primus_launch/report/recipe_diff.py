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


def _cut(line: str) -> str:
    s = line.strip()
    return s if len(s) <= LINE_WIDTH else s[:LINE_WIDTH - 3] + "..."


def changed_lines(original: str, tuned: str) -> list[tuple[str, str]]:
    """``(sign, line)`` for each line of ``original`` replaced or deleted (``-``) and each line of ``tuned``
    replaced or inserted (``+``), in file order; whitespace-only differences included."""
    a, b = original.splitlines(), tuned.splitlines()
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out += [("-", ln) for ln in a[i1:i2]] + [("+", ln) for ln in b[j1:j2]]
    return out


def change_counts(original: str, tuned: str) -> dict[str, int]:
    """Lines ``changed`` (a line of ``original`` replaced by one of ``tuned``), ``added`` and ``removed``: per
    replaced block the pairs are changes and the surplus on either side added or removed."""
    a, b = original.splitlines(), tuned.splitlines()
    n = {"changed": 0, "added": 0, "removed": 0}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            pairs = min(i2 - i1, j2 - j1)
            n["changed"] += pairs
            n["added"] += j2 - j1 - pairs
            n["removed"] += i2 - i1 - pairs
    return n


def diff_lines(original: str, tuned: str, original_name: str, tuned_name: str) -> list[str]:
    """The answer's block: a heading with the counts, at most :data:`MAX_SHOWN` changed lines, and what was
    left out with the command that shows it."""
    ch = changed_lines(original, tuned)
    if not ch:
        return [f"the tuned recipe is the same text as {original_name} (the recipe's own plan is the best)"]
    counts = ", ".join(f"{v} {k}" for k, v in change_counts(original, tuned).items() if v)
    out = [f"lines that differ from {original_name}: {counts}"]
    out += [f"  {s} {_cut(ln)}" for s, ln in ch[:MAX_SHOWN]]
    if len(ch) > MAX_SHOWN:
        out.append(f"  ... {len(ch) - MAX_SHOWN} more: diff {original_name} {tuned_name}")
    return out
