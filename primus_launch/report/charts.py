"""Inline-SVG pictures of a tune: every candidate as throughput against peak memory, the illegal
ones with their reason, and the incumbent (best so far) path over the search.

A search of tens of thousands of candidates is drawn with at most :data:`SCATTER_MAX_POINTS`
points (the fastest that fit, the memory / throughput front, the incumbent path, then an even
sample of the rest) and :data:`REJECTED_MAX_MARKS` rejection marks; the pictures say how many of
how many they draw, and the trial log holds them all."""

from __future__ import annotations

from html import escape

from primus_launch.projection.hardware.gpus import GiB
from primus_launch.report.svg import legend, rect, svg_doc, text
from primus_launch.tuner.result import Trial, TuneResult

_SOURCE_COLORS = {"seed": "#000000", "planner": "#4e79a7", "llm": "#f28e2b", "exhaustive": "#9c755f"}
SCATTER_MAX_POINTS = 1500
REJECTED_MAX_MARKS = 200


def _even(items: list, n: int) -> list:
    """``n`` items spread evenly over ``items`` (all of them when there are at most ``n``)."""
    if len(items) <= n:
        return list(items)
    return [items[int(i * len(items) / n)] for i in range(n)]


def drawn_candidates(scored: list[Trial], limit: int = SCATTER_MAX_POINTS) -> list[Trial]:
    """The scored trials the scatter draws: all when at most ``limit``; else the 100 fastest that
    fit, the incumbent path, the front (no other candidate both faster and smaller; evenly thinned
    to a third of ``limit``) and an even sample of the rest, ``limit`` in all, in search order."""
    if len(scored) <= limit:
        return scored
    keep: dict[int, Trial] = {}
    fast = sorted((t for t in scored if t.fits), key=lambda t: (-t.tokens_per_sec_per_gpu, t.index))
    for t in fast[:100] + _even(incumbent_path(scored), limit // 6):
        keep[t.index] = t
    best, front = None, []
    for t in sorted(scored, key=lambda t: (t.peak_memory_bytes or 0, -t.tokens_per_sec_per_gpu)):
        if best is None or t.tokens_per_sec_per_gpu > best:
            best = t.tokens_per_sec_per_gpu
            front.append(t)
    for t in _even(front, limit // 3):
        keep[t.index] = t
    rest = [t for t in scored if t.index not in keep]
    for t in _even(rest, max(0, limit - len(keep))):
        keep[t.index] = t
    return sorted(keep.values(), key=lambda t: t.index)


def _changes(t: Trial) -> str:
    from primus_launch.report.tune_text import value_text  # values as the text answer writes them, not Python's repr

    return ", ".join(f"{k}={value_text(v)}" for k, v in sorted(t.changes.items())) or "(user's recipe)"


def incumbent_path(trials: list[Trial]) -> list[Trial]:
    """Scored, fitting trials that improved on the best so far, in search order."""
    path, best = [], None
    for t in sorted(trials, key=lambda t: t.index):
        if t.status == "scored" and t.fits and t.tokens_per_sec_per_gpu is not None:
            if best is None or t.tokens_per_sec_per_gpu > best:
                best = t.tokens_per_sec_per_gpu
                path.append(t)
    return path


def scatter_svg(res: TuneResult, width: int = 1100, height: int = 460) -> str:
    """Tokens/s/GPU against peak memory per GPU; rejected candidates in a strip below the axis."""
    left, right, top, bottom = 70, 20, 40, 110
    pw, ph = width - left - right, height - top - bottom
    scored = [t for t in res.trials if t.status == "scored" and t.tokens_per_sec_per_gpu is not None]
    rejected = [t for t in res.trials if t.status == "rejected"]
    cap = res.baseline.memory.capacity_bytes
    limit = cap * (1 - res.baseline.memory.margin_fraction)
    mems = [t.peak_memory_bytes or 0 for t in scored] + [cap]
    xmax = max(mems) * 1.05
    ymax = max([t.tokens_per_sec_per_gpu for t in scored] + [1.0]) * 1.1
    sx, sy = pw / xmax, ph / ymax
    shown = drawn_candidates(scored)
    what = "Scored candidates" if len(shown) == len(scored) else \
        f"{len(shown):,} of {len(scored):,} scored candidates (the fastest, the front and an even sample)"
    body = [text(left, 16, f"{what}: throughput against peak memory (hover for the configuration)", 13)]
    body += legend(left, 32, [("seed", _SOURCE_COLORS["seed"]), ("planner", _SOURCE_COLORS["planner"]),
                              ("LLM", _SOURCE_COLORS["llm"]), ("exhaustive", _SOURCE_COLORS["exhaustive"]),
                              ("does not fit (hollow)", "#cccccc"), ("incumbent path", "#2ca02c"),
                              ("rejected (x, below axis)", "#d62728")])
    body.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#444"/>')
    body.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#444"/>')
    for i in range(6):
        y = top + ph - ph * i / 5
        body += [text(left - 6, y + 4, f"{ymax * i / 5:,.0f}", 10, "end"),
                 f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>']
        x = left + pw * i / 5
        body.append(text(x, top + ph + 14, f"{xmax * i / 5 / GiB:.0f}", 10, "middle"))
    body.append(text(left + pw, top + ph + 28, "peak memory per GPU (GiB)", 11, "end"))
    body.append(text(14, top + ph / 2, "tokens/s/GPU", 11, "middle").replace(
        "<text ", f'<text transform="rotate(-90 14 {top + ph / 2:.0f})" ', 1))
    for val, label, color, dy in ((cap, "HBM capacity", "#000", 10), (limit, "usable", "#d62728", 24)):
        x = left + val * sx
        body += [f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="{color}" stroke-dasharray="5,3"/>',
                 text(x - 3, top + dy, label, 10, "end", color)]
    for t in shown:
        x = left + (t.peak_memory_bytes or 0) * sx
        y = top + ph - t.tokens_per_sec_per_gpu * sy
        color = _SOURCE_COLORS.get(t.source, "#4e79a7")
        fill = color if t.fits else "none"
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{color}" fill-opacity="0.75">'
                    f'<title>{escape(f"#{t.index} {t.source}: {_changes(t)}; {t.tokens_per_sec_per_gpu:,.0f} tok/s/GPU, {(t.peak_memory_bytes or 0) / GiB:.1f} GiB")}</title></circle>')
    path = incumbent_path(res.trials)
    if len(path) > 1:
        pts = " ".join(f"{left + (t.peak_memory_bytes or 0) * sx:.1f},{top + ph - t.tokens_per_sec_per_gpu * sy:.1f}" for t in path)
        body.append(f'<polyline points="{pts}" fill="none" stroke="#2ca02c" stroke-width="2"/>')
    strip_y = top + ph + 50
    marks = _even(rejected, REJECTED_MAX_MARKS)
    body.append(text(left, strip_y - 8, f"rejected before scoring: {len(rejected):,}"
                     + (f" ({len(marks)} drawn)" if len(marks) < len(rejected) else "") + " (hover for the reason)", 11))
    n = max(len(marks), 1)
    for i, t in enumerate(marks):
        x = left + pw * (i + 0.5) / n
        body.append(f'<path d="M{x - 4:.1f},{strip_y - 4} l8,8 m0,-8 l-8,8" stroke="#d62728" stroke-width="1.5">'
                    f'<title>{escape(f"#{t.index} {_changes(t)}: {t.reason}")}</title></path>')
    return svg_doc(width, height, body, "tune scatter")


def incumbent_svg(res: TuneResult, width: int = 1100, height: int = 220) -> str:
    """Best-so-far tokens/s/GPU against the number of candidates looked at."""
    left, top, pw, ph = 70, 30, width - 90, height - 70
    trials = sorted(res.trials, key=lambda t: t.index)
    n = max(len(trials), 1)
    best, pts = None, []
    for i, t in enumerate(trials):  # the steps of the best-so-far line (and its end)
        if t.status == "scored" and t.fits and t.tokens_per_sec_per_gpu is not None:
            if best is None or t.tokens_per_sec_per_gpu > best:
                if best is not None:
                    pts.append((i, best))
                best = t.tokens_per_sec_per_gpu
                pts.append((i, best))
    if best is not None:
        pts.append((len(trials) - 1, best))
    ymax = (max(b for _, b in pts) if pts else 1.0) * 1.1
    body = [text(left, 16, "Incumbent over the search (best fitting tokens/s/GPU so far)", 13)]
    body.append(rect(left, top, pw, ph, "#fafafa", stroke="#ccc"))
    if pts:
        poly = " ".join(f"{left + pw * i / n:.1f},{top + ph - ph * b / ymax:.1f}" for i, b in pts)
        body.append(f'<polyline points="{poly}" fill="none" stroke="#2ca02c" stroke-width="2"/>')
    body += [text(left - 6, top + 10, f"{ymax:,.0f}", 10, "end"), text(left - 6, top + ph, "0", 10, "end"),
             text(left + pw, top + ph + 16, f"candidates looked at ({len(trials)})", 10, "end")]
    return svg_doc(width, height, body, "incumbent path")
