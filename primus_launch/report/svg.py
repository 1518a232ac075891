"""Inline-SVG pictures of a projection: pipeline timeline, time breakdown, memory breakdown.

Pure string building (no plotting library, no network): each function returns one ``<svg>``
element that a self-contained HTML page can embed.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Sequence

from primus_launch.projection.hardware.gpus import GiB
from primus_launch.projection.result import MemoryReport, TimelineEvent


KIND_COLORS = {
    "F": "#4e79a7", "B": "#e15759", "BW": "#e15759", "W": "#f28e2b", "send": "#76b7b2", "recv": "#76b7b2",
    "dp_comm": "#b07aa1", "optimizer": "#59a14f", "bubble": "#e8e8e8",
}
KIND_LABELS = {"F": "forward", "B": "backward (input grad)", "BW": "backward", "W": "weight grad",
               "send": "P2P send", "recv": "P2P recv", "dp_comm": "DP communication",
               "optimizer": "optimizer step", "bubble": "bubble (idle)"}
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]


def svg_doc(width: int, height: int, body: Iterable[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
            + "".join(body) + "</svg>")


def rect(x: float, y: float, w: float, h: float, fill: str, title: str = "", stroke: str = "none") -> str:
    t = f"<title>{escape(title)}</title>" if title else ""
    return (f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(w, 0.0):.2f}" height="{h:.2f}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="0.5">{t}</rect>')


def text(x: float, y: float, s: str, size: int = 11, anchor: str = "start", fill: str = "#222") -> str:
    return (f'<text x="{x:.2f}" y="{y:.2f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
            f'font-family="sans-serif">{escape(s)}</text>')


def legend(x: float, y: float, items: Sequence[tuple[str, str]]) -> list[str]:
    out, cx = [], x
    for label, color in items:
        out += [rect(cx, y - 9, 10, 10, color), text(cx + 14, y, label, 11)]
        cx += 22 + 6.5 * len(label)
    return out


def ticks(x0: float, width: float, y: float, span: float, unit_scale: float, unit: str, n: int = 8) -> list[str]:
    out = []
    for i in range(n + 1):
        v = span * i / n
        x = x0 + width * i / n
        out += [f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#666"/>',
                text(x, y + 15, f"{v * unit_scale:.3g}", 10, "middle")]
    out.append(text(x0 + width, y + 28, unit, 10, "end"))
    return out


def time_unit(span_s: float) -> tuple[float, str]:
    """Scale and unit for a time axis: ms below 2 s, seconds above."""
    return (1.0, "s") if span_s >= 2.0 else (1e3, "ms")


TIMELINE_MAX_EVENTS = 8000   # more events are drawn as pixel columns (a picture of bounded size)
TIMELINE_COLUMN_PX = 2.0


def _binned(events: Sequence[TimelineEvent], num_stages: int, span: float, plot_w: float) -> list[tuple]:
    """Per stage, runs of :data:`TIMELINE_COLUMN_PX`-wide columns coloured by the kind that fills
    most of each column (compute kinds on the main row, sends on the thin row below): (stage, row,
    x0, x1, kind).  At most stages x 2 x columns rectangles, whatever the event count."""
    ncol = max(1, int(plot_w / TIMELINE_COLUMN_PX))
    col_s = span / ncol
    fill: dict[tuple[int, int], dict[str, list[float]]] = {}
    for e in events:
        if e.kind == "bubble" or e.end_s <= e.start_s:
            continue
        row = 1 if e.kind in ("send", "recv") else 0
        per = fill.setdefault((e.stage, row), {}).setdefault(e.kind, [0.0] * ncol)
        c0, c1 = int(e.start_s / col_s), min(ncol - 1, int(e.end_s / col_s))
        for c in range(max(0, c0), c1 + 1):
            per[c] += min(e.end_s, (c + 1) * col_s) - max(e.start_s, c * col_s)
    runs = []
    for (stage, row), kinds in sorted(fill.items()):
        cur, start = None, 0
        for c in range(ncol + 1):
            k = None
            if c < ncol:
                best = max(kinds, key=lambda kk: kinds[kk][c])
                k = best if kinds[best][c] > 0.25 * col_s else None
            if k != cur:
                if cur is not None:
                    runs.append((stage, row, start, c, cur))
                cur, start = k, c
    return [(s, r, a * plot_w / ncol, b * plot_w / ncol, k) for s, r, a, b, k in runs]


def timeline_svg(events: Sequence[TimelineEvent], num_stages: int, width: int = 1100) -> str:
    """The simulated iteration per pipeline stage: F / B / W / communication, gaps as bubbles.
    More than :data:`TIMELINE_MAX_EVENTS` events are drawn as columns of the kind filling them."""
    if not events:
        return svg_doc(width, 40, [text(10, 24, "no timeline recorded")], "pipeline timeline")
    left, row_h, top = 70, 26, 28
    span = max(e.end_s for e in events) or 1.0
    plot_w = width - left - 20
    sx = plot_w / span
    body = legend(left, 16, [(KIND_LABELS[k], KIND_COLORS[k]) for k in ("F", "B", "W", "send", "dp_comm", "optimizer", "bubble")])
    for s in range(num_stages):
        y = top + s * row_h
        body.append(rect(left, y, plot_w, row_h - 4, KIND_COLORS["bubble"]))
        body.append(text(left - 8, y + row_h / 2 + 2, f"stage {s}", 11, "end"))
    if len(events) > TIMELINE_MAX_EVENTS:
        for stage, row, x0, x1, kind in _binned(events, num_stages, span, plot_w):
            y, h = top + stage * row_h, row_h - 4
            if row:
                y, h = y + h - 5, 5
            body.append(rect(left + x0, y, x1 - x0, h, KIND_COLORS.get(kind, "#999"), KIND_LABELS.get(kind, kind)))
        axis_y = top + num_stages * row_h + 2
        body += ticks(left, plot_w, axis_y, span, *time_unit(span))
        body.append(text(left, axis_y + 30, f"{len(events):,} events drawn as {TIMELINE_COLUMN_PX:g}-px columns of the "
                                            "kind that fills most of each (the trace file holds every event)", 10))
        return svg_doc(width, axis_y + 40, body, "pipeline timeline")
    for e in sorted(events, key=lambda e: (e.kind in ("send", "recv"), e.start_s)):
        if e.kind == "bubble":
            continue
        y = top + e.stage * row_h
        h = row_h - 4
        if e.kind in ("send", "recv"):
            y, h = y + h - 5, 5
        x, w = left + e.start_s * sx, (e.end_s - e.start_s) * sx
        mb = f" mb {e.microbatch}" if e.microbatch >= 0 else ""
        ch = f" chunk {e.chunk}" if e.chunk else ""
        title = f"stage {e.stage} {KIND_LABELS.get(e.kind, e.kind)}{mb}{ch}: {e.start_s * 1e3:.2f}-{e.end_s * 1e3:.2f} ms"
        body.append(rect(x, y, w, h, KIND_COLORS.get(e.kind, "#999"), title, "#ffffff"))
        if e.microbatch >= 0 and w > 14 and e.kind not in ("send", "recv"):
            body.append(text(x + w / 2, y + h / 2 + 4, str(e.microbatch), 9, "middle", "#fff"))
    axis_y = top + num_stages * row_h + 2
    body += ticks(left, plot_w, axis_y, span, *time_unit(span))
    return svg_doc(width, axis_y + 36, body, "pipeline timeline")


def stacked_bar_svg(parts: dict[str, float], unit_scale: float, unit: str, title: str,
                    capacity: float | None = None, limit: float | None = None, width: int = 1100) -> str:
    """One horizontal stacked bar of ``parts`` (optionally against a capacity and a usable limit)."""
    left, top, bar_h = 10, 56, 34
    plot_w = width - 2 * left
    total = sum(v for v in parts.values() if v > 0)
    span = max(total, capacity or 0.0) or 1.0
    sx = plot_w / span
    items = [(k, v) for k, v in parts.items() if v > 0]
    colors = {k: PALETTE[i % len(PALETTE)] for i, (k, _) in enumerate(parts.items())}
    body = [text(left, 14, title, 13)]
    body += legend(left, 34, [(f"{k} {v * unit_scale:.3g}", colors[k]) for k, v in items])
    x = left
    for k, v in items:
        w = v * sx
        body.append(rect(x, top, w, bar_h, colors[k], f"{k}: {v * unit_scale:.4g} {unit} ({100 * v / (total or 1):.1f} %)", "#fff"))
        x += w
    # capacity labelled under the bar, the usable limit above it, so the two never overlap
    for val, label, color, ty in ((capacity, "capacity", "#000", top + bar_h + 18),
                                  (limit, "usable (after margin)", "#d62728", top - 8)):
        if val:
            xx = left + val * sx
            body += [f'<line x1="{xx:.1f}" y1="{top - 6}" x2="{xx:.1f}" y2="{top + bar_h + 6}" stroke="{color}" '
                     f'stroke-width="2" stroke-dasharray="5,3"/>',
                     text(min(xx, left + plot_w - 4), ty, f"{label} {val * unit_scale:.4g} {unit}", 10, "end", color)]
    body += ticks(left, plot_w, top + bar_h + 24, span, unit_scale, unit)
    return svg_doc(width, top + bar_h + 62, body, title)


def memory_svg(mem: MemoryReport, width: int = 1100) -> str:
    """Worst stage's memory by component against HBM capacity and the margin."""
    return stacked_bar_svg(
        mem.breakdown, 1 / GiB, "GiB",
        f"Per-GPU memory, worst stage {mem.worst_stage}: {mem.peak_bytes_per_gpu / GiB:.1f} GiB "
        f"({mem.verdict})",  # the verdict as the text answer has it: a tight plan read "fits" here
        capacity=float(mem.capacity_bytes), limit=mem.capacity_bytes * (1 - mem.margin_fraction), width=width)


def time_breakdown_svg(breakdown: dict[str, float], width: int = 1100) -> str:
    total = sum(breakdown.values())
    scale, unit = time_unit(total)
    return stacked_bar_svg(breakdown, scale, unit, f"Iteration time {total * scale:.4g} {unit} by component (exposed)",
                           width=width)
