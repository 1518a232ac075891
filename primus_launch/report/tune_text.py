"""The tuner's text answer: what ``primus-launch --tune`` prints (the CLI renders a :class:`TuneResult` with
:func:`render_tune_text`; the tuner itself only searches and scores).

Within :data:`WIDTH` columns (the brief: a person reads the default answer in one screen): the original and
best plans, the gain, the search's counts and certificate, which numerics knobs were allowed, the memory rule,
the ranking line where the model cannot rank plans apart, and the top-N table.
"""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan
from primus_launch.plan.inert import inert_fields
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner import rules
from primus_launch.tuner.engine import plan_changes
from primus_launch.tuner.result import TuneResult, best_rank


def _reference_word(res: TuneResult) -> str:
    """What the table and the ranking line call the plan the search started from: ``original`` (the recipe's
    own), ``start`` where the recipe's plan is not legal on the cluster (``res.no_reference``)."""
    return "start" if res.no_reference else "original"


def _ranking_lines(res: TuneResult) -> list[str]:
    """The ``ranking:`` line, only where the model cannot rank plans apart: the top rows whose error band
    overlaps the best's (the original named where it is one of them, or added where only the gain is)."""
    ranks = list(res.inside_best_band)
    orig = {k for k in ranks if not res.top[k - 1].changes}
    ref = _reference_word(res)
    if not ranks and not res.gain_inside_band:
        return []
    one = _best_rank(res)
    if len(ranks) > 1 and ranks == list(range(one + 1, ranks[-1] + 1)):
        who = f"#{one + 1}-#{ranks[-1]}" + (f" (the {ref} among them)" if orig else "")
    else:
        who = ", ".join(f"#{k}" + (f" (the {ref})" if k in orig else "") for k in ranks)
    if res.gain_inside_band and not orig:
        who = f"{who} and the {ref}" if who else f"the {ref}"
    b = res.best.band
    # whose band it is, in seconds as the project answer gives it ("#1's -2 .. +17 %" left the sign to guess)
    size = ("" if b is None else
            # kept on one line ("expected 55.413" / ".. 59.375 s" was wrapped apart); _wrapped restores the spaces
            (f" (#{one}: expected %.3f .. %.3f s)" % b.iteration_range(res.best.iteration_time_s)).replace(
                " .. ", "\u00a0..\u00a0"))
    return [f"ranking:  #{one} and {who} overlap in their error bands{size}: either could run faster (plans of one "
            "group share much of that error)"]


def _best_rank(res: TuneResult) -> int:
    """The 1-based row of the best plan in the top-N table: the first row that could be the answer (rows the
    memory rule keeps out, tight plans over the capacity, may precede it: ``tuner/memory_rule.py``)."""
    return best_rank(res.top) or 1


def knob_line(res: TuneResult) -> str:
    """Which numerics-changing knob families were allowed, and which were not searched."""
    from primus_launch.projection.hardware.gpus import get_gpu, has_fp8

    gpu = res.best_plan.cluster.gpu
    # `--allow fp8` on a GPU without FP8 tensor cores (an A100): allowed, and no plan could take it -- said
    allowed = ", ".join(a if a != "fp8" or has_fp8(get_gpu(gpu)) else f"fp8 (none on {gpu}: no FP8 tensor cores)"
                        for a in res.allowed) or "none"
    missing = [a for a in rules.ALLOWABLE if a not in res.allowed]
    out = f"numerics: allowed {allowed}"
    if missing:
        out += " (not searched: " + ", ".join(f"--allow {a}" for a in missing) + ")"
    return out


def _verdict(r: ProjectionResult) -> str:
    """The verdict in words; a ``tight`` plan whose point estimate is over the usable capacity says so (more
    likely to run out of memory than not: ``tuner/memory_rule.py``)."""
    from primus_launch.tuner.memory_rule import over_capacity

    if r.memory.verdict == "tight":
        return ("TIGHT: the capacity lies in the peak's error band"
                + (", the point estimate over it" if over_capacity(r.memory) else ""))
    return {"fits": "fits"}.get(r.memory.verdict, "DOES NOT FIT")


def _held_bytes(t) -> int:
    """The part of a top-N row's peak that cannot be released (``Trial.oom_peak_bytes``) where the row shows it
    (below the peak: the band is on it, not on the peak), else 0."""
    held = getattr(t, "oom_peak_bytes", None)
    return held if held and t.peak_memory_bytes and held < t.peak_memory_bytes else 0


def _memory_cell(t) -> str:
    """A top-N row's memory: the peak, the part of it that cannot be released where less (the verdict's
    quantity, :func:`_held_bytes`), its error band and the verdict (``tight``: the capacity lies in
    the band; the plan is kept and marked)."""
    out = f"{(t.peak_memory_bytes or 0) / 2**30:.1f}"
    held = _held_bytes(t)
    if held:
        out += f", held {held / 2**30:.1f}"
    if t.peak_band_bytes is not None:
        lo, hi = t.peak_band_bytes
        out += f" ({lo / 2**30:.1f}-{hi / 2**30:.1f})"
    if t.verdict:
        out += (" TIGHT" + (" over" if getattr(t, "over_capacity", None) else "")) if t.verdict == "tight" \
            else f" {t.verdict}"
    return out


def _searched_line(res: TuneResult) -> str:
    if res.search == "branch-and-bound" and res.certificate is not None:
        c = res.certificate
        if c.certified:  # the counts are the certificate's, on the "search:" line below
            return f"searched: {c.plans:,} plans in {res.elapsed_s:.1f} s"
        return (f"searched: {c.plans:,} plans: {c.scored:,} scored, {c.bounded_time:,} bounded out by time, "
                f"{c.bounded_memory:,} by memory{f', {c.open:,} open' if c.open else ''}, {res.elapsed_s:.1f} s")
    return (f"searched: {res.scored} scored of {res.legal_candidates:,} legal candidates"
            f"{'' if res.legal_exact else ' (estimated)'} ({100 * res.scored_fraction:.1f} %), "
            f"{res.rejected} rejected by the pre-filter, {res.elapsed_s:.1f} s")


def _memory_rule_line(res: TuneResult) -> list[str]:
    """Which memory verdicts the answer could have (issue 27: the tuner says which plans it kept,
    ``res.memory_rule``, ``tuner/memory_rule.py``): a line when the rule mattered or was asked for."""
    rule = getattr(res, "memory_rule", "certain" if res.memory_certain else "point")
    if rule == "point" and not (any(t.verdict == "tight" for t in res.top) or res.best.memory.verdict == "tight"):
        return []
    from primus_launch.tuner.memory_rule import RULE_TEXT

    return [f"memory:   {RULE_TEXT[rule]}"]


def _run_lines(res: TuneResult) -> list[str]:
    """With a token count (``training_tokens``): the whole run of the original and the best plan,
    side by side (days, GPU-hours, cost, with the time band where there is one)."""
    if not res.training_run:
        return []
    from primus_launch.projection.training_run import days_text, gpu_text, tokens_text

    o, b = res.training_run["original"], res.training_run["best"]
    return [f"run of {tokens_text(o.tokens)} tokens ({o.excludes}):",
            f"  original: {days_text(o)}, {gpu_text(o)}",
            f"  best:     {days_text(b)}, {gpu_text(b)}"]


WIDTH = 80  # the text answer's width (the brief: a person reads the default answer in one screen)


def _wrapped(line: str, indent: int = 10) -> list[str]:
    """``line`` wrapped at :data:`WIDTH` columns, continuation lines indented under its label."""
    import textwrap

    from primus_launch.report.text import glue_units

    return [w.replace("\u00a0", " ") for w in textwrap.wrap(glue_units(line), WIDTH, subsequent_indent=" " * indent,
                                                             break_on_hyphens=False)] or [line]


#: recompute fields a granularity does not read (``plan/sections.py`` ``Recompute``): not shown as changes
#: where the new granularity ignores them ("recompute.num_layers=None" beside "granularity=none")
_RECOMPUTE_UNREAD = {"none": ("method", "num_layers", "modules", "layer_ids"), "op": ("method", "num_layers", "modules",
                                                                                     "layer_ids"),
                     "selective": ("method", "num_layers", "layer_ids"), "full": ("modules",)}


def _effective_etp(changes: dict, original: Plan) -> Optional[int]:
    """The expert TP degree a change set leaves: ``parallel.etp``, where None means "the same as TP"
    (``plan/sections.py`` ``Parallel.etp``; Megatron's ``--expert-tensor-parallel-size`` defaults to
    ``--tensor-model-parallel-size``), resolved against the new TP."""
    etp = changes["parallel.etp"] if "parallel.etp" in changes else original.parallel.etp
    return etp if etp is not None else changes.get("parallel.tp", original.parallel.tp)


def _changed_degrees(original: Plan, changes: dict) -> Plan:
    """``original`` at the changed TP and pipeline degrees: what :func:`inert_fields` reads of the changed plan (its
    model is the original's: the tuner changes no architecture)."""
    new = {k: changes[f"parallel.{k}"] for k in ("tp", "pp") if f"parallel.{k}" in changes}
    if not new:
        return original
    return original.model_copy(update={"parallel": original.parallel.model_copy(update=new)})


def shown_changes(changes: dict, original: Plan | None = None) -> dict:
    """``changes`` (dotted plan fields -> new values) less the recompute fields the plan's recompute
    granularity does not read (:data:`_RECOMPUTE_UNREAD`; the granularity is the changed one, else
    ``original``'s) and the fields without effect on the changed plan (``plan/inert.py``: expert fields on a
    dense model, the pipeline's at pp 1, sequence parallelism at tp 1; user19: ``parallel.etp=8`` was listed on a
    dense Llama), with ``parallel.etp`` resolved (None: the TP degree): left out where the expert TP degree
    the plan runs is the original's ("etp=None" beside "tp=1" when the original ran tp=2, etp=1)."""
    gran = changes.get("training.recompute.granularity")
    if gran is None and original is not None:
        gran = original.training.recompute.granularity
    unread = {f"training.recompute.{f}" for f in _RECOMPUTE_UNREAD.get(gran, ())}
    if original is not None:  # fields without effect on the changed plan: no change of the run (plan/inert.py)
        unread |= inert_fields(_changed_degrees(original, changes))
    out = {k: v for k, v in changes.items() if k not in unread}
    if original is not None and "parallel.etp" in out:
        new = _effective_etp(changes, original)
        old = original.parallel.etp if original.parallel.etp is not None else original.parallel.tp
        if new == old:
            del out["parallel.etp"]
        else:
            out["parallel.etp"] = new
    return out


def value_text(v: object) -> str:
    """A plan value as a setting reads: a tuple or list of names space-joined (``modules=moe_act
    layernorm``), an empty one or None as ``none`` (``vpp=none``: no interleaving; ``cuda_graph_scope=none``),
    anything else as ``str`` gives it."""
    if isinstance(v, (tuple, list)):
        return " ".join(map(str, v)) if v else "none"
    return "none" if v is None else str(v)


#: the top-N table's short names for the plan's long field names (the ``changes:`` line above the table keeps
#: the dotted plan names; the tuned recipe, the framework's own)
SHORT_NAMES = {"pipeline_layers_first_stage": "first_stage_layers", "pipeline_layers_last_stage": "last_stage_layers",
               "account_for_embedding_in_pipeline_split": "embedding_in_split",
               "account_for_loss_in_pipeline_split": "loss_in_split"}


def _setting(key: str, value: object) -> str:
    """``knob=value`` for the top-N table: the field's last dotted part (:data:`SHORT_NAMES` where long)."""
    name = key.split(".")[-1]
    return f"{SHORT_NAMES.get(name, name)}={value_text(value)}"


def _changes_text(changes: dict, original=None) -> str:
    return ", ".join(_setting(k, v) for k, v in shown_changes(changes, original).items())


def _original_value(original, key: str):
    obj = original
    for part in key.split("."):
        obj = getattr(obj, part, None)
    return obj


def _top_changes(rank: int, t, first, ref: str = "original", original=None, one: int = 1) -> str:
    """A top-N row's changes: the best's row (``first``, rank ``one``) against the original; each other row's
    as the best's row plus what it sets differently (``cp=1`` where it keeps the original's value: the value,
    from ``original``, the plan the search started from), so that ties read as what they are: the same plan
    with one knob that does not move the time.  ``ref``: the word for that plan (:func:`_reference_word`)."""
    if not t.changes:
        return f"({ref})"
    if t is first or first is None:
        return _changes_text(t.changes, original)
    mine, best = shown_changes(t.changes, original), shown_changes(first.changes, original)
    diff = {k: v for k, v in mine.items() if best.get(k) != v}
    diff.update({k: (_original_value(original, k) if original is not None else ref) for k in best if k not in mine})
    if "parallel.etp" in diff and "parallel.etp" not in mine and original is not None:
        diff["parallel.etp"] = _effective_etp({}, original)   # the original's expert TP, None resolved
    text = ", ".join(_setting(k, v) for k, v in diff.items())
    return f"#{one}" + (" with " + text if diff else "")


#: under the top-N table where a row shows ``held``: what it is (the answer's memory line says it in words)
HELD_LINE = ("held: the peak less the free cached segments the allocator gives back before an out-of-memory "
             "error; the band and the verdict are on it")

UNDER_ROW_LINES = 3  # a changes cell packed into more lines than this puts every row's changes under its row
ROW_ONE_LINES = 3   # the first row's changes longer than this many lines refer to the "changes:" line instead


def _same_changes(top: dict, full: dict) -> bool:
    """Whether a top-N row's changes (keys by their last dotted part) are the ``changes:`` line's."""
    return {k.split(".")[-1]: str(v) for k, v in top.items()} == {k.split(".")[-1]: str(v) for k, v in full.items()}


def _pack(text: str, room: int) -> str:
    """``[#1 with ]a=1, b=2, ...`` packed into lines of at most ``room`` columns, broken between
    settings; a setting longer than the room is broken at its separators (:func:`_break_setting`), never
    mid-word where a separator allows.  Each setting is packed with the comma that follows it (a line filled to
    the room and then given its comma was one column over: the 70B wrapper's table at 81 columns)."""
    import re

    m = re.match(r"(#\d+ with) ", text)
    sep, rest = (m.group(1), text[m.end():]) if m else ("", text)
    settings = rest.split(", ")
    items = ([sep] if sep else []) + [it + ("," if n < len(settings) - 1 else "") for n, it in enumerate(settings)]
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 1 + len(item) <= room:
            lines[-1] += " " + item
            continue
        lines += _break_setting(item, room)
    return "\n".join(lines)


def _settings(text: str) -> list[str]:
    """The settings of a changes cell as :func:`_pack` places them (``#1 with`` aside, each with the comma that
    follows it)."""
    import re

    rest = re.sub(r"^#\d+ with ", "", text).split(", ")
    return [it + ("," if n < len(rest) - 1 else "") for n, it in enumerate(rest)]


def _break_setting(item: str, room: int) -> list[str]:
    """One setting (``knob=value``) in lines of at most ``room`` columns: whole when it fits, else broken
    after its separators (``_ . / - =``: ``account_for_embedding_in_`` / ``pipeline_split=True``), a
    piece longer than the room without one cut at the room."""
    import re

    if len(item) <= room:
        return [item]
    lines = [""]
    for piece in re.findall(r"[^_./=-]*[_./=-]?", item):
        if not piece:
            continue
        if lines[-1] and len(lines[-1]) + len(piece) > room:
            lines.append("")
        lines[-1] += piece
    return [ln[i:i + room] for ln in lines for i in range(0, len(ln), room)]


def _top_table(res: TuneResult) -> str:
    """The top-N table within :data:`WIDTH` columns (MFU, proportional to tokens/s within one tune, is
    in the original and best lines above it): the ``source`` column only where the rows came
    from more than one search (the original, ``seed``, aside), the changes column wrapped between
    settings."""
    from tabulate import tabulate

    one = _best_rank(res)
    first = res.top[one - 1] if res.top else None
    original = getattr(getattr(res, "baseline", None), "plan", None)
    sources = {t.source for t in res.top if t.changes}
    rows = []
    for rank, t in enumerate(res.top, 1):
        row = [rank, f"{t.iteration_time_s:.3f}", f"{t.tokens_per_sec_per_gpu:,.0f}", _memory_cell(t)]
        if len(sources) > 1:
            row.append(t.source)
        rows.append(row + [_top_changes(rank, t, first, _reference_word(res), original, one)])
    headers = ["#", "s/iter", "tok/s/GPU", "GiB (band) verdict"] + (["source"] if len(sources) > 1 else [])
    align = ("right", "right", "right") + ("left",) * (len(headers) - 2)
    fixed = tabulate([r[:-1] for r in rows], headers=headers, tablefmt="simple", disable_numparse=True,
                     colalign=align[:-1])
    room = max(WIDTH - max(len(line) for line in fixed.splitlines()) - 2, 24)
    best = plan_changes(res.baseline.plan, res.best_plan) if res.top else {}
    packed = [_pack(r[-1], room) for r in rows]
    # a setting wider than the column was cut mid-name ("dp_sharding=optimizer_" / "grads" on a Primus 8B tune;
    # user14): every row's changes then go under it, across the width
    cut = any(len(item) > room for r in rows for item in _settings(r[-1]))
    if max(p.count("\n") for p in packed) < UNDER_ROW_LINES and not cut:
        for rank, (r, p) in enumerate(zip(rows, packed), 1):
            r[-1] = p
            if rank == one and first is not None and first.changes and _same_changes(first.changes, best) \
                    and p.count("\n") >= ROW_ONE_LINES:
                r[-1] = "(the changes: line above)"  # listed in full above the table, not cut into pieces here
        return tabulate(rows, headers=headers + ["changes"], tablefmt="simple", disable_numparse=True,
                        colalign=align)
    # long changes: each row's on the lines under it, across the width, instead of a narrow column
    # (a ten-row table of 12-line cells would not fit one screen)
    lines = fixed.splitlines()
    out = [lines[0] + "  changes (under each row)", lines[1]]
    for rank, (r, line) in enumerate(zip(rows, lines[2:]), 1):
        out.append(line)
        text = r[-1]
        if rank == one and first is not None and first.changes and _same_changes(first.changes, best):
            text = "(the changes: line above)"
        out += ["      " + ln for ln in _pack(text, WIDTH - 6).split("\n")]
    return "\n".join(out)


def gain_text(gain: float) -> str:
    """The gain with what it is a gain of (``TuneResult.gain``: original / best iteration time - 1, the tokens/s
    ratio): ``+18.4 % tokens/s/GPU (iteration time -15.5 %)``; "gain: +18.4 %" beside 1.447 -> 1.222 s left the
    reader to guess whether the time fell by 18.4 % (it fell by 15.5 %)."""
    if gain == 0:
        return "+0.0 %"
    return f"{100 * gain:+.1f} % tokens/s/GPU (iteration time {100 * (1 / (1 + gain) - 1):+.1f} %)"


def render_tune_text(res: TuneResult) -> str:
    """The CLI's text for a tune: verdict, counts and the top-N table, within :data:`WIDTH` columns (MFU as the
    project answer prints it: a tiny model's 0.0085 % read "0.0 %"; where the best plan changes the precision,
    each MFU names the peak it is taken against: an FP8 plan 64 % faster read "MFU 42.9 %" -> "MFU 35.2 %")."""
    from primus_launch.report.text import PEAK_NAMES, mfu_range_text, small_figure

    b, o = res.best, res.baseline

    def mfu(r: ProjectionResult) -> str:
        # with the dry-run's expected range, as the project answer's MFU row gives it (user19: printed bare)
        out = f"MFU {small_figure(100 * r.mfu)} %{mfu_range_text(r)}"
        prec = r.plan.training.precision
        if prec != (o.plan.training.precision if r is b else b.plan.training.precision):
            out += f" of {PEAK_NAMES.get(prec, prec.upper())} peak"
        return out

    lines = [
        ("start:    " if res.no_reference else "original: ") + f"{o.iteration_time_s:.3f} s/iter, {o.tokens_per_sec_per_gpu:,.0f} tokens/s/GPU, "
        f"{mfu(o)}, {o.memory.peak_bytes_per_gpu / 2**30:.1f} GiB "
        f"({_verdict(o)})",
        f"best:     {b.iteration_time_s:.3f} s/iter, {b.tokens_per_sec_per_gpu:,.0f} tokens/s/GPU, "
        f"{mfu(b)}, {b.memory.peak_bytes_per_gpu / 2**30:.1f} GiB "
        f"({_verdict(b)})",
        f"gain:     none: no legal reference on this cluster (the recipe's own plan: {res.no_reference}; "
        "start: the search's legal starting plan)" if res.no_reference else
        f"gain:     {gain_text(res.gain)}" + (f" ({res.tie_note})" if res.tie_note else ""),
    ] + _run_lines(res) + [
        _searched_line(res),
        f"search:   {res.search}" + (f" on {res.executor}" if res.executor else
                                     f" on {res.workers} workers" if res.search == "exhaustive" else "")
        + (f": {res.certificate.text}" if res.certificate and res.certificate.certified else
           f" ({res.certificate.text})" if res.certificate else
           f" (no certificate of optimality{': ' + res.search_note if res.search_note else ''})"),
        knob_line(res),
    ] + _memory_rule_line(res) + _ranking_lines(res)
    changes = shown_changes(plan_changes(res.baseline.plan, res.best_plan), res.baseline.plan)
    if changes:
        lines.append("changes:  " + ", ".join(f"{k}={value_text(v)}" for k, v in changes.items()))
    else:  # the tuned recipe is then the original's copy: said, not left to a diff
        lines.append("changes:  none: the recipe's own plan is the best found")
    out = "\n".join(w for line in lines for w in _wrapped(line))
    if res.top:
        out += "\n\n" + _top_table(res)
        if any(_held_bytes(t) for t in res.top):  # a row shows 'held': say what it is
            out += "\n" + "\n".join(_wrapped(HELD_LINE, indent=0))
        if res.same_runs:
            out += "\n" + "\n".join(_wrapped(
                f"left out: {res.same_runs} plan(s) that are the same run as a row above (equal figures; only "
                "dp_sharding / the DP overlaps differ, which change nothing at DP x CP = 1)", indent=0))
    for w in res.warnings:
        out += "\n" + "\n".join(_wrapped(f"warning: {w}", indent=9))
    return out
