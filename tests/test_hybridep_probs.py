"""HybridEP's two size-dependent terms beyond the token bytes: the fp32 routing probabilities that travel with each
token copy, and the forward dispatch's routing-map all-gather.

Truth: DeepEP hybrid-ep @94a9f8f ``csrc/hybrid_ep/backend/hybrid_ep_backend.cuh`` (``prob_per_token =
NUM_OF_EXPERTS_PER_RANK * NUM_OF_RANKS_PER_NODE`` floats per token copy), ``docs/Hybrid-EP_Implementation.md``
section 4.2 (its EP64 / 256-expert / 8 x 8 example: ``RDMA prob 4096 x 7 x 32 x 4B``), ``executor.cu``
``allgather_routing_map`` (``[T, E]`` bool, gathered ``[T n, E]``), the README benchmark's shape
(``docs/README_Hybrid-EP.md``: 4,096 tokens, 8 local experts; records of ``kernel_evidence.json``) and
megatron-core ``fused_a2a.py`` (which calls carry probs).
"""

from __future__ import annotations

import math

import pytest

from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost.fitted import FITTED
from primus_launch.projection.cost.moe_routing import expected_units_hit
from primus_launch.projection.hardware.placement import place


def test_probs_bytes_match_the_implementation_docs_example():
    """The docs' RDMA example (EP 64 = 8 ranks x 8 nodes, 256 experts): ``4096 x 7 x 32 x 4B`` -- 32 floats (4
    experts per rank x 8 ranks per node) = 128 B per token and remote node; its MNNVL example (64 ranks in one
    domain): ``262,144 x 256 x 4B`` -- 256 floats per token copy."""
    assert coll.hybridep_probs_bytes(256, 64, 8) == 32 * 4
    assert coll.hybridep_probs_bytes(256, 64, 64) == 256 * 4
    # Nemotron 3 Super (512 experts) at EP 64 over 8 DGX nodes: 256 B per copy, an eighth of its 2 KB latent token
    assert coll.hybridep_probs_bytes(512, 64, 8) == 256


@pytest.mark.parametrize("key", ["hybridep/rdma", "hybridep/nvlink"])
def test_readme_probs_ratio_recomputed_from_the_fitted_records(key):
    """The README's probs over token bytes, per record (the test counts token bytes only while its dispatch and combine
    carry probs), as the module constant states: 256 / 14,336 on every RDMA record, the geometric mean on NVLink."""
    recs = {r["id"]: r for r in ev.select("deepep")}
    logs = []
    for rid in FITTED["deepep"][key]["records"]:
        sh = recs[rid]["shape"]
        n = int(sh["ep"])
        nodes = 1 if sh.get("domain") else int(sh.get("nodes") or 1)
        p = coll.hybridep_probs_bytes(n * int(sh["local_experts"]), n, n // nodes)
        h = int(sh["hidden"])
        b = h + h // 128 * 4 if "fp8" in str(sh["op"]) else 2 * h
        logs.append(math.log1p(p / b))
    ratio = math.exp(sum(logs) / len(logs)) - 1
    assert ratio == pytest.approx(coll.HYBRIDEP_README_PROBS_RATIO[key.split("/")[1]], abs=2e-6)


def test_readme_shaped_call_with_probs_prices_as_the_kernel_only_record():
    """A README-shaped H100 call (EP 64 over 8 nodes, 512 experts, 4,096 BF16 7,168-wide tokens) with probs prices
    within 4 % of the README's kernel-only BF16 dispatch time (the fit's own spread at 8 nodes); without probs (the
    forward combine's case in Megatron) 1 / (1 + 256 / 14,336) of it."""
    pl = place(64, 1, 8)
    kw = dict(lib="hybridep", insitu=False, api=False, combine_chunk=128)
    with_p = coll.deepep_dispatch(4096, 2.0 * 7168, pl, "h100-sxm", 512, 8, probs=True, **kw)
    without = coll.deepep_dispatch(4096, 2.0 * 7168, pl, "h100-sxm", 512, 8, probs=False, **kw)
    rec = next(r for r in ev.select("deepep") if r["id"] == "hybridep-h100-r64-sm8-dispatch_bf16")
    d_dom = expected_units_hit(512, 8, 64)
    measured = 4096 * d_dom * 2.0 * 7168 / (rec["shape"]["kernel_only_gbps"] * 1e9)
    assert abs(math.log(with_p / measured)) < math.log(1.04)
    lat = with_p - 4096 * d_dom * (1 - 1 / 8) * 2.0 * 7168 / (coll.hybridep_rdma_eff(8) * coll.fabric("h100-sxm").nic_bw)
    assert (without - lat) / (with_p - lat) == pytest.approx(1 / (1 + 256 / 14336), rel=1e-4)


@pytest.mark.parametrize("gpu,n,g", [("h100-sxm", 16, 8), ("h100-sxm", 64, 8), ("b200", 8, 8), ("gb200", 36, 72)])
def test_readme_shape_reproduces_the_fitted_dispatch_api_time(gpu, n, g):
    """The README benchmark's own routing map (4,096 tokens x 8 n experts) adds nothing: the forward dispatch's API
    time is the fitted point, as before this term."""
    pl = place(n, 1, g)
    assert coll.hybridep_routing_map_s(4096, 8 * n, pl, gpu) == 0.0
    before = coll.hybridep_api_overhead("dispatch", pl.nodes, n)
    assert coll.hybridep_api_overhead("dispatch", pl.nodes, n, coll.hybridep_routing_map_s(4096, 8 * n, pl, gpu)) == before


def test_super_routing_map_doubles_the_readme_gather():
    """Nemotron 3 Super at EP 64 over 8 nodes gathers 8,192 x 512 bool per rank (4 MiB; 256 MiB gathered), twice the
    README's 64-rank shape (4,096 x 512: 2 MiB, 128 MiB gathered): the extra time is the README gather's bytes time
    again (bus bytes linear in the size), a positive fraction of the README's dispatch API time; the backward's
    cached-handle dispatch and the combine do not all-gather and do not change."""
    pl = place(64, 1, 8)
    assert 64 * 8192 * 512 == 2 * 64 * 4096 * 512 == 256 * 2**20
    extra = coll.hybridep_routing_map_s(8192, 512, pl, "b200")
    readme_bytes_s = coll._gather_bytes_s(64 * 4096 * 512, pl, "b200")
    assert extra == pytest.approx(readme_bytes_s, rel=0.05)
    base = coll.hybridep_api_overhead("dispatch", 8, 64)
    assert 0.0 < extra < base
    assert coll.hybridep_api_overhead("dispatch", 8, 64, extra) == pytest.approx(base + extra)
    assert coll.hybridep_api_overhead("combine", 8, 64, extra) == coll.hybridep_api_overhead("combine", 8, 64)


def test_a_smaller_map_never_makes_the_api_time_negative():
    pl = place(64, 1, 8)
    small = coll.hybridep_routing_map_s(1, 64, pl, "h100-sxm")
    assert small < 0.0
    assert coll.hybridep_api_overhead("dispatch", 8, 64, -1.0) == 0.0


def test_probs_calls_are_megatrons_forward_dispatch_and_backward_combine():
    """megatron-core ``fused_a2a.py``: ``HybridEPDispatch.forward`` passes ``probs``, its backward the probs' gradient to
    ``combine_with_unpermute``; ``HybridEPCombine`` (forward combine, backward dispatch on the handle) passes none."""
    import importlib.util
    import pathlib

    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
    from primus_launch.projection.cost.moe_dispatch import PROBS_CALLS, dispatcher_collectives

    # the installed megatron-core's source, read as text (importing megatron.core costs seconds)
    root = pathlib.Path(importlib.util.find_spec("megatron").submodule_search_locations[0])
    src = (root / "core" / "transformer" / "moe" / "fused_a2a.py").read_text()
    disp = src[src.index("class HybridEPDispatch"):src.index("class HybridEPCombine")]
    comb = src[src.index("class HybridEPCombine"):]
    comb = comb[:comb.index("\nif HAVE_HYBRIDEP") if "\nif HAVE_HYBRIDEP" in comb else len(comb)]
    d_fwd, d_bwd = disp[:disp.index("def backward")], disp[disp.index("def backward"):]
    c_fwd, c_bwd = comb[:comb.index("def backward")], comb[comb.index("def backward"):]
    assert "probs=probs" in d_fwd and "probs=grad_probs" in d_bwd
    assert "probs=" not in c_fwd and "probs=" not in c_bwd
    plan = Plan(model=ModelArch(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4,
                                vocab_size=1024, seq_length=16, num_experts=4, moe_router_topk=2,
                                moe_ffn_hidden_size=128),
                parallel=Parallelism(tp=1, ep=2, etp=1),
                training=Training(global_batch_size=4, micro_batch_size=2, moe_token_dispatcher="hybridep"),
                cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=2))
    fwd, bwd = dispatcher_collectives(plan)
    carried = [(ph, c.what) for ph, calls in (("fwd", fwd), ("bwd", bwd)) for c in calls
               if (ph, c.what) in PROBS_CALLS]
    assert carried == [("fwd", "dispatch"), ("bwd", "combine")]
