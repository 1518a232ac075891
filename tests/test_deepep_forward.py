"""DeepEP V1's internode normal kernels bound by their own forwarding warps at 2 nodes (issue 28).

Truth: DeepEP's own benchmark (``tests/test_internode.py``) as published -- DeepEP#493 (2 x 8 H200 + CX7
400G, 24 SMs: the NVL receive and logical RDMA figures of the same calls; kind ``deepep_fwd`` records of
``kernel_evidence.json``) and the README's H800 EP16 row (43 GB/s logical RDMA, kept, not fitted) -- and
DeepSeek's profile records (the in-situ fraction's SM count).  No timing; each test < 1 s.
"""

from __future__ import annotations

import pytest

from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost.fitted import FITTED
from primus_launch.projection.cost.moe_routing import expected_units_hit
from primus_launch.projection.hardware.placement import place

T, H = 4096, 7168                  # DeepEP test_internode.py's workload
E, K = 256, 8


def _rec(rid: str) -> dict:
    r = ev.record(rid)
    assert r is not None, rid
    return r


def test_benchmark_nvl_over_rdma_is_the_routing_ratio():
    """The #493 test prints two rates of one call: NVL (every token copy the rank receives, its own
    included) and RDMA (every (token, destination node) pair, its own node included).  Their ratio is
    D_dom / D_rank of the test's routing (2 nodes: top-8 of 256, unrestricted), which is what
    ``moe_routing.expected_units_hit`` gives: the convention the forwarder bound is priced in."""
    ratio = expected_units_hit(E, K, E // 2) / expected_units_hit(E, K, E // 16)
    for op in ("combine", "dispatch"):
        r = _rec(f"deepep493-h200-ep16-{op}-nvl")
        assert r["shape"]["rdma_logical_gbps"] / r["value"] == pytest.approx(ratio, rel=0.03)


def test_the_nic_carried_half_at_two_nodes_so_no_link_binds():
    """At 2 nodes only the other node's share of the pairs crosses the NIC: ~20-22 GB/s of the CX7's 50,
    while the H200's NVLink ran at a third of its 450 GB/s per direction -- the kernel binds, not a link."""
    remote = expected_units_hit(E, K, E // 2) - 1.0          # the other node, per token
    share = remote / expected_units_hit(E, K, E // 2)
    for op in ("combine", "dispatch"):
        r = _rec(f"deepep493-h200-ep16-{op}-nvl")
        nic = r["shape"]["rdma_logical_gbps"] * share
        assert 19.0 < nic < 23.0 < 0.5 * 50.0
        assert r["value"] < 450.0 / 3


def test_fit_is_the_benchmark_rate():
    f = FITTED["deepep"]["deepep/forward"]
    assert f["sms"] == 24
    for op in ("combine", "dispatch"):
        assert f[op] == pytest.approx(_rec(f"deepep493-h200-ep16-{op}-nvl")["value"] * 1e9, rel=1e-6)


def test_readme_ep16_row_is_reproduced_and_ep32_64_stay_nic_bound():
    """The isolated 2-node kernel at the README's 24 SMs reproduces the H800 EP16 row (43 GB/s logical RDMA,
    not fitted; its dispatch is FP8, 7,392 bytes a token, its combine BF16); at 4 and 8 nodes the bound
    stays below the NIC's, so the fit of ``deepep/rdma`` to the EP32 / EP64 rows is untouched."""
    readme = _rec("deepep-v1-readme-ep16-h800-logical")["value"]
    for op, tok in (("dispatch", H + H // 128 * 4), ("combine", 2 * H)):
        t = coll.deepep_dispatch(T, float(tok), place(16, 1, 8), "h100-sxm", E, K, 2, 2, "deepep",
                                 insitu=False, op=op, num_sms=24)
        logical = T * expected_units_hit(E, K, E // 2) * tok / t / 1e9
        assert logical == pytest.approx(readme, rel=0.12), op
        without = coll.deepep_dispatch(T, float(tok), place(16, 1, 8), "h100-sxm", E, K, 2, 2, "deepep",
                                       insitu=False, op=op, num_sms=24, forward=False)
        assert without < 0.6 * t                    # the NIC alone would put EP16 near 2x the README's rate
    for ep, groups in ((32, 4), (64, 8)):
        args = (T, float(2 * H), place(ep, 1, 8), "h100-sxm", E, K, groups, 4, "deepep")
        assert coll.deepep_dispatch(*args, insitu=False, op="combine", num_sms=24) == pytest.approx(
            coll.deepep_dispatch(*args, insitu=False, op="combine", num_sms=24, forward=False), rel=1e-12)


def test_sm_scaling_starts_from_the_in_situ_records_sm_count():
    """The in-situ fraction is DeepSeek's 20-SM kernels in training over the 24-SM benchmark, so a 20-SM
    recipe in a step runs at benchmark x fraction, a 24-SM one 24/20 of that; isolated: benchmark x SMs / 24."""
    for rid in ("dsprofile-v3-train-h800-deepep-dispatch", "dsprofile-v3-train-h800-deepep-combine"):
        assert _rec(rid)["shape"]["sms"] == coll.DEEPEP_INSITU_SMS
    f_in = FITTED["deepep"]["deepep/insitu"]["eff"]
    r = FITTED["deepep"]["deepep/forward"]["dispatch"]
    assert coll.deepep_forward_bw("dispatch", 20) == pytest.approx(r * f_in)
    assert coll.deepep_forward_bw("dispatch", 24) == pytest.approx(r * f_in * 1.2)
    assert coll.deepep_forward_bw("dispatch", 20, insitu=False) == pytest.approx(r * 20 / 24)


def test_only_deepep_across_domains_carries_the_bound():
    """HybridEP (its own kernels, fitted apart) and DeepEP inside one NVLink domain (intranode kernels) do not."""
    for lib, pl in (("hybridep", place(16, 1, 8)), ("deepep", place(8, 1, 8))):
        args = (6144, 8192.0, pl, "b200", 128, 8, 1, 1, lib)
        assert coll.deepep_dispatch(*args, forward=True) == coll.deepep_dispatch(*args, forward=False)


def test_explanation_names_the_forwarder_term():
    """A DeepEP plan across 2 DGX nodes (Megatron-LM's Qwen3-235B B200 recipe) shows the bound as its own
    "of which" row of the EP time."""
    import json
    from pathlib import Path

    from primus_launch.plan import Plan
    from primus_launch.projection.explain import comm_rows

    root = Path(__file__).resolve().parents[1]
    rows = json.loads((root / "scripts" / "validation" / "runs.json").read_text())["rows"]
    plan = Plan.model_validate(next(r for r in rows if r["id"] == "mlm_moe_qwen3_235b_b200_mxfp8_128gpu_tp2pp4ep16")["plan"])
    comm = comm_rows(plan)
    ep = next(r for r in comm if r[0].startswith("EP deepep"))
    fw = next(r for r in comm if "internode forwarder" in r[0])
    assert 0.0 < fw[1] < ep[1] and 0.0 < fw[3] <= ep[3]
    assert "DeepEP#493" in fw[5]
