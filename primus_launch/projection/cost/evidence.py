"""Public kernel-level measurements the cost model stands on (``projection/data/kernel_evidence.json``).

Each record: ``id, kind, gpu, impl, dtype, shape, value, unit, source, note`` (see
``docs/kernel-evidence.md``).  The dry-run never reads this file: the curves fitted to it live in
:mod:`primus_launch.projection.cost.fitted` (written by ``scripts/fit_kernels.py``, each with the
ids of the records it was fitted to).  This module serves the fit script, the tests that hold every
curve to its records, and the explanation (source text of a record id).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

EVIDENCE = Path(__file__).resolve().parents[1] / "data" / "kernel_evidence.json"


@lru_cache(maxsize=1)
def all_records() -> tuple[dict, ...]:
    """Every record of the evidence file (empty when the file is absent)."""
    if not EVIDENCE.exists():
        return ()
    return tuple(json.loads(EVIDENCE.read_text()))


@lru_cache(maxsize=1)
def _by_id() -> dict[str, dict]:
    return {r["id"]: r for r in all_records()}


def record(rid: str) -> dict | None:
    """The record with id ``rid`` (None when absent)."""
    return _by_id().get(rid)


def select(kind: str, pred: Callable[[dict], bool] = lambda r: True) -> list[dict]:
    """Records of ``kind`` for which ``pred`` holds."""
    return [r for r in all_records() if r["kind"] == kind and pred(r)]


def cite(ids: Iterable[str], limit: int = 3) -> str:
    """A short citation of record ids: the first ``limit`` ids and the sources they come from."""
    ids = list(ids)
    srcs: list[str] = []
    for i in ids:
        r = record(i)
        if r is None:
            continue
        s = r["source"].split(",")[0].split(" @")[0][:80]
        if s not in srcs:
            srcs.append(s)
    more = f" (+{len(ids) - limit} more)" if len(ids) > limit else ""
    return f"records {', '.join(ids[:limit])}{more}; " + "; ".join(srcs[:2])


def number(v: object) -> float | None:
    """A record's numeric shape entry (None for text such as 'max over ...')."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
