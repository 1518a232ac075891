"""Probe the held-out MoE rows (issue 28): what one switch of a row's plan does to its dry-run projection, and
how busy DeepSeek's public DualPipe training profile keeps its compute streams.

Diagnostics only: nothing here changes the model or the validation rows.

1. ``--row ID``: the row's projection as built, then with one plan field switched at a time
   (``overlap_moe_expert_parallel_comm`` off, recompute off, forced-balance routing off); with
   ``--as-mxfp8`` the row projected with ``training.precision = fp8`` and ``fp8_recipe = mxfp8`` (e.g. the
   TorchTitan Llama 4 Scout MXFP8 row, whose plan the builder leaves in BF16: its ``quantization`` entry is a
   note, not a config key the TorchTitan adapter reads).  Each line: tokens/s/GPU, iteration seconds and the
   error against the row's measured tokens/s/GPU.
2. ``--dualpipe``: DeepSeek's ``train.json`` (github.com/deepseek-ai/profile-data, a pair of DualPipe
   forward / backward chunks of 4 DeepSeek-V3 MoE layers, EP64, H800): the trace's span, the union of its
   compute-stream kernels (every stream but DeepEP's, 27) and the gaps longer than 50 us between them --
   how much of the step a best-case two-chunk overlap leaves the compute idle.  Reads the trace from the
   local mirror (``/work/.mirror/deepseek-ai+profile-data/repo``) or ``--trace PATH``.
3. ``--bridge3868``: Megatron-Bridge PR #3868's A/B (records ``mbridge3868-*``: Qwen3-30B-A3B on 16 H100, EP 16, MBS
   1, all-to-all, eager vs TE-scoped graphs attn / moe_router / moe_preprocess) projected from the Bridge H100
   Qwen3-30B row switched to what the PR ran (the plan ``tests/test_moe_host.py`` checks).
   With ``--row``, ``--walk`` also prints the row's MoE layer pair as ``cost/ep_overlap.py`` walks it (Megatron's
   1F1B all-to-all overlap): its compute and dispatcher seconds and what the walk leaves exposed per pair.
4. ``--bridge5094``: Megatron-Bridge PR #5094's A/B of the 1F1B all-to-all overlap alone (records ``mbridge5094-*``:
   Qwen3-30B-A3B on 16 H100, EP 16, HybridEP, overlap off 24.71 / on 20.99 s per iteration) projected, and the
   on / off ratio beside the measured one (the plan ``tests/test_ep_overlap.py`` checks).
5. ``--torch-grouped``: the dry-run's ``torch._grouped_mm`` BF16 and MXFP8 times (forward + dgrad + wgrad, GEMMs
   only) at the shapes of torchao's autograd-function table (records ``ao-b200-gg-*``, whose MXFP8 time includes
   the quantisation kernels) beside that table's BF16 / MXFP8 ratio.
6. ``--per-layer``: seconds per (layer x micro-batch) on one pipeline stage, measured and projected, of the public
   Qwen3-235B-A22B runs on x86 DGX Blackwell (``PER_LAYER_CASES``: the B200 rows of both frameworks, Bridge's B300
   preset with the NCCL all-to-all (26.04) and with HybridEP (26.04.01)), the model's host / GPU / dispatcher
   seconds of one MoE layer and micro-batch, and ``a + b x tokens`` fitted to the all-to-all cases (MBS 1 and 2).
   ``--row ID --set section.field=JSON [--measured TOK]`` switches the row's plan first.
7. ``--qwen30``: the Qwen3-30B-A3B runs on GB200 (issue 28: Megatron-LM's EP16 rows, Bridge's EP8 siblings), seconds
   per (layer x micro-batch) measured and projected with the MoE layer's host / GPU / dispatcher split
   (``QWEN30_CASES``; the Megatron-LM rows at both public measurements of the same recipes: the moe_recipes README
   at d48bd6be and Megatron-LM PR #5728's re-measurement), the public A/B ratios beside the projected ones
   (MXFP8 + TE-scoped graphs against BF16 eager; the paged stash with the full-iteration graph against the partial
   graphs; Megatron-LM EP16 on 16 GPUs against Bridge EP8 on 8, per layer and micro-batch), and the Megatron-LM
   MXFP8 row with one field switched at a time.
8. ``--dsv3-b300``: Megatron-Bridge's DeepSeek-V3 MXFP8 runs on 256 x86 DGX B300 / B200 (issue 28: the B300 row
   +22 %, its B300 / B200 pair measured 1.04x, modelled 1.26x), measured and projected at both public recipes
   (``DSV3_B300_CASES``): the 26.04 table, where B300 and B200 ran one recipe (PP 16, EP 8 HybridEP, MBS 1, no
   CUDA graphs: ``deepseek_workload_base_configs.py`` @f171d7d30, B300_V2 and B200_V2 both V1 + GBS 4096), and the
   26.04.01 table (the rows).  The same-recipe pair is what tests ``calibration.power_headroom`` on a MoE step;
   the recipe steps (26.04 -> 26.04.01 on each SKU) what tests the rest.

9. ``--a2a-path``: issue 28's hypothesis that Megatron's NCCL all-to-all dispatcher (``MoEAlltoAllTokenDispatcher``)
   inside one 8-GPU node is underpriced, part by part on the x86 DGX Qwen3-235B cases of ``--per-layer``: each NCCL
   all-to-all call of the layer (size per rank and per peer) priced by the model and by the most pessimistic reading of
   the one public single-node alltoall_perf run with an average (OCI B300, NCCL 2.28.9: its 8 GiB bus bandwidth and the
   per-call fixed cost that makes ``t = busbytes / B + l`` reproduce its printed average over 512 KiB .. 8 GiB); the
   dispatcher's copy kernels (permute, sort chunks, TE Fp8 pad / unpad, unsort, unpermute) and the HBM fraction they
   would need to close each case's gap alone; the host syncs priced per layer.
10. ``--b300-diff``: issue 28's Bridge DeepSeek-V3 B300 row against its 26.04.01 siblings (B200 / GB200 / GB300): each
   row's host CPU, NIC rate, scale-up domain, EP span, local experts and tokens per local expert, with seconds per
   (layer x micro-batch) measured and projected; the B300's hardware-database terms switched one at a time (host priced
   as Grace, NIC at 50 / 25 GB/s, NVLink at 450 GB/s: a what-if GPU registered under its own name) on the row and on its
   twin on the same DGX B300 cluster (Bridge Qwen3-235B, PP 8, EP 8 HybridEP, MBS 2); the row with fewer, larger local
   experts; and the NVIDIA Megatron-family MoE rows (GPT-OSS aside) split by tokens per local expert, beside the best
   cuBLAS shapes of the public MAMF sweeps on Blackwell.

    python scripts/moe_probe.py --row mlm_moe_qwen3_235b_h100_bf16_256gpu_tp2pp8ep32
    python scripts/moe_probe.py --row torchtitan_gb200_llama4_scout_mxfp8 --as-mxfp8
    python scripts/moe_probe.py --dualpipe
    python scripts/moe_probe.py --bridge3868 --torch-grouped
    python scripts/moe_probe.py --per-layer
    python scripts/moe_probe.py --qwen30
    python scripts/moe_probe.py --dsv3-b300
    python scripts/moe_probe.py --a2a-path
    python scripts/moe_probe.py --b300-diff
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "scripts" / "validation" / "runs.json"
MIRROR = Path("/work/.mirror/deepseek-ai+profile-data/repo")
DEEPEP_STREAM = 27


def _project(plan: dict) -> tuple[float, float]:
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    res = project_dry_run(Plan.model_validate(plan))
    return res.tokens_per_sec_per_gpu, res.iteration_time_s


def walk_row(plan) -> None:
    """The row's MoE layer pair under Megatron's 1F1B all-to-all overlap (``cost/ep_overlap.py``)."""
    from primus_launch.projection.cost import ep_comm as ec
    from primus_launch.projection.cost.ep_overlap import exposed_per_layer, exposed_per_step
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    from primus_launch.projection.cost.tp_comm import tp_exposed, tp_layer_comm

    lt, spec, lay = layer_times_roofline(plan), get_gpu(plan.cluster.gpu), layout(plan)
    f, b = ec.ep_layer_comm(plan, spec, lay)
    tp = tp_exposed(plan, tp_layer_comm(plan, spec, lay, moe=True), lt, spec, lay)
    pair = ec.moe_layer_pair(plan, lt, f, b, tp)
    c, n = ec.walk_contention(plan, spec), ec.moe_layers_per_step(plan)
    moved = ec.permutes_on_comm(plan, lt)   # permutes the walk runs on the communication stream
    exp = max(0.0, max(exposed_per_layer(pair, c=c), exposed_per_step(pair, n, c) / n) - moved)
    print(f"  1F1B overlap walk per MoE layer pair: compute {1e3 * (pair.compute_s + moved):.2f} ms, dispatcher "
          f"{1e3 * (f + b):.2f} ms, exposed {1e3 * exp:.2f} ms ({n} layer(s) per step, compute at "
          f"{100 * (1 - c):.0f} % beside the dispatcher)")


def probe_row(row_id: str, as_mxfp8: bool, walk: bool = False, sets: list[str] | None = None,
              measured: float | None = None) -> int:
    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    if row_id not in rows:
        print(f"--row: {row_id!r} is not a row of {RUNS.relative_to(ROOT)}", file=sys.stderr)
        return 2
    row = copy.deepcopy(rows[row_id])
    for item in sets or []:   # --set section.field=JSON: the row's plan switched before every case
        key, _, val = item.partition("=")
        sec, _, field = key.partition(".")
        if sec not in row["plan"] or not field or not val:
            print(f"--set: {item!r} is not section.field=JSON over the plan's sections "
                  f"({', '.join(row['plan'])})", file=sys.stderr)
            return 2
        row["plan"][sec][field] = json.loads(val)
    meas = measured if measured is not None else row["measured_tokens_per_sec_per_gpu"]

    def switched(**fields) -> dict:
        p = copy.deepcopy(row["plan"])
        for k, v in fields.items():
            if k == "recompute":
                p["training"]["recompute"]["granularity"] = v
            else:
                p["training"][k] = v
        return p

    cases = [("as built", row["plan"]),
             ("EP overlap off", switched(overlap_moe_expert_parallel_comm=False)),
             ("recompute off", switched(recompute="none")),
             ("forced balance off", switched(moe_router_force_load_balancing=False))]
    if as_mxfp8:
        cases.append(("as MXFP8 (precision fp8, recipe mxfp8)", switched(precision="fp8", fp8_recipe="mxfp8")))
    print(f"{row_id}: measured {meas:.1f} tokens/s/GPU")
    for name, plan in cases:
        tok, it = _project(plan)
        print(f"  {name:40s} {tok:9.1f} tokens/s/GPU  {it:8.3f} s/iter  {100 * (tok - meas) / meas:+6.1f}%")
    if walk:
        from primus_launch.plan import Plan

        walk_row(Plan.model_validate(row["plan"]))
    return 0


def _union(intervals: list[tuple[int, int]]) -> tuple[int, list[tuple[int, int]]]:
    """Total covered length of ``intervals`` and the gaps between them (start, length)."""
    iv = sorted(intervals)
    total, gaps = 0, []
    s, e = iv[0]
    for a, b in iv[1:]:
        if a > e:
            total += e - s
            gaps.append((e, a - e))
            s, e = a, b
        else:
            e = max(e, b)
    return total + e - s, gaps


def probe_dualpipe(trace_path: str | None) -> int:
    if trace_path:
        trace = json.loads(Path(trace_path).read_text())
    else:
        out = subprocess.run(["git", "-C", str(MIRROR), "show", "HEAD:train.json"], capture_output=True, check=True)
        trace = json.loads(out.stdout)
    ks = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    t0 = min(e["ts"] for e in ks)
    t1 = max(e["ts"] + e["dur"] for e in ks)
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in ks if e["args"]["stream"] != DEEPEP_STREAM]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in ks if e["args"]["stream"] == DEEPEP_STREAM]
    busy, gaps = _union(comp)
    cbusy, _ = _union(comm)
    long_gaps = [g for g in gaps if g[1] > 50]
    span = t1 - t0
    print(f"DualPipe chunk pair (4 MoE layers forward + 4 backward): span {span / 1e3:.2f} ms")
    print(f"  compute streams busy {busy / 1e3:.2f} ms ({100 * busy / span:.1f}% of the span); DeepEP stream busy "
          f"{cbusy / 1e3:.2f} ms (notify waits included)")
    print(f"  compute idle gaps > 50 us: {len(long_gaps)}, {sum(g[1] for g in long_gaps) / 1e3:.2f} ms in all")
    return 0


def bridge3868_plans() -> tuple:
    """(eager, TE-scoped graphs) plans of Megatron-Bridge PR #3868's A/B (module doc, item 3)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    d = copy.deepcopy(rows["mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu"]["plan"])
    d["training"].update(precision="bf16", fp8_recipe=None, fp8_param_gather=False, moe_token_dispatcher="alltoall",
                         overlap_moe_expert_parallel_comm=False, delay_wgrad_compute=False, global_batch_size=1024,
                         micro_batch_size=1)
    base = Plan.model_validate(d)
    cg = base.model_copy(deep=True)
    cg.training.cuda_graph_impl, cg.training.cuda_graph_scope = "transformer_engine", ["attn", "moe_router",
                                                                                    "moe_preprocess"]
    return base, cg


def bridge5094_plans() -> tuple:
    """(overlap off, overlap on) plans of Megatron-Bridge PR #5094's A/B (records ``mbridge5094-*``): the
    Bridge H100 Qwen3-30B row in BF16 with HybridEP, MBS 1, GBS 1024, TE graphs moe_router / moe_preprocess,
    no delayed wgrad; only ``overlap_moe_expert_parallel_comm`` differs."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    d = copy.deepcopy(rows["mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu"]["plan"])
    d["training"].update(precision="bf16", fp8_recipe=None, fp8_param_gather=False, moe_token_dispatcher="hybridep",
                         overlap_moe_expert_parallel_comm=False, delay_wgrad_compute=False, global_batch_size=1024,
                         micro_batch_size=1, cuda_graph_impl="transformer_engine",
                         cuda_graph_scope=["moe_router", "moe_preprocess"])
    off = Plan.model_validate(d)
    on = off.model_copy(deep=True)
    on.training.overlap_moe_expert_parallel_comm = True
    return off, on


def probe_bridge5094() -> int:
    from primus_launch.projection.cost import evidence as ev
    from primus_launch.projection.dryrun import project_dry_run

    times = []
    for name, plan in zip(("off", "on"), bridge5094_plans()):
        rec = ev.record(f"mbridge5094-h100-qwen3-30b-a3b-hybridep-overlap-{name}-step")
        t = project_dry_run(plan).iteration_time_s
        times.append((rec["value"], t))
        print(f"Bridge PR #5094 overlap {name:3s}: measured {rec['value']:.2f} s/iter, projected {t:.2f} s/iter")
    print(f"  on / off: measured {times[1][0] / times[0][0]:.3f}, projected {times[1][1] / times[0][1]:.3f}")
    return 0


def probe_bridge3868() -> int:
    from primus_launch.projection.cost import evidence as ev
    from primus_launch.projection.dryrun import project_dry_run

    for name, plan in zip(("eager", "te-graphs"), bridge3868_plans()):
        rec = ev.record(f"mbridge3868-h100-qwen3-30b-a3b-{name}-step")
        t = project_dry_run(plan).iteration_time_s
        print(f"Bridge PR #3868 {name:9s}: measured {rec['value']:.2f} s/iter, projected {t:.2f} s/iter "
              f"({100 * (rec['value'] - t) / rec['value']:+.1f}% faster)")
    return 0


def probe_torch_grouped() -> int:
    sys.path.insert(0, str(ROOT))
    from primus_launch.projection.cost import evidence as ev
    from primus_launch.projection.cost.compute import gemm_time

    for model, n, k in (("Llama4", 8192, 5120), ("DeepSeek-V3", 2048, 7168)):
        for g in (1, 8):
            recs = {dt: ev.record(f"ao-b200-gg-{model}-G{g}-{dt}") for dt in ("bf16", "mxfp8")}
            m = recs["bf16"]["shape"]["total_m"] // g
            t = {f: sum(gemm_time(*s, "b200", "bf16", g, f, "torch", wgrad=w)
                        for *s, w in ((m, n, k, False), (m, k, n, False), (k, n, m, True)))
                 for f in ("bf16", "mxfp8")}
            print(f"torch grouped {model:11s} G{g}: dry-run BF16 / MXFP8 GEMMs {t['bf16'] / t['mxfp8']:.2f}x; "
                  f"torchao table BF16 / MXFP8 (quantisation included) "
                  f"{recs['mxfp8']['value'] / recs['bf16']['value']:.2f}x")
    return 0


# --per-layer: public throughputs of Qwen3-235B-A22B on x86 DGX Blackwell (EP inside or across 8-GPU nodes),
# each (label, runs.json row, plan fields switched, measured tokens/s/GPU, where the figure and the config come from)
PER_LAYER_CASES = (
    ("Bridge B200 MBS1 all-to-all (26.04.01)", "mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu", {}, 3776.0,
     "Bridge docs/performance-summary-archive.md 26.04.01, config v0.4.2 (the row)"),
    ("Bridge B200 MBS1 all-to-all (26.02.01)", "mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu", {}, 3805.0,
     "same archive, 26.02.01 table: same GPUs / GBS / MBS / TP / PP / EP, no VP"),
    ("Bridge B300 MBS2 all-to-all (26.04)", "mbridge2604_b300_fp8_mx_qwen3_235b_a22b_256gpu",
     {"training.moe_token_dispatcher": "alltoall"}, 4865.0,
     "same archive, 26.04 table; config v0.4.1: B300 preset without a flex backend, dispatcher alltoall"),
    ("Bridge B300 MBS2 HybridEP (26.04.01)", "mbridge2604_b300_fp8_mx_qwen3_235b_a22b_256gpu", {}, 5936.0,
     "same archive, 26.04.01 (the row); config v0.4.2 adds moe_flex_dispatcher_backend=hybridep (PR #3490)"),
    ("Megatron-LM B200 MBS3 TP2 DeepEP + overlap", "mlm_moe_qwen3_235b_b200_mxfp8_128gpu_tp2pp4ep16", {}, 4282.1,
     "Megatron-LM dev @d48bd6be examples/moe_recipes README (the row)"),
)


def per_layer_mb_seconds(plan, tokens_per_gpu_s: float) -> tuple[float, float]:
    """(seconds per layer and micro-batch on one pipeline stage, tokens one GPU's layer sees per micro-batch) of a
    run at ``tokens_per_gpu_s``: iteration = GBS x seq / (tokens/s/GPU x GPUs); per stage m micro-batches of
    L / PP layers with the interleaved bubble (1 + (PP - 1) / (VPP m)); a GPU's layer sees MBS x seq / TP tokens
    (sequence parallel; the experts the same count of routed copies per GPU at ETP 1)."""
    t, p = plan.training, plan.parallel
    gpus = plan.cluster.num_nodes * plan.cluster.gpus_per_node
    it = t.global_batch_size * plan.model.seq_length / (tokens_per_gpu_s * gpus)
    m = plan.num_microbatches
    per_stage = plan.model.num_layers / p.pp * m * (1 + (p.pp - 1) / (p.vpp * m))
    return it / per_stage, t.micro_batch_size * plan.model.seq_length / p.tp


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares a + b x over (x, y) points."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def probe_per_layer() -> int:
    """Measured and projected seconds per (layer x micro-batch) of PER_LAYER_CASES, and a + b x tokens fitted to each."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    meas_pts, proj_pts = [], []
    print(f"{'case':46s} {'tok/GPU/MB':>10s} {'measured':>9s} {'projected':>9s}  ms per layer x micro-batch")
    for label, rid, sw, meas, _src in PER_LAYER_CASES:
        d = copy.deepcopy(rows[rid]["plan"])
        for k, v in sw.items():
            sec, f = k.split(".")
            d[sec][f] = v
        tok, _ = _project(d)
        plan = Plan.model_validate(d)
        sm, x = per_layer_mb_seconds(plan, meas)
        sp, _ = per_layer_mb_seconds(plan, tok)
        meas_pts.append((x, sm))
        proj_pts.append((x, sp))
        hf, hb, gf, gb = layer_op_times(plan).get("_host", {})["moe"]
        ef, eb = ep_layer_comm(plan, get_gpu(plan.cluster.gpu), layout(plan))
        print(f"{label:46s} {x:10.0f} {1e3 * sm:9.2f} {1e3 * sp:9.2f}  ({meas:.0f} vs {tok:.0f} tokens/s/GPU, "
              f"{100 * (tok - meas) / meas:+.1f}%); MoE layer: host {1e3 * (hf + hb):.2f} + GPU {1e3 * (gf + gb):.2f}"
              f" + dispatcher {1e3 * (ef + eb):.2f} = {1e3 * (hf + hb + gf + gb + ef + eb):.2f} ms serialised")
    a2a = [i for i, c in enumerate(PER_LAYER_CASES) if "all-to-all" in c[0]]   # one dispatcher, MBS 1 and 2
    for name, pts in (("measured", meas_pts), ("projected", proj_pts)):
        a, b = _fit([pts[i] for i in a2a])
        print(f"  NCCL all-to-all cases, {name:9s}: {1e3 * a:5.2f} ms per layer x micro-batch + {1e6 * b:.3f} us per "
              "token (least squares)")
    # the same B300 MBS 2 preset with either dispatcher: what the NCCL all-to-all path costs beyond HybridEP's
    b3 = {c[0]: i for i, c in enumerate(PER_LAYER_CASES)}
    ia, ih = b3.get("Bridge B300 MBS2 all-to-all (26.04)"), b3.get("Bridge B300 MBS2 HybridEP (26.04.01)")
    if ia is not None and ih is not None:
        dm, dp = meas_pts[ia][1] - meas_pts[ih][1], proj_pts[ia][1] - proj_pts[ih][1]
        print(f"  B300 MBS2, all-to-all minus HybridEP: measured {1e3 * dm:.2f} ms, projected {1e3 * dp:.2f} ms per layer x "
              f"micro-batch (all-to-all / HybridEP: measured {meas_pts[ia][1] / meas_pts[ih][1]:.3f}, projected "
              f"{proj_pts[ia][1] / proj_pts[ih][1]:.3f})")
    return 0


# --a2a-path: NCCL all-to-all inside one 8-GPU HGX / DGX node, nccl-tests alltoall_perf -g 8 on one OCI BM.GPU.B300.8
# (NCCL 2.28.9, 512 KiB .. 8 GiB by factors of 2; github.com/oracle-quickstart/oci-gpu-quickstarts @6a0abdc
# nvidia/B300/README-B300.md 'All-to-All - Single Node'): the 8 GiB line's out-of-place bus bandwidth (record
# oci-b300-a2a-r8-8589934592) and the run's printed 'Avg bus bandwidth' over all its sizes (the smaller sizes' lines are
# truncated in the README; nccl-tests averages every size's bus bandwidth)
OCI_B300_A2A_8GIB_BUSBW = 675.55e9
OCI_B300_A2A_AVG_BUSBW = 359.21e9
OCI_B300_A2A_SIZES = tuple(2 ** k for k in range(19, 34))
# the all-to-all dispatcher's copy kernels (roofline rows of the MoE layer) that HybridEP's fused dispatch / combine and
# its pad_multiple do not run, plus the permutes both run
A2A_COPY_ROWS = ("permute", "sort chunks", "TE Fp8Padding", "TE Fp8Unpadding", "unsort chunks", "unpermute")


def sweep_fixed_cost(busbw: float, avg_busbw: float, ranks: int, sizes: tuple[int, ...]) -> float:
    """Per-call seconds ``l`` of ``t = busbytes / busbw + l`` that makes the curve's mean bus bandwidth over ``sizes``
    equal a sweep's printed average (bisection): the largest fixed cost per call the published sweep allows in that
    form (every shortfall below the large-message rate read as a fixed cost)."""
    def mean_bw(lat: float) -> float:
        bbs = [s * (ranks - 1) / ranks for s in sizes]
        return sum(bb / (bb / busbw + lat) for bb in bbs) / len(bbs)

    lo, hi = 0.0, 1e-2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_bw(mid) > avg_busbw else (lo, mid)
    return lo


def oci_a2a_latency(ranks: int = 8) -> float:
    """:func:`sweep_fixed_cost` of the OCI B300 run (``B`` its 8 GiB bus bandwidth, the run's sizes and printed
    average): the largest fixed cost per call the published run allows."""
    return sweep_fixed_cost(OCI_B300_A2A_8GIB_BUSBW, OCI_B300_A2A_AVG_BUSBW, ranks, tuple(OCI_B300_A2A_SIZES))


def probe_a2a_path() -> int:
    """Issue 28's hypothesis that the model underprices Megatron's ``MoEAlltoAllTokenDispatcher`` inside one NVLink
    node, checked part by part on the x86 DGX Qwen3-235B cases of ``--per-layer`` (module doc item 9)."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost.moe_dispatch import _group, dispatcher_collectives
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    lat = oci_a2a_latency()
    print(f"NCCL all-to-all, 8 ranks in one node (OCI B300 alltoall_perf, NCCL 2.28.9): {OCI_B300_A2A_8GIB_BUSBW / 1e9:.1f} GB/s "
          f"bus bandwidth at 8 GiB, average {OCI_B300_A2A_AVG_BUSBW / 1e9:.2f} over 512 KiB .. 8 GiB -> at most "
          f"{1e6 * lat:.1f} us per call in t = busbytes / B + l")
    for label, rid, sw, meas, _src in PER_LAYER_CASES[:4]:
        d = _switched(rows[rid]["plan"], sw)
        plan = Plan.model_validate(d)
        gpu = plan.cluster.gpu
        tok, _ = _project(d)
        sm, _x = per_layer_mb_seconds(plan, meas)
        sp, _x = per_layer_mb_seconds(plan, tok)
        gap = sm - sp
        print(f"{label}: measured {1e3 * sm:.2f} ms per layer x micro-batch, projected {1e3 * sp:.2f} (gap {1e3 * gap:+.2f})")
        fwd, bwd = dispatcher_collectives(plan)
        ep_pl = layout(plan).ep
        if plan.training.moe_token_dispatcher == "alltoall":
            d_model = d_oci = 0.0
            for c in (*fwd, *bwd):
                if c.op != "all_to_all":
                    continue
                pl = _group(c.group, plan, ep_pl)
                t_m = coll.all_to_all(c.nbytes, pl, gpu)
                t_o = coll.bus_bytes("all_to_all", c.nbytes, pl.size) / OCI_B300_A2A_8GIB_BUSBW + lat
                d_model, d_oci = d_model + t_m, d_oci + t_o
                print(f"  all-to-all {c.what:28s} {c.nbytes / 2 ** 20:8.2f} MiB per rank ({c.nbytes / pl.size / 2 ** 20:7.2f} "
                      f"per peer): modelled {1e6 * t_m:7.1f} us, OCI-bounded {1e6 * t_o:7.1f} us")
            print(f"  NCCL all-to-alls per layer x micro-batch: modelled {1e3 * d_model:.2f} ms, OCI-bounded "
                  f"{1e3 * d_oci:.2f} ms ({1e3 * (d_oci - d_model):+.2f} ms of the {1e3 * gap:+.2f} ms gap)")
        ops = layer_op_times(plan)["moe"]
        bw = get_gpu(gpu).hbm_bw
        copies = [(n, f + b, info[3] * 2) for n, f, b, _w, info in ops
                  if info[0] == "elementwise" and any(n.startswith(k) for k in A2A_COPY_ROWS)]
        s = sum(t for _, t, _ in copies)
        nbytes = sum(nb for _, _, nb in copies)
        if s > 0 and gap > 0:
            print(f"  copy kernels ({len(copies)} rows: {', '.join(n.split(':')[0] for n, _, _ in copies)}): "
                  f"{1e3 * s:.2f} ms fwd + bwd at {100 * nbytes / s / bw:.0f} % of the datasheet HBM bandwidth; to close the "
                  f"gap alone they would run at {100 * nbytes / (s + gap) / bw:.0f} %")
        syncs = [n for n, *_ in ops if "host-device sync" in n]
        where = ("megatron-core 0.17.1 @2edffadb MoEAlltoAllTokenDispatcher: one d2h_event.synchronize() at "
                 "before_ep_alltoall with permute fusion and no CUDA graphs, none in backward"
                 if plan.training.moe_token_dispatcher == "alltoall" else
                 "HybridEP dispatch without a token budget: one stream synchronize, cost/moe_host.py")
        print(f"  host syncs priced per MoE layer forward: {len(syncs)} ({where})")
    return 0


# --qwen30: public Qwen3-30B-A3B runs on GB200 NVL72, each (label, runs.json row, measured TFLOP/s/GPU, where the figure
# comes from); TFLOP/s become tokens/s with the row's own ratio (the source's FLOP formula, derived_fields)
QWEN30_CASES = (
    ("MLM BF16 eager EP16 (README)", "mlm_moe_qwen3_30b_gb200_bf16_16gpu_tp1pp1ep16", 528.0,
     "Megatron-LM dev @d48bd6be examples/moe_recipes/README.md (the row)"),
    ("MLM BF16 eager EP16 (PR 5728)", "mlm_moe_qwen3_30b_gb200_bf16_16gpu_tp1pp1ep16", 504.2,
     "Megatron-LM PR #5728 (7146484607, open): the same recipe re-measured, median of steps 30-45"),
    ("MLM MXFP8 TE graphs EP16 (README)", "mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_partial_cg", 514.0,
     "Megatron-LM dev @d48bd6be examples/moe_recipes/README.md (the row)"),
    ("MLM MXFP8 TE graphs EP16 (PR 5728)", "mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_partial_cg", 480.3,
     "Megatron-LM PR #5728 (re-measured)"),
    ("MLM MXFP8 paged stash full CG (README)", "mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_paged_stash", 646.8,
     "Megatron-LM dev @d48bd6be examples/moe_recipes/README.md (the row)"),
    ("MLM MXFP8 paged stash full CG (PR 5728)", "mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_paged_stash", 598.1,
     "Megatron-LM PR #5728 (re-measured)"),
    ("Bridge MXFP8 TE graphs EP8 (26.04)", "mbridge2604_gb200_fp8_mx_qwen3_30b_a3b_8gpu", None,
     "Megatron-Bridge 26.04 performance summary (the row)"),
    ("Bridge MXFP8 full-iteration CG EP8 (26.08)", "mbridge2608_gb200_fp8_mx_qwen3_30b_a3b_8gpu", None,
     "Megatron-Bridge 26.08 performance summary (the row)"),
)
# A/B pairs of QWEN30_CASES (numerator label, denominator label): measured and projected throughput ratios
QWEN30_PAIRS = (
    ("MLM MXFP8 TE graphs EP16 (README)", "MLM BF16 eager EP16 (README)"),
    ("MLM MXFP8 TE graphs EP16 (PR 5728)", "MLM BF16 eager EP16 (PR 5728)"),
    ("MLM MXFP8 paged stash full CG (README)", "MLM MXFP8 TE graphs EP16 (README)"),
    ("MLM MXFP8 paged stash full CG (PR 5728)", "MLM MXFP8 TE graphs EP16 (PR 5728)"),
    ("MLM MXFP8 TE graphs EP16 (README)", "Bridge MXFP8 TE graphs EP8 (26.04)"),
)
# the Megatron-LM MXFP8 row with one plan field switched (label, {section.field: value})
QWEN30_SWITCHES = (
    ("as built (EP16, TE graphs attn/router/preprocess)", {}),
    ("HybridEP 32 SMs (Bridge's) instead of the default 24", {"training.moe_dispatcher_num_sms": 32}),
    ("graph scopes moe_router/moe_preprocess (no attn)", {"training.cuda_graph_scope": ["moe_router", "moe_preprocess"]}),
    ("no CUDA graphs", {"training.cuda_graph_impl": "none", "training.cuda_graph_scope": []}),
    ("EP8 on 8 GPUs (Bridge's layout)", {"parallel.ep": 8, "cluster.num_nodes": 2}),
    ("BF16 (the eager row's precision, graphs kept)", {"training.precision": "bf16", "training.fp8_recipe": None}),
)


def qwen30_measured_tokens(row: dict, tflops: float | None) -> float:
    """Tokens/s/GPU of a QWEN30_CASES entry: the row's own figure, or ``tflops`` x the row's tokens per TFLOP
    (the row's measured tokens/s over its measured TFLOP/s: the source's FLOP formula)."""
    tok = row["measured_tokens_per_sec_per_gpu"]
    if tflops is None:
        return tok
    return tflops * tok / row["measured"]["tflops_per_gpu"]


def _switched(plan: dict, sw: dict) -> dict:
    d = copy.deepcopy(plan)
    for k, v in sw.items():
        sec, f = k.split(".")
        d[sec][f] = v
    return d


def probe_qwen30() -> int:
    """QWEN30_CASES measured vs projected per (layer x micro-batch), QWEN30_PAIRS, QWEN30_SWITCHES (module doc, 7)."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    tok = {}
    print(f"{'case':42s} {'measured':>9s} {'projected':>9s}  ms per layer x micro-batch")
    for label, rid, tflops, _src in QWEN30_CASES:
        row = rows[rid]
        meas = qwen30_measured_tokens(row, tflops)
        proj, _ = _project(row["plan"])
        tok[label] = (meas, proj)
        plan = Plan.model_validate(row["plan"])
        sm, _ = per_layer_mb_seconds(plan, meas)
        sp, _ = per_layer_mb_seconds(plan, proj)
        hf, hb, gf, gb = layer_op_times(plan).get("_host", {})["moe"]
        ef, eb = ep_layer_comm(plan, get_gpu(plan.cluster.gpu), layout(plan))
        print(f"{label:42s} {1e3 * sm:9.2f} {1e3 * sp:9.2f}  ({meas:.0f} vs {proj:.0f} tokens/s/GPU, "
              f"{100 * (proj - meas) / meas:+.1f}%); MoE layer host {1e3 * (hf + hb):.2f}, GPU {1e3 * (gf + gb):.2f}, "
              f"dispatcher {1e3 * (ef + eb):.2f} ms")
    for a, b in QWEN30_PAIRS:
        (ma, pa), (mb, pb) = tok[a], tok[b]
        pa_s = per_layer_mb_seconds(Plan.model_validate(rows[dict((c[0], c[1]) for c in QWEN30_CASES)[a]]["plan"]), 1.0)[0]
        pb_s = per_layer_mb_seconds(Plan.model_validate(rows[dict((c[0], c[1]) for c in QWEN30_CASES)[b]]["plan"]), 1.0)[0]
        # per (layer x micro-batch) throughput ratio: equal to the tokens/s/GPU ratio where both runs have the same
        # micro-batches per GPU and layer count (every pair but EP16 against EP8, whose GPU counts differ)
        k = pb_s / pa_s
        print(f"  {a} / {b}: measured {k * ma / mb:.3f}, projected {k * pa / pb:.3f} (per layer x micro-batch)")
    base = rows["mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_partial_cg"]
    m0 = base["measured_tokens_per_sec_per_gpu"]
    print(f"{base['id']} switched (measured {m0:.1f} tokens/s/GPU):")
    for label, sw in QWEN30_SWITCHES:
        t, it = _project(_switched(base["plan"], sw))
        print(f"  {label:52s} {t:9.1f} tokens/s/GPU  {it:7.3f} s/iter")
    return 0


DSV3_B300_ROW = "mbridge2604_b300_fp8_mx_deepseek_v3_256gpu"
# the 26.04 recipe of both SKUs, switched into the 26.04.01 B300 row's plan (deepseek_workload_base_configs.py
# @f171d7d30: B300_V1 / B200_V1 = PP 16, EP 8, HybridEP, recompute mla_up_proj, no a2a overlap; WorkloadBaseConfig
# micro_batch_size 1, cuda_graph_impl None; layout from set_deepseek_v3_pipeline_model_parallel_layout's (16, 1) entry:
# embedding + 4 layers, 14 x 4 layers, 1 layer + MTP + loss)
DSV3_2604_RECIPE = {"parallel.pp": 16, "parallel.vpp": 1, "parallel.pipeline_layout": "Et*4|(t*4|)*14tmL",
                    "training.micro_batch_size": 1, "training.cuda_graph_impl": "none", "training.cuda_graph_scope": []}
DSV3_B300_CASES = (
    # label, gpu, the 26.04 recipe (else the row's own plan), measured tokens/s/GPU, source
    ("26.04 B300 PP16 EP8 MBS1", "b300", True, 3131.0,
     "Megatron-Bridge docs/performance-summary.md @f171d7d30 ('26.04 NeMo Container', DeepSeekV3 DGX-B300 MXFP8)"),
    ("26.04 B200 PP16 EP8 MBS1", "b200", True, 2815.0,
     "Megatron-Bridge docs/performance-summary.md @f171d7d30 ('26.04 NeMo Container', DeepSeekV3 DGX-B200 MXFP8)"),
    ("26.04.01 B300 PP8 EP8 MBS2 TE graphs", "b300", False, 3456.0, "the row mbridge2604_b300_fp8_mx_deepseek_v3_256gpu"),
)
DSV3_B200_ROW = "mbridge2604_b200_fp8_mx_deepseek_v3_256gpu"


def dsv3_b300_cases() -> list[tuple[str, float, float]]:
    """(label, measured, projected tokens/s/GPU) of DSV3_B300_CASES and the 26.04.01 B200 row (module doc, 8)."""
    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    base = rows[DSV3_B300_ROW]["plan"]
    out = []
    for label, gpu, old, meas, _src in DSV3_B300_CASES:
        plan = _switched(base, {**(DSV3_2604_RECIPE if old else {}), "cluster.gpu": gpu})
        out.append((label, meas, _project(plan)[0]))
    b200 = rows[DSV3_B200_ROW]
    out.append(("26.04.01 B200 PP8 VP2 EP32 DeepEP overlap", b200["measured_tokens_per_sec_per_gpu"],
                _project(b200["plan"])[0]))
    return out


def probe_dsv3_b300() -> int:
    """DSV3_B300_CASES measured vs projected, the same-recipe B300 / B200 ratio and the recipe steps (module doc, 8)."""
    res = dsv3_b300_cases()
    for label, m, p in res:
        print(f"{label:44s} measured {m:7.0f}  projected {p:7.0f} tokens/s/GPU ({100 * (p - m) / m:+.1f}%)")
    t = {label: (m, p) for label, m, p in res}
    labels = [r[0] for r in res]
    for a, b, what in ((labels[0], labels[1], "B300 / B200, one recipe"),
                       (labels[2], labels[3], "B300 / B200, 26.04.01 recipes"),
                       (labels[2], labels[0], "B300 26.04.01 / 26.04 recipe"),
                       (labels[3], labels[1], "B200 26.04.01 / 26.04 recipe")):
        print(f"  {what:34s} measured {t[a][0] / t[b][0]:.3f}  projected {t[a][1] / t[b][1]:.3f}")
    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    capped, _ = _project(_switched(rows[DSV3_B300_ROW]["plan"], {**DSV3_2604_RECIPE, "cluster.power_limit_w": 1000}))
    print(f"  {'one recipe, B300 capped at 1,000 W':34s} projected {capped / t[labels[1]][1]:.3f} "
          "(no power headroom: calibration.power_headroom x the cap = 1)")
    return 0


# --b300-diff: the B300 DeepSeek-V3 row against the same recipe family on the other Blackwell systems (issue 28)
B300_DIFF_ROWS = ("mbridge2604_b300_fp8_mx_deepseek_v3_256gpu", "mbridge2604_b200_fp8_mx_deepseek_v3_256gpu",
                  "mbridge2604_gb200_fp8_mx_deepseek_v3_256gpu", "mbridge2604_gb300_fp8_mx_deepseek_v3_256gpu")
# its twin on the same x86 DGX B300 cluster: Bridge 26.04.01 Qwen3-235B, PP 8 without VP, EP 8 HybridEP at 32 SMs,
# MBS 2, no 1F1B overlap (the row's plan; qwen3_workload_base_configs.py @v0.4.2 B300 V2 + PR #3490)
B300_TWIN_ROW = "mbridge2604_b300_fp8_mx_qwen3_235b_a22b_256gpu"
# one hardware-database field of the B300 switched at a time (registered as a new GPU name, so every per-GPU cache of
# the cost model keys on it): the Grace host factor of GB200 / GB300 (cost/framework.py HOST_CPU_FACTOR), half and a
# quarter of ConnectX-8's 100 GB/s per GPU, half of NVLink 5's 900 GB/s per direction
B300_KNOBS = (("host CPU priced as Grace (x2.75 per launch)", {"host_cpu": "grace"}),
              ("NIC 50 GB/s per GPU", {"inter_node_bw": 50e9}),
              ("NIC 25 GB/s per GPU", {"inter_node_bw": 25e9}),
              ("NVLink 450 GB/s per direction", {"intra_node_bw": 450e9}))
# the best shapes of the public MAMF sweeps on Blackwell (records): the K of a cuBLAS GEMM at the top of its sweep
MAMF_BLACKWELL = ("mamf-bf16-b300", "mamf-bf16-gb200", "mamf-fp8-gb200-19456x5120x1536")


def tokens_per_local_expert(plan) -> float:
    """Routed token copies one local expert sees per micro-batch under balanced routing: MBS x seq / (TP x CP) tokens
    per GPU, x top-k copies, over num_experts / EP local experts (ETP 1)."""
    m, p = plan.model, plan.parallel
    local = m.num_experts // p.ep
    return plan.training.micro_batch_size * m.seq_length / (p.tp * p.cp) * m.moe_router_topk / local


def knob_gpu(base: str, label: str, update: dict) -> str:
    """Register ``base``'s GPU spec with ``update`` under a new name (``load_gpu_file``: a JSON document is YAML) and
    return the name; the database entry of ``base`` is not touched."""
    import tempfile

    from primus_launch.projection.hardware.gpus import get_gpu, known_gpus, load_gpu_file

    name = f"{base}-whatif-" + "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")
    if name not in known_gpus():
        spec = get_gpu(base).model_dump()
        spec.update(update, name=name)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
            json.dump({"gpu": {name: spec}}, fh)
        load_gpu_file(fh.name)
        Path(fh.name).unlink()
    return name


def stage_seconds(plan_dict: dict) -> list[float]:
    """The model's forward + backward seconds of one micro-batch on each pipeline stage (all its chunks), as the
    schedule simulator receives them (``steps/stage.py``)."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.steps.flow import run_steps

    plan = project_dry_run(Plan.model_validate(plan_dict)).plan   # the plan as projected (power cap resolved)
    st = run_steps(plan, layer_times_roofline(plan))
    return [sum(c.fwd + c.bwd_input + c.bwd_weight for c in chunks) for chunks in st.stages.chunks]


def b300_knob_errors() -> list[tuple[str, float, float]]:
    """(knob, DeepSeek-V3 B300 row error, its Qwen3-235B B300 twin's error) with each B300_KNOBS entry applied to both,
    the rows as built first."""
    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    out = []
    for label, upd in (("as built", {}),) + B300_KNOBS:
        errs = []
        for rid in (DSV3_B300_ROW, B300_TWIN_ROW):
            row = rows[rid]
            plan = row["plan"] if not upd else _switched(row["plan"], {"cluster.gpu": knob_gpu("b300", label, upd)})
            tok, _ = _project(plan)
            errs.append((tok - row["measured_tokens_per_sec_per_gpu"]) / row["measured_tokens_per_sec_per_gpu"])
        out.append((label, errs[0], errs[1]))
    return out


def expert_size_split() -> list[tuple[float, str, float]]:
    """(tokens per local expert, row id, error) of every NVIDIA Megatron-family MoE row (Megatron-LM, Bridge, AutoModel)
    but GPT-OSS (its own entry: the TE op fuser), projected as built."""
    from primus_launch.plan import Plan

    out = []
    for row in json.loads(RUNS.read_text())["rows"]:
        rid, plan = row["id"], row["plan"]
        if not plan["model"].get("num_experts") or "gpt_oss" in rid or not rid.startswith(("mlm_", "mbridge", "automodel")):
            continue
        tok, _ = _project(plan)
        meas = row["measured_tokens_per_sec_per_gpu"]
        out.append((tokens_per_local_expert(Plan.model_validate(plan)), rid, (tok - meas) / meas))
    return sorted(out)


def probe_b300_diff() -> int:
    """The DeepSeek-V3 MXFP8 rows of Bridge 26.04.01 by system, the B300 hardware knobs on the row and its Qwen3-235B
    twin, the local-expert count, and the NVIDIA MoE rows split by tokens per local expert (module doc, 10)."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost import evidence as ev
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    print(f"{'row':46s} {'host':5s} {'NIC':>5s} {'NVL':>4s} {'EP / domains':>9s} {'local':>5s} {'tok/exp':>7s} "
          f"{'measured':>8s} {'projected':>9s}  ms per layer x micro-batch (measured / projected)")
    for rid in B300_DIFF_ROWS:
        row = rows[rid]
        plan = Plan.model_validate(row["plan"])
        spec, ep = get_gpu(plan.cluster.gpu), layout(plan).ep
        meas = row["measured_tokens_per_sec_per_gpu"]
        tok, _ = _project(row["plan"])
        sm, _ = per_layer_mb_seconds(plan, meas)
        sp, _ = per_layer_mb_seconds(plan, tok)
        print(f"{rid:46s} {spec.host_cpu:5s} {spec.inter_node_bw / 1e9:5.0f} {plan.cluster.scaleup_domain:4d} "
              f"{ep.size:3d} in {-(-ep.size * ep.stride // plan.cluster.scaleup_domain):1d} {plan.model.num_experts // plan.parallel.ep:5d} "
              f"{tokens_per_local_expert(plan):7.0f} {meas:8.0f} {tok:9.0f}  {1e3 * sm:6.2f} / {1e3 * sp:6.2f} "
              f"({100 * (tok - meas) / meas:+.1f}%)")
    st = stage_seconds(rows[DSV3_B300_ROW]["plan"])
    print(f"  B300 row, model's seconds per micro-batch by pipeline stage (fwd + bwd, layout "
          f"{rows[DSV3_B300_ROW]['plan']['parallel']['pipeline_layout']}): "
          + ", ".join(f"{1e3 * t:.1f}" for t in st) + " ms")
    print("B300 hardware knobs, one at a time (error of the DeepSeek-V3 row / of its Qwen3-235B B300 twin):")
    knobs = b300_knob_errors()
    d0, t0 = knobs[0][1], knobs[0][2]
    for label, d, t in knobs:
        print(f"  {label:46s} {100 * d:+6.1f}% / {100 * t:+6.1f}%   (moves {100 * (d - d0):+5.1f} / {100 * (t - t0):+5.1f} points)")
    base = rows[DSV3_B300_ROW]
    for ne in (256, 64):
        tok, _ = _project(_switched(base["plan"], {"model.num_experts": ne}))
        plan = Plan.model_validate(_switched(base["plan"], {"model.num_experts": ne}))
        print(f"  DeepSeek-V3 B300 row with {ne:3d} experts ({ne // 8:2d} local, {tokens_per_local_expert(plan):5.0f} tokens "
              f"each): {tok:7.1f} tokens/s/GPU")
    print("NVIDIA Megatron-family MoE rows (GPT-OSS aside) by tokens per local expert and micro-batch:")
    split = expert_size_split()
    for lo, hi in ((0, 2048), (2049, 4096), (4097, 1e9)):
        errs = sorted(e for x, _r, e in split if lo <= x <= hi)
        if errs:
            med = errs[len(errs) // 2] if len(errs) % 2 else (errs[len(errs) // 2 - 1] + errs[len(errs) // 2]) / 2
            print(f"  {lo:>6.0f} .. {hi:<10.0f} n={len(errs):2d}  median {100 * med:+6.1f}%  range {100 * errs[0]:+6.1f} .. "
                  f"{100 * errs[-1]:+6.1f}%")
    for x, rid, e in split:
        if x <= 2048:
            print(f"    {x:6.0f}  {rid:60s} {100 * e:+6.1f}%")
    for rec_id in MAMF_BLACKWELL:
        r = ev.record(rec_id)
        s = r["shape"]
        print(f"  {rec_id:34s} best cuBLAS shape {s['m']} x {s['n']} x K {s['k']}: {r['value']:.0f} TFLOP/s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", help="a row id of scripts/validation/runs.json")
    ap.add_argument("--as-mxfp8", action="store_true", help="also project the row's plan as MXFP8")
    ap.add_argument("--walk", action="store_true", help="the row's MoE layer pair under the 1F1B all-to-all overlap")
    ap.add_argument("--set", action="append", metavar="SECTION.FIELD=JSON",
                    help="switch the row's plan first (repeatable), e.g. training.micro_batch_size=1")
    ap.add_argument("--measured", type=float, help="tokens/s/GPU to compare against instead of the row's")
    ap.add_argument("--dualpipe", action="store_true", help="compute-stream occupancy of DeepSeek's DualPipe profile")
    ap.add_argument("--trace", help="path of train.json (default: the local mirror)")
    ap.add_argument("--bridge3868", action="store_true", help="Megatron-Bridge PR #3868's graph A/B projected")
    ap.add_argument("--bridge5094", action="store_true", help="Megatron-Bridge PR #5094's EP-overlap A/B projected")
    ap.add_argument("--torch-grouped", action="store_true", help="torch grouped-GEMM BF16 / MXFP8 ratios")
    ap.add_argument("--per-layer", action="store_true",
                    help="seconds per layer x micro-batch of the x86 DGX Blackwell Qwen3-235B runs, measured vs projected")
    ap.add_argument("--qwen30", action="store_true",
                    help="the GB200 Qwen3-30B-A3B runs: per layer x micro-batch, public A/B ratios, one-field switches")
    ap.add_argument("--a2a-path", action="store_true",
                    help="the NCCL all-to-all dispatcher's parts against public bounds on the x86 DGX Qwen3-235B cases")
    ap.add_argument("--dsv3-b300", action="store_true",
                    help="Bridge DeepSeek-V3 MXFP8 on DGX B300 / B200 at both public recipes, measured vs projected")
    ap.add_argument("--b300-diff", action="store_true",
                    help="the B300 DeepSeek-V3 row against its siblings and its B300 twin: hardware knobs, expert sizes")
    a = ap.parse_args(argv)
    if not (a.row or a.dualpipe or a.bridge3868 or a.bridge5094 or a.torch_grouped or a.per_layer or a.qwen30
            or a.dsv3_b300 or a.a2a_path or a.b300_diff):
        ap.print_help()
        return 2
    rc = probe_row(a.row, a.as_mxfp8, a.walk, a.set, a.measured) if a.row else 0
    if a.dualpipe and rc == 0:
        rc = probe_dualpipe(a.trace)
    if a.bridge3868 and rc == 0:
        rc = probe_bridge3868()
    if a.bridge5094 and rc == 0:
        rc = probe_bridge5094()
    if a.torch_grouped and rc == 0:
        rc = probe_torch_grouped()
    if a.per_layer and rc == 0:
        rc = probe_per_layer()
    if a.qwen30 and rc == 0:
        rc = probe_qwen30()
    if a.dsv3_b300 and rc == 0:
        rc = probe_dsv3_b300()
    if a.a2a_path and rc == 0:
        rc = probe_a2a_path()
    if a.b300_diff and rc == 0:
        rc = probe_b300_diff()
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
