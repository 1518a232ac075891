"""The memory validation harness (``scripts/validate_memory.py``) and its data.

Checks that every configuration it judges -- the rows of ``current_runs.json``, the bundled published
recipes and every case of ``memory_cases.json`` -- becomes a plan through the project's adapters or
carries the reason it cannot, that each case states its source, quote and hardware, that the plans read
what the cases' own flags say (world size, micro-batch), that the committed cases are what
``build_memory_cases.py`` builds, and the harness's verdict / peak / summary logic on synthetic reports.
It does NOT assert that today's memory model gets the verdicts right (``scripts/validation/MEMORY.md``
lists what it gets wrong).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

import validate_memory as vm  # noqa: E402

CASES = json.loads((ROOT / "scripts/validation/memory_cases.json").read_text())["cases"]


@pytest.fixture(scope="module")
def items():
    return vm.collect()


def test_every_item_builds_a_plan_or_says_why(items):
    assert items, "nothing collected"
    for it in items:
        assert (it.plan is None) == bool(it.skip), f"{it.id}: plan and skip reason must exclude each other"
        assert it.expect in vm.ALLOWED, it.id
    kinds = {it.kind for it in items}
    assert kinds == {"current", "recipe", "case"}
    n_current = len(json.loads((ROOT / "scripts/validation/current_runs.json").read_text()))
    assert sum(it.kind == "current" for it in items) == n_current
    # the bundled recipes that reproduce published runs are all read (none refused by its reader)
    recipes = [it for it in items if it.kind == "recipe"]
    assert len(recipes) >= 6 and all(it.plan is not None for it in recipes), [it.id for it in recipes if it.skip]


def test_cases_state_source_quote_and_hardware():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for c in CASES:
        assert c["outcome"] in vm.ALLOWED, c["id"]
        assert c["source"].get("ref") and c["source"].get("url", "").startswith("https://"), c["id"]
        assert c.get("quote") and c.get("read"), c["id"]
        hw = c["hardware"]
        assert hw["num_gpus"] > 0 and hw["plan_gpu"], c["id"]
        if not c.get("skip_reason"):
            readers = [k for k in ("megatron_flags", "torchtitan_config", "primus_config", "torchtitan_launch") if c.get(k)]
            assert len(readers) == 1, c["id"]
        m = c.get("measured_peak")
        if m:
            assert m["basis"] in ("allocated", "reserved") and m["rank"] in ("first", "last", "max"), c["id"]
            assert (m.get("gib") or 0) > 0 or 0 < (m.get("fraction_of_device") or 0) <= 1, c["id"]
    judged_ooms = [c for c in CASES if c["outcome"] != "ran" and not c.get("skip_reason")]
    assert len(judged_ooms) >= 12


def _flag(flags: list[str], name: str):
    for f in flags:
        parts = f.split()
        if parts[0] == name:
            return parts[1] if len(parts) > 1 else True
    return None


def test_case_plans_read_the_cases_own_settings(items):
    by_id = {it.id: it for it in items if it.kind == "case"}
    for c in CASES:
        it = by_id[c["id"]]
        if it.plan is None:
            continue
        p = it.plan
        assert p.world_size == c["hardware"]["num_gpus"], c["id"]
        assert p.cluster.gpu == c["hardware"]["plan_gpu"], c["id"]
        if c.get("megatron_flags"):
            assert p.training.micro_batch_size == int(_flag(c["megatron_flags"], "--micro-batch-size")), c["id"]
            vp = _flag(c["megatron_flags"], "--num-virtual-stages-per-pipeline-rank")
            if vp is not None:
                assert p.parallel.vpp == int(vp), c["id"]
        elif c.get("torchtitan_launch"):
            argv = c["torchtitan_launch"]
            lbs = argv[argv.index("--training.local_batch_size") + 1] if "--training.local_batch_size" in argv else None
            assert lbs is None or p.training.micro_batch_size == int(lbs), c["id"]
            ac = [t.split(":", 1)[1] for t in argv if t.startswith("activation-checkpoint:")]
            want = {"none": "none", "full": "full", "selective": "op"}[ac[0]] if ac else None  # per-op SAC
            assert want is None or p.training.recompute.granularity == want, c["id"]
        elif c.get("primus_config", {}).get("framework") == "megatron":  # a flattened Primus Megatron module
            ov = c["primus_config"]["overrides"]
            assert p.training.micro_batch_size == ov["micro_batch_size"], c["id"]
            assert p.model.seq_length == ov["seq_length"], c["id"]
        else:
            job = c.get("torchtitan_config") or c["primus_config"]["overrides"]
            par = job["parallelism"]
            mb = par.get("pipeline_parallel_microbatch_size") if par.get("pipeline_parallel_degree", 1) > 1 \
                else job["training"]["local_batch_size"]
            assert p.training.micro_batch_size == mb, c["id"]
            assert p.model.seq_length == job["training"]["seq_len"], c["id"]


def test_committed_cases_are_what_the_builder_builds():
    import build_memory_cases as bmc

    stored = {c["id"]: c for c in CASES}
    for case in bmc.CASES:
        built = json.loads(json.dumps(bmc.resolve(case)))
        assert stored[built["id"]] == built, f"{built['id']}: rerun scripts/validation/build_memory_cases.py"


def test_derive_edits_flags_in_place():
    from build_memory_cases import derive

    out = derive(["--a 1", "--b", "--c x y"], {"--a": 2, "--d": None, "--c": ["p", "q"]}, drop=("--b",))
    assert out == ["--a 2", "--c p q", "--d"]


@pytest.mark.parametrize("report, want", [
    (SimpleNamespace(fits=True), vm.FITS),
    (SimpleNamespace(fits=False), vm.DNF),
    (SimpleNamespace(fits=True, verdict=None), vm.FITS),
    (SimpleNamespace(fits=True, verdict="tight"), vm.TIGHT),
    (SimpleNamespace(fits=False, verdict="does_not_fit"), vm.DNF),
    (SimpleNamespace(fits=False, verdict="DOES NOT FIT"), vm.DNF),
    (SimpleNamespace(fits=True, verdict=SimpleNamespace(value="fits")), vm.FITS),
])
def test_verdict_of_reads_the_verdict_or_falls_back_to_fits(report, want):
    assert vm.verdict_of(report) == want


def test_verdict_of_refuses_an_unknown_verdict():
    with pytest.raises(ValueError):
        vm.verdict_of(SimpleNamespace(fits=True, verdict="maybe"))


@pytest.mark.parametrize("expect, verdict, right", [
    ("ran", vm.FITS, True), ("ran", vm.TIGHT, True), ("ran", vm.DNF, False),
    ("oom", vm.DNF, True), ("oom", vm.TIGHT, False), ("oom", vm.FITS, False),
    ("oom_borderline", vm.TIGHT, True), ("oom_borderline", vm.DNF, True), ("oom_borderline", vm.FITS, False),
])
def test_is_right(expect, verdict, right):
    assert vm.is_right(expect, verdict) is right


def test_stage_peak_and_error():
    g = vm.GiB
    stages = [SimpleNamespace(allocated_bytes=10 * g, allocator_reserve_bytes=1 * g),
              SimpleNamespace(allocated_bytes=12 * g, allocator_reserve_bytes=0),
              SimpleNamespace(allocated_bytes=8 * g, allocator_reserve_bytes=5 * g)]
    assert vm.stage_peak_bytes(stages, "allocated", "first") == 10 * g
    assert vm.stage_peak_bytes(stages, "reserved", "last") == 13 * g
    assert vm.stage_peak_bytes(stages, "allocated", "max") == 12 * g
    assert vm.stage_peak_bytes(stages, "reserved", "max") == 13 * g
    assert vm.peak_error(55.0, 50.0) == pytest.approx(0.10)
    assert vm.peak_error(45.0, 50.0) == pytest.approx(-0.10)


def _res(i, expect, verdict, group="moe", fw="megatron", err=None, approx=False):
    r = dict(id=f"r{i}", kind="case", expect=expect, verdict=verdict, right=vm.is_right(expect, verdict),
             group=group, framework=fw)
    if err is not None:
        r.update(peak_err=err, peak_approx=approx)
    return r


def test_summarize_counts_wrong_verdicts_and_exact_peaks_only():
    results = [_res(0, "ran", vm.FITS, err=0.05), _res(1, "ran", vm.TIGHT, err=-0.20), _res(2, "ran", vm.DNF),
               _res(3, "oom", vm.DNF), _res(4, "oom", vm.FITS), _res(5, "oom_borderline", vm.TIGHT),
               _res(6, "ran", vm.FITS, group="dense_bf16", fw="torchtitan", err=0.5, approx=True),
               dict(id="skipped", kind="case", expect="oom", skipped="why", group=None)]
    s = vm.summarize(results)
    moe = s["megatron:moe"]
    assert moe["ran"] == {vm.FITS: 1, vm.TIGHT: 1, vm.DNF: 1}
    assert moe["oom"] == {vm.FITS: 1, vm.TIGHT: 1, vm.DNF: 1}
    assert moe["wrong"] == 2 and s["wrong"] == ["r2", "r4"]
    assert moe["peak"] == {"n": 2, "median_abs": pytest.approx(0.125), "max_abs": pytest.approx(0.20)}
    assert s["torchtitan:dense_bf16"]["peak"]["n"] == 0  # a rough peak is listed, not counted
    assert s["skipped"] == 1 and s["all"]["n"] == 7


def test_group_of_on_read_plans(items):
    groups = {it.id: vm.group_of(it.plan) for it in items if it.plan is not None}
    assert groups["torchtitan_h100_8b_8gpu_fsdp4_cp2_seq65536"] == "long_seq"
    assert groups["mbridge2604_b200_fp8_mx_deepseek_v3_256gpu"] == "mla"
    assert groups["mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu"] == "moe"
    assert groups["torchtitan_h100_8b_8gpu_FSDP"] == "dense_bf16"
    assert groups["torchtitan_h100_8b_8gpu_FSDP_torchcompile_Float8"] == "dense_fp8"


def test_json_output(tmp_path):
    out = tmp_path / "mem.json"
    assert vm.main(["--only", "recipe", "--quiet", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["results"] and all(("verdict" in r) != ("skipped" in r) for r in doc["results"])
    for r in doc["results"]:
        if "verdict" in r:
            assert r["verdict"] in vm.VERDICTS and set(r["terms_gib"]) == set(vm.TERMS)
    assert doc["summary"]["kind:recipe"]["n"] == sum("verdict" in r for r in doc["results"])


def test_primus_torchtitan_cases_run_primus_attention_without_repeat_kv():
    """A Primus TorchTitan case (``primus_config``) is read by the Primus reader, not as a TorchTitan TOML: Primus's
    llama3 Attention (AMD-AGI/Primus release/v25.10 07c68e33, primus/backends/torchtitan/models/llama3/model/model.py)
    comments out torchtitan 5fb7cc2e's ``repeat_kv`` before Primus-Turbo's flash attention, so K and V are kept at the
    8 KV heads of Llama 3.1 8B, not expanded to its 32 query heads: per layer and micro-batch the TOML reading keeps
    ``2 B x sb x 2 x (32 - 8) x 128`` more (sb = 3 x 8192: 288 MiB) -- the whole difference of the two readings."""
    import tomli_w

    from build_runs import _cluster_for

    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.projection.memory.estimate import titan_attention
    from primus_launch.projection.memory.titan import layer_activation_bytes

    case = next(c for c in CASES if c["id"] == "primus_issue349_mi350x_llama31_8b_bf16_titan_lbs3_noac")
    primus = vm.plan_of_case(case)
    job = {k: v for k, v in case["primus_config"]["overrides"].items() if k != "primus_turbo"}
    toml = plan_from_text(tomli_w.dumps(job), cluster=_cluster_for("mi350x", 8, 8))
    assert titan_attention(toml) == "sdpa_repeat_kv" and titan_attention(primus) != "sdpa_repeat_kv"
    m = primus.model
    assert (m.num_attention_heads, m.kv_heads, m.kv_channels, m.num_layers) == (32, 8, 128, 32)
    kw = dict(seq=8192, mbs=3, tp=1, compiled=True)
    diff = (layer_activation_bytes(m, attn="sdpa_repeat_kv", **kw).kept
            - layer_activation_bytes(m, attn=titan_attention(primus), **kw).kept)
    # flex keeps max_scores beside the log-sum-exp (4 B x 32 heads x sb), Primus-Turbo's kernel only the lse
    assert diff + 4.0 * 32 * 3 * 8192 == 2 * 3 * 8192 * 2 * (32 - 8) * 128
