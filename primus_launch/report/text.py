"""Text rendering of a :class:`ProjectionResult` (the CLI's table)."""

from __future__ import annotations

from tabulate import tabulate

from primus_launch.projection.hardware.gpus import GiB
from primus_launch.projection.result import ProjectionResult


def measurement_summary(res: ProjectionResult) -> list[str]:
    """Lines of the per-piece report (what was measured, what was substituted and why)."""
    ms = res.measurement
    if ms is None:
        return []
    out = []
    for n, pc in ms.pieces.items():
        sp = pc.spread.get("total", 0.0)
        out.append(f"{n}: {pc.source} in {pc.measured_dtype}, fwd {pc.fwd_s * 1e3:.3f} ms, bwd input "
                   f"{pc.bwd_input_s * 1e3:.3f} / weight {pc.bwd_weight_s * 1e3:.3f} ms ({pc.split}), spread "
                   f"{sp:.1%} over {pc.repeats}{'' if pc.converged else ' (not converged)'}, kept "
                   f"{pc.activation_bytes / 2 ** 20:.2f} MiB")
        for s in pc.substitutions:
            out.append(f"  substituted: {s.what} -- {s.why}" + (f" [{s.model}]" if s.model else ""))
    return out


def plan_line(r: ProjectionResult) -> str:
    """The layout plus the flags a reader compares between candidates."""
    p, t = r.plan.parallel, r.plan.training
    rc = t.recompute
    how = ""
    if rc.granularity == "full":
        how = (f"({len(rc.layer_ids)} listed layers)" if rc.method == "layer_ids" else
               f"({rc.method}" + (f" {rc.num_layers}" if rc.num_layers else "") + ")")
    elif rc.granularity == "selective":
        how = f"({','.join(rc.modules)})"
    return (f"{r.plan.parallel_summary()} recompute={rc.granularity}{how} schedule={t.pipeline_schedule} "
            f"dp_sharding={p.dp_sharding} SP={'on' if p.sequence_parallel else 'off'}")


def summary_rows(r: ProjectionResult) -> list[tuple[str, str]]:
    """The summary of one projection as (label, value) rows; the text table and the HTML report
    render the same rows."""
    c, m = r.plan.cluster, r.memory
    verdict = "fits" if m.fits else "DOES NOT FIT"
    it, tps = f"{r.iteration_time_s:.3f} s", f"{r.tokens_per_sec_per_gpu:,.0f}"
    if r.band is not None:
        lo, hi = r.band.iteration_range(r.iteration_time_s)
        it += f", expected {r.band.text()}"
        tps += f" (expected {r.tokens_per_sec_per_gpu * r.iteration_time_s / hi:,.0f} .. " \
               f"{r.tokens_per_sec_per_gpu * r.iteration_time_s / lo:,.0f})"
    return [
        ("mode", r.mode),
        ("model", f"{r.plan.model.name} ({r.plan.model.num_layers} layers, hidden {r.plan.model.hidden_size})"),
        ("cluster", f"{c.num_nodes} x {c.gpus_per_node} {c.gpu} = {r.num_gpus} GPUs"),
        ("parallelism", plan_line(r)),
        ("iteration time", it),
        ("tokens/s/GPU", tps),
        ("model TFLOP/s/GPU", f"{r.model_tflops_per_gpu:.1f}"),
        ("MFU", f"{100 * r.mfu:.1f} %"),
        ("memory", f"{m.peak_bytes_per_gpu / GiB:.1f} GiB peak of {m.capacity_bytes / GiB:.1f} GiB "
                   f"(margin {100 * m.margin_fraction:.0f} %): {verdict} (worst stage {m.worst_stage})"),
    ]


def render_text(r: ProjectionResult) -> str:
    """Summary, time breakdown and memory breakdown as plain-text tables."""
    m = r.memory
    head = summary_rows(r)
    out = [tabulate(head, tablefmt="simple")]
    total = r.iteration_time_s or 1.0
    times = [(k, f"{v * 1e3:.1f}", f"{100 * v / total:.1f}") for k, v in r.time_breakdown.items()]
    out.append(tabulate(times, headers=["time component", "ms", "%"], tablefmt="simple"))
    mem = [(k, f"{v / GiB:.2f}") for k, v in m.breakdown.items()]
    out.append(tabulate(mem, headers=[f"memory (stage {m.worst_stage})", "GiB"], tablefmt="simple"))
    if r.measurement is not None:
        out.append("measured pieces (per GPU, one micro-batch):\n" + "\n".join(measurement_summary(r)))
    notes = list(r.notes) + list(m.notes)
    if notes:
        out.append("\n".join(f"note: {n}" for n in notes))
    if r.mode == "dry-run":
        out.append(render_explanation(r))
    return "\n\n".join(out)


def render_explanation(r: ProjectionResult) -> str:
    """The dry-run term by term: per kernel of one layer its time, efficiency and source, the
    layer's communication and the framework profile (``projection/cost/explain.py``)."""
    from primus_launch.projection.cost.explain import explain_text

    return ("how the dry-run priced it (kernel times include the framework's in-situ efficiency and the "
            "sustained clock)\n\n" + explain_text(r.plan))
