"""The AMD rows of ``scripts/validation/current_runs.json`` that publish their configuration (issue 28: the AMD group).

Each ``primus_config`` row is a flattened Primus module (the experiment YAML + the run script's arguments of
the figure's bar, resolved at the row's commit by ``build_current_runs.primus_flatten``).  Checked: the
row builds through the Primus reader (``build_runs.primus_row``) into the plan that ``runs.json`` holds;
that plan carries the settings the source states for the bar (the row's ``parallelism`` / ``training`` and
the run script's feature legend: Turbo DeepEP -> DeepEP dispatcher, sync-free stage 1 -> fused router /
permutation, legacy grouped GEMM); and ``validate.py``'s AMD group judges them.
"""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "validation"))
sys.path.insert(0, str(ROOT / "scripts"))

from build_runs import primus_row  # noqa: E402

CURRENT = json.loads((ROOT / "scripts/validation/current_runs.json").read_text())
RUNS = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]}
PRIMUS = [r for r in CURRENT if r.get("primus_config")]


def test_there_are_primus_rows_with_configs():
    assert len(PRIMUS) >= 10
    assert all(r["hardware"]["plan_gpu"].startswith("mi") for r in PRIMUS)


@pytest.mark.parametrize("r", PRIMUS, ids=[r["id"] for r in PRIMUS])
def test_primus_row_builds_the_committed_plan_with_the_stated_settings(r):
    row, why = primus_row(r, "judge", "current_primus")
    assert row is not None, why
    assert row["plan"] == RUNS[r["id"]]["plan"], "runs.json is stale for this row: rerun build_runs.py"
    p = row["plan"]
    par, tr, m = p["parallel"], p["training"], p["model"]
    assert (par["tp"], par["pp"], par["ep"], par["vpp"]) == (r["parallelism"]["tp"], r["parallelism"]["pp"],
                                                            r["parallelism"]["ep"], r["parallelism"]["vpp"] or 1)
    assert p["cluster"]["num_nodes"] * p["cluster"]["gpus_per_node"] == r["hardware"]["num_gpus"]
    assert (tr["micro_batch_size"], tr["global_batch_size"]) == (r["training"]["micro_batch_size"],
                                                                 r["training"]["global_batch_size"])
    assert m["seq_length"] == 4096 and m["multi_latent_attention"] and tr["precision"] == "bf16"
    feats = r["derived_fields"][0]
    assert tr["moe_expert_gemm"] == "legacy"            # LEGACY_GG=True in both run scripts
    assert tr["moe_router_force_load_balancing"] is True
    assert (tr["moe_token_dispatcher"] == "deepep") == ("Turbo DeepEP" in feats)
    assert tr["moe_router_fusion"] == ("sync-free" in feats)
    assert (tr["cross_entropy_fusion_impl"] == "te") == ("loss fusion" in feats)
    assert tr["pipeline_schedule"] == ("interleaved_1f1b" if par["vpp"] > 1 else "1f1b")


def test_validate_judges_the_amd_rows():
    """validate.py's issue-28 AMD group takes every one of these rows as a judged row, but the one the ROCm legacy
    grouped_gemm host cost is fitted on (calibration.ROCM_LEGACY_GEMM_ROW)."""
    import validate
    from primus_launch.projection.cost import calibration as cal

    ids = {r["id"] for r in PRIMUS}
    res = validate.evaluate([x for x in validate.load_rows() if x["id"] in ids])
    assert {r["id"] for r in res} == ids
    amd = validate.ISSUE28_GROUPS["amd"][1]
    judged = validate.judged(res)
    assert all(amd(r["dims"]) for r in judged)
    assert {r["id"] for r in judged} == ids - {cal.ROCM_LEGACY_GEMM_ROW}
    assert all(r["projected"] > 0 and r["measured"] > 0 for r in res)


def test_rocm_legacy_gemm_host_is_fitted_on_its_one_row_only():
    """The calibration subset of ``calibration.ROCM_LEGACY_GEMM_HOST_S`` is exactly the stated row: the only MoE-package
    row out of the judged set is it, and refitting the constant (``scripts/calibrate.py``'s bisection, which reads
    that row alone) gives back the committed value, at which the row projects its measured throughput."""
    import calibrate
    import validate
    from primus_launch.projection.cost import calibration as cal

    rows = validate.load_rows()
    pkg = [r for r in rows if r["id"].startswith("primus_moepkg_")]
    assert [r["id"] for r in pkg if r["role"] != "judge"] == [cal.ROCM_LEGACY_GEMM_ROW]
    assert cal.ROCM_LEGACY_GEMM_ROW not in cal.CALIBRATION_ROWS
    assert calibrate.fit_rocm_legacy_gemm_host(rows) == pytest.approx(cal.ROCM_LEGACY_GEMM_HOST_S, rel=2e-3)
    (r,) = validate.evaluate([x for x in rows if x["id"] == cal.ROCM_LEGACY_GEMM_ROW])
    assert abs(r["err"]) < 0.005
    # the fit sees no other row: the same bisection without the stated row has nothing to fit
    assert calibrate.fit_rocm_legacy_gemm_host([x for x in rows if x["id"] != cal.ROCM_LEGACY_GEMM_ROW]) is None
