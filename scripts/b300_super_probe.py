"""Why the Nemotron 3 Super MXFP8 rows on DGX B300 project fast (issue 28, Blackwell Ultra group; branch b300x).

Diagnostics only: nothing here changes the model, the hardware database or the validation rows.

The held-out rows ``mbridge2606_b300_fp8_mx_nemotron3_super_64gpu`` (+44.9 %) and ``mbridge260401_b300_...`` (+56.2 %)
run the Bridge recipe of their GB300 twins (+23.6 / +27.7 %) with EP 8 instead of 64 (Megatron-Bridge @8f341b04f
``scripts/performance/configs/nemotronh/nemotron_3_workload_base_configs.py``: ``BASE_NEMOTRON_3_SUPER_CONFIG_B300 =
replace(BASE, expert_model_parallel_size=8)``): 64 local experts of 2,816 tokens per GPU, HybridEP inside the 8-GPU
node, expert-DP 8 across the nodes over InfiniBand, x86 hosts.  Sections:

1. ``bf16``: the same B300 layout in BF16.  Bridge's ``B300_BF16_V1`` is the B300 base plus ``recompute_modules =
   ["moe_act", "layernorm"]`` (same file); its throughput is public: Megatron-Bridge PR #6056 (2026-09-10, "re-enable
   PCT binding for Nemotron-3 Super bf16 on B300"): 64 B300, 8 nodes, 744 TFLOP/s/GPU with the ranks pinned to the
   priority cores, 684 without, "the 26.06.01 container baseline of 739".  Bridge's model-TFLOP/s and tokens/s are one
   figure in two units (the 26.06 table's B300 MXFP8 row: 667 TFLOP/s = 7,867 tokens/s), so 744 / 739 TFLOP/s are
   8,775 / 8,716 tokens/s.  The twin built here (the MXFP8 row's plan; BF16, no FP8 parameters, no router padding for
   quantization -- ``set_nemotron_3_super_common_configs`` sets it for fp8_mx / nvfp4 only -- and that selective
   recompute) projects within the shared hybrid-row level, so every term the two precisions share (NIC, expert-DP
   sync, HybridEP at EP 8, x86 host per kernel, B300 clock and power) is not what makes the MXFP8 row +45 %.
2. ``dp``: the expert-DP gradient reduce-scatter / parameter all-gather of the MXFP8 row as priced (group, bytes, raw
   seconds, the last micro-batch's windows, exposed) and two bounds: overlap off (``--overlap-grad-reduce`` /
   ``--overlap-param-gather`` false: all of it exposed) and the NIC at 50 GB/s (b300ep's implied rate).
3. ``host``: the x86 launch prices (``framework.HOST_CPU_FACTOR['x86']`` and ``moe_host.TE_GEMM_HOST_S``) times k
   on the MXFP8 rows, the BF16 twin and the GB300 twin (Grace, untouched); and the priority-core A/B of PR #6056 read as
   host sensitivity: pinned ranks run on the Xeon 6776P's priority cores (Intel: 8 cores per socket at 4.6 GHz under
   Priority Core Turbo, the others at the 2.3 GHz base; heise.de 2025-05 "Intel Xeon 6 6776P: Diesen Prozessor setzt
   Nvidia im DGX B300 ein"), so unpinned is about twice the host time per launch (plus more cores to spread threads
   on): measured 744 / 684 = 1.088, against the model's throughput at k over 2k.
4. ``tensors``: MXFP8 weight tensors per GPU (TE GroupedLinear keeps one weight per local expert), which Megatron
   re-quantises one ``copy_`` at a time after the BF16 parameter all-gather (``--reuse-grad-buf-for-mxfp8-param-ag``;
   Megatron-LM #6095 "Reducing exposed cast(bf16->mxfp8) overheads", fixed in part by #6094, 2026-07-30, after the
   rows' containers; at the 26.06 pin, Megatron-LM d1410e15e1, ``_post_param_sync`` from ``finish_param_sync``):
   B300 EP 8 against GB300 EP 64, that copy-back at the model's own eager price per op, and the per-tensor host
   seconds that would close the MXFP8 row to its BF16 twin's error.
5. ``memory``: see the end of this docstring.
6. ``pair``: the B300 / B200 pair of the 26.04.01 table (branch superpair): why the model's B300 / B200 throughput
   ratio is ~1.8-1.9 where the table's is 1.140.  The B200 row (EP 64 across 8 DGX B200 nodes, HybridEP over
   400 Gb/s InfiniBand, no CUDA graphs, selective moe_act / layernorm recompute; Bridge v0.4.2 c81012934
   ``BASE_NEMOTRON_3_SUPER_CONFIG_B200``, ``perf_plugins.py`` ``NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=8``) and
   the B300 row (EP 8 inside the node) share the GPU work (the model's compute terms within 2 %); the difference
   is the B200's inter-node dispatch / combine.  Printed: each row's breakdown; the B200's bytes through each
   GPU's NIC per step (every (token, remote node) pair once: T x (D_dom - D_dom / m) x l x 2 bytes per call, 4
   calls per MoE layer and micro-batch) and their time at the NIC's line rate, a floor; the most the measured B200
   step leaves for it (measured step - the modelled non-EP time) and the NIC efficiency that implies; and the
   least of the B300 row's excess that is B300-specific (its excess minus the B200's slack above that floor).

    python scripts/b300_super_probe.py               # all sections
    python scripts/b300_super_probe.py --section host

5. ``memory``: the projected peaks of the MXFP8 row, its BF16 twin and the GB300 twin against the capacity: the MXFP8
   row is the one near the B300's 267.7 GiB (allocator retries near capacity are not priced).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "scripts" / "validation" / "runs.json"

MX_ROWS = ("mbridge2606_b300_fp8_mx_nemotron3_super_64gpu", "mbridge260401_b300_fp8_mx_nemotron3_super_64gpu")
GB300 = "mbridge2606_gb300_fp8_mx_nemotron3_super_64gpu"
# the 26.06 table's B300 MXFP8 row: 667 model TFLOP/s/GPU = 7,867 tokens/s/GPU (Bridge docs/performance-summary-archive.md)
TABLE_TFLOPS, TABLE_TOKENS = 667.0, 7867.0
# Megatron-Bridge PR #6056: Super BF16, 64 B300, TFLOP/s/GPU pinned to the priority cores / not pinned / 26.06.01 baseline
BF16_PINNED, BF16_UNPINNED, BF16_2606_01 = 744.0, 684.0, 739.0
BF16_RECOMPUTE = ("moe_act", "layernorm")   # @8f341b04f NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_BF16_V1
PCT_CLOCK_RATIO = 4.6 / 2.3                  # Xeon 6776P priority-core turbo over base (heise.de, Intel's table)
SLOW_NIC = 50e9


def rows() -> dict:
    return {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}


def tokens_of_tflops(tflops: float) -> float:
    """Bridge's model TFLOP/s/GPU of this model as tokens/s/GPU (the table's own ratio)."""
    return tflops * TABLE_TOKENS / TABLE_TFLOPS


def bf16_twin(plan: dict) -> dict:
    """The MXFP8 row's plan as Bridge's B300 BF16 recipe (module doc, section 1)."""
    out = json.loads(json.dumps(plan))
    t = out["training"]
    t.update(precision="bf16", fp8_recipe=None, fp8_param_gather=False, moe_router_padding_for_quantization=False)
    t["recompute"].update(granularity="selective", modules=list(BF16_RECOMPUTE))
    return out


def project(plan: dict):
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    return project_dry_run(Plan.model_validate(plan))


def host_scaled(k: float):
    """Context manager: the x86 host prices times ``k`` (Grace's untouched)."""
    from contextlib import contextmanager

    from primus_launch.projection.cost import framework, moe_host

    @contextmanager
    def _ctx():
        fac, gemm = dict(framework.HOST_CPU_FACTOR), moe_host.TE_GEMM_HOST_S
        framework.HOST_CPU_FACTOR.update(x86=fac["x86"] * k)
        moe_host.TE_GEMM_HOST_S = gemm * k   # only x86 rows are projected under a scaled price here
        framework.clear_caches()
        try:
            yield
        finally:
            framework.HOST_CPU_FACTOR.update(fac)
            moe_host.TE_GEMM_HOST_S = gemm
            framework.clear_caches()
    return _ctx()


def moe_layers(plan: dict) -> int:
    """MoE layers of the stack incl. MTP depths (``E`` in the hybrid pattern and in each MTP depth's pattern)."""
    m = plan["model"]
    return m["hybrid_pattern"].count("E") + (m.get("mtp_num_layers") or 0) * (m.get("hybrid_mtp_pattern") or "").count("E")


def expert_weight_tensors(plan: dict) -> int:
    """Expert weight tensors one GPU holds: local experts x (FC1, FC2) x MoE layers."""
    return moe_layers(plan) * plan["model"]["num_experts"] // plan["parallel"]["ep"] * 2


def micro_batches(plan: dict) -> int:
    """Micro-batches per iteration on one pipeline: GBS / (DP x MBS), DP = GPUs / (TP x PP x CP)."""
    c, p, t = plan["cluster"], plan["parallel"], plan["training"]
    dp = c["num_nodes"] * c["gpus_per_node"] // (p["tp"] * p["pp"] * p["cp"])
    return t["global_batch_size"] // (dp * t["micro_batch_size"])


def copy_back_op_s(plan: dict) -> float:
    """The model's host seconds for one eager PyTorch op on the plan's host (``framework.eager_host_per_kernel``):
    the least one MXFP8 ``param.data.copy_`` costs (it dispatches through TE's ``__torch_dispatch__`` to a quantise)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.cost import framework
    from primus_launch.projection.hardware.gpus import get_gpu

    p = Plan.model_validate(plan)
    return framework.eager_host_per_kernel(framework.profile_of(p, get_gpu(p.cluster.gpu).arch))


def _err(proj: float, meas: float) -> str:
    return f"{100 * (proj / meas - 1):+6.1f}%"


def _bf16() -> None:
    r = rows()
    mx = r[MX_ROWS[0]]
    twin = bf16_twin(mx["plan"])
    p_mx, p_bf = project(mx["plan"]).tokens_per_sec_per_gpu, project(twin).tokens_per_sec_per_gpu
    print("B300 Super, the 26.06 MXFP8 row and its BF16 twin (EP 8, expert-DP 8 over IB, 64 local experts)")
    print(f"  MXFP8 row          projected {p_mx:8.0f}  measured {TABLE_TOKENS:8.0f}  {_err(p_mx, TABLE_TOKENS)}")
    for label, tf in (("BF16 pinned (#6056)", BF16_PINNED), ("BF16 26.06.01", BF16_2606_01)):
        meas = tokens_of_tflops(tf)
        print(f"  {label:18s} projected {p_bf:8.0f}  measured {meas:8.0f}  {_err(p_bf, meas)}")
    print(f"  BF16 / MXFP8 throughput: measured {BF16_2606_01 / TABLE_TFLOPS:.3f} (26.06.01 BF16 over 26.06 MXFP8), "
          f"modelled {p_bf / p_mx:.3f}")
    g = r[GB300]
    print(f"  GB300 twin (EP 64 inside NVL72) MXFP8 {_err(project(g['plan']).tokens_per_sec_per_gpu, g['measured_tokens_per_sec_per_gpu'])}")


def _dp() -> None:
    sys.path.insert(0, str(ROOT))
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost import dp_comm
    from primus_launch.projection.steps import iteration as it

    mx = rows()[MX_ROWS[0]]
    seen = {}
    orig = it.dp_grad_sync

    def spy(plan, spec, lay, sp_, fwd_win, bwd_win, rank=0, chunks=None):
        out = orig(plan, spec, lay, sp_, fwd_win, bwd_win, rank, chunks)
        eb = dp_comm.fsdp_bytes(plan)
        seen.update(lay=lay, expert=sp_.expert, dense=sp_.dense, fwd=fwd_win, bwd=bwd_win, exposed=out,
                    rs=coll.reduce_scatter(eb.grad * sp_.expert, lay.expert_dp, spec.name),
                    ag=coll.all_gather(eb.param * sp_.expert, lay.expert_dp, spec.name), grad=eb.grad, param=eb.param)
        return out

    it.dp_grad_sync = spy
    try:
        base = project(mx["plan"])
    finally:
        it.dp_grad_sync = orig
    e = seen["lay"].expert_dp
    print("Expert-DP sync of the MXFP8 row as priced (one GPU, one step)")
    print(f"  group {e.size} ranks, {e.per_node} per node over {e.nodes} nodes; {seen['expert'] / 1e9:.2f} B expert "
          f"parameters; gradients {seen['grad']:g} B, parameters gathered at {seen['param']:g} B per element")
    print(f"  raw reduce-scatter {seen['rs']:.3f} s, all-gather {seen['ag']:.3f} s; windows: last micro-batch's "
          f"backward {seen['bwd']:.3f} s, first forward {seen['fwd']:.3f} s; exposed (dense + expert) {seen['exposed']:.3f} s")
    meas = mx["measured_tokens_per_sec_per_gpu"]
    no_ov = json.loads(json.dumps(mx["plan"]))
    no_ov["training"].update(overlap_grad_reduce=False, overlap_param_gather=False)
    sys.path.insert(0, str(ROOT / "scripts"))
    from moe_probe import knob_gpu

    slow = knob_gpu("b300", f"nic {SLOW_NIC / 1e9:.0f} GB/s", {"inter_node_bw": SLOW_NIC})
    both = json.loads(json.dumps(no_ov))
    both["cluster"]["gpu"] = slow
    nic = json.loads(json.dumps(mx["plan"]))
    nic["cluster"]["gpu"] = slow
    print(f"  row error: as built {_err(base.tokens_per_sec_per_gpu, meas)}; overlap off "
          f"{_err(project(no_ov).tokens_per_sec_per_gpu, meas)}; NIC 50 GB/s {_err(project(nic).tokens_per_sec_per_gpu, meas)}; "
          f"both {_err(project(both).tokens_per_sec_per_gpu, meas)}")
    bmeas = tokens_of_tflops(BF16_2606_01)   # the BF16 twin moves the same bytes (MXFP8 parameters gather in BF16)
    print(f"  BF16 twin error (26.06.01): as built {_err(project(bf16_twin(mx['plan'])).tokens_per_sec_per_gpu, bmeas)}; "
          f"overlap off {_err(project(bf16_twin(no_ov)).tokens_per_sec_per_gpu, bmeas)}; NIC 50 GB/s "
          f"{_err(project(bf16_twin(nic)).tokens_per_sec_per_gpu, bmeas)}; both "
          f"{_err(project(bf16_twin(both)).tokens_per_sec_per_gpu, bmeas)}")


def host_sweep(ks=(1.0, 1.25, 1.5, 2.0)) -> list[tuple[float, float, float, float, float]]:
    """(k, MXFP8 26.06 error, BF16 twin error vs the 26.06.01 baseline, model pinned / unpinned ratio k vs
    PCT_CLOCK_RATIO x k, GB300 twin error)."""
    r = rows()
    mx, g = r[MX_ROWS[0]], r[GB300]
    twin = bf16_twin(mx["plan"])
    out = []
    # the GB300 twin outside the scaled prices: host_scaled scales moe_host.TE_GEMM_HOST_S on every host, and the
    # layer-time cache (keyed on the plan, not on that constant) kept whichever k projected it first
    c = project(g["plan"]).tokens_per_sec_per_gpu
    for k in ks:
        with host_scaled(k):
            a, b = project(mx["plan"]).tokens_per_sec_per_gpu, project(twin).tokens_per_sec_per_gpu
        with host_scaled(k * PCT_CLOCK_RATIO):
            b_slow = project(twin).tokens_per_sec_per_gpu
        out.append((k, a / TABLE_TOKENS - 1, b / tokens_of_tflops(BF16_2606_01) - 1, b / b_slow,
                    c / g["measured_tokens_per_sec_per_gpu"] - 1))
    return out


OTHER_B300 = (MX_ROWS[1], "mbridge2604_b300_fp8_mx_deepseek_v3_256gpu", "mbridge2602_b300_bf16_gpt_oss_120b_64gpu_ep64")


def _host(ks=(1.0, 1.25, 1.5, 2.0)) -> None:
    print(f"x86 host prices x k (Grace untouched); PCT A/B of PR #6056: pinned / unpinned measured "
          f"{BF16_PINNED / BF16_UNPINNED:.3f} for a {PCT_CLOCK_RATIO:g}x host clock")
    r = rows()
    others = [i for i in OTHER_B300 if i in r]
    head = "  ".join(f"{i.split('_', 1)[1][:22]:>22s}" for i in others)
    print(f"  {'k':>5s}  {'MXFP8 row':>9s}  {'BF16 twin':>9s}  {'BF16 k / 2k':>11s}  {'GB300 twin':>10s}  {head}")
    for k, a, b, ratio, c in host_sweep(ks):
        with host_scaled(k):
            errs = [project(r[i]["plan"]).tokens_per_sec_per_gpu / r[i]["measured_tokens_per_sec_per_gpu"] - 1
                    for i in others]
        tail = "  ".join(f"{100 * e:+21.1f}%" for e in errs)
        print(f"  {k:5.2f}  {100 * a:+8.1f}%  {100 * b:+8.1f}%  {ratio:11.3f}  {100 * c:+9.1f}%  {tail}")


def _tensors() -> None:
    r = rows()
    mx, g = r[MX_ROWS[0]], r[GB300]
    nb, ng = expert_weight_tensors(mx["plan"]), expert_weight_tensors(g["plan"])
    print(f"MXFP8 expert weight tensors per GPU: B300 EP {mx['plan']['parallel']['ep']} {nb}, "
          f"GB300 EP {g['plan']['parallel']['ep']} {ng} ({moe_layers(mx['plan'])} MoE layers incl. MTP)")
    for label, row, n in (("B300", mx, nb), ("GB300", g, ng)):
        t_op = copy_back_op_s(row["plan"])
        print(f"  {label}: the per-parameter copy-back at the model's eager price per op ({1e6 * t_op:.1f} us) "
              f"= {n * t_op:.3f} s of host work per step, in the first micro-batch's forward")
    p_mx, p_bf = project(mx["plan"]), project(bf16_twin(mx["plan"]))
    twin_err = p_bf.tokens_per_sec_per_gpu / tokens_of_tflops(BF16_2606_01)
    step_meas = p_mx.iteration_time_s * p_mx.tokens_per_sec_per_gpu / TABLE_TOKENS
    gap = step_meas - p_mx.iteration_time_s * twin_err
    print(f"  measured step {step_meas:.2f} s, projected {p_mx.iteration_time_s:.2f} s; at the BF16 twin's error the "
          f"row would leave {gap:.2f} s, i.e. {1e6 * gap / nb:.0f} us per expert tensor per step if it were all the "
          f"per-parameter copy-back (or {1e6 * gap / (nb * micro_batches(mx['plan'])):.1f} us "
          f"per expert tensor per micro-batch)")


def _memory() -> None:
    r = rows()
    print("Projected memory peak per GPU (reserved basis), its error band (the verdict peak at the 10th .. 90th percentile of published / projected), capacity")
    for label, plan in (("B300 MXFP8 row", r[MX_ROWS[0]]["plan"]), ("B300 BF16 twin", bf16_twin(r[MX_ROWS[0]]["plan"])),
                        ("GB300 MXFP8 twin", r[GB300]["plan"])):
        sys.path.insert(0, str(ROOT))
        from primus_launch.projection.hardware.gpus import get_gpu

        m = project(plan).memory
        band = f"{m.band.low_bytes / 2**30:.1f} .. {m.band.high_bytes / 2**30:.1f}" if m.band else "n/a"
        print(f"  {label:17s} {m.peak_bytes_per_gpu / 2**30:6.1f} GiB  band {band} GiB  of "
              f"{get_gpu(plan['cluster']['gpu']).hbm_bytes / 2**30:.1f} GiB")


PAIR_ROWS = ("mbridge260401_b300_fp8_mx_nemotron3_super_64gpu", "mbridge260401_b200_fp8_mx_nemotron3_super_64gpu")


def measured_step_s(row: dict) -> float:
    """The row's measured iteration seconds: GBS x sequence / (GPUs x tokens/s/GPU)."""
    t, m, c = row["plan"]["training"], row["plan"]["model"], row["plan"]["cluster"]
    return t["global_batch_size"] * m["seq_length"] / (c["num_nodes"] * c["gpus_per_node"] * row["measured_tokens_per_sec_per_gpu"])


def nic_bytes_per_step(plan: dict) -> float:
    """Bytes one GPU's NIC carries per iteration for HybridEP's inter-node dispatch / combine (section 6): every
    (token, remote node) pair once, ``T (D_dom - D_dom / m)`` copies of an l-wide BF16 token per call (D_dom: the
    expected distinct nodes of a token's top-k, uniform routing: ``m (1 - C(E - E/m, k) / C(E, k))``), four calls
    per MoE layer and micro-batch (forward dispatch + combine, their backward combine + dispatch)."""
    from math import comb

    m_, p, t, c = plan["model"], plan["parallel"], plan["training"], plan["cluster"]
    nodes = max(1, p["ep"] // c["gpus_per_node"])
    if nodes <= 1:
        return 0.0
    E, k = m_["num_experts"], m_["moe_router_topk"]
    d_dom = nodes * (1 - comb(E - E // nodes, k) / comb(E, k))
    tokens = t["micro_batch_size"] * m_["seq_length"] // p["tp"]
    width = m_.get("moe_latent_size") or m_["hidden_size"]
    per_call = tokens * d_dom * (1 - 1 / nodes) * width * 2
    return per_call * 4 * moe_layers(plan) * micro_batches(plan)


def pair_numbers() -> dict:
    """Section 6's figures (module doc): per row the measured and modelled step and breakdown; the B200's NIC bytes,
    line-rate floor, the measured step's room for the EP term and the NIC efficiency it implies; the B300's excess
    and the part of it the B200 row cannot share."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.projection.hardware.gpus import get_gpu

    r = rows()
    out = {}
    for rid in PAIR_ROWS:
        res = project(r[rid]["plan"])
        out[rid] = dict(measured=measured_step_s(r[rid]), modelled=res.iteration_time_s, breakdown=dict(res.time_breakdown))
    b300, b200 = (out[rid] for rid in PAIR_ROWS)
    plan = r[PAIR_ROWS[1]]["plan"]
    nbytes = nic_bytes_per_step(plan)
    floor = nbytes / get_gpu(plan["cluster"]["gpu"]).inter_node_bw
    non_ep = b200["modelled"] - b200["breakdown"].get("ep_comm", 0.0)
    room = b200["measured"] - non_ep
    excess = b300["measured"] - b300["modelled"]
    slack = b200["measured"] - non_ep - floor
    return dict(rows=out, nic_bytes=nbytes, floor_s=floor, room_s=room, implied_nic_eff=floor / room,
                b300_excess_s=excess, b200_slack_s=slack, b300_specific_s=excess - slack,
                modelled_ratio=b200["modelled"] / b300["modelled"], measured_ratio=b200["measured"] / b300["measured"])


def _pair() -> None:
    x = pair_numbers()
    print("B300 / B200 Nemotron 3 Super MXFP8, 26.04.01 (step seconds; throughput ratio = B200 step / B300 step)")
    for rid, v in x["rows"].items():
        bd = ", ".join(f"{k} {s:.2f}" for k, s in v["breakdown"].items() if s > 0.005)
        print(f"  {rid:50s} measured {v['measured']:6.2f}  modelled {v['modelled']:6.2f} ({_err(v['measured'], v['modelled'])} "
              f"throughput)  [{bd}]")
    print(f"  ratio: measured {x['measured_ratio']:.3f}, modelled {x['modelled_ratio']:.3f}")
    print(f"  B200 HybridEP through each GPU's NIC: {x['nic_bytes'] / 1e9:.1f} GB per step; at the 400 Gb/s line rate "
          f"{x['floor_s']:.2f} s (a floor)")
    print(f"  the measured B200 step leaves {x['room_s']:.2f} s for it (measured - modelled non-EP time): NIC at >= "
          f"{x['implied_nic_eff']:.2f} of line rate, API time included, if the modelled GPU work is right")
    print(f"  B300 excess over the model {x['b300_excess_s']:.2f} s; the B200's slack above its floor {x['b200_slack_s']:.2f} s "
          f"-> at least {x['b300_specific_s']:.2f} s of the B300's excess is B300 / EP-8 specific")


SECTIONS = {"bf16": _bf16, "dp": _dp, "host": _host, "tensors": _tensors, "memory": _memory, "pair": _pair}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", choices=sorted(SECTIONS), action="append", help="one section (repeatable; default all)")
    a = ap.parse_args(argv)
    for name in a.section or list(SECTIONS):
        SECTIONS[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
