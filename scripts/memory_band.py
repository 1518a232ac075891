"""The memory projection's error band from the published peaks ``scripts/validate_memory.py`` compares.

For every published peak the validation compares exactly (``scripts/validation/memory_cases.json``:
pytorch/torchtitan benchmark reserved peaks, Megatron-LM functional-test allocated peaks of the last rank,
Megatron-Bridge and TorchTitan reports; peaks a source states only roughly are left out, as the
validation's statistics leave them out), ``published / projected - 1`` on the same basis and rank; per
framework its 10th and 90th percentiles (linear interpolation) over the measured *configurations*, count, median
and extremes.  A configuration is one source's run of one model on one GPU with one parallel layout, sequence,
recompute and compile setting: rows that differ only in the number format (BF16 / float8 / MXFP8 recipes) or in
TP's overlap (async TP) are one configuration and count once, at their median (their errors move together: the
five torchao B200 Llama 3 8B precision rows read -14.8 .. -16.0 %, the PR #808 rows -1.2 .. -2.1 %), so that one
source's precision sweep does not stand in for the spread over the configurations a user brings.  With
``--write`` the figures replace ``BANDS`` in ``primus_launch/projection/memory/band_data.py`` (atomic
write); without, they are printed.

    PYTHONPATH=. python scripts/memory_band.py [--write]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_memory import collect, evaluate  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "primus_launch" / "projection" / "memory" / "band_data.py"


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of ``xs``."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def configuration(it, r: dict) -> tuple:
    """The measured configuration a row belongs to (module doc): source, GPU, parallel layout, model,
    sequence, recompute and compile -- not the number format or TP's overlap."""
    p = it.plan
    t = p.training
    return (r["source"].split("#")[0], r["gpu"], r["parallel"], p.model.num_layers, p.model.hidden_size,
            p.model.seq_length, t.recompute.granularity, tuple(t.recompute.modules), t.compile)


def errors() -> dict[str, list[tuple[str, float, tuple]]]:
    """framework -> [(row, published / projected - 1, configuration)] over the exactly published peaks."""
    out: dict[str, list[tuple[str, float, tuple]]] = {"megatron": [], "torchtitan": []}
    for it in collect(("case",)):
        r = evaluate(it)
        if r.get("measured_gib") and not r.get("peak_approx") and r.get("framework") in out:
            out[r["framework"]].append((r["id"], r["measured_gib"] / r["projected_gib"] - 1, configuration(it, r)))
    return out


def per_configuration(rows: list[tuple[str, float, tuple]]) -> list[float]:
    """One error per configuration: the median of its rows' errors."""
    groups: dict[tuple, list[float]] = {}
    for _, e, cfg in rows:
        groups.setdefault(cfg, []).append(e)
    return [statistics.median(v) for v in groups.values()]


def bands(errs: dict[str, list[tuple[str, float, tuple]]]) -> dict[str, tuple]:
    """framework -> (p10, p90, configurations, median, min, max) of the per-configuration errors."""
    out = {}
    pooled = [row for rows in errs.values() for row in rows]
    for key, rows in list(errs.items()) + [("all", pooled)]:
        xs = per_configuration(rows)
        if xs:
            out[key] = (round(quantile(xs, 0.1), 4), round(quantile(xs, 0.9), 4), len(xs),
                        round(statistics.median(xs), 4), round(min(xs), 4), round(max(xs), 4))
    return out


def write(b: dict[str, tuple]) -> None:
    text = DATA.read_text()
    body = "BANDS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in b.items()) + "}\n"
    new = re.sub(r"BANDS = \{\n.*?\n\}\n", body, text, flags=re.S)
    fd, tmp = tempfile.mkstemp(dir=DATA.parent, prefix=".band_data.", suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.replace(tmp, DATA)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite BANDS in memory/band_data.py")
    a = ap.parse_args()
    errs = errors()
    for fw, rows in errs.items():
        for rid, e, _ in rows:
            print(f"{fw:10s} {rid[:64]:64s} published / projected - 1 = {e:+.3f}")
    b = bands(errs)
    for k, (lo, hi, n, med, mn, mx) in b.items():
        print(f"band {k:10s} configurations {n:3d}  p10 {lo:+.3f}  p90 {hi:+.3f}  median {med:+.3f}  min {mn:+.3f}  max {mx:+.3f}")
    if a.write:
        write(b)
        print(f"wrote {DATA}")


if __name__ == "__main__":
    main()
