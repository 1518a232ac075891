"""``--explain``'s streaming rows state one quantity in their "MB fwd": the bytes of the forward pass
whose time is the row's ``fwd`` column.  The cross-entropy row had recorded fwd + bwd bytes (42,027 MB
beside an 8.4 ms forward on an H100: 5 TB/s, above the 3.35 TB/s HBM), its norm neighbours forward bytes
only, so bytes / fwd time must read one bandwidth, at most the GPU's HBM rate, on every large row."""

from __future__ import annotations

import re
from pathlib import Path

from primus_launch.adapters import load_recipe
from primus_launch.projection.explain import op_rows
from primus_launch.projection.hardware.gpus import get_gpu

ROOT = Path(__file__).resolve().parents[1]


def test_streaming_rows_bytes_are_forward_bytes_at_one_rate():
    plan = load_recipe(ROOT / "recipes/torchtitan/llama3.1_8b.toml")
    hbm = get_gpu(plan.cluster.gpu).hbm_bw
    rates = {}
    for r in op_rows(plan):
        m = re.search(r"% of HBM, ([\d,]+) MB fwd", r.efficiency)
        if m and r.fwd_ms > 0.05:  # launch latency negligible
            rates[r.name] = float(m.group(1).replace(",", "")) * 1e6 / (r.fwd_ms * 1e-3)
    assert "cross-entropy (torch)" in rates and "final norm" in rates
    assert all(v <= hbm for v in rates.values()), rates
    lo, hi = min(rates.values()), max(rates.values())
    assert hi / lo < 1.25, rates


def test_cut_columns_say_they_were_cut():
    """--explain cuts long names and sources to its columns; a cut one ends in "..." (it was cut mid-word
    silently, reading as a whole source)."""
    from primus_launch.projection.explain import explain_text

    text = explain_text(load_recipe(ROOT / "recipes/torchtitan/llama3.1_8b.toml"))
    rows = [r for r in op_rows(load_recipe(ROOT / "recipes/torchtitan/llama3.1_8b.toml")) if len(r.source) > 110]
    assert rows and f"{rows[0].source[:107]}..." in text
