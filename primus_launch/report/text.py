"""Text rendering of a :class:`ProjectionResult` (the CLI's answer).

:func:`render_text` gives the short answer by default -- one screen of at most :data:`MAX_LINES`
lines of at most :data:`WIDTH` columns: the summary (iteration time, tokens/s/GPU, TFLOP/s, MFU,
the memory verdict with its band when the result has one), the largest time components beside the
memory by term, and the warnings ("warnings: none" where there are none); ``explain=True`` gives every
table: the full time and memory breakdowns, the measured pieces, every note and the dry-run's per-op pricing
(``projection/explain.py``).
"""

from __future__ import annotations

import re
import textwrap
from typing import Iterable, Optional

from tabulate import tabulate

from primus_launch.plan import Cluster
from primus_launch.projection.hardware.gpus import GiB
from primus_launch.projection.result import ErrorBand, NodeSearch, ProjectionResult
from primus_launch.projection.training_run import TrainingRun
from primus_launch.projection.training_run import summary_rows as run_rows

#: the short answer's width and height: an 80 x 40 terminal
WIDTH = 80
MAX_LINES = 40
#: time components listed in the short answer (the rest summed as "other")
TOP_TIME = 5


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
                   f"{pc.activation_bytes / 2 ** 20:.2f} MiB"
                   + (f", peak {pc.peak_bytes / 2 ** 20:.2f} / reserved {pc.reserved_bytes / 2 ** 20:.2f} MiB"
                      if pc.reserved_bytes else ""))
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


def gib_digits(r: ProjectionResult) -> int:
    """Decimals of the memory row's GiB: 1, or as many (up to 3) as tell the band's ends apart (a tiny model's
    "0.9 GiB peak ..., band 0.9-0.9 GiB" said nothing; the peak is then given to the same decimals) and each end
    apart from the usable capacity it is compared with (a 70B FP8 run's "peak of 79.2 GiB: TIGHT, band 75.0-79.2 GiB"
    read as fitting: the band's top, 79.197 GiB, is over the 79.188 GiB; the capacity is then given to the same
    decimals, user18)."""
    b = r.memory.band
    if b is None:
        return 1
    lo, hi = b.low_bytes / GiB, b.high_bytes / GiB
    usable = r.memory.capacity_bytes * (1 - r.memory.margin_fraction) / GiB

    def apart(d: int) -> bool:
        return f"{lo:.{d}f}" != f"{hi:.{d}f}" and all(f"{e:.{d}f}" != f"{usable:.{d}f}" for e in (lo, hi)
                                                      if e != usable)
    return next((d for d in (1, 2) if apart(d)), 3)


def verdict_text(r: ProjectionResult) -> str:
    """The memory verdict (``fits`` / ``TIGHT`` / ``DOES NOT FIT``) with the band the peak is expected
    in (:mod:`projection.memory.verdict`: the validation spread of the peak), e.g.
    ``fits, band 36.6-41.3 GiB (-2/+11 %)``; where the verdict's quantity (``oom_peak_bytes``: the peak less
    the free cached segments the allocator releases before it raises) is below the shown peak, which it is."""
    m = r.memory
    verdict = {"fits": "fits", "tight": "TIGHT", "does not fit": "DOES NOT FIT"}[m.verdict]
    if m.band is None:
        return verdict
    held = m.verdict_peak_bytes
    usable = m.capacity_bytes * (1 - m.margin_fraction)
    # a reserved peak above the capacity beside "fits" ("87.2 GiB peak of 79.2 GiB: fits", torchtitan's
    # qwen3_32b.toml) read as a contradiction: the excess is cache the allocator gives back, and the answer says so
    above = (f": the {(m.peak_bytes_per_gpu - usable) / GiB:.1f} GiB over the capacity are among them"
             if held <= usable < m.peak_bytes_per_gpu else "")
    on = (f" of the {held / GiB:.1f} GiB that cannot be released ({(m.peak_bytes_per_gpu - held) / GiB:.1f} GiB of "
          f"free cached segments, given back before an out-of-memory error{above})"
          if held < m.peak_bytes_per_gpu else "")
    # a tight plan whose point estimate is already over the usable capacity ("162.1 GiB peak of 139.8 GiB: TIGHT")
    # read as a contradiction: say that only the band's lower part fits
    over = ("; over the capacity at the point estimate (fits only at the band's low end)"
            if m.verdict == "tight" and held > m.capacity_bytes * (1 - m.margin_fraction) else "")
    lo, hi, d = m.band.low_bytes / GiB, m.band.high_bytes / GiB, gib_digits(r)
    return (f"{verdict}, band {lo:.{d}f}-{hi:.{d}f} GiB "
            f"({100 * m.band.low:+.0f}/{100 * m.band.high:+.0f} %){on}{over}")


def small_figure(v: float) -> str:
    """``v`` to one decimal, thousands separated as every other figure of the answer (an MI355X FP8 run's
    "1313.7" beside "5,033 TFLOP/s"), or to two significant digits where that would read 0.0 of a figure that
    is not zero (a tiny model's 0.0026 TFLOP/s and 0.00052 % MFU printed as "0.0")."""
    return f"{v:.2g}" if 0 < abs(v) < 0.05 else f"{v:,.1f}"


PEAK_NAMES = {"bf16": "BF16", "fp16": "FP16", "fp8": "FP8", "fp4": "FP4", "fp32": "TF32"}


def mfu_range_text(r: ProjectionResult) -> str:
    """`` (44.2 .. 47.4 %)``: a dry-run's expected range of MFU, the iteration time's error band inverted as for
    tokens/s (MFU is a rate: ``ErrorBand.tokens_range``); empty without a band or for a zero MFU.  The project
    answer's MFU row and the tuner's ``original:`` / ``best:`` lines both print it (user19: the tuner's were bare)."""
    if r.band is None or r.mfu <= 0:
        return ""
    lo, hi = r.band.tokens_range(100 * r.mfu)
    return f" ({small_figure(lo)} .. {small_figure(hi)} %)"


def mfu_text(r: ProjectionResult) -> str:
    """MFU with the peak it is taken against (``projection/steps/flow.py``: model TFLOP/s over the GPU's
    datasheet dense peak at the plan's precision, ``GPUSpec.peak_flops``), so that a reader can check
    it: e.g. ``18.7 % of the FP8 dense peak (1,979 TFLOP/s)``; a dry-run gives its expected range after the figure,
    the error band inverted as for tokens/s (``34.0 % (30.7 .. 37.7 %) of ...``)."""
    out = f"{small_figure(100 * r.mfu)} %" + mfu_range_text(r)
    if r.mfu > 0:
        prec = PEAK_NAMES.get(r.plan.training.precision, r.plan.training.precision.upper())
        out += f" of the {prec} dense peak ({r.model_tflops_per_gpu / r.mfu:,.0f} TFLOP/s)"
    return out


def power_cap_text(c: Cluster) -> str:
    """The stated board power cap (``--power-limit-w``, ``Cluster.power_limit_w``) beside the cluster, so
    that the short answer says why its times differ from the rated GPU's: ``, power cap 500 W (rated
    700 W)``; a cap at or above the rated power changes nothing and says so."""
    cap = c.power_limit_w
    if cap is None:
        return ""
    from primus_launch.projection.hardware.gpus import get_gpu

    rated = get_gpu(c.gpu).tdp_watts
    if rated and cap >= rated:
        return f", power cap {cap:g} W: none (rated {rated:g} W)"
    return f", power cap {cap:g} W" + (f" (rated {rated:g} W)" if rated else "")


#: the memory row names a basis other than the default (the caching allocator's reserved peak)
_BASIS = {"allocated": "allocated "}



def _hybrid_counts(pattern: str | None) -> str:
    """``; hybrid: 23 Mamba, 6 attention, 23 MoE`` for a hybrid stack's layer symbols; empty for a GPT stack."""
    if not pattern:
        return ""
    names = (("M", "Mamba"), ("*", "attention"), ("-", "MLP"), ("E", "MoE"))
    return "; hybrid: " + ", ".join(f"{pattern.count(sym)} {name}" for sym, name in names if sym in pattern)

def summary_rows(r: ProjectionResult, run: Optional[TrainingRun] = None) -> list[tuple[str, str]]:
    """The summary of one projection as (label, value) rows; the text answer and the HTML report
    render the same rows.  ``run``: a whole training run at this projection (``--train-tokens``):
    its days, GPU-hours and cost as two more rows."""
    c, m = r.plan.cluster, r.memory
    # the capacity the verdict compares with, beside the margin ("20.1 GiB peak of 55.9 GiB, margin 65 %: DOES NOT
    # FIT" left the reader to work out that 19.6 GiB are usable; user14)
    d = gib_digits(r)
    margin = (f" ({m.capacity_bytes * (1 - m.margin_fraction) / GiB:.{d}f} GiB usable, margin "
              f"{100 * m.margin_fraction:.0f} %)" if m.margin_fraction else "")
    it, tps = f"{r.iteration_time_s:.3f} s", f"{r.tokens_per_sec_per_gpu:,.0f}"
    if r.band is not None:  # the dry-run's expected error (projection/band.py)
        # the range in seconds, as the tokens/s row gives its own: "+3% .. +11%" left the sign to guess (slower or
        # faster than projected?); the fractions are in --explain's note and --json's band
        b = r.band
        t_lo, t_hi = b.iteration_range(r.iteration_time_s)
        it += f", expected {t_lo:.3f} .. {t_hi:.3f} s on {b.n} judged rows like it ({b.group})" + band_side(b)
        lo, hi = r.band.tokens_range(r.tokens_per_sec_per_gpu)
        tps += f" (expected {lo:,.0f} .. {hi:,.0f})"
    return [
        ("mode", r.mode),
        ("model", f"{r.plan.model.name} ({r.plan.model.num_layers} layers, hidden {r.plan.model.hidden_size}"
                  + _hybrid_counts(r.plan.model.hybrid_pattern) + ")"),
        ("cluster", f"{c.num_nodes} x {c.gpus_per_node} {c.gpu} = {r.num_gpus} GPU{'' if r.num_gpus == 1 else 's'}"
                    + power_cap_text(c)),
        ("parallelism", plan_line(r)),
        ("iteration time", it),
        ("tokens/s/GPU", tps),
        ("model TFLOP/s/GPU", small_figure(r.model_tflops_per_gpu) + (
            " (expected {} .. {})".format(*map(small_figure, r.band.tokens_range(r.model_tflops_per_gpu)))
            if r.band is not None else "")),
        ("MFU", mfu_text(r)),
        ("memory", f"{m.peak_bytes_per_gpu / GiB:.{d}f} GiB {_BASIS.get(m.memory_basis, '')}peak of "
                   f"{m.capacity_bytes / GiB:.{d}f} GiB{margin}: "
                   f"{verdict_text(r)}" + (f" (worst stage {m.worst_stage})" if r.plan.parallel.pp > 1 else "")),
    ] + ([("nodes", node_search_text(m.node_search))] if m.node_search is not None else []) \
        + (run_rows(run) if run is not None else [])


#: memory terms that more data-parallel ranks leave as they are (per micro-batch, per GPU)
_NOT_SHARDED = ("activations", "transient", "workspaces")


def node_search_text(s: NodeSearch) -> str:
    """The fewest-nodes answer (:mod:`projection.node_fit`), e.g. ``does not fit on 1 node (fitted; the recipe
    states none); fits from 36 nodes (tight from 32): give --nodes 36``; the counts skipped (the recipe cannot run
    there) are counted, each named by ``--explain`` (:func:`node_search_notes`)."""
    n0 = s.from_nodes
    head = f"does not fit on {n0} node{'' if n0 == 1 else 's'} (fitted; the recipe states none); "
    skipped = [t for t in s.tried if t.skipped is not None]
    why = sorted({(t.skipped or "").split(": ", 1)[0] for t in skipped})
    skip = (f"; {len(skipped)} count(s) skipped ({', '.join(str(t.nodes) for t in skipped)} nodes), where the recipe "
            f"cannot run ({', '.join(why)} refused there: --explain)" if skipped else "")
    if s.fits_from_nodes is None:
        tight = f" (tight from {s.tight_from_nodes})" if s.tight_from_nodes is not None else ""
        done = [t for t in s.tried if t.skipped is None]
        last = max(done, key=lambda t: t.nodes)
        most = (f", most of it {last.largest_term}" if last.largest_term else "") \
            + (" (data parallelism does not shrink them)" if last.largest_term in _NOT_SHARDED else "")
        still = f": on {last.nodes} nodes still {last.peak_bytes / GiB:.1f} GiB{most}" if last.nodes > n0 else ""
        return (head + f"fits on none of the counts tried, doubling up to {s.max_nodes} nodes "
                f"({s.max_nodes * s.gpus_per_node} GPUs){tight}"
                + still + skip)
    tight = f" (tight from {s.tight_from_nodes})" if s.tight_from_nodes is not None else ""
    fewest = "" if s.exact else " or fewer (search budget spent)"
    return head + f"fits from {s.fits_from_nodes} nodes{fewest}{tight}: give --nodes {s.fits_from_nodes}" + skip


def node_search_notes(s: NodeSearch) -> list[str]:
    """``--explain``'s notes on the fewest-nodes search: each count tried, its verdict and peak, or why skipped."""
    done = [f"{t.nodes}: {t.verdict} ({t.peak_bytes / GiB:.1f} GiB)" if t.skipped is None else
            f"{t.nodes}: skipped ({t.skipped})" for t in s.tried]
    return [f"nodes: the node count was fitted (the recipe states none) and the plan does not fit: the same recipe "
            f"re-read with --nodes N (data-parallel / FSDP degrees that follow the world grow with it) and projected "
            f"at {s.gpus_per_node} GPUs per node, doubling then bisecting up to {s.max_nodes} nodes; verdict per "
            f"count: " + "; ".join(done)]


def band_side(b: ErrorBand) -> str:
    """Why a point estimate lies outside its own expected range, where it does: the judged rows like it all
    (10th .. 90th percentile) ran slower, or all faster, than projected (``1.447 s, expected 1.494 .. 1.601 s``
    read as a contradiction); empty where the range holds the point."""
    if b.low > 0:
        return f": they ran {100 * b.low:.0f} .. {100 * b.high:.0f} % slower than projected"
    if b.high < 0:
        return f": they ran {-100 * b.high:.0f} .. {-100 * b.low:.0f} % faster than projected"
    return ""


def band_note(b: ErrorBand) -> str:
    """``--explain``'s note on the iteration time's expected error (``projection/band.py``): the band's
    fractions with their sign spelled out, what they are and how the ranges of the summary follow."""
    return (f"expected error of the iteration time: {b.text()}: {b.statistic} (+ slower than projected, - faster); "
            "the summary's iteration range is the projected time x (1 + low) .. (1 + high), the tokens/s range "
            "the same band inverted" + (f"; judging dimensions dropped to reach enough rows: {', '.join(b.relaxed)}"
                                        if b.relaxed else ""))


#: the parallelism row's names in words (``plan/sections.py`` ``Parallel``, ``Recompute``; ``Plan.dp``)
PARALLELISM_NOTE = (
    "parallelism: TP tensor, PP pipeline (VPP: model chunks per pipeline rank), CP context, EP expert parallel; "
    "DP = GPUs / (TP x PP x CP) data-parallel replicas; MBS micro-batch and GBS global batch, in sequences; "
    "recompute: none | selective (the modules listed) | full (method and layers) | op (TorchTitan's per-op "
    "selective); dp_sharding: none (DDP) | optimizer (distributed optimizer, ZeRO-1) | optimizer_grads (ZeRO-2) | "
    "full (FSDP, ZeRO-3); SP: sequence parallel")


def figure_notes(r: ProjectionResult) -> list[str]:
    """What the summary's figures are, for ``--explain`` and the HTML report's notes (the short answer prints
    "model TFLOP/s/GPU", "dp_sharding=optimizer" and an expected range without their definitions): the
    parallelism row's names, the model FLOPs behind TFLOP/s and MFU, and the iteration time's error band
    (:func:`band_note`)."""
    out = [PARALLELISM_NOTE]
    if r.iteration_time_s > 0 and r.num_gpus:
        out.append(f"model TFLOP/s/GPU: the model's FLOPs per iteration ({r.model_flops_per_iteration / 1e15:,.4g} "
                   f"PFLOP, counted as Megatron-LM's num_floating_point_operations: causal attention halved, recomputed "
                   f"forwards not counted; projection/cost/flops.py) / iteration time / "
                   f"{r.num_gpus:,} GPUs; MFU: that over the GPU's datasheet dense peak at the plan's precision")
    if r.band is not None:
        out.append(band_note(r.band))
    return out


_NBSP = "\u00a0"
#: a number and the unit after it stay on one line ("0.7 s" was wrapped as "0.7" / "s")
_NUMBER_UNIT = re.compile(r"(?<=\d) (?=(?:s|ms|us|%|GiB|MiB|GB|MB|KB|W|bytes|days|GPU-hours)(?![\w/]))")


#: a range's two ends stay on one line ("3 .. 11", "+0% .. +16%", "1.494 .. 1.601")
_RANGE = re.compile(r"(?<=[\d%]) \.\. (?=[-+]?\d)")


def glue_units(text: str) -> str:
    """``text`` with the space between a number and its unit made non-breaking (callers that wrap it turn
    the non-breaking spaces back into spaces)."""
    # "... judged rows like" / "it (megatron / ...)" wrapped mid-phrase; "they ran 0 .." / "16 % slower" split a range
    text = _RANGE.sub(lambda m: m.group(0).replace(" ", _NBSP), text)
    return _NUMBER_UNIT.sub(_NBSP, text).replace("rows like it", f"rows like{_NBSP}it")


#: a break allowed after the ``=`` of a ``key=value`` word too long for a line (removed after wrapping)
_BREAK = "\x00"


def _breakable(text: str, room: int) -> str:
    """``text`` with a break allowed after the first ``=`` of each word longer than ``room`` columns: a
    ``section.key=value`` pair the note names (user16: a Bridge note's
    ``model.transformer_layer_spec=megatron.bridge.models.gpt_provider.default_layer_spec,`` ran to column 88).
    The key and the value each stay whole (a path in the value can still be pasted)."""
    words = text.split(" ")
    for i, w in enumerate(words):
        eq = w.find("=")
        if len(w) > room and 0 < eq < len(w) - 1:
            words[i] = w[:eq + 1] + _BREAK + " " + w[eq + 1:]
    return " ".join(words)


def _wrap(text: str, indent: str = "", first: str = "") -> list[str]:
    """``text`` wrapped to :data:`WIDTH` columns, the first line after ``first``, the rest after
    ``indent``; a parenthesised group short enough for one line is kept on one line, unless moving it whole
    leaves a line under a third of the width (then it wraps at its spaces); a ``key=value`` word longer than a
    line breaks after its ``=`` (:func:`_breakable`)."""
    text = _breakable(glue_units(text), WIDTH - max(len(indent), len(first)))
    groups, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(" and not depth:
            start = i
        depth += ch == "("
        if ch == ")" and depth == 1:
            groups.append((start, i))
        depth -= ch == ")" and depth > 0
    kept = set(range(len(groups)))
    for _ in range(len(groups) + 1):
        chars = list(text)
        for g in kept:
            a, b = groups[g]
            chars[a:b] = [_NBSP if c == " " else c for c in chars[a:b]]
        lines = textwrap.wrap("".join(chars), WIDTH, initial_indent=first, subsequent_indent=indent,
                              break_long_words=False, break_on_hyphens=False)
        # "note: ...: cluster gpu=h100-sxm: the" / "default" / "(the recipe does not state it; ...)": the group
        # moved to the next line left "default" alone on its own
        ragged = next((i for i, ln in enumerate(lines[:-1]) if len(ln) < WIDTH // 3 and len(ln) > len(indent)
                       and lines[i + 1][len(indent):].startswith("(")), None)
        if ragged is None:
            break
        pos = len("".join(ln[len(first if i == 0 else indent):] for i, ln in enumerate(lines[:ragged + 1]))
                  .replace(" ", "").replace(_NBSP, ""))  # the group's start among the non-blank characters
        at = [g for g in kept if len(text[:groups[g][0]].replace(" ", "").replace(_NBSP, "")) == pos]
        if not at:
            break
        kept -= set(at)
    if any(len(ln) > WIDTH for ln in lines):  # a group longer than a line: wrap it at its spaces too
        # a single word longer than a line (a file path) is left whole: a path broken across lines cannot be pasted
        lines = textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent,
                              break_long_words=False, break_on_hyphens=False)
    return [ln.replace(_NBSP, " ").replace(_BREAK + " ", "").replace(_BREAK, "").rstrip()
            for ln in lines] or [first.rstrip()]


def _summary_lines(r: ProjectionResult, run: Optional[TrainingRun] = None) -> list[str]:
    rows = summary_rows(r, run)
    w = max(len(k) for k, _ in rows) + 2
    out: list[str] = []
    for k, v in rows:
        out += _wrap(v, indent=" " * w, first=f"{k:<{w}}")
    return out


def _time_memory_lines(r: ProjectionResult) -> list[str]:
    """The largest :data:`TOP_TIME` time components (ms, %; the rest as ``other (N)``, N components, where
    more than one is left: a single one is shown by its own name) beside the memory by term of the worst
    stage (GiB), as one two-column table."""
    total = r.iteration_time_s or 1.0
    items = sorted(((k, v) for k, v in r.time_breakdown.items() if v >= 5e-5), key=lambda kv: -kv[1])  # >= 0.1 ms
    cut = TOP_TIME if len(items) > TOP_TIME + 1 else TOP_TIME + 1  # one left over is shown by its name
    shown, rest = items[:cut], items[cut:]
    if rest:
        shown.append((f"other ({len(rest)})", sum(v for _, v in rest)))
    times = [(k, f"{v * 1e3:,.1f}", f"{100 * v / total:.1f}") for k, v in shown]
    m = r.memory
    mem = [(k, f"{v / GiB:.2f}") for k, v in m.breakdown.items() if v]
    mem.append(("peak", f"{m.peak_bytes_per_gpu / GiB:.2f}"))
    n = max(len(times), len(mem))
    times += [("", "", "")] * (n - len(times))
    mem += [("", "")] * (n - len(mem))
    rows = [t + mm for t, mm in zip(times, mem)]
    return tabulate(rows, headers=["time component", "ms", "%", f"memory (stage {m.worst_stage})", "GiB"],
                    tablefmt="simple", colalign=("left", "right", "right", "left", "right"),
                    disable_numparse=True).splitlines()


#: the warnings heading of an answer with no setting left unmodelled: said, not left to the reader to infer from
#: an absent list (the short answer of a recipe without warnings did not mention what was not modelled at all)
NO_WARNINGS = "warnings: none (no setting of the recipe is left unmodelled)"


def warnings_heading(r: ProjectionResult) -> str:
    """``warnings: N setting(s) not modelled``, or :data:`NO_WARNINGS` where the result has none."""
    return f"warnings: {len(r.warnings)} setting(s) not modelled" if r.warnings else NO_WARNINGS


def _list_value(value: str) -> str:
    """A warning's value with a space after each comma where, whole, it would not fit a line: a list such as
    Primus's ``primus_turbo=use_turbo_attention,use_turbo_mx_linear,...`` was one 98-column word the wrapper could
    not break; a shorter value is shown as written."""
    v = str(value)
    return v.replace(",", ", ") if len(v) > WIDTH - 16 and "," in v and " " not in v else v


def _warning_lines(r: ProjectionResult, reader_notes: Iterable[str]) -> list[list[str]]:
    """One block of wrapped lines per warning (a setting not modelled) and per reader note; the first
    note's block starts with its own ``notes:`` heading (a note listed under "warnings: N setting(s) not
    modelled" read as one more setting not modelled; under "warnings: none" it would read as a warning)."""
    out = [_wrap(f"{w.flag}={_list_value(w.value)}: {w.effect}", indent="    ", first="  ") for w in r.warnings]
    notes = [_wrap(n, indent="    ", first="  note: ") for n in reader_notes]
    if notes:
        notes[0] = ["notes:"] + notes[0]
    return out + notes


def render_short(r: ProjectionResult, reader_notes: Iterable[str] = (), run: Optional[TrainingRun] = None) -> str:
    """The short answer: at most :data:`MAX_LINES` lines of at most :data:`WIDTH` columns (module
    docstring); warnings and reader notes fill what is left, the rest counted on the last line."""
    out = _summary_lines(r, run) + [""] + _time_memory_lines(r)
    if r.measurement is not None:
        ms = r.measurement
        cpu = ("; CPU timings only check the path, not GPU performance (--dry-run simulates the GPU)"
               if ms.device.startswith("cpu") else "")  # the figures above are not the GPU's: said on the screen
        out += [""] + _wrap(f"measured: {len(ms.pieces)} pieces on {ms.device} ({ms.cache_hits} from the cache)"
                            + cpu, indent="  ")
    blocks = _warning_lines(r, reader_notes)
    tail = "details: --explain (every table and note), --json"
    out += ["", warnings_heading(r)]  # said also where there is none
    if blocks:
        room = MAX_LINES - len(out) - 1  # the last line says what was left out
        shown = 0
        for b in blocks:
            if len(b) > room:
                break
            out += b
            room -= len(b)
            shown += 1
        if shown < len(blocks):  # what was left out, by kind ("... 1 more" left the reader to guess which)
            warned = len(r.warnings)
            left = [(max(0, warned - shown), "setting(s) not modelled"),
                    (len(blocks) - max(shown, warned), "note(s)")]
            tail = "... " + " and ".join(f"{n} more {what}" for n, what in left if n) + "; " + tail
            if len(tail) > WIDTH:  # both kinds left out (a long summary above): within the width all the same
                tail = "... " + ", ".join(f"{n} more {what}" for n, what in left if n) + ": --explain, --json"
    out.append(tail)
    return "\n".join(out)


#: each time component in words (``projection/steps/iteration.py`` ``iteration_costs``: the busiest pipeline
#: stage's time, each communication term the part not hidden behind compute), for ``--explain``'s table
TIME_TERMS = {
    "compute": "the busiest stage's kernels and host launches (recomputed forwards included)",
    "tp_comm": "tensor-parallel all-gather / reduce-scatter not hidden behind compute",
    "cp_comm": "context-parallel key/value exchange not hidden behind attention",
    "ep_comm": "expert-parallel token dispatch / combine (all-to-all) not hidden",
    "dp_comm": "data-parallel gradient sync and parameter gathers (FSDP) not hidden",
    "pp_comm": "pipeline sends between stages on the critical path",
    "bubble": "pipeline idle time: the stage waiting for its neighbours (warm-up, cool-down)",
    "optimizer": "the optimizer step after the last backward",
}
#: each memory term in words (``projection/memory/estimate.py``: the worst stage's peak, one GPU)
MEMORY_TERMS = {
    "parameters": "the weights this GPU holds (its shard)",
    "gradients": "gradient buffers (in the dtype gradients are reduced in)",
    "optimizer": "optimizer state (master weights, Adam moments or Muon momentum), sharded as dp_sharding says "
                 "(dist_muon: whole tensors per owner)",
    "activations": "tensors saved for the backward, of every micro-batch in flight",
    "transient": "temporaries alive at the peak (beyond the saved tensors)",
    "workspaces": "cuBLAS / Transformer Engine GEMM workspaces",
    "reserve": "cached by the allocator but unused, + CUDA context / NCCL outside it",
    "peak": "the sum: the stage's peak on one GPU",
}
#: the ``parameters`` term of a Megatron plan in FP8 / FP4 (``projection/memory/mcore.py``: the stored weights plus
#: Transformer Engine's quantized copies of the linears' weights, all-gathered whole under FSDP): "its shard" alone
#: read as wrong beside a 70B FSDP run's 80 GiB of "parameters" on one GPU
LOW_PRECISION_PARAMETERS = ("the weights this GPU holds (its shard) and Transformer Engine's quantized copies of the "
                            "linears' weights it computes with (whole layers under FSDP)")


def memory_term(key: str, r: ProjectionResult) -> str:
    """What memory term ``key`` of ``r`` holds, in words (:data:`MEMORY_TERMS`; a Megatron plan in FP8 / FP4 holds
    quantized weight copies in ``parameters`` too: :data:`LOW_PRECISION_PARAMETERS`)."""
    if key == "parameters" and r.plan.framework == "megatron" and r.plan.training.precision in ("fp8", "fp4"):
        return LOW_PRECISION_PARAMETERS
    return MEMORY_TERMS.get(key, "")


def _term_width(rows: list[tuple], headers: list[str]) -> int:
    """The room left within :data:`WIDTH` for a table's last ("what it is") column, after the others and
    tabulate's two-space gaps (at least 24)."""
    used = sum(max(len(str(r[i])) for r in [tuple(headers)] + rows) + 2 for i in range(len(headers) - 1))
    return max(WIDTH - used - 2, 24)   # tabulate may run a wrapped cell a column or two past the width asked


def render_text(r: ProjectionResult, explain: bool = False, reader_notes: Optional[Iterable[str]] = None,
                run: Optional[TrainingRun] = None) -> str:
    """The short answer (:func:`render_short`), or with ``explain`` every table: summary, time
    breakdown, memory breakdown, the measured pieces, the warnings and every note, and for a
    dry-run the per-op pricing (:func:`render_explanation`).  ``reader_notes``: what the recipe
    reader noted (default: the plan's ``source.notes``); ``run``: a whole training run at this
    projection (two more summary rows, and with ``explain`` what it leaves out)."""
    notes_in = list(reader_notes) if reader_notes is not None else list(r.plan.source.notes if r.plan.source else [])
    if not explain:
        return render_short(r, notes_in, run)
    m = r.memory
    out = ["\n".join(_summary_lines(r, run))]   # as the short answer writes it, within WIDTH columns
    total = r.iteration_time_s or 1.0
    times = [(k, f"{v * 1e3:,.1f}", f"{100 * v / total:.1f}", TIME_TERMS.get(k, "")) for k, v in r.time_breakdown.items()]
    # figures as written (tabulate's number parsing printed 194.0 ms as "194", 0.0 as "0", the peak as "37.2")
    out.append(tabulate(times, headers=["time component", "ms", "%", "what it is"], tablefmt="simple",
                        disable_numparse=True, colalign=("left", "right", "right", "left"),
                        maxcolwidths=[None, None, None, _term_width(times, ["time component", "ms", "%", ""])]))
    mem = [(k, f"{v / GiB:.2f}", memory_term(k, r)) for k, v in m.breakdown.items()]
    mem.append(("peak", f"{m.peak_bytes_per_gpu / GiB:.2f}", MEMORY_TERMS["peak"]))
    if m.oom_peak_bytes and m.oom_peak_bytes < m.peak_bytes_per_gpu:
        mem.append(("verdict on (less free cached segments)", f"{m.oom_peak_bytes / GiB:.2f}",
                    "the peak less what the allocator frees before an out-of-memory error"))
    out.append(tabulate(mem, headers=[f"memory (stage {m.worst_stage})", "GiB", "what it is"], tablefmt="simple",
                        disable_numparse=True, colalign=("left", "right", "left"),
                        maxcolwidths=[None, None, _term_width(mem, [f"memory (stage {m.worst_stage})", "GiB", ""])]))
    if r.measurement is not None:
        out.append("measured pieces (per GPU, one micro-batch):\n" + "\n".join(measurement_summary(r)))
    warn = [f"warning: {w.flag}={w.value}: not modelled ({w.effect})" for w in r.warnings] or [NO_WARNINGS]
    notes = [f"note: {n}" for n in notes_in + list(r.notes) + list(m.notes)]
    notes += [f"note: {n}" for n in figure_notes(r)]
    if m.node_search is not None:
        notes += [f"note: {n}" for n in node_search_notes(m.node_search)]
    if run is not None:
        notes.append(f"note: training run: {run.excludes}")
    # each warning / note wrapped within WIDTH columns, its continuation indented (a 469-character note was one line)
    out.append("\n".join(ln for item in warn + notes for ln in _wrap(item, indent="    ")))
    if r.mode == "dry-run":
        out.append(render_explanation(r))
    return "\n\n".join(out)


def render_explanation(r: ProjectionResult) -> str:
    """The dry-run term by term: per kernel of one layer its time, efficiency and source, the
    layer's communication and the framework profile (``projection/explain.py``)."""
    from primus_launch.projection.explain import explain_text

    return ("how the dry-run priced it (kernel times include the framework's in-situ efficiency and the "
            "sustained clock)\n\n" + explain_text(r.plan))
