"""Term-by-term explanation of a dry-run projection: per kernel its time, efficiency and source.

For one micro-batch of one layer on one GPU (:func:`primus_launch.projection.dryrun.layer_op_times`)
each op gets its forward / input-grad / weight-grad milliseconds, the efficiency it runs at (GEMMs
and attention: FLOP/s as a fraction of the datasheet peak of its format; memory-bound kernels: bytes/s
as a fraction of the datasheet HBM bandwidth) and the SOURCE of that number: the fitted curve
(``projection/cost/fitted/``) and the kernel-evidence records it stands on.  Then the layer's
communication (raw and exposed after overlap, with the fabric curve it was priced on), the
framework profile (fusions, host launch time, CUDA graphs, in-situ efficiency, sustained clock)
and the iteration's breakdown.  ``scripts/explain_projection.py`` prints it; the text report
(:mod:`report.text`) and the HTML report (``report/html.py``) carry the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost.fitted import FITTED
from primus_launch.projection.cost.compute import quant_efficiency

if TYPE_CHECKING:
    from primus_launch.projection.result import ProjectionResult

#: layer kinds of the roofline's op lists (a hybrid Mamba stack's: one per layer symbol, M * - E)
HYBRID_KINDS = ("hybrid_mamba", "hybrid_attn", "hybrid_mlp", "hybrid_moe")
KINDS = ("dense", "dense_window", "moe", "moe_window", *HYBRID_KINDS, "mtp", "embedding", "head")
#: op kinds whose row names what they are and the source the cost model gives (info[1]), with no efficiency
_PLAIN_KINDS = {"host": "host (GPU idle)", "host_ops": "host launches (tiny kernels)",
                "imbalance": "busiest EP rank's extra", "serial": "serial loop (latency)",
                "kernel": "a measured kernel, scaled (cost/mamba.py)"}


@dataclass(frozen=True)
class OpRow:
    kind: str           # layer kind
    name: str
    fwd_ms: float
    bwd_input_ms: float
    bwd_weight_ms: float
    efficiency: str     # e.g. "64% of FP8 peak", "83% of HBM"
    source: str         # curve key and records


def _curve_source(section: str, key: str) -> str:
    c = FITTED.get(section, {}).get(key.split("/", 1)[1] if key.startswith("grouped/") else key)
    if not c:
        return key
    recs = c.get("records", [])
    rms = c.get("rms")
    tail = f", rms {100 * rms:.0f}% on them" if isinstance(rms, (int, float)) else ""
    note = f"; {c['note']}" if c.get("note") else ""
    return f"{section} {key}: {len(recs)} records ({', '.join(recs[:2])}{', ...' if len(recs) > 2 else ''}){tail}{note}"


def op_rows(plan: Plan) -> list[OpRow]:
    """Every op of every layer kind of ``plan``'s dry-run, with efficiency and source (module doc)."""
    from primus_launch.projection.cost.compute import (arch_of, attn_curve, fmt_peak, gemm_curve, grouped_curve,
                                                  hbm_eta)
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.gpus import get_gpu

    gpu = plan.cluster.gpu
    g = get_gpu(gpu)
    arch = arch_of(gpu)
    ops = layer_op_times(plan)
    out = []
    eta, eta_key = hbm_eta(arch)
    torch_lib = plan.framework == "torchtitan"
    for kind in KINDS:
        for name, f, bi, bw, info in ops.get(kind, []):
            what = info[0]
            if what in ("gemm", "grouped_gemm"):
                fmt = info[1]
                key = (grouped_curve(arch, fmt, torch_lib) if what == "grouped_gemm" else gemm_curve(arch, fmt))[1]
                eff = info[2] / (f * fmt_peak(gpu, fmt)) if f > 0 else 0.0
                label = {"bf16": "BF16", "fp8": "FP8", "fp8_block": "FP8", "mxfp8": "FP8", "fp4": "FP4"}[fmt]
                effs = f"{100 * eff:.0f}% of {label} peak (fwd)"
                src = _curve_source("grouped_gemm" if key.startswith("grouped/") else "gemm", key)
            elif what == "attention":
                impl = info[1]
                if impl == "unfused":
                    key, src = "unfused", "batched GEMMs (gemm curves) + softmax over the s x s scores (HBM)"
                else:
                    key = attn_curve(arch, impl)[1]
                    src = _curve_source("attention", key)
                eff = info[2] / (f * g.peak_flops_bf16) if f > 0 else 0.0
                effs = f"{100 * eff:.0f}% of BF16 peak (fwd)"
            elif what in _PLAIN_KINDS:
                effs, src = _PLAIN_KINDS[what], info[1]
            elif what == "quant":
                torchao = len(info) > 4 and info[4] == "torchao"   # inductor-fused casts (roofline.quant_flush)
                q = {} if torchao else FITTED["fp8_quant"].get(info[1], {})
                nbytes = info[3] if len(info) > 3 else 0.0
                effs = (f"{100 * quant_efficiency(q, g.arch):.0f}% of HBM (recipe kernels)" if q
                        else f"{100 * eta:.0f}% of HBM (streaming)")
                src = (f"fp8_quant {info[1]}: {len(q.get('records', []))} records "
                       f"({', '.join(q.get('records', [])[:2])}); bytes per element cost/fp8.py; "
                       f"{nbytes / 1e9:.2f} GB per micro-batch") if q else (
                    f"torchao roofline bytes per role under torch.compile (cost/fp8.py torchao_compiled_bytes): "
                    f"{nbytes / 1e9:.2f} GB per micro-batch" if torchao else "cost/fp8.py (casts at streaming speed)")
                if len(info) > 5 and info[5]:
                    src += (f"; + {info[5] / 1e9:.2f} GB: the MX linears' dim1 casts on the Triton / torch kernel "
                            "(training.mx_dim1_cast_kernel, cost/fp8.py mx_dim1_extra_bytes)")
            else:
                nbytes = info[3] if len(info) > 3 else 0.0
                # every streaming row records its forward pass's bytes (Acc.elem; the backward's follow its
                # time): the cross-entropy and CP helper rows had fwd + bwd, 2-3x their norm neighbours'
                effs = f"{100 * eta:.0f}% of HBM" + (f", {nbytes / 1e6:,.0f} MB fwd" if nbytes else "")
                src = f"{eta_key}: " + ev.cite(FITTED["hbm"].get(eta_key.split("/")[-1], {}).get("records", []), 2) \
                    if eta_key.startswith("hbm/") else eta_key
            out.append(OpRow(kind, name, 1e3 * f, 1e3 * bi, 1e3 * bw, effs, src))
    return out


def comm_rows(plan: Plan) -> list[tuple[str, float, float, float, float, str]]:
    """(what, raw fwd ms, raw bwd ms, exposed fwd ms, exposed bwd ms, how it is priced) per layer: the
    terms of the projection's layer step (:class:`~primus_launch.projection.steps.layer.LayerCosts`)
    on the dry-run's layer times."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.steps.layer import layer_costs
    from primus_launch.projection.steps.setup import setup

    s = setup(plan, layer_times_roofline(plan))
    lc = layer_costs(s)
    lay, gpu = s.lay, s.spec.name
    fab = coll.fabric(gpu)
    measured = coll.measured_fabric_fields(gpu)
    if measured is not None and measured.get("points"):
        arch_key = (f"link times measured for {gpu} ({measured.get('points_ranks', 2)} ranks: between the measured "
                    "sizes; per-op fits elsewhere)")
    elif measured is not None:
        arch_key = f"per-op link fits measured for {gpu}"
    elif fab.fitted:
        arch_key = f"collectives {coll.fabric_arch(s.spec.arch)}/fabric"
    else:
        arch_key = "calibration defaults"
    rows = []
    tp_how = (f"{arch_key}; overlap: " + ("TE userbuffers / async TP" if plan.training.tp_comm_overlap else
                                          ("none: the EP overlap's CUDA_DEVICE_MAX_CONNECTIONS > 1 drops "
                                           "Hopper's launch order" if lc.tp_async_lost else
                                           "column-parallel backward async" if plan.framework == "megatron"
                                           else "none")))
    tp_what = ("TP (" + ("AG/RS, SP" if plan.parallel.sequence_parallel else "all-reduce") + f") {lay.tp.size} ranks, "
               f"{lay.tp.nodes} domain(s)")
    # a MoE layer with its own TP calls (TorchTitan's: cost/layer_collectives.tp_calls) gets its own row
    for moe in ((False, True) if lc.tp_moe_own else (False,)):
        tp, tpe = (lc.tp_moe_raw, lc.tp_moe) if moe else (lc.tp_raw, lc.tp)
        what = tp_what + (", MoE layer" if moe else ", dense layer" if lc.tp_moe_own else "")
        rows.append((what, *[1e3 * x for x in tp + tpe], tp_how))
    from primus_launch.projection.cost.tp_comm import qkv_subshard_comm

    sub = qkv_subshard_comm(plan, s.spec, lay)
    if any(sub):   # inside the TP row(s) above: megatron-core >= 0.16's QKV sub-sharding (cost/layer_collectives.py)
        m = plan.model
        rows.append((f"  of which: QKV sub-sharding AG + grad RS ({m.kv_heads} groups < TP {plan.parallel.tp}, "
                     f"[T, {(m.num_attention_heads + 2 * m.kv_heads) * m.kv_channels}])",
                     *[1e3 * x for x in sub + sub],
                     f"{arch_key}; bf16; overlap: none (compute stream, between QKV and core)"))
    how = ("PyTorch ring attention: K,V " + ("all-gather" if plan.parallel.cp_comm_type == "allgather" else "rotation")
           + " + fp32 dK,dV rotation, hidden behind the attention core" if plan.framework == "torchtitan"
           else "ring P2P hidden behind the attention core")
    rows.append((f"CP {plan.parallel.cp_comm_type} {lay.cp.size} ranks",
                 *[1e3 * x for x in lc.cp_raw + lc.cp_behind_attention], how if lc.cp_ring else arch_key))
    if plan.model.is_moe:
        from primus_launch.projection.cost.moe_imbalance import plan_imbalance

        d = plan.training.moe_token_dispatcher
        src = (f"deepep: {_curve_source('deepep', d + '/rdma')}" if d in ("deepep", "hybridep") else arch_key)
        if lc.ep_walked:
            from primus_launch.projection.cost.ep_comm import moe_layer_pair

            whole = sum(moe_layer_pair(plan, s.lt, *lc.ep_raw, lc.tp_moe).whole)
            src = (f"combined 1F1B walk, {lc.ep_layers_per_step} layer(s) per step, compute at "
                   f"{100 * (1 - lc.ep_walk_contention):.0f}% beside the dispatcher"
                   + (f", stalled beside {1e3 * whole:.2f} ms per layer pair of whole-GPU work on the comm stream "
                      "(HybridEP preprocessing / sync / permutes, the all-to-all's unpermute)" if whole > 0 else "")
                   + "; " + src)
        rows.append((f"EP {d} dispatch+combine, {lay.ep.size} ranks over {lay.ep.nodes} domain(s) (MoE layer)",
                     *[1e3 * x for x in lc.ep_raw + lc.ep_overlapped], src))
        # the issue-28 terms inside the EP time, each as the raw share it adds (exposed: the same fraction)
        from primus_launch.projection.cost.moe_dispatch import dispatcher_times

        raw = lc.ep_raw
        terms = []
        imb = plan_imbalance(plan)
        if imb.delta > 0:
            terms.append((f"  of which: busiest EP rank +{100 * imb.delta:.1f}% routed tokens (router {imb.mode})",
                          dispatcher_times(plan, gpu, lay.ep, busiest_rank=False),
                          "cost/moe_imbalance.py" + (": sampling of forced-balance routing" if imb.mode == "forced"
                                                     else ": learned-router spread, shawntan/scattermoe#10")))
        from primus_launch.projection.cost.collectives import DEEPEP_INSITU_SMS

        insitu = FITTED.get("deepep", {}).get("deepep/insitu", {}).get("eff")
        lib = {"deepep": "DeepEP", "hybridep": "HybridEP"}.get(d)
        if lib and lay.ep.nodes > 1 and insitu:
            terms.append((f"  of which: {lib} in situ (RDMA x {insitu:.2f} of its benchmark"
                          + (f"; forwarder from the in-situ {DEEPEP_INSITU_SMS} SMs)" if d == "deepep" else ")"),
                          dispatcher_times(plan, gpu, lay.ep, insitu=False),
                          "deepep/insitu: DeepSeek's DeepSeek-V3 profile vs DeepEP's README of the same week"))
        if d == "deepep" and lay.ep.nodes > 1:
            without = dispatcher_times(plan, gpu, lay.ep, forward=False)
            if any(r > w for r, w in zip(raw, without)):
                terms.append(("  of which: DeepEP V1 internode forwarder bound (NVL receive per SM)", without,
                              "deepep/forward: DeepEP#493 2-node H200 test_internode figures x "
                              f"{plan.training.moe_dispatcher_num_sms or 20} SMs"))
        if d == "hybridep":
            without = dispatcher_times(plan, gpu, lay.ep, api=False)
            if any(r > w for r, w in zip(raw, without)):
                terms.append(("  of which: HybridEP torch API per call (sync, flags)", without,
                              "hybridep/api: DeepEP hybrid-ep README, torch API minus kernel-only time per call"))
        for what, without, how in terms:
            add = [max(0.0, r - w) for r, w in zip(raw, without)]
            shown = [a * (e / r if r > 0 else 0.0) for a, e, r in zip(add, lc.ep_overlapped, raw)]
            rows.append((what, *[1e3 * x for x in add + shown], how))
    rows += _fsdp_rows(plan, s.lt, lay, lc, arch_key)
    return rows


def _fsdp_rows(plan: Plan, lt, lay, lc, arch_key: str) -> list[tuple[str, float, float, float, float, str]]:
    """FSDP (``dp_sharding = "full"``) rows of :func:`comm_rows`: one layer's gathers and
    reduce-scatters per micro-batch as the layer step (``cost/fsdp.py``) prices them."""
    p, m = plan.parallel, plan.model
    if not lc.fsdp:
        return []
    eb = lc.fsdp_bytes
    pe, gd, ge = eb.param, eb.grad, eb.expert_grad
    if p.pp > 1 and p.fsdp_pp_grad_sync == "schedule":
        how = "torch pipelining: gathered once per schedule, reduce-scattered after the stage's last backward (dp_comm)"
    elif p.pp > 1:
        how = "per micro-batch (the stage module is not the FSDP root): prefetched behind the layer"
    else:
        how = "per micro-batch, prefetched behind the layer"
    dt = f"; gather {int(8 * pe)}-bit, grads {int(8 * gd)}-bit" + (f", expert grads {int(8 * ge)}-bit" if ge != gd else "")
    reshard = lc.fsdp_reshard
    rows = []
    for moe in ((False, True) if m.is_moe and lt.moe_layer is not None else (False,)):
        ag_d, ag_e, rs_d, rs_e = lc.fsdp_units[moe]
        ex = lc.fsdp_moe if moe else lc.fsdp_dense
        who = (f"FSDP {'MoE' if moe else 'dense'} layer, {lay.dp_shard.size} ranks over {lay.dp_shard.nodes} domain(s)"
               + (f", experts over {lay.expert_dp.size} ranks / {lay.expert_dp.nodes} domain(s)" if ag_e else ""))
        rows.append((who, 1e3 * (ag_d + ag_e), 1e3 * (rs_d + rs_e + (ag_d + ag_e if reshard else 0.0)), 1e3 * ex[0],
                     1e3 * ex[1], f"{arch_key}; {how}{dt}" + ("; re-gathered in backward" if reshard else "")))
        if moe:
            nf, nb = lc.fsdp_ep_nic
            if nf or nb:
                rows.append(("  of which: EP phases slowed by FSDP traffic on the same NIC", 1e3 * nf, 1e3 * nb,
                             1e3 * nf, 1e3 * nb, "fsdp.fsdp_ep_nic_sharing (even NIC share; DeepEP README: "
                                                 "traffic isolation)"))
    if p.pp > 1 and p.fsdp_pp_grad_sync == "microbatch":
        for moe in sorted({m.is_moe_layer(0), m.is_moe}):
            ef, eb_ = lc.fsdp_edges[(moe, False, False)]
            rows.append((f"FSDP chunk start / end, first layer {'MoE' if moe else 'dense'} (per chunk pass)",
                         1e3 * ef, 1e3 * eb_, 1e3 * ef, 1e3 * eb_,
                         "FSDP2 root pre-forward orders the gathers after compute; post-backward callback waits "
                         "for the reduce-scatters (fsdp.fsdp_microbatch_edges)"))
        head = lc.fsdp_edges[(m.is_moe, False, True)][0] - lc.fsdp_edges[(m.is_moe, False, False)][0]
        if head > 0:
            rows.append(("FSDP output-layer gather (its own FSDP root; loss chunk, per pass)", 1e3 * head, 0.0,
                         1e3 * head, 0.0, "fsdp.fsdp_microbatch_edges (head)"))
    return rows


def framework_rows(plan: Plan) -> list[tuple[str, str]]:
    """The framework profile's terms (module doc of ``cost/framework.py``)."""
    from primus_launch.projection.cost.compute import arch_of
    from primus_launch.projection.cost.dp_comm import dp_sync_line
    from primus_launch.projection.cost.fp8 import recipe_of
    from primus_launch.projection.cost.framework import graph_scopes, profile_of
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import scaleup_domain

    gpu = plan.cluster.gpu
    arch = arch_of(gpu)
    prof = profile_of(plan, arch)
    k = layer_op_times(plan)["_kernels"]
    host = FITTED.get("host", {})
    mode = "compile" if prof.name.endswith("compile") else "eager"
    t = plan.training
    from primus_launch.projection.cost.attention_block import rope_fused
    from primus_launch.projection.cost.bias_dropout_add import te_grouped_mlp_bias

    m = plan.model
    rope = "fused" if rope_fused(prof, m) else ("Megatron unfused (YaRN mscale)" if prof.fused_rope else "eager")
    extra = ""
    fused_mlp = t.moe_grouped_gemm and t.moe_expert_gemm == "te_fused" and prof.name == "megatron-te"
    if te_grouped_mlp_bias(m, prof, t.moe_grouped_gemm):
        extra = ("; biases: " + ("expert biases in the fused grouped MLP's epilogues" if fused_mlp else
                                 "TEGroupedMLP per-expert FC2 bias x probs")
                 + ", bias-dropout-add unfused (TEGroupedMLP asserts bias_dropout_fusion off)")
    if fused_mlp:
        extra += "; experts: TE op-fuser grouped MLP (no eager clamp, no per-expert bias loop)"
    elif m.activation_clamp and m.swiglu and m.is_moe and prof.name == "megatron-te":
        extra += f"; activation clamp {m.activation_clamp:g} unfused (clamp, clamp, cat)"
    if m.softmax_type != "vanilla" and prof.name == "megatron-te" and prof.attention == "cudnn":
        extra += f"; softmax {m.softmax_type} (sinks): TE disables FlashAttention, cuDNN fused attention"
    if prof.fused_norm:
        norms = "fused"
    elif m.normalization == "rmsnorm":
        ver = plan.software.torch or "current"
        norms = f"eager ({'torch fused' if prof.torch_fused_rms else 'composite'} RMSNorm, torch {ver})"
    else:
        norms = "eager"
    rows = [
        ("profile", f"{prof.name}: norms {norms}, activation "
                    f"{'fused' if prof.fused_act else 'eager'}, RoPE {rope}, "
                    f"attention {prof.attention}, cross-entropy {prof.ce}{extra}"),
        ("host launch per kernel", f"{1e6 * prof.host_per_kernel:.1f} us ({mode}; fitted to "
                                   f"{', '.join(host.get(mode, {}).get('records', []))}"
                                   + (f"; x{prof.host_cpu_factor:.2f} on this GPU's {get_gpu(gpu).host_cpu} host, "
                                      "records te2053-torch-linear-cpu-*" if prof.host_cpu_factor != 1.0 else "") + ")"),
        (("kernels per dense layer (fwd / bwd)", f"{k['dense'][0]} / {k['dense'][1]}"
          + (f"; MoE layer {k['moe'][0]} / {k['moe'][1]}" if "moe" in k else "")) if "dense" in k else
         ("kernels per hybrid layer (fwd / bwd)", "; ".join(f"{kind[7:]} {k[kind][0]} / {k[kind][1]}"
                                                            for kind in HYBRID_KINDS if kind in k))),
        # "none scopes -" read as a garbled phrase where no graph is captured
        ("CUDA graphs", (f"{t.cuda_graph_impl}, scopes {', '.join(sorted(graph_scopes(plan)))}" if graph_scopes(plan)
                         else "none (eager)" if t.cuda_graph_impl == "none" else f"{t.cuda_graph_impl}, no scope")),
        *([("MoE routing (busiest EP rank)", _routing_line(plan))] if m.is_moe else []),
        *([("MoE expert GEMMs / dispatcher sync", _moe_host_path_line(plan, prof))] if m.is_moe else []),
        ("host vs GPU per layer (ms, fwd / bwd)", _host_line(plan)),
        ("in-situ efficiency", f"{cal.framework_eff(plan.framework):.3f} (calibration.FRAMEWORK_EFF[{plan.framework}], "
                               f"fitted on the validation's calibration rows: scripts/calibrate.py --show)"),
        ("sustained clock", f"{cal.sustained_clock(gpu, get_gpu(gpu).sustained_clock_fraction, arch):.3f} "
                            "(calibration.SUSTAINED_CLOCK, power-limited architectures)"),
        ("power headroom", _power_headroom_line(gpu)),
        ("power cap", _power_cap_line(gpu)),
        ("scale-up domain", f"{scaleup_domain(plan)} GPUs"),
        *([("data-parallel gradient sync", dp_line)] if (dp_line := dp_sync_line(plan)) else []),
        ("SM contention", _contention_line(plan)),
        *([("manual garbage collection", gc_line)] if (gc_line := _manual_gc_line(plan)) else []),
    ]
    if t.precision in ("fp8", "fp4"):
        rows.append(("low-precision recipe", f"{recipe_of(plan)}" + (", FP8 parameter all-gather" if t.fp8_param_gather else "")))
    return rows


def _manual_gc_line(plan: Plan) -> str | None:
    """The manual garbage collection's share of the iteration (``cost/manual_gc.py``), None where none is priced."""
    from primus_launch.projection.cost.manual_gc import HEAP_TRACKED_OBJECTS, manual_gc_s

    per_step = manual_gc_s(plan)
    if per_step <= 0:
        return None
    n = plan.training.manual_gc_interval
    pause = per_step * n   # one collection (manual_gc_s = gc_pause_s / interval)
    return (f"{1e3 * per_step:.1f} ms per iteration (in the optimizer row): one full gc.collect() of >= "
            f"{HEAP_TRACKED_OBJECTS / 1e3:.0f}k tracked objects ({1e3 * pause:.0f} ms at "
            f"{1e6 * pause / HEAP_TRACKED_OBJECTS:.2f} us each, sgl-project/sglang#28067 on this host) every {n} "
            f"iterations (--manual-gc-interval)")


def _power_headroom_line(gpu: str) -> str:
    from primus_launch.projection.hardware.gpus import get_gpu

    g = get_gpu(gpu)
    h = cal.power_headroom(g.tdp_watts, g.peak_power_w, g.arch)
    if h == 1.0:
        return "none (datasheet peaks stated at the rated power)"
    clk = cal.sustained_clock(gpu, g.sustained_clock_fraction, g.arch)
    return (f"rated {g.tdp_watts:g} W, peaks stated at {g.peak_power_w:g} W: compute-bound kernels x {h:.3f} "
            f"((rated / stated) ** {cal.POWER_CAP_EXPONENT}, calibration.power_headroom), sustained "
            f"{min(1.0, clk * h):.3f} of the kernel benchmarks (ceiling 1); records triton-gb300-gemm-1400w, "
            f"mamf-bf16-gb200")


def _power_cap_line(gpu: str) -> str:
    from primus_launch.projection.hardware.gpus import get_gpu

    g = get_gpu(gpu)
    f = cal.power_cap_factor(g.power_limit_w, g.tdp_watts)
    if f >= 1.0:
        return f"none (rated {g.tdp_watts:g} W)" if g.tdp_watts else "none"
    return (f"{g.power_limit_w:g} W of the rated {g.tdp_watts:g} W: compute-bound kernels x {f:.3f} "
            f"((cap / rated) ** {cal.POWER_CAP_EXPONENT}, calibration.power_cap_factor; records triton-gb300-gemm-*, "
            f"fbgemm-*)")


def _moe_host_path_line(plan: Plan, prof) -> str:
    """How the MoE layer's experts are launched and whether its dispatcher synchronises with the host
    (``cost/roofline.py``: ``training.moe_expert_gemm``, ``training.moe_sync_free``, CUDA-graph scopes)."""
    from primus_launch.projection.cost.framework import graph_scopes

    t = plan.training
    if prof.name != "megatron-te":
        gem = "torch._grouped_mm, one kernel" if t.moe_grouped_gemm else "one GEMM per expert"
    elif not t.moe_grouped_gemm:
        gem = "one GEMM per expert (SequentialMLP)"
    else:
        gem = {"te": "TE GroupedLinear: one BLAS GEMM per local expert on 4 streams",
               "legacy": "legacy grouped_gemm: one BLAS GEMM per local expert on 4 streams, BF16 experts",
               "turbo": "Primus-Turbo grouped GEMM: one kernel, group sizes on the device",
               "te_fused": "TE op-fuser grouped MLP: CuTeDSL grouped GEMMs with the activation and biases in "
                           "their epilogues under MXFP8 / NVFP4 on Blackwell, else TE's basic ops (per-expert GEMMs, "
                           "one activation kernel)"}[t.moe_expert_gemm]
    if "experts" in t.bf16_linears and t.precision in ("fp8", "fp4"):
        gem += ", BF16 experts (no grouped-experts converter: only the linears run the low precision)"
    if t.moe_sync_free:
        sync = "no host sync (Primus-Turbo sync-free MoE: device token counts, worst-case token budget)"
    elif (t.moe_pad_expert_input_to_capacity and t.moe_expert_capacity_factor is not None
          and t.moe_token_dispatcher == "alltoall" and prof.name == "megatron-te"):
        sync = ("no host sync (token drop padded to the capacity: the alltoall dispatcher's counts are static, "
                "megatron-core token_dispatcher.py drop_and_pad)")
    elif "moe" in graph_scopes(plan):
        sync = "no host sync (the MoE layer is inside a CUDA graph: static shapes)"
    elif prof.name == "megatron-te" or plan.parallel.ep > 1:
        sync = ("one host sync per MoE forward: the ops after it and the next layer's up to it launch into an idle "
                "GPU, walked kernel by kernel (host_sync.launch_bound_seconds)")
    else:
        sync = "none"
    return f"{gem}; {sync}"


def _host_line(plan: Plan) -> str:
    """Per decoder-layer kind, host launch time vs GPU time of each pass (``layer_ops.LayerOps.host_summary``):
    a pass whose host time is longer is host-bound."""
    from primus_launch.projection.cost.roofline import layer_op_times

    hs = layer_op_times(plan).get("_host", {})
    parts = []
    for kind in ("dense", "moe", *HYBRID_KINDS):
        if kind not in hs:
            continue
        hf, hb, gf, gb = hs[kind]
        bound = [p for p, h, g in (("fwd", hf, gf), ("bwd", hb, gb)) if h > g]
        parts.append(f"{kind}: host {1e3 * hf:.2f} / {1e3 * hb:.2f} vs GPU {1e3 * gf:.2f} / {1e3 * gb:.2f}"
                     + (f" (host-bound {', '.join(bound)})" if bound else ""))
    return "; ".join(parts) or "-"


def _contention_line(plan: Plan) -> str:
    """Which overlapped communication holds SMs in this plan (cost/contention.py)."""
    from primus_launch.plan.userbuffers import UB_NAMES, ub_default
    from primus_launch.projection.cost import contention as con

    t, p = plan.training, plan.parallel
    parts = []
    if t.tp_comm_overlap and p.tp > 1 and plan.framework == "megatron":
        over = {c[0]: c[1:] for c in t.tp_comm_overlap_cfg}
        cells = []
        for name in UB_NAMES:
            method, n, margin = over.get(name, ub_default(name))
            if method != "external" and n > 1:
                cells.append(f"{name} {method} {n} SMs{' margin' if margin else ''}")
        parts.append("TE userbuffers (" + ("--tp-comm-overlap-cfg" if over else "TE defaults") + "): "
                     + (", ".join(cells) or "copy-engine ring exchange only"))
    if plan.model.is_moe and p.ep > 1:
        from primus_launch.projection.hardware.placement import layout

        n_ep = con.ep_sms(t.moe_token_dispatcher, layout(plan).ep.nodes, t.moe_dispatcher_num_sms)
        parts.append(f"EP {t.moe_token_dispatcher}: {n_ep} SMs while overlapped")
    parts.append(f"overlapped NCCL collectives: {con.NCCL_SMS} SMs")
    from primus_launch.projection.hardware.gpus import get_gpu

    arch = get_gpu(plan.cluster.gpu).arch
    if arch in con.STATIC_TAIL:
        parts.append(f"{arch} static persistent GEMMs lose >= {100 * con.STATIC_TAIL[arch]:.0f}% of their rate "
                     "while overlapped (tail effect)")
    return "; ".join(parts)


def _routing_line(plan: Plan) -> str:
    """The router's mode and the busiest EP rank's excess it implies (``cost/moe_imbalance.py``)."""
    from primus_launch.projection.cost.moe_imbalance import plan_imbalance

    imb = plan_imbalance(plan)
    if imb.mode == "round_robin":
        from primus_launch.projection.cost.moe_routing import round_robin_units_hit

        m = plan.model
        d = round_robin_units_hit(m.num_experts, m.moe_router_topk, max(1, m.num_experts // plan.parallel.ep))
        who = ("TorchTitan's debug.moe_force_load_balance" if plan.framework == "torchtitan"
               else "Primus-Turbo's DeepEP dispatcher")
        return (f"forced balance through {who}: token i to the {m.moe_router_topk} experts "
                f"from i x {m.moe_router_topk} mod {m.num_experts} (round robin): every expert the same count, "
                f"{d:.2f} destination ranks per token (cost/moe_routing.py round_robin_units_hit)")
    why = {"forced": "--moe-router-force-load-balancing: random logits, sampling spread only",
           "aux_loss": "load-balancing loss: a trained router's spread (shawntan/scattermoe#10) + sampling",
           "expert_bias": "expert-bias balancing: priced with the trained router's spread (no measurement of its own)",
           "none": "no balancing: priced with the trained router's spread, a lower bound"}[imb.mode.split(",")[0]]
    t = plan.training
    if t.moe_expert_capacity_factor is not None and t.moe_pad_expert_input_to_capacity:
        why = ("megatron-core moe_utils / token_dispatcher drop_and_pad: the routing map is the capacity mask, so "
               "the router's spread does not reach the step (cost/moe_imbalance.py capped)")
    elif t.moe_expert_capacity_factor is not None:   # dropping without padding: a bound on the busiest rank
        why = (f"token drop at capacity factor {t.moe_expert_capacity_factor:g}: no rank above the factor x the mean "
               "(cost/moe_imbalance.py capped); " + why)
    return f"{imb.text()}; {why}"


def _clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters for a table column, with "..." where it was cut (a source
    cut silently read as whole: "github.com/samuel-bohm")."""
    return text if len(text) <= width else text[: width - 3] + "..."


def explain_text(plan: Plan, result: Optional[ProjectionResult] = None) -> str:
    """The explanation as plain-text tables (module doc)."""
    from primus_launch.projection.hardware.gpus import resolve_power_cap

    plan = resolve_power_cap(plan)
    from tabulate import tabulate

    out = []
    rows = op_rows(plan)
    for kind in KINDS:
        sel = [r for r in rows if r.kind == kind]
        if not sel:
            continue
        body = [(_clip(r.name, 58), f"{r.fwd_ms:.3f}", f"{r.bwd_input_ms:.3f}", f"{r.bwd_weight_ms:.3f}", r.efficiency,
                 _clip(r.source, 110)) for r in sel]
        tot = [sum(getattr(r, a) for r in sel) for a in ("fwd_ms", "bwd_input_ms", "bwd_weight_ms")]
        # "GPU + host rows" only where the table has host rows (user14: it was said of tables with none)
        host = any(r.efficiency in (_PLAIN_KINDS["host"], _PLAIN_KINDS["host_ops"]) for r in sel)
        body.append((f"sum (pass time{': GPU + host rows' if host else ''})", *(f"{x:.3f}" for x in tot), "", ""))
        # figures as written, to 3 decimals (tabulate's number parsing printed 3.400 as "3.4" and 0.000 as "0")
        out.append(f"{kind} layer: one micro-batch on one GPU (ms)\n"
                   + tabulate(body, headers=["op", "fwd", "bwd_in", "bwd_w", "efficiency", "source"], tablefmt="simple",
                              disable_numparse=True, colalign=("left", "right", "right", "right", "left", "left")))
    comm = [(_clip(w, 70), f"{a:.3f}", f"{b:.3f}", f"{c:.3f}", f"{d:.3f}", _clip(src, 90)) for w, a, b, c, d, src in comm_rows(plan)]
    out.append("communication of one layer, one micro-batch (ms)\n"
               + tabulate(comm, headers=["collective", "raw fwd", "raw bwd", "exposed fwd", "exposed bwd", "priced on"],
                          tablefmt="simple", disable_numparse=True,
                          colalign=("left", "right", "right", "right", "right", "left")))
    out.append("framework profile\n" + tabulate(framework_rows(plan), tablefmt="simple"))
    if result is not None:
        bd = [(k, f"{1e3 * v:.1f}", f"{100 * v / (result.iteration_time_s or 1):.1f}") for k, v in result.time_breakdown.items()]
        out.append("iteration breakdown\n" + tabulate(bd, headers=["component", "ms", "%"], tablefmt="simple"))
        if getattr(result, "band", None) is not None:
            out.append(f"expected error of the iteration time: {result.band.text()}; {result.band.statistic} "
                       "(projection/band.py)")
    return "\n\n".join(out)


def explain_html(plan: Plan) -> str:
    """The per-kernel and communication tables as HTML (for ``report_html``)."""
    from primus_launch.projection.hardware.gpus import resolve_power_cap

    plan = resolve_power_cap(plan)
    from html import escape

    def table(rows, headers):
        h = "<tr>" + "".join(f"<th>{escape(x)}</th>" for x in headers) + "</tr>"
        return "<table>" + h + "".join("<tr>" + "".join(f"<td>{escape(str(x))}</td>" for x in r) + "</tr>"
                                       for r in rows) + "</table>"
    parts = []
    rows = op_rows(plan)
    for kind in KINDS:
        sel = [r for r in rows if r.kind == kind]
        if sel:
            parts.append(f"<h3>{escape(kind)} layer (one micro-batch, one GPU, ms)</h3>" + table(
                [(r.name, f"{r.fwd_ms:.3f}", f"{r.bwd_input_ms:.3f}", f"{r.bwd_weight_ms:.3f}", r.efficiency, r.source)
                 for r in sel], ["op", "fwd", "bwd_in", "bwd_w", "efficiency", "source"]))
    parts.append("<h3>Communication of one layer (ms)</h3>" + table(
        [(w, f"{a:.3f}", f"{b:.3f}", f"{c:.3f}", f"{d:.3f}", s) for w, a, b, c, d, s in comm_rows(plan)],
        ["collective", "raw fwd", "raw bwd", "exposed fwd", "exposed bwd", "priced on"]))
    parts.append("<h3>Framework profile</h3>" + table(framework_rows(plan), ["term", "value"]))
    return "".join(parts)
