"""The tune's memory rule (issue 27, tuner/memory_rule.py): a ``tight`` plan whose point estimate is over the
usable capacity (more likely to run out of memory than not) stays in the table, marked, but is not the answer
unless no plan's point estimate fits; the text and the JSON say which rule was used.  And the new-user pass's
text glitches, and Megatron's local layers (``--transformer-impl local``) tuned."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tuner_helpers import small_dense_plan

from primus_launch.projection.dryrun import project_dry_run
from primus_launch.report.tune_text import render_tune_text, shown_changes
from primus_launch.tuner.memory_rule import admits, over_capacity
from primus_launch.tuner.search import tune
from primus_launch.tuner.space import SpaceConfig

ROOT = Path(__file__).resolve().parents[1]
RESTRICTED = SpaceConfig.restricted()


def _point_margin(plan) -> float:
    """A margin that puts ``plan``'s point estimate just over the usable capacity, its band's bottom under it
    (verdict ``tight``, over): the verdict's own quantities (memory/verdict.py)."""
    from primus_launch.projection.memory.verdict import band_for

    low = band_for(plan.framework)[0]
    m = project_dry_run(plan).memory
    inside = m.verdict_peak_bytes - m.outside_allocator_bytes
    return 1.0 - (inside * (1.0 + low / 2) + m.outside_allocator_bytes) / m.capacity_bytes


def test_point_rule_answer_is_the_brute_forces_and_certified():
    """The recipe's own plan tight and over the capacity: the brute force and the branch and bound answer the
    fastest plan whose point estimate fits, taken here from the brute force's trials by the verdict's own
    quantities (not by ``fits``); the faster tight plans over the capacity are in the table, marked, and the
    certificate's counts add up to the space."""
    plan = small_dense_plan()
    margin = _point_margin(plan)

    def score(p):
        return project_dry_run(p, memory_margin=margin)

    ex = tune(plan, score=score, space=RESTRICTED, exhaustive=True, memory_margin=margin)
    assert ex.baseline.memory.verdict == "tight" and over_capacity(ex.baseline.memory) and ex.memory_rule == "point"
    scored = [t for t in ex.trials if t.status == "scored"]
    under = [t for t in scored if t.verdict == "fits" or (t.verdict == "tight" and t.oom_peak_bytes
                                                          <= ex.baseline.memory.capacity_bytes * (1 - margin))]
    over = [t for t in scored if t.verdict == "tight" and t not in under]
    assert under and over
    want = min(t.iteration_time_s for t in under)
    assert ex.best.iteration_time_s == pytest.approx(want, rel=1e-12) and not over_capacity(ex.best.memory)
    bb = tune(plan, space=RESTRICTED, memory_margin=margin)
    c = bb.certificate
    assert c.certified and bb.best.iteration_time_s == pytest.approx(want, rel=1e-9)
    outside = "outside the space, among the scored" in c.text   # the recipe's own plan, scored once besides
    assert c.scored + c.bounded_time + c.bounded_memory == c.plans + outside and c.scored == bb.scored
    assert any("point estimate of its peak is over the usable capacity" in w for w in ex.warnings)
    for res in (ex, bb):
        assert all(t.fits or (t.verdict == "tight" and t.over_capacity) for t in res.top)
        assert res.to_json_dict()["memory_rule"] == "point"


def test_band_rule_when_no_point_estimate_fits():
    """Where no plan's point estimate fits but some are tight, the answer is the fastest tight plan, the rule
    ``band`` and a warning says so (a score whose every plan is tight and over: the verdict's report edited)."""
    plan = small_dense_plan()

    def score(p):
        r = project_dry_run(p)
        m = r.memory
        over = m.model_copy(update={"verdict": "tight", "fits": True, "oom_peak_bytes": m.capacity_bytes + 1})
        return r.model_copy(update={"memory": over})

    res = tune(plan, score=score, space=RESTRICTED, exhaustive=True)
    assert res.memory_rule == "band" and res.best.memory.fits
    scored = [t for t in res.trials if t.status == "scored"]
    assert res.best.iteration_time_s == pytest.approx(min(t.iteration_time_s for t in scored), rel=1e-12)
    assert any("no plan's point estimate" in w for w in res.warnings)
    assert "no plan's point estimate fits" in " ".join(render_tune_text(res).split())
    assert not admits(res.best.memory, "point") and admits(res.best.memory, "band")


def test_h200_wrapper_tight_over_row_is_not_the_answer(tmp_path, capsys):
    """The new-user pass: the TorchTitan 70B recipe on 4 x 8 H200 answered a plan holding 151.1 GiB of the
    139.8 GiB usable (tight, its point estimate over).  Now that plan is a marked row and the answer is the
    next, under the capacity; the rule is in the text and the trial log; the certificate counts add up; the
    bar's elapsed time is in the answer's form (no "0:00:00").  Since the TorchTitan memory band narrowed
    (titanpk) that plan fits the full 139.8 GiB by its whole band, so the case keeps 8 % free (``--memory-margin
    0.08``: 128.6 GiB usable), where the fastest plans are again tight with their point estimate over."""
    from primus_launch.cli import main

    wrapper = tmp_path / "w.primus.toml"
    wrapper.write_text(f'[recipe]\npath = "{ROOT / "recipes/torchtitan/llama3.1_70b.toml"}"\n'
                       '[cluster]\ngpu = "h200"\nnodes = 4\ngpus_per_node = 8\n')
    assert main(["--tune", str(wrapper), "--dry-run", "--memory-margin", "0.08", "--out", str(tmp_path / "t.toml")]) == 0
    cap = capsys.readouterr()
    text = " ".join(cap.out.split())
    log = json.loads((tmp_path / "t.toml.trials.json").read_text())
    assert log["memory_rule"] == "point" and log["memory_rule_text"] in text
    best_t = log["best"]["iteration_time_s"]
    over = [t for t in log["top"] if t["over_capacity"]]
    assert over and min(t["iteration_time_s"] for t in over) < best_t   # a faster plan, over: not the answer
    assert all(not t["fits"] and t["verdict"] == "tight" for t in over)
    m = log["best"]["memory"]
    assert m["oom_peak_bytes"] <= m["capacity_bytes"] * (1 - m["margin_fraction"])
    assert "TIGHT over" in text
    c = log["certificate"]
    outside = "outside the space, among the scored" in c["text"]
    assert c["certified"] and c["scored"] + c["bounded_time"] + c["bounded_memory"] == c["plans"] + outside
    # glitches: no inert recompute field, no "=original" value, the bar's seconds
    assert "num_layers=None" not in text and "=original" not in text
    assert "0:00:00" not in cap.err and re.search(r" \d+\.\d s\b", cap.err)


def test_shown_changes_drop_recompute_fields_the_granularity_does_not_read():
    plan = small_dense_plan()
    ch = {"training.recompute.granularity": "none", "training.recompute.num_layers": None, "parallel.tp": 4}
    assert shown_changes(ch, plan) == {"training.recompute.granularity": "none", "parallel.tp": 4}
    sel = {"training.recompute.granularity": "selective", "training.recompute.modules": ("core_attn",),
           "training.recompute.method": "block"}
    assert shown_changes(sel, plan) == {k: v for k, v in sel.items() if not k.endswith("method")}


def test_top_row_keeping_the_original_value_shows_it():
    """A row that keeps the original's value of a knob the best's row changes showed ``cp=original``; it
    shows the value (``cp=1``)."""
    from types import SimpleNamespace

    from primus_launch.report.tune_text import _top_table
    from primus_launch.tuner.engine import plan_changes

    orig = small_dense_plan()
    best = orig.model_copy(update={"parallel": orig.parallel.model_copy(update={"tp": 4, "cp": 2})})
    second = orig.model_copy(update={"parallel": orig.parallel.model_copy(update={"tp": 4})})

    def row(p, t):
        return SimpleNamespace(changes=plan_changes(orig, p), iteration_time_s=t, tokens_per_sec_per_gpu=1e3 / t,
                               peak_memory_bytes=70 * 2**30, peak_band_bytes=None, verdict="fits", fits=True,
                               source="branch-and-bound")

    res = SimpleNamespace(top=[row(best, 1.0), row(second, 1.1)], baseline=SimpleNamespace(plan=orig),
                          best_plan=best, no_reference=None)
    text = _top_table(res)
    assert "#1 with cp=1" in text and "original" not in text


def test_progress_bar_counts_seconds_from_the_tunes_start():
    """The bar's elapsed time reads as the answer's ("searched: ... in 1.3 s"), from the tune's start: rich's
    own column counted whole seconds from the bar's creation ("0:00:00")."""
    import io

    from primus_launch.tuner.progress import Progress

    out = io.StringIO()
    bar = Progress(100, baseline_s=2.0, stream=out, min_interval_s=0.0, unit="plans", start=time.monotonic() - 5.0)
    bar.advance_to(100, best_s=1.0, force=True)
    bar.close()
    last = [ln for ln in out.getvalue().splitlines() if ln.strip()][-1]
    assert "0:00:0" not in last and re.search(r" [5-9]\.\d s$", last.rstrip())


LOCAL = "    --transformer-impl local"


def _local_script(tmp_path: Path, backend: str = "") -> Path:
    src = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
    assert "    --attention-backend auto" in src
    body = src.replace("    --attention-backend auto", LOCAL + (f"\n    --attention-backend {backend}" if backend else ""))
    p = tmp_path / "local.sh"
    p.write_text(body)
    return p


def test_local_layers_tune_keeps_te_only_knobs_and_the_backend(tmp_path, capsys):
    """``--transformer-impl local`` (megatron-core's local layers): the tuner searched fine-grained activation
    offloading (Megatron-LM d98e8a64dd ``arguments.py`` asserts it needs transformer_engine), the delayed wgrad
    (asserted likewise), TE userbuffers and FP8 (TE modules only) -- the 8B script's answer offloaded
    ``core_attn attn_proj``, which Megatron refuses.  Now no trial changes those or the attention backend, and
    the tuned script writes no ``--attention-backend`` (Megatron ignores it under local layers)."""
    from primus_launch.cli import main

    recipe = _local_script(tmp_path, "flash")
    out = tmp_path / "t.sh"
    assert main(["--tune", str(recipe), "--dry-run", "--allow", "fp8", "--out", str(out)]) == 0
    capsys.readouterr()
    log = json.loads((tmp_path / "t.sh.trials.json").read_text())
    knobs = log["trials"]["knobs"]
    te_only = ("training.attention_backend", "training.offload.activation_modules", "training.delay_wgrad_compute",
               "training.tp_comm_overlap", "training.precision", "training.fp8_recipe")
    assert not set(knobs) & set(te_only), sorted(set(knobs) & set(te_only))
    written = out.read_text()
    assert written.count("--attention-backend") == 1 and "--fine-grained-activation-offloading" not in written
    assert LOCAL in written


def test_writer_never_writes_the_backend_under_local_layers():
    from primus_launch.adapters.megatron_args import desired_args

    plan = small_dense_plan()
    plan = plan.model_copy(update={"training": plan.training.model_copy(update={"attention_backend": "local"})})
    assert "attention_backend" not in desired_args(plan, {"transformer_impl": "local"})
    assert desired_args(plan, {})["attention_backend"] == "local"


def test_local_layers_space_offers_no_te_only_value_and_obeys_the_rules():
    """The MoE toy on local layers: the space's flag values hold no TE userbuffers overlap, no delayed wgrad and
    no fine-grained activation offloading (each offered on the same plan with TE layers; FP8: the CLI test
    above), and every candidate breaks none of ``rules.knob_problems`` (which names the two Megatron
    asserts)."""
    from tuner_helpers import small_moe_plan

    from primus_launch.tuner import rules
    from primus_launch.tuner.space import AXES, N_STRUCT, Knobs, Space, problems_of

    flags = AXES[N_STRUCT:]
    cfg = SpaceConfig(max_mbs=1, max_cp=1, max_vpp=1, max_tp=2, max_ep=2, block_recompute_layers=())
    te = small_moe_plan()
    local = te.model_copy(update={"training": te.training.model_copy(update={"attention_backend": "local"})})

    def values(sp):
        return {a: {f[j] for t in sp.tables for f in t} for j, a in enumerate(flags)}

    v_te, sp_local = values(Space(te, cfg)), Space(local, cfg)
    v_local = values(sp_local)
    for axis, te_only in (("tp_comm_overlap", True), ("delay_wgrad", True), ("offload_modules", ("core_attn", "attn_proj"))):
        assert te_only in v_te[axis] and te_only not in v_local[axis], axis
    assert v_local["offload_modules"] == {()}
    for head, c in list(zip(sp_local.structs, sp_local.ctx))[:: max(1, len(sp_local.structs) // 20)]:
        for f in sp_local.tables[c][:: max(1, len(sp_local.tables[c]) // 20)]:
            assert not problems_of(local, Knobs._make(head + f))
    bad = local.model_copy(update={"training": local.training.model_copy(update={"delay_wgrad_compute": True})})
    assert any("transformer_engine" in p[2] for p in rules.knob_problems(bad))
