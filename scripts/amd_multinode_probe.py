"""Where the multi-node MI355X MoE rows' error sits: the network, or what one node has too (issue 28, AMD).

    PYTHONPATH=$PWD python scripts/amd_multinode_probe.py

For every MI355X row of ``scripts/validation/runs.json`` on more than one scale-up domain (the Primus MoE package
blog's DeepSeek-V2 on 32 GPUs, the 2.0 blog's DeepSeek-V3 FP8 on 256 / 1,024, the Mixtral 8x22B blog row on 64):

- how each parallel group is placed (``hardware.placement.layout``: ranks over scale-up domains): which traffic
  crosses the NIC at all;
- the projected iteration's exposed seconds per component (``ProjectionResult.time_breakdown``) and the share of
  the components that cross nodes (the EP all-to-all only where its group spans domains; DP gradient sync and
  pipeline P2P where theirs do);
- the row's error as projected, and with the network free: ``hardware.fabric.register_fabric`` lays a NIC of
  1 PB/s with zero latency over the MI355X fabric (``nic_bw``, ``l_nic``, ``a_nic``, ``l_nic_a2a``), so every
  inter-node term (RCCL rings / trees, all-to-all, DeepEP RDMA, P2P) goes to ~0.  This bounds what any NIC model
  (AMD Pollara 400 = 50 GB/s per GPU in the hardware DB, RCCL or MoRI / DeepEP efficiencies) could move the rows;
- then every MI355X row, single- and multi-node, ordered by its MoE layer's host over GPU time (forward +
  backward of one micro-batch, ``roofline.layer_op_times(plan)['_host']``): the error follows that ratio and the
  dispatcher, not the node count (``scripts/amd_fp8_probe.py --implied`` prices the host cost per row).

``--chunk-sort``: host seconds per chunk of megatron-core's unfused all-to-all chunk sort
(``moe_utils.sort_chunks_by_idxs``, called twice per MoE forward by ``MoEAlltoAllTokenDispatcher`` at EP > 1 with
more than one local expert: the dispatch sort with the probabilities, the combine sort without), forward and
backward, at EP x local-expert chunk counts of the rows, timed on THIS machine's CPU with tiny tensors (host work
only; megatron-core as installed).  The model prices it at ``cost/moe_host.CHUNK_SORT_HOST_S`` (item 4), the value
this option printed; the all-to-all path has it and DeepEP's does not.

The tables are what-ifs and readings, not the model (``scripts/validation/README.md`` Known gaps, AMD multi-node).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

# the inter-node fields of a Fabric a free network zeroes (hardware/fabric.py)
FREE_NIC = {"nic_bw": 1e15, "l_nic": 0.0, "a_nic": 0.0, "l_nic_a2a": 0.0}
CROSS = ("ep_comm", "dp_comm", "pp_comm")


def multinode_rows(validate) -> list[dict]:
    """The MI355X rows of runs.json whose world spans more than one scale-up domain."""
    from primus_launch.projection.hardware.gpus import get_gpu

    out = []
    for r in validate.load_rows():
        c = r["plan"]["cluster"]
        if c["gpu"] != "mi355x":
            continue
        world = c["num_nodes"] * c["gpus_per_node"]
        if world > get_gpu("mi355x").scaleup_domain:
            out.append(r)
    return out


def placement(plan) -> dict[str, tuple[int, int]]:
    """(ranks, domains) of the EP, expert-DP, DP groups and of two adjacent pipeline stages of ``plan``
    (``hardware.placement.layout``, Megatron's rank order)."""
    from primus_launch.projection.hardware.placement import layout

    lay = layout(plan)
    return {k: (g.size, g.nodes) for k, g in (("ep", lay.ep), ("edp", lay.expert_dp), ("dp", lay.dp),
                                               ("pp", lay.pp))}


def free_network_errors(validate, rows: list[dict]) -> dict[str, float]:
    """Each row's error with a free NIC laid over the MI355X fabric (module doc); the registration is dropped after."""
    from primus_launch.projection.hardware.fabric import register_fabric

    try:
        register_fabric("mi355x", FREE_NIC)
        return {r["id"]: r["err"] for r in validate.evaluate(rows)}
    finally:
        register_fabric("mi355x", None)


def chunk_sort_seconds(chunks: int, reps: int = 40) -> tuple[float, float]:
    """Host seconds per chunk (forward, backward) of the two ``sort_chunks_by_idxs`` calls of one all-to-all MoE
    layer (module doc): the dispatch sort with the probabilities plus the combine sort without, on ``chunks`` =
    EP x local experts chunks of one token each, timed on this CPU (least of 7 runs of ``reps``).  The backward
    is the forward + backward less the forward and less the same ``sum`` / ``backward`` on an identity."""
    import time

    import torch
    from megatron.core.transformer.moe.moe_utils import sort_chunks_by_idxs

    x = torch.randn(chunks, 4, requires_grad=True)
    pr = torch.rand(chunks, requires_grad=True)
    sizes = torch.ones(chunks, dtype=torch.long)
    ep = 8 if chunks % 8 == 0 else 1
    idx = torch.arange(chunks).view(ep, -1).T.ravel()   # rank-major -> expert-major, as the dispatcher's

    def least(fn) -> float:
        for _ in range(5):
            fn()
        best = float("inf")
        for _ in range(7):  # the least of 7 runs: the machine is shared
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best = min(best, (time.perf_counter() - t0) / reps)
        return best

    def fwd(probs: bool):
        return lambda: sort_chunks_by_idxs(x, sizes, idx, probs=pr if probs else None)

    def fwd_bwd(probs: bool):
        def run():
            y, p = sort_chunks_by_idxs(x, sizes, idx, probs=pr if probs else None)
            (y.sum() + p.sum() if probs else y.sum()).backward()
        return run

    def ident(probs: bool):
        return lambda: ((x * 1).sum() + (pr * 1).sum() if probs else (x * 1).sum()).backward()

    f = b = 0.0
    for probs in (True, False):
        tf = least(fwd(probs))
        f += tf
        b += max(0.0, least(fwd_bwd(probs)) - tf - least(ident(probs)))
    return f / chunks, b / chunks


def main(argv: list[str]) -> int:
    import validate

    if "--chunk-sort" in argv:
        from primus_launch.projection.cost import moe_host

        print(f"{'EP x local experts':>18s} {'fwd us/chunk':>12s} {'bwd us/chunk':>12s}   (both sort_chunks_by_idxs "
              "calls of one MoE layer and micro-batch, this CPU)")
        for n in (64, 160, 256):
            f, b = chunk_sort_seconds(n)
            print(f"{n:18d} {1e6 * f:12.2f} {1e6 * b:12.2f}")
        print(f"model (moe_host.CHUNK_SORT_HOST_S): {1e6 * moe_host.CHUNK_SORT_HOST_S[0]:.2f} / "
              f"{1e6 * moe_host.CHUNK_SORT_HOST_S[1]:.2f} us per chunk")
        return 0
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    rows = multinode_rows(validate)
    if not rows:
        print("amd_multinode_probe: error: no multi-node MI355X rows in scripts/validation/runs.json", file=sys.stderr)
        return 2
    now = {r["id"]: r["err"] for r in validate.evaluate(rows)}
    free = free_network_errors(validate, rows)
    print(f"{'row':52s} {'GPUs':>5s} {'EP':>5s} {'EDP':>5s} {'DP':>5s} {'PP':>4s} {'iter s':>7s} "
          f"{'ep%':>5s} {'dp%':>5s} {'pp%':>5s} {'bubble%':>7s} {'err':>7s} {'free NIC':>8s}")
    for r in rows:
        plan = Plan.model_validate(r["plan"])
        res = project_dry_run(plan)
        tb, it = res.time_breakdown, res.iteration_time_s
        pl = placement(plan)
        share = {k: 100 * tb.get(k, 0.0) / it for k in CROSS + ("bubble",)}
        print(f"{r['id'].replace('primus_', ''):52s} {plan.world_size:5d} {'%d/%d' % pl['ep']:>5s} "
              f"{'%d/%d' % pl['edp']:>5s} {'%d/%d' % pl['dp']:>5s} {'%d/%d' % pl['pp']:>4s} {it:7.2f} {share['ep_comm']:5.1f} {share['dp_comm']:5.1f} "
              f"{share['pp_comm']:5.1f} {share['bubble']:7.1f} {100 * now[r['id']]:+6.1f}% {100 * free[r['id']]:+7.1f}%")
    print("EP / EDP / DP / PP: ranks / scale-up domains of the group (PP: two adjacent stages); "
          "ep% / dp% / pp% / bubble%: exposed share of the projected iteration; free NIC: the error with the "
          "inter-node fabric at 1 PB/s, zero latency (module doc)\n")
    every = [r for r in validate.load_rows() if r["plan"]["cluster"]["gpu"] == "mi355x"]
    errs = {r["id"]: r["err"] for r in validate.evaluate(every)}
    print(f"{'row (every MI355X row)':52s} {'GPUs':>5s} {'MBS':>3s} {'local E':>7s} {'gemm':6s} {'dispatch':8s} "
          f"{'MoE host/GPU':>12s} {'err':>7s}")
    for r in sorted(every, key=lambda r: host_gpu_ratio(Plan.model_validate(r["plan"]))):
        plan = Plan.model_validate(r["plan"])
        t = plan.training
        local = plan.model.num_experts // max(1, plan.parallel.ep)
        print(f"{r['id'].replace('primus_', ''):52s} {plan.world_size:5d} {t.micro_batch_size:3d} {local:7d} "
              f"{t.moe_expert_gemm:6s} {t.moe_token_dispatcher:8s} {host_gpu_ratio(plan):12.2f} "
              f"{100 * errs[r['id']]:+6.1f}%")
    print("MoE host/GPU: the MoE layer's host launch time over its GPU time, forward + backward of one micro-batch "
          "(roofline.layer_op_times '_host'; > 1: host-bound in the model)")
    return 0


def host_gpu_ratio(plan) -> float:
    """The MoE layer's host seconds over its GPU seconds, forward + backward of one micro-batch, as the model walks
    them (``roofline.layer_op_times(plan)['_host']['moe']``: host fwd, host bwd, GPU fwd, GPU bwd); 0 without MoE."""
    from primus_launch.projection.cost.roofline import layer_op_times

    hs = layer_op_times(plan).get("_host", {})
    if "moe" not in hs:
        return 0.0
    hf, hb, gf, gb = hs["moe"]
    return (hf + hb) / (gf + gb)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
