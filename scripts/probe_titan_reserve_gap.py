"""Probe (MEMORY.md round 21): where a TorchTitan run's measured reserved peak sits between the projected allocated
peak and the projected reserved peak.

For every judged TorchTitan case of ``memory_cases.json`` with an exactly published reserved peak, prints the
projected allocated peak A, the projected reserved peak R (A + the stated 10 % of the dynamic bytes + FSDP2's
side-stream pools, ``memory.stage.stage_report``), the measured reserved peak M, and where M falls:
``(M - A) / (R - A)`` (0 = the allocated projection, 1 = the reserved one), with the measured peak as a fraction
of the device.  Nothing is written.

    PYTHONPATH=. python scripts/probe_titan_reserve_gap.py [ID_SUBSTRING ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_memory import case_items, evaluate, load_gpus  # noqa: E402


def titan_reserved_cases(only: list[str]) -> list:
    """The judged TorchTitan cases with an exactly published reserved peak (whose id contains one of ``only``,
    where given)."""
    load_gpus()
    out = []
    for it in case_items():
        m = it.measured or {}
        if it.plan is None or it.plan.framework != "torchtitan" or m.get("basis") != "reserved" or m.get("approx") \
                or not m.get("gib") or (only and not any(s in it.id for s in only)):
            continue
        out.append(it)
    return out


def rows(only: list[str]) -> list[dict]:
    out = []
    for it in titan_reserved_cases(only):
        m = it.measured
        r = evaluate(it)
        a, res, meas = r["allocated_gib"], r["reserved_gib"], float(m["gib"])
        out.append(dict(id=it.id, alloc=a, reserved=res, measured=meas, capacity=r["capacity_gib"],
                        where=(meas - a) / (res - a) if res > a else float("nan")))
    return out


def main(argv: list[str] | None = None) -> int:
    rs = rows(list(sys.argv[1:] if argv is None else argv))
    print(f"{'case':62s} {'alloc A':>8s} {'resv R':>8s} {'meas M':>8s} {'(M-A)/(R-A)':>11s} {'M/device':>8s}")
    for r in rs:
        print(f"{r['id'][:62]:62s} {r['alloc']:8.1f} {r['reserved']:8.1f} {r['measured']:8.1f} {r['where']:11.2f} "
              f"{r['measured'] / r['capacity']:8.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
