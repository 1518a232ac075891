"""``cut`` (GNU coreutils 9) of one line, for the bash reader's ``$(echo ... | cut ...)``: which characters of the
line are printed, so that each keeps where it was written.

``cut -f LIST [-d C]`` prints the fields LIST names (1-based ``N``, ``N-M``, ``N-``, ``-M``, comma-separated), in
input order, joined by the delimiter (TAB by default); a line without the delimiter is printed whole (no ``-s``).
``cut -c LIST`` / ``-b LIST`` prints those characters.  Other options: not read (None).
"""

from __future__ import annotations

import re


def _ranges(spec: str) -> list[tuple[int, int]] | None:
    """LIST as 0-based [a, b) ranges."""
    out = []
    for item in spec.split(","):
        # at most 18 digits: GNU cut refuses an offset past its size_t ("is too large"), and int() of 4,301
        # digits raises
        m = re.fullmatch(r"(\d{0,18})(-?)(\d{0,18})", item)
        if not m or not (m.group(1) or m.group(3)):
            return None
        a = int(m.group(1)) if m.group(1) else 1
        b = (int(m.group(3)) if m.group(3) else 1 << 30) if m.group(2) else a
        if a < 1 or b < a:
            return None
        out.append((a - 1, b))
    return out


def cut_indices(line: str, argv: list[str]) -> list[int | str] | None:
    """What ``argv`` (``["cut", ...]``) prints of ``line``: indices into ``line``, and the delimiter (a str)
    where cut writes one between fields; None for options this does not read."""
    if not argv or argv[0] != "cut":
        return None
    opts: dict[str, str] = {}
    args = argv[1:]
    i = 0
    while i < len(args):
        a = args[i]
        m = re.fullmatch(r"-([fdcb])(.*)", a) or re.fullmatch(r"--(fields|delimiter|characters|bytes)=(.*)", a)
        if not m:
            return None
        val = m.group(2)
        if not val and not a.startswith("--"):
            if i + 1 >= len(args):
                return None
            val, i = args[i + 1], i + 1
        opts[m.group(1)[0]] = val
        i += 1
    if "f" in opts:
        delim = opts.get("d", "\t")
        ranges = _ranges(opts["f"])
        if len(delim) != 1 or ranges is None:
            return None
        if delim not in line:
            return list(range(len(line)))
        fields: list[list[int]] = [[]]
        for k, ch in enumerate(line):
            if ch == delim:
                fields.append([])
            else:
                fields[-1].append(k)
        out: list[int | str] = []
        for n, f in enumerate(f for j, f in enumerate(fields) if any(a <= j < b for a, b in ranges)):
            out.extend(([delim] if n else []) + f)
        return out
    spec = opts.get("c", opts.get("b"))
    ranges = _ranges(spec) if spec is not None and "d" not in opts else None
    if ranges is None:
        return None
    return [k for k in range(len(line)) if any(a <= k < b for a, b in ranges)]
