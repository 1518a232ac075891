"""Self-contained HTML reports (inline CSS and SVG, no network fetches) of a projection or a tune."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from primus_launch.projection.hardware.gpus import GiB
from primus_launch.fileio import atomic_write_text
from primus_launch.report.text import NO_WARNINGS, figure_notes, small_figure, summary_rows
from primus_launch.projection.result import ProjectionResult
from primus_launch.projection.training_run import TrainingRun, days_text, gpu_text, tokens_text
from primus_launch.report.svg import memory_svg, time_breakdown_svg, timeline_svg

if TYPE_CHECKING:
    from primus_launch.tuner.result import TuneResult


_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1180px}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f4f4f4} .figure{margin:8px 0 18px 0} .note{color:#555;font-size:12px}
.bad{color:#b00} .good{color:#070}
"""


def _page(title: str, sections: list[str]) -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1>" + "".join(sections) + "</body></html>")


def _table(rows: list[tuple], headers: list[str] | None = None) -> str:
    h = "<tr>" + "".join(f"<th>{escape(str(x))}</th>" for x in headers) + "</tr>" if headers else ""
    body = "".join("<tr>" + "".join(f"<td>{escape(str(x))}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table>{h}{body}</table>"


def projection_sections(r: ProjectionResult, run: Optional[TrainingRun] = None) -> list[str]:
    """The summary, timeline, time breakdown and memory sections of one projection (``run``: a whole
    training run at it, two more summary rows and what it leaves out)."""
    out = [f"<h2>Summary</h2>{_table(summary_rows(r, run))}"]
    if run is not None:
        out.append(f"<p class=\"note\">Training run: {escape(run.excludes)}.</p>")
    out.append("<h2>Pipeline timeline of one iteration</h2><div class=\"figure\">"
               + timeline_svg(r.timeline, r.plan.parallel.pp) + "</div>"
               + "<p class=\"note\">One row per pipeline stage, as the schedule simulator ordered it; "
                 "hover a block for its micro-batch and times. Grey is idle (bubble).</p>")
    out.append("<h2>Time breakdown</h2><div class=\"figure\">" + time_breakdown_svg(r.time_breakdown) + "</div>")
    out.append("<h2>Memory</h2><div class=\"figure\">" + memory_svg(r.memory) + "</div>")
    stages = [(s.stage, f"{s.total_bytes / GiB:.2f}", f"{s.parameters_bytes / GiB:.2f}",
               f"{s.activations_bytes / GiB:.2f}", s.microbatches_in_flight) for s in r.memory.stages]
    out.append(_table(stages, ["stage", "total GiB", "parameters GiB", "activations GiB", "micro-batches in flight"]))
    # what was not modelled, as the text answer says it (the page had neither the warnings nor the reader's notes)
    from primus_launch.projection.api import with_unmodelled  # a tune's bare dry-run best: its plan's flags too

    warn = [f"{w.flag}={w.value}: {w.effect}" for w in with_unmodelled(r).warnings]
    out.append("<h2>Not modelled</h2>" + ("<ul>" + "".join(f"<li>{escape(w)}</li>" for w in warn) + "</ul>" if warn
                                          else f"<p>{escape(NO_WARNINGS)}</p>"))
    notes = (list(r.plan.source.notes if r.plan.source else []) + list(r.notes) + list(r.memory.notes)
             + figure_notes(r))  # what the summary's figures are, as --explain says
    if notes:
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    if r.mode == "dry-run":
        from primus_launch.projection.explain import explain_html

        out.append("<h2>How the dry-run priced it</h2><p class=\"note\">Per kernel of one layer (one micro-batch, "
                   "one GPU): time, efficiency and the kernel measurements its curve stands on; then the "
                   "layer's communication and the framework profile. Kernel times include the framework's "
                   "in-situ efficiency and the sustained clock.</p>" + explain_html(r.plan))
    return out


def write_projection_report(r: ProjectionResult, path: str | Path, run: Optional[TrainingRun] = None) -> Path:
    title = f"primus-launch projection: {r.plan.model.name} on {r.num_gpus} x {r.plan.cluster.gpu}"
    return atomic_write_text(path, _page(title, projection_sections(r, run)))


def write_tune_report(res: TuneResult, path: str | Path) -> Path:
    """The tune page: search pictures, top-N with diffs against the user's recipe, then the best
    configuration's projection (timeline, time and memory)."""
    from primus_launch.report.charts import incumbent_svg, scatter_svg
    from primus_launch.report.tune_text import gain_text, shown_changes, value_text  # as the text answer words them

    b = res.best
    title = f"primus-launch tune: {b.plan.model.name} on {b.num_gpus} x {b.plan.cluster.gpu}"
    head = [("baseline (user's recipe)", f"{res.baseline.iteration_time_s:.3f} s/iter, "
                                         f"{res.baseline.tokens_per_sec_per_gpu:,.0f} tokens/s/GPU, "
                                         f"{res.baseline.memory.verdict}"),
            ("best", f"{b.iteration_time_s:.3f} s/iter, {b.tokens_per_sec_per_gpu:,.0f} tokens/s/GPU, "
                     f"{b.memory.verdict}"),
            ("projected gain", "none: no legal reference on this cluster (the recipe's own plan: "
                               f"{res.no_reference})" if res.no_reference else gain_text(res.gain)),
            # as the text answer counts them ("3 scored of 174315 legal (0.0 %)": no separators, 0.0 % of a nonzero)
            ("candidates", f"{res.scored:,} scored of {res.legal_candidates:,} legal "
                           f"({small_figure(100 * res.scored_fraction)} %), {res.rejected:,} rejected, "
                           f"{res.elapsed_s:.1f} s"),
            ("search", f"{res.search}: " + (res.certificate.text if res.certificate else f"no certificate of optimality"
                                                                f"{' (' + res.search_note + ')' if res.search_note else ''}")),
            ("numerics-changing knobs allowed", ", ".join(res.allowed) or "none")] \
        + ([("memory rule", res.memory_rule_text)] if res.memory_rule_text else [])
    if res.training_run:  # --train-tokens: the whole run of the original and the best plan
        for key, label in (("original", "baseline (user's recipe)"), ("best", "best")):
            tr = res.training_run[key]
            head.append((f"{label}: {tokens_text(tr.tokens)} tokens", f"{days_text(tr)}; {gpu_text(tr)}"))
    sections = [f"<h2>Search</h2>{_table(head)}"]
    if res.training_run:
        sections.append(f"<p class=\"note\">Training run: {escape(res.training_run['best'].excludes)}.</p>")
    sections += ["<div class=\"figure\">" + scatter_svg(res) + "</div>",
                 "<div class=\"figure\">" + incumbent_svg(res) + "</div>"]
    # values as the text answer writes them ("modules=('layernorm',)" was Python's tuple)
    orig = res.baseline.plan   # each row's changes as the text answer lists them (no field without effect)
    rows = [(i + 1, ", ".join(f"{k}={value_text(v)}" for k, v in sorted(shown_changes(t.changes, orig).items()))
             or "(user's recipe)",
             f"{t.iteration_time_s:.3f}", f"{t.tokens_per_sec_per_gpu:,.0f}", f"{100 * (t.mfu or 0):.1f}",
             f"{(t.peak_memory_bytes or 0) / GiB:.1f}"
             # a tight plan over the usable capacity: listed, not the answer (tuner/memory_rule.py)
             + (" (tight, over the capacity: not the answer)" if t.over_capacity and not t.fits else ""),
             t.source) for i, t in enumerate(res.top)]
    sections.append("<h2>Top configurations (diff against the user's recipe)</h2>"
                    + _table(rows, ["#", "changes", "s/iter", "tokens/s/GPU", "MFU %", "peak GiB", "found by"]))
    if res.warnings:
        sections.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in res.warnings) + "</ul>")
    sections.append("<h2>Best configuration</h2>")
    sections += projection_sections(b)[1:]
    return atomic_write_text(path, _page(title, sections))
