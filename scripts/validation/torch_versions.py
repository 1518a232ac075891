"""The torch version of the validation rows whose source states or dates it (``plan.software.torch``,
``primus_launch/plan/software.py``).

A row gets a version only where its source names the run's torch or dates the run; the others keep ``None``
(the current stack).  Where the source gives a torch commit or only a date, the value is the newest torch
release published by that date (a main-branch build of that date has at most that release's kernels plus the
main branch's; for the kernel this serves -- eager ``nn.RMSNorm``'s fused kernel, torch >= 2.9, landed on main
between 2025-07-09 and 2025-08-13, ``cost/torch_rmsnorm.py`` -- every date below is before it).  Torch releases:
2.3.0 2024-04-24, 2.5.1 2024-10-29, 2.6.0 2025-01-29, 2.7.1 2025-06-04.

Rows left at ``None`` (source neither states nor bounds it before the kernel): PR #1690's Qwen3 32B runs (logged
around 2025-09-17, after the kernel reached the nightlies), PR #2107 (2025-12), the torchao / GB200 / NVFP4 rows
(2025-11 and later, or compiled: inductor fuses the norm whatever the release).

    python scripts/validation/torch_versions.py      # apply to the committed runs.json (build_runs.py does it too)
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

RUNS = Path(__file__).with_name("runs.json")

# (text the row's source starts with or contains, torch version, why) -- first match wins
TORCH_BY_SOURCE: list[tuple[str, str, str]] = [
    ("benchmarks/llama3_h100_202412_torchtitan.md", "2.5.1",
     "the source's 'Versions and Dates' table: torch 1963fc8 of 2024-12-23, a main build; 2.5.1 is the newest "
     "release by then"),
    ("benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md", "2.7.1",
     "the source states torch 38410cf9 (the file dated 2025-06-16): a main build; 2.7.1 is the newest release by then"),
    ("benchmarks/llama3_8b_h200_2025-06_torchtitan.md", "2.7.1",
     "the source dates the runs June 2025 (torch not named); 2.7.1 is the newest release by then"),
    ("docs/performance.md (commit 04133643", "2.3.0",
     "dated by the torchtitan commit 04133643 of 2024-04-24 (torch not named); 2.3.0 is the newest release by then"),
    ("PR #808 (", "2.6.0",
     "dated by the PR (squash-merged 2025-02-27; torch not named); 2.6.0 is the newest release by then"),
    ("commit 88247277c (PR #820", "2.6.0",
     "dated by the commit (2025-02-06; torch not named); 2.6.0 is the newest release by then"),
]


# (text the row's source contains, torchtitan version, why): plan.software.torchtitan (cost/titan_qk_norm.py)
TORCHTITAN_BY_SOURCE: list[tuple[str, str, str]] = [
    ("pytorch/torchtitan PR #1690 (", "0.1.0",
     "the source names the squash-merge d66b72a6a (2025-09-17), whose assets/version.txt is 0.1.0"),
]


def torchtitan_of(source: str) -> tuple[str, str] | None:
    """The (version, why) :data:`TORCHTITAN_BY_SOURCE` gives a row's ``source`` text, None when no entry matches."""
    for key, version, why in TORCHTITAN_BY_SOURCE:
        if key in source:
            return version, why
    return None


def torch_of(source: str) -> tuple[str, str] | None:
    """The (version, why) :data:`TORCH_BY_SOURCE` gives a row's ``source`` text, None when no entry matches."""
    for key, version, why in TORCH_BY_SOURCE:
        if key in source:
            return version, why
    return None


def apply(rows: list[dict]) -> int:
    """Set ``plan.software.torch`` (and an assumption line) on every row :func:`torch_of` matches, and
    ``plan.software.torchtitan`` on every row :func:`torchtitan_of` matches; the count of the former."""
    n = 0
    for row in rows:
        titan = torchtitan_of(row.get("source") or "")
        if titan is not None and (row.get("plan") or {}).get("source", {}).get("framework") == "torchtitan":
            row["plan"]["software"] = {**(row["plan"].get("software") or {}), "torchtitan": titan[0]}
            note = f"software.torchtitan = {titan[0]}: {titan[1]}"
            row["assumptions"] = [a for a in row.get("assumptions", [])
                                  if not a.startswith("software.torchtitan = ")] + [note]
        hit = torch_of(row.get("source") or "")
        if hit is None or (row.get("plan") or {}).get("source", {}).get("framework") != "torchtitan":
            continue
        version, why = hit
        row["plan"]["software"] = {**(row["plan"].get("software") or {}), "torch": version}
        note = f"software.torch = {version}: {why}"
        row["assumptions"] = [a for a in row.get("assumptions", []) if not a.startswith("software.torch = ")] + [note]
        n += 1
    return n


def main() -> int:
    doc = json.loads(RUNS.read_text())
    n = apply(doc["rows"])
    fd, tmp = tempfile.mkstemp(dir=RUNS.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, RUNS)
    print(f"software.torch set on {n} rows -> {RUNS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
