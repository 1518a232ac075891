"""The CLI's default text answer is one screen; ``--explain`` keeps every table (issue 31, item 4).

Truth: the bundled recipes themselves, each projected in dry-run through the CLI's own ``main``:
its whole answer (stdout and stderr) fits an 80 x 40 terminal and leads with the verdict, while
``--explain`` still prints the per-op pricing tables and the full breakdowns.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from primus_launch.cli import main
from primus_launch.report.text import MAX_LINES, WIDTH

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p for p in (ROOT / "recipes").rglob("*") if p.is_file() and p.suffix in (".sh", ".yaml", ".toml"))


def _run(capsys, *args: str) -> tuple[int, list[str]]:
    rc = main(["--project", *args, "--dry-run"])
    cap = capsys.readouterr()
    return rc, cap.out.splitlines() + cap.err.splitlines()


@pytest.mark.parametrize("recipe", RECIPES, ids=[str(p.relative_to(ROOT / "recipes")) for p in RECIPES])
def test_default_answer_is_one_screen(recipe, capsys):
    rc, lines = _run(capsys, str(recipe))
    assert rc == 0, lines[-5:]
    assert len(lines) <= MAX_LINES, "\n".join(lines)
    assert all(len(ln) <= WIDTH for ln in lines), [ln for ln in lines if len(ln) > WIDTH]
    assert not any(ln.endswith(" rows like") for ln in lines)  # user11: "like" / "it (...)" was wrapped apart
    text = "\n".join(lines)
    for word in ("iteration time", "tokens/s/GPU", "model TFLOP/s/GPU", "MFU", "memory", "time component",
                 "parameters", "activations"):
        assert word in text, word
    assert any(("fits" in ln or "FIT" in ln) for ln in lines[:14])  # the verdict in the summary, on top
    assert "how the dry-run priced it" not in text and lines[-1].startswith(("details:", "..."))


def test_warnings_are_in_the_answer_and_the_rest_is_counted(capsys):
    """A recipe with not-modelled settings lists them in the answer (not only on stderr); what does
    not fit the screen is counted on the last line."""
    rc, lines = _run(capsys, str(ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"))
    assert rc == 0
    i = next(k for k, ln in enumerate(lines) if ln.startswith("warnings: "))
    n = int(lines[i].split()[1])
    # --manual-gc is read since moonstep (cost/manual_gc.py); the sigmoid router score is still not modelled
    assert n > 0 and any("--moe-router-score-function" in ln for ln in lines[i:]) or lines[-1].startswith("... ")


def _with_continuation(lines: list[str], at: int) -> str:
    """Line ``at`` of --explain with the indented lines that continue it (a wrapped table cell or note)."""
    out = [lines[at]]
    for ln in lines[at + 1:]:
        if not ln.startswith(" ") or not ln.strip():
            break
        out.append(ln)
    return "\n".join(out)


def test_explain_keeps_every_table(capsys):
    rc, lines = _run(capsys, str(ROOT / "recipes/megatron/llama3.1_8b.sh"), "--explain")
    assert rc == 0
    text = "\n".join(lines)
    assert "how the dry-run priced it" in text and "dense layer: one micro-batch on one GPU (ms)" in text
    header = next(ln for ln in lines if ln.startswith("op ") and "efficiency" in ln)
    assert "fwd" in header and "source" in header
    for comp in ("cp_comm", "pp_comm", "optimizer"):  # the full time breakdown, zero terms included
        assert any(ln.startswith(comp) for ln in lines), comp
    # every time row's ms and % to one decimal as computed (tabulate's number parsing printed 0.0 as "0")
    i = lines.index(next(ln for ln in lines if ln.startswith("time component")))
    rows = [ln for ln in lines[i + 2:i + 2 + 24] if ln[:1].isalpha()][:8]   # less the wrapped "what it is" lines
    assert all(re.fullmatch(r"\w+ +\d[\d,]*\.\d +\d+\.\d( +\S.*)?", ln) for ln in rows), rows  # + what it is
    assert any(ln.startswith("note: ") for ln in lines)
    assert len(lines) > MAX_LINES
    # the summary, the term tables, the warnings and the notes within WIDTH columns (a note ran to 469; user12)
    upto = next(j for j, ln in enumerate(lines) if ln.startswith("how the dry-run priced it"))
    assert all(len(ln) <= WIDTH for ln in lines[:upto]), [ln for ln in lines[:upto] if len(ln) > WIDTH]


def test_verdict_line_names_the_band(capsys):
    """The memory line carries the verdict and the band the peak is expected in (issue 27, item 3)."""
    rc, lines = _run(capsys, str(ROOT / "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml"))
    assert rc == 0
    mem = " ".join(ln for ln in lines if "GiB peak of" in ln or ln.startswith(" "))
    assert "band" in mem and "GiB" in mem and ("fits" in mem or "TIGHT" in mem)


def test_mfu_line_names_the_peak_it_is_taken_against(capsys):
    """MFU = model TFLOP/s / the GPU's dense datasheet peak at the plan's precision (GPUSpec.peak_flops):
    the line names that peak, and the printed figures agree with one another (an FP8 recipe: the FP8 peak,
    not the BF16 one)."""
    import re

    from primus_launch.projection.hardware.gpus import get_gpu

    rc, lines = _run(capsys, str(ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"))
    text = "\n".join(lines)
    tflops = float(re.search(r"model TFLOP/s/GPU\s+([\d.]+)", text).group(1))
    mfu, prec, peak = re.search(r"MFU\s+([\d.]+) % (?:\([\d.]+ \.\. [\d.]+ %\)\s+)?of the (\w+) dense peak "
                                r"\(([\d,]+) TFLOP/s\)", text).groups()
    peak_tf = float(peak.replace(",", ""))
    assert rc == 0 and prec == "FP8"
    assert peak_tf == pytest.approx(get_gpu("h100-sxm").peak_flops("fp8") / 1e12, abs=0.5)
    assert float(mfu) / 100 * peak_tf == pytest.approx(tflops, abs=0.0005 * peak_tf + 0.05)  # MFU's rounding


def test_one_leftover_time_component_is_named(capsys):
    """The short table lists the five largest time components and sums the rest as ``other (N)``; a single
    leftover is shown by its own name (the 70B wrapper's six components printed the optimizer step as
    "other (1)").  Truth: the result's own time breakdown (``--json``), every term of 0.1 ms or more."""
    import json

    from primus_launch.report.text import TOP_TIME

    recipe = str(ROOT / "recipes/llama3.1_70b_h100_1024gpu.primus.toml")
    assert main(["--project", recipe, "--dry-run", "--json"]) == 0
    terms = [k for k, v in json.loads(capsys.readouterr().out)["time_breakdown"].items() if v >= 5e-5]
    rc, lines = _run(capsys, recipe)
    assert rc == 0 and len(terms) == TOP_TIME + 1
    i = next(k for k, ln in enumerate(lines) if ln.startswith("time component"))
    named = [ln.split()[0] for ln in lines[i + 2:i + 2 + len(terms)]]
    assert sorted(named) == sorted(terms) and not any(ln.startswith("other (") for ln in lines)


def test_notes_have_their_own_heading_after_the_warnings(capsys):
    """A reader note (the vocabulary looked up) sat under "warnings: 4 setting(s) not modelled" as if it were a
    fifth; it now follows a ``notes:`` heading, and the warning count is the result's own."""
    import json

    recipe = str(ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml")
    assert main(["--project", recipe, "--dry-run", "--json"]) == 0
    n_warn = len(json.loads(capsys.readouterr().out)["warnings"])
    rc, lines = _run(capsys, recipe)
    w = lines.index(f"warnings: {n_warn} setting(s) not modelled")
    n = lines.index("notes:")
    assert rc == 0 and n_warn > 0 and w < n
    assert not any(ln.startswith("  note: ") for ln in lines[w:n])
    assert lines[n + 1].startswith("  note: vocabulary")


def test_cpu_measurement_says_on_screen_it_is_no_gpu_figure():
    """``--measure-device cpu`` prints iteration time, tokens/s and MFU against the target GPU's peak from CPU
    timings; the short answer only said "measured: 5 pieces on cpu:x86_64:1threads" (the caveat was in
    ``--explain``'s notes).  The measured line now says it; a CUDA measurement's line does not."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project
    from primus_launch.projection.result import MeasurementReport
    from primus_launch.report.text import render_text

    res = project(load_recipe(ROOT / "recipes/megatron/tiny_gpt_cpu.sh"), dry_run=True)

    def measured_on(device: str) -> str:
        ms = MeasurementReport(device=device, framework="megatron-core", policy="", clock="", threads=1,
                               cache_dir="", cache_hits=0, pieces={}, layer_times={})
        return " ".join(render_text(res.model_copy(update={"measurement": ms, "mode": "measured"})).split())

    assert "measured: 0 pieces on cpu:x86_64:1threads (0 from the cache); CPU timings only check the path, not " \
           "GPU performance" in measured_on("cpu:x86_64:1threads")
    assert "CPU timings" not in measured_on("cuda:NVIDIA H100 80GB HBM3")


def test_one_gpu_is_not_plural(capsys):
    """A one-GPU run (TorchTitan's launch line without torchrun: one process) read "1 x 1 h100-sxm = 1 GPUs"."""
    rc, lines = _run(capsys, str(ROOT / "recipes/torchtitan/llama3.1_8b.toml"), "--nodes", "1", "--gpus-per-node", "1")
    assert rc == 0 and any(ln.startswith("cluster") and ln.endswith("= 1 GPU") for ln in lines), lines[:4]
    rc, lines = _run(capsys, str(ROOT / "recipes/torchtitan/llama3.1_8b.toml"))
    assert rc == 0 and any(ln.startswith("cluster") and ln.endswith("= 8 GPUs") for ln in lines), lines[:4]


def test_project_says_which_files_it_wrote(tmp_path, capsys):
    """``--project --report r.html --trace t.json`` wrote both without a word (a tune lists its files and their
    sizes); one line per file now follows the answer, on stderr (the answer's screen and ``--json``'s one object
    on stdout unchanged).  Truth: the files on disk and their sizes."""
    import json

    report, trace = tmp_path / "r.html", tmp_path / "t.json"
    rc, lines = _run(capsys, str(ROOT / "recipes/megatron/tiny_gpt_cpu.sh"), "--report", str(report),
                     "--trace", str(trace))
    assert rc == 0 and report.is_file() and trace.is_file()
    from primus_launch.cli_output import human

    assert lines[-2:] == [f"primus-launch: report written to {report} ({human(report.stat().st_size)})",
                          f"primus-launch: trace written to {trace} ({human(trace.stat().st_size)})"]
    assert main(["--project", str(ROOT / "recipes/megatron/tiny_gpt_cpu.sh"), "--dry-run", "--json", "--report",
                 str(report)]) == 0
    cap = capsys.readouterr()
    assert "iteration_time_s" in json.loads(cap.out) and "report written to" in cap.err


@pytest.mark.parametrize("recipe", ["recipes/torchtitan/llama3.1_8b.toml", "recipes/llama3.1_70b_h100_1024gpu.primus.toml"])
def test_worst_stage_is_named_only_where_there_are_stages(recipe, capsys):
    """"(worst stage 0)" on a plan of one pipeline stage took a wrapped line to say nothing; it stays where the
    plan has several (truth: the plan's pp and the worst stage in --json)."""
    import json

    assert main(["--project", str(ROOT / recipe), "--dry-run", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rc, lines = _run(capsys, str(ROOT / recipe))
    said = f"(worst stage {d['memory']['worst_stage']})" in " ".join(" ".join(lines).split())
    assert rc == 0 and said == (d["plan"]["parallel"]["pp"] > 1)


@pytest.mark.parametrize("recipe", ["recipes/torchtitan/llama3.1_8b.toml", "recipes/llama3.1_70b_h100_1024gpu.primus.toml",
                                    "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"])
def test_answer_always_says_what_was_not_modelled(recipe, capsys):
    """user11: a recipe with no setting left unmodelled printed no word about it (the short answer's list of
    what was not modelled was simply absent, and the 70B wrapper's reader note stood under a bare "notes:"); the
    warnings heading is now on every answer, short and ``--explain``, with the count of the result's own
    ``warnings`` (``--json``), "none" where it is empty, and a note never sits under it."""
    import json

    from primus_launch.report.text import NO_WARNINGS

    assert main(["--project", str(ROOT / recipe), "--dry-run", "--json"]) == 0
    n_warn = len(json.loads(capsys.readouterr().out)["warnings"])
    heading = f"warnings: {n_warn} setting(s) not modelled" if n_warn else NO_WARNINGS
    rc, lines = _run(capsys, str(ROOT / recipe))
    assert rc == 0 and [ln for ln in lines if ln.startswith("warnings: ")] == [heading]
    nxt = lines[lines.index(heading) + 1]
    assert nxt.startswith("  ") and not nxt.startswith("  note: ") if n_warn else nxt in ("notes:", lines[-1])
    rc, lines = _run(capsys, str(ROOT / recipe), "--explain")
    assert rc == 0 and (NO_WARNINGS in lines) == (not n_warn)
    assert sum(ln.startswith("warning: ") for ln in lines) == n_warn


@pytest.mark.parametrize("recipe", ["recipes/llama3.1_70b_h100_1024gpu.primus.toml", "recipes/torchtitan/llama3.1_8b.toml",
                                    "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"])
def test_explain_says_each_term_in_words(recipe, capsys):
    """user11: ``--explain``'s time and memory tables named their rows ``tp_comm``, ``bubble``, ``transient``,
    ``reserve`` and no more; every row the result has (``--json``'s ``time_breakdown`` and ``memory.breakdown``,
    zero terms included) now has a "what it is" text, and the stage the time breakdown is taken on is numbered
    from 0 as the memory's stages are (the note read "critical stage 3 of 4" for the last of stages 0-3)."""
    import json

    from primus_launch.report.text import LOW_PRECISION_PARAMETERS, MEMORY_TERMS, TIME_TERMS

    assert main(["--project", str(ROOT / recipe), "--dry-run", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rc, lines = _run(capsys, str(ROOT / recipe), "--explain")
    assert rc == 0
    # user14: a Megatron FP8 plan's "parameters" hold Transformer Engine's quantized weight copies too
    low = d["plan"]["source"]["framework"] == "megatron" and d["plan"]["training"]["precision"] in ("fp8", "fp4")
    memory_terms = {**MEMORY_TERMS, **({"parameters": LOW_PRECISION_PARAMETERS} if low else {})}
    for head, terms, names in (("time component", TIME_TERMS, d["time_breakdown"]),
                               ("memory (stage", memory_terms, list(d["memory"]["breakdown"]) + ["peak"])):
        i = next(j for j, ln in enumerate(lines) if ln.startswith(head))  # "optimizer" is a row of both tables
        for k in names:
            at = next(j for j in range(i, len(lines)) if lines[j].split()[:1] == [k])
            row = _with_continuation(lines, at)   # the "what it is" text wrapped onto the lines under it
            assert terms[k] and "".join(row.split()).endswith("".join(terms[k].split())), (k, row)
    pp = d["plan"]["parallel"]["pp"]
    said = [n for n in d["notes"] if n.startswith("time breakdown of pipeline stage")]
    assert len(said) == (pp > 1)
    if said:
        stage = int(said[0].split()[5])
        assert 0 <= stage < pp and f"stages 0-{pp - 1}" in said[0]
        assert [st["stage"] for st in d["memory"]["stages"]] == list(range(pp))


@pytest.mark.parametrize("recipe", ["recipes/llama3.1_70b_h100_1024gpu.primus.toml",
                                    "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml"])
def test_explain_cuda_graphs_row_reads_as_the_recipe(recipe, capsys):
    """user11: the framework profile's row read "CUDA graphs  none scopes -" for an eager recipe; it says
    "none (eager)" there, and for NVIDIA's Qwen3 YAML (``cuda_graph_impl: transformer_engine``,
    ``cuda_graph_scope: moe_router moe_preprocess``) the implementation and the scopes the recipe names."""
    import json

    assert main(["--project", str(ROOT / recipe), "--dry-run", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["plan"]["training"]
    rc, lines = _run(capsys, str(ROOT / recipe), "--explain")
    row = " ".join(next(ln for ln in lines if ln.startswith("CUDA graphs ")).split()[2:])
    if t["cuda_graph_impl"] == "none":
        assert row == "none (eager)"
    else:
        impl, scopes = row.split(", scopes ")
        assert impl == t["cuda_graph_impl"] and sorted(scopes.split(", ")) == sorted(t["cuda_graph_scope"])


def test_tight_over_capacity_says_the_point_estimate_does_not_fit():
    """user11: a tune's best plan on H200 read "162.1 GiB peak of 139.8 GiB: TIGHT, band 138.1-162.3 GiB" -- a peak
    over the capacity next to a verdict that it may fit.  Where the verdict is tight and the verdict's own bytes
    (``oom_peak_bytes``) are over the usable capacity, the line says only the band's low end fits; a tight plan
    under it (the Megatron 8B script at TP 1 with Megatron-FSDP: 77.3 of 79.2 GiB) does not say it."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project
    from primus_launch.report.text import verdict_text

    plan = load_recipe(ROOT / "recipes/megatron/llama3.1_8b.sh")
    plan = plan.model_copy(update={
        "parallel": plan.parallel.model_copy(update={"tp": 1, "sequence_parallel": False,
                                                     "dp_sharding": "optimizer_grads"}),
        "training": plan.training.model_copy(update={"gradient_accumulation_fusion": False})})
    res = project(plan, dry_run=True)
    m = res.memory
    assert m.verdict == "tight" and m.oom_peak_bytes < m.capacity_bytes
    assert "over the capacity" not in verdict_text(res)
    # the same result on a device between the band's low end and the point estimate: still tight, now over
    cap = (m.band.low_bytes + m.oom_peak_bytes) // 2
    from primus_launch.projection.memory.verdict import verdict

    outside = m.outside_allocator_bytes
    assert verdict(m.oom_peak_bytes, cap, m.band.low, m.band.high, 0.0, outside) == "tight"
    smaller = res.model_copy(update={"memory": m.model_copy(update={"capacity_bytes": cap})})
    assert "TIGHT" in verdict_text(smaller) and "over the capacity at the point estimate" in verdict_text(smaller)


def test_rows_like_it_is_not_wrapped_apart():
    """The Megatron FSDP 8B FP8 example's iteration row wrapped as "... on 25 judged rows like" / "it (megatron / ...)"."""
    from primus_launch.report.text import _wrap

    v = "10.789 s, expected 9.701 .. 11.890 s on 25 judged rows like it (megatron / hopper / dense / FP8 / sequence < 32k)"
    lines = _wrap(v, indent=" " * 19, first="iteration time".ljust(19))
    assert len(lines) == 2 and lines[1].split()[:2] == ["like", "it"] and " ".join(" ".join(lines).split()[2:]) == v


def test_comma_list_warning_value_wraps_within_the_width():
    """user12: Primus's TorchTitan 70B FP8 example (MI355X) printed its warning
    "primus_turbo=use_turbo_attention,use_turbo_mx_linear,use_turbo_float8_linear,use_turbo_async_tp:" as one
    98-column word the wrapper could not break.  A long comma list is broken after its commas; a short value is
    shown as written."""
    from primus_launch.adapters import load_recipe
    from primus_launch.plan.sections import UnmodelledFlag
    from primus_launch.projection.api import project
    from primus_launch.report.text import render_text

    res = project(load_recipe(ROOT / "recipes/megatron/llama3.1_8b.sh"), dry_run=True)
    turbo = "use_turbo_attention,use_turbo_mx_linear,use_turbo_float8_linear,use_turbo_async_tp"
    res = res.model_copy(update={"warnings": [UnmodelledFlag(flag="primus_turbo", value=turbo, effect="time: kernels"),
                                              UnmodelledFlag(flag="x", value="a,b", effect="time: small")]})
    lines = render_text(res).splitlines()
    assert max(len(ln) for ln in lines) <= WIDTH
    flat = " ".join(ln.strip() for ln in lines)
    assert "primus_turbo=" + turbo.replace(",", ", ") + ": time: kernels" in flat and "x=a,b: time: small" in flat


def test_memory_band_ends_that_round_equal_get_more_decimals():
    """user12: the tiny CPU recipe measured on the CPU printed "0.9 GiB peak of 79.2 GiB: fits, band 0.9-0.9 GiB":
    the band's ends are given to as many decimals as tell them apart, and the peak to the same."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project
    from primus_launch.projection.hardware.gpus import GiB
    from primus_launch.report.text import summary_rows

    res = project(load_recipe(ROOT / "recipes/megatron/tiny_gpt_cpu.sh"), dry_run=True)
    m = res.memory
    band = m.band.model_copy(update={"low_bytes": int(0.851 * GiB), "high_bytes": int(0.862 * GiB)})
    res = res.model_copy(update={"memory": m.model_copy(update={"band": band, "peak_bytes_per_gpu": int(0.853 * GiB)})})
    row = dict(summary_rows(res))["memory"]
    assert row.startswith("0.85 GiB peak of ") and "band 0.85-0.86 GiB" in row


def test_band_top_over_the_capacity_is_not_printed_equal_to_it():
    """user18: a 70B FP8 Bridge config printed "76.3 GiB peak of 79.2 GiB: TIGHT, band 75.0-79.2 GiB": the band's top
    (79.197 GiB) is over the capacity (79.188 GiB), which is why the verdict is TIGHT, yet both read 79.2.  The
    memory row's GiB get the decimals that keep each band end apart from the capacity, the capacity the same."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project
    from primus_launch.projection.hardware.gpus import GiB
    from primus_launch.report.text import summary_rows

    res = project(load_recipe(ROOT / "recipes/megatron/tiny_gpt_cpu.sh"), dry_run=True)
    m = res.memory
    cap = 85027979264  # the H100's 79.19 GiB (hardware/gpus.py)
    band = m.band.model_copy(update={"low_bytes": 80531025540, "high_bytes": 85036987081})
    res = res.model_copy(update={"memory": m.model_copy(update={
        "band": band, "peak_bytes_per_gpu": 81949718262, "oom_peak_bytes": 81949718262, "capacity_bytes": cap,
        "margin_fraction": 0.0, "verdict": "tight"})})
    row = dict(summary_rows(res))["memory"]
    printed = re.search(r"peak of ([\d.]+) GiB: TIGHT, band ([\d.]+)-([\d.]+) GiB", row)
    assert printed, row
    assert float(printed.group(3)) > float(printed.group(1)), row  # the top over the capacity, as printed
    assert abs(float(printed.group(1)) - cap / GiB) < 0.01


def test_explain_names_every_term_of_the_parallelism_row(capsys):
    """user12: the short answer's "TP=8 PP=4 VPP=4 DP=32 MBS=1 GBS=128 recompute=none ... dp_sharding=optimizer
    SP=on" was explained nowhere; ``--explain`` says what each name and each dp_sharding / recompute value is."""
    from typing import get_args

    from primus_launch.plan.sections import DPSharding, RecomputeGranularity
    from primus_launch.report.text import PARALLELISM_NOTE

    rc, lines = _run(capsys, str(ROOT / "recipes/llama3.1_70b_h100_1024gpu.primus.toml"), "--explain")
    notes = [" ".join(_with_continuation(lines, j).split()) for j, ln in enumerate(lines) if ln.startswith("note: ")]
    assert rc == 0 and " ".join(f"note: {PARALLELISM_NOTE}".split()) in notes
    for name in ("TP", "PP", "VPP", "CP", "EP", "DP", "MBS", "GBS", "SP", "recompute", "dp_sharding"):
        assert re.search(rf"\b{name}\b", PARALLELISM_NOTE), name
    dp_part = PARALLELISM_NOTE.split("dp_sharding: ")[1]
    rc_part = PARALLELISM_NOTE.split("recompute: ")[1]
    assert all(f"{v} (" in dp_part for v in get_args(DPSharding))
    assert all(re.search(rf"\b{v}\b", rc_part) for v in get_args(RecomputeGranularity))


def test_band_side_words_each_side():
    """user12: the clause that says why a point estimate lies outside its range, for a band above zero (the
    judged runs slower than projected), below it (faster) and across it (nothing to say)."""
    from primus_launch.projection.result import ErrorBand
    from primus_launch.report.text import band_side

    def band(lo, hi):
        return ErrorBand(low=lo, high=hi, median=(lo + hi) / 2, n=9, group="g")

    assert band_side(band(0.04, 0.16)) == ": they ran 4 .. 16 % slower than projected"
    assert band_side(band(-0.12, -0.03)) == ": they ran 3 .. 12 % faster than projected"
    assert band_side(band(-0.06, 0.09)) == ""


@pytest.mark.parametrize("recipe,host", [("recipes/llama3.1_70b_h100_1024gpu.primus.toml", False),
                                         ("recipes/megatron/tiny_gpt_cpu.sh", True)])
def test_explain_op_tables_sum_and_figures(recipe, host, capsys):
    """user14: each per-op table's sum row read "sum (pass time: GPU + host rows)" where the table had no host row,
    and tabulate's number parsing printed 3.400 ms as "3.4" and 0.000 as "0" beside "3.346".  Truth: the op rows
    themselves (projection.explain.op_rows): the sum row names host rows only where a row is one, every figure has
    three decimals, and each sum is the column's sum."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.explain import op_rows

    rc, lines = _run(capsys, str(ROOT / recipe), "--explain")
    assert rc == 0
    i = lines.index("dense layer: one micro-batch on one GPU (ms)")
    table = lines[i + 3:lines.index("", i)]
    rows = [r for r in op_rows(load_recipe(ROOT / recipe)) if r.kind == "dense"]
    assert len(table) == len(rows) + 1
    assert ("host (GPU idle)" in "\n".join(table)) == host
    assert table[-1].startswith("sum (pass time: GPU + host rows)" if host else "sum (pass time) ")
    for ln, r in zip(table, rows):
        assert f"{r.fwd_ms:.3f}" in ln and f"{r.bwd_input_ms:.3f}" in ln and f"{r.bwd_weight_ms:.3f}" in ln, ln
    figures = table[-1].split()[-3:]
    assert figures == [f"{sum(getattr(r, a) for r in rows):.3f}" for a in ("fwd_ms", "bwd_input_ms", "bwd_weight_ms")]


def test_memory_band_source_names_no_write_command(capsys):
    """user14: every --explain note and --json ``memory.band.source`` ended "(PYTHONPATH=. python
    scripts/memory_band.py --write)": a maintainer's command that rewrites the installed band data; the source names
    the script that prints the band, with the configuration count of projection/memory/band_data.py."""
    import json

    from primus_launch.projection.memory.band_data import BANDS

    assert main(["--project", str(ROOT / "recipes/llama3.1_70b_h100_1024gpu.primus.toml"), "--dry-run", "--json"]) == 0
    band = json.loads(capsys.readouterr().out)["memory"]["band"]
    assert band["source"] == f"megatron: {BANDS['megatron'][2]} measured configurations, scripts/memory_band.py"
    rc, lines = _run(capsys, str(ROOT / "recipes/llama3.1_70b_h100_1024gpu.primus.toml"), "--explain")
    assert rc == 0 and not any("--write" in ln for ln in lines)


def test_memory_margin_row_names_the_usable_capacity(capsys):
    """user14: "20.1 GiB peak of 55.9 GiB, margin 65 %: DOES NOT FIT" left the reader to work out the capacity the
    verdict compares with; the row now gives it.  Truth: --json's capacity_bytes x (1 - margin_fraction) and its
    verdict."""
    import json

    from primus_launch.projection.hardware.gpus import GiB

    recipe = str(ROOT / "recipes/llama3.1_70b_h100_1024gpu.primus.toml")
    assert main(["--project", recipe, "--dry-run", "--json", "--memory-margin", "0.55"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    rc, lines = _run(capsys, recipe, "--memory-margin", "0.55")
    text = " ".join(" ".join(lines).split())
    usable = m["capacity_bytes"] * (1 - m["margin_fraction"]) / GiB
    verdict = {"fits": "fits", "tight": "TIGHT", "does not fit": "DOES NOT FIT"}[m["verdict"]]
    assert rc == 0 and f"of {m['capacity_bytes'] / GiB:.1f} GiB ({usable:.1f} GiB usable, margin 55 %): {verdict}," in text


def test_left_out_lines_say_what_they_are(tmp_path, capsys):
    """user14: an answer whose warnings and notes overflow the screen ended "... 1 more; details: ..." without
    saying whether a setting not modelled or a note was left out.  Truth: --json's warnings and the plan's notes
    (stderr with --json): the shown blocks plus the counted ones are all of them, by kind."""
    import json

    src = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
    flags = ("--empty-unused-memory-level 1 --fp16-lm-cross-entropy --no-masked-softmax-fusion --attention-softmax-in-fp32 "
             "--ddp-pad-buckets-for-high-nccl-busbw --no-bias-dropout-fusion --no-bias-swiglu-fusion "
             "--no-rope-fusion --no-persist-layer-norm --no-gradient-accumulation-fusion")
    rec = tmp_path / "many.sh"
    src = "\n".join(ln for ln in src.splitlines() if "primus-launch:" not in ln)  # one more note: the default GPU
    rec.write_text(src.replace("    --ckpt-format torch_dist", f"    --ckpt-format torch_dist {flags}"))
    assert main(["--project", str(rec), "--dry-run", "--json"]) == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    n_warn, n_note = len(d["warnings"]), len(d["plan"]["source"]["notes"])
    rc, lines = _run(capsys, str(rec))
    assert rc == 0 and len(lines) <= MAX_LINES
    shown_warn = sum(1 for ln in lines if re.match(r"  --[\w-]+=", ln))
    shown_note = sum(1 for ln in lines if ln.startswith("  note: "))
    m = re.match(r"\.\.\. (?:(\d+) more setting\(s\) not modelled)?(?: and )?(?:(\d+) more note\(s\))?; details:",
                 lines[-1])
    assert m and (m.group(1) or m.group(2)), lines[-1]
    assert shown_warn + int(m.group(1) or 0) == n_warn and shown_note + int(m.group(2) or 0) == n_note, lines[-12:]


def test_in_situ_efficiency_row_names_where_it_is_fitted(capsys):
    """user14: the framework profile read "0.895 (calibration.FRAMEWORK_EFF[megatron], calibrated on calibration
    rows)": the row names the command that prints the fit and its rows (scripts/calibrate.py --show), with the
    figure the projection uses (truth: calibration.framework_eff)."""
    from primus_launch.projection.cost import calibration as cal

    rc, lines = _run(capsys, str(ROOT / "recipes/llama3.1_70b_h100_1024gpu.primus.toml"), "--explain")
    row = " ".join(next(ln for ln in lines if ln.startswith("in-situ efficiency")).split())
    assert rc == 0 and "calibrated on calibration rows" not in row
    assert row.startswith(f"in-situ efficiency {cal.framework_eff('megatron'):.3f} (") and \
        "scripts/calibrate.py --show" in row


def test_long_key_value_in_a_note_breaks_after_its_equals_sign(capsys):
    """A Bridge run config's ``model.transformer_layer_spec=megatron.bridge.models.gpt_provider.default_layer_spec``
    (84 characters with its comma) in the "not read" note ran to column 88 (user16); it breaks after its ``=``,
    the key and the value each whole on a line.  Truth: the field as the run config writes it."""
    rc, lines = _run(capsys, str(ROOT / "tests/data/bridge/qwen3_moe_run_config.yaml"))
    assert rc == 0, lines[-5:]
    assert all(len(ln) <= WIDTH for ln in lines), [ln for ln in lines if len(ln) > WIDTH]
    i = next(j for j, ln in enumerate(lines) if ln.rstrip().endswith("model.transformer_layer_spec="))
    assert lines[i + 1].strip().startswith("megatron.bridge.models.gpt_provider.default_layer_spec")
