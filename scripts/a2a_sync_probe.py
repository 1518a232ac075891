"""Issue 28 probe: is the dropless all-to-all dispatcher's host sync what makes Blackwell MoE at micro-batch 1 slow?

Diagnostics only: nothing here changes the model or the validation rows.  The question (Megatron-Bridge 25.11 archive
row ``mbridge2511_b200_fp8_mx_qwen3_30b_a3b_8gpu_mbs1``: 9,299 tokens/s/GPU measured, ~18,450 projected; the same
8-GPU layout with token dropping in the 25.09 table measured 18,066) is whether a per-layer, per-micro-batch
serialisation point of ``MoEAlltoAllTokenDispatcher`` that the model does not price explains the ~4.5 ms per
(layer x micro-batch) between them.  The code at the rows' pins (Bridge v0.2.1 -> Megatron-LM 0d8e0714 =
megatron-core 0.16.0rc0, TransformerEngine ``release_v2.9``; Bridge v0.1.0rc4 for the 25.09 run) says:

* 25.11 (dropless): one host wait per MoE forward -- ``_maybe_dtoh_and_synchronize`` copies the splits and counts
  on a side stream at ``cuda_dtoh_point`` and waits on its event at ``cuda_sync_point = before_ep_alltoall``
  (EP > 1); under TE-scoped graphs with ``moe_preprocess`` the copy point moves to ``before_ep_alltoall`` too
  (the copies can no longer overlap the permute).  No wait in the backward: ``_AllToAll.backward`` reuses the
  forward's host splits, TE ``GroupedLinear.backward`` its ``ctx.m_splits``, the fused permute / chunk sort /
  unpermute their saved row-id maps, ``Fp8Padding`` / ``Fp8Unpadding`` the host lists (TE release_v2.9
  ``permutation.py``, ``module/grouped_linear.py``, ``module/fp8_padding.py``: no ``.item()`` / ``.tolist()`` /
  ``.cpu()`` / blocking H2D).  ``tests/moe_host_trace.py`` traces megatron-core 0.16.1's layer: 1 forward, 0
  backward.  What stays eager under the row's graphs (scope moe_router + moe_preprocess, TE
  ``make_graphed_callables``): the attention block and everything after the sync.
* 25.09 (token drop): ``apply_moe_token_drop`` sets capacity factor 1.0 with ``moe_pad_expert_input_to_capacity``:
  ``drop_and_pad`` skips every device-to-host copy and sync, and the static shapes let the perf config's
  ``cuda_graphs: true`` (``helpers.set_cuda_graph_overrides`` -> ``enable_cuda_graph``: Megatron's per-layer local
  graphs) capture the whole layer: that run is the GPU-bound reference, with no host time in its layers.

On a host-bound step a host wait costs little by itself: the host blocks only while the GPU still has work queued,
and afterwards the GPU follows the host launch by launch -- what ``roofline.launch_bound_seconds`` walks.  So the
bound on what any sync placement can do is full serialisation, host + GPU + dispatcher per layer and micro-batch.
This probe prints, per NVIDIA Megatron MoE row on x86 Blackwell / Hopper, seconds per (layer x micro-batch) measured
and projected, the model's MoE-layer host / GPU / dispatcher seconds and their serialised sum, and the host price
factor ``k`` the serialised reading would need to reach the measurement (``k = (measured - GPU - dispatcher) /
host``); then the row graphed whole (the 25.09 run's shape) against 18,066.

With ``--host-factor K`` (a what-if, not a fit): every NVIDIA Megatron MoE row re-projected with the eager launch price
(``framework`` ``t_launch``) and TE's per-expert GEMM host price (``moe_host.TE_GEMM_HOST_S``) times K, beside its
error as the model stands; ``--x86-only`` scales only the x86 hosts' launch price (Grace's absolute price kept).

    python scripts/a2a_sync_probe.py
    python scripts/a2a_sync_probe.py --host-factor 2
    python scripts/a2a_sync_probe.py --host-factor 2 --x86-only
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
RUNS = ROOT / "scripts" / "validation" / "runs.json"

ROW = "mbridge2511_b200_fp8_mx_qwen3_30b_a3b_8gpu_mbs1"
# Megatron-Bridge docs/performance-summary-archive.md (@067f987df0), 25.09 NeMo container, DGX-B200,
# 'Qwen3_30B_a3B (tokendrop)', 8 GPUs, GBS 512, MBS 1, EP 8: tokens/s/GPU
TOKENDROP_2509_B200 = 18066.0
HOST_ARCH = {"b200": "x86", "b300": "x86", "h100-sxm": "x86"}
# the archive's other same-layout DGX-B200 pairs of 25.09 token drop (drop_and_pad: no device-to-host copy, no sync)
# and 25.11 dropless, MXFP8 numbers (the parenthesised 32x32 ones of 25.09), tokens/s/GPU: (label, 25.09, 25.11,
# row of runs.json holding the 25.11 layout or None, note)
DROP_PAIRS = (
    ("DeepSeek-V3 256 B200 PP16 EP8 MBS1, both eager", 2159.0, 2139.0, "mbridge2511_b200_fp8_mx_deepseek_v3_256gpu_pp16",
     "25.11 with MTP (+4 % FLOPs per token)"),
    ("Qwen3-235B 64 B200 PP8 VP2 EP8 MBS1, both eager", 4275.0, 3269.0, None,
     "25.11 not a row: the v0.2.1 config says VP 4 with the 1F1B overlap, the table VP 2"),
    ("Qwen3-30B 8 B200 EP8 MBS1", TOKENDROP_2509_B200, 9299.0, ROW,
     "25.09 whole-layer local graphs, 25.11 TE graphs moe_router + moe_preprocess only"),
)


def moe_layer_split(plan) -> tuple[float, float, float]:
    """(host, GPU, dispatcher) seconds of one MoE layer and micro-batch, forward + backward, as the model prices
    them (``roofline.layer_op_times`` ``_host``; ``ep_comm.ep_layer_comm``)."""
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    hf, hb, gf, gb = layer_op_times(plan)["_host"]["moe"]
    ef, eb = ep_layer_comm(plan, get_gpu(plan.cluster.gpu), layout(plan))
    return hf + hb, gf + gb, ef + eb


def row_cases() -> list[dict]:
    """Per NVIDIA Megatron MoE row on an x86 host (HOST_ARCH): measured / projected seconds per layer x micro-batch
    and the model's MoE-layer split (module doc)."""
    from moe_probe import per_layer_mb_seconds

    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    out = []
    for r in json.loads(RUNS.read_text())["rows"]:
        d = r["plan"]
        if not d["model"].get("num_experts") or d["source"]["framework"] != "megatron":
            continue
        if d["cluster"]["gpu"] not in HOST_ARCH:
            continue
        plan = Plan.model_validate(d)
        proj = project_dry_run(plan).tokens_per_sec_per_gpu
        meas = r["measured_tokens_per_sec_per_gpu"]
        sm, _ = per_layer_mb_seconds(plan, meas)
        sp, _ = per_layer_mb_seconds(plan, proj)
        h, g, e = moe_layer_split(plan)
        out.append(dict(id=r["id"], disp=plan.training.moe_token_dispatcher, mbs=plan.training.micro_batch_size,
                        meas=meas, proj=proj, sm=sm, sp=sp, host=h, gpu=g, ep=e, k=(sm - g - e) / h if h else 0.0))
    return out


def graphed_whole(plan_dict: dict) -> float:
    """tokens/s/GPU of ``plan_dict`` with every layer captured whole (Megatron local per-layer graphs, the 25.09
    run's ``enable_cuda_graph``)."""
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    d = copy.deepcopy(plan_dict)
    d["training"].update(cuda_graph_impl="local", cuda_graph_scope=[])
    return project_dry_run(Plan.model_validate(d)).tokens_per_sec_per_gpu


def host_factor_whatif(k: float, x86_only: bool = False) -> int:
    """Errors of the NVIDIA Megatron MoE rows with the host prices times ``k`` (module doc, ``--host-factor``); with
    ``x86_only`` only the x86 hosts' launch price (``framework.HOST_CPU_FACTOR["x86"]``), Grace's absolute price and
    the per-expert GEMM price kept."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost import framework, moe_host
    from primus_launch.projection.dryrun import project_dry_run

    rows = [r for r in json.loads(RUNS.read_text())["rows"] if r["plan"]["model"].get("num_experts")
            and r["plan"]["source"]["framework"] == "megatron" and not r["plan"]["cluster"]["gpu"].startswith("mi")]

    def errors() -> list[float]:
        return [project_dry_run(Plan.model_validate(r["plan"])).tokens_per_sec_per_gpu
                / r["measured_tokens_per_sec_per_gpu"] - 1 for r in rows]

    base = errors()
    consts, gemm, fac = framework._host_constants, moe_host.TE_GEMM_HOST_S, dict(framework.HOST_CPU_FACTOR)
    if x86_only:
        framework.HOST_CPU_FACTOR.update(x86=fac["x86"] * k, grace=fac["grace"])
    else:
        scaled = {key: {**v, "t_launch": v["t_launch"] * k} if isinstance(v, dict) and "t_launch" in v else v
                  for key, v in consts().items()}
        framework._host_constants = lambda: scaled
        moe_host.TE_GEMM_HOST_S = gemm * k
    framework.clear_caches()
    try:
        new = errors()
    finally:
        framework._host_constants, moe_host.TE_GEMM_HOST_S = consts, gemm
        framework.HOST_CPU_FACTOR.update(fac)
        framework.clear_caches()
    print(f"{'row':62s} {'dispatcher':9s} {'gpu':6s} mbs  error now -> {'x86 ' if x86_only else ''}host x {k:g}")
    for r, b, n in sorted(zip(rows, base, new), key=lambda x: x[0]["id"]):
        t = r["plan"]["training"]
        print(f"{r['id'][:62]:62s} {t['moe_token_dispatcher']:9s} {r['plan']['cluster']['gpu']:6s} "
              f"{t['micro_batch_size']:3d}  {100 * b:+6.1f}% -> {100 * n:+6.1f}%")
    within = sum(abs(n) <= 0.15 for n in new), sum(abs(b) <= 0.15 for b in base)
    print(f"rows within 15 %: {within[1]} -> {within[0]} of {len(rows)}")
    return 0


def sync_free_ratio(plan_dict: dict) -> float:
    """Projected tokens/s/GPU of ``plan_dict`` without the dispatcher's host wait (``training.moe_sync_free``) over
    with it: what the model prices the one forward sync at."""
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    d = copy.deepcopy(plan_dict)
    base = project_dry_run(Plan.model_validate(d)).tokens_per_sec_per_gpu
    d["training"]["moe_sync_free"] = True
    return project_dry_run(Plan.model_validate(d)).tokens_per_sec_per_gpu / base


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    x86 = "--x86-only" in argv
    argv = [a for a in argv if a != "--x86-only"]
    if argv[:1] == ["--host-factor"] and len(argv) == 2:
        try:
            return host_factor_whatif(float(argv[1]), x86)
        except ValueError:
            print(f"--host-factor: {argv[1]!r} is not a number", file=sys.stderr)
            return 2
    if argv:
        print("usage: a2a_sync_probe.py [--host-factor K [--x86-only]]", file=sys.stderr)
        return 2
    cases = row_cases()
    print(f"{'row':60s} {'disp':8s} mbs  {'meas ms':>7s} {'proj ms':>7s}  host + GPU + disp = serial  k(serial)")
    for c in sorted(cases, key=lambda c: (c["disp"], c["id"])):
        print(f"{c['id'][:60]:60s} {c['disp']:8s} {c['mbs']:3d}  {1e3 * c['sm']:7.2f} {1e3 * c['sp']:7.2f}  "
              f"{1e3 * c['host']:4.2f} + {1e3 * c['gpu']:5.2f} + {1e3 * c['ep']:4.2f} = "
              f"{1e3 * (c['host'] + c['gpu'] + c['ep']):6.2f}  {c['k']:5.2f}")
    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    from moe_probe import per_layer_mb_seconds

    from primus_launch.plan import Plan

    plan_d = rows[ROW]["plan"]
    g = graphed_whole(plan_d)
    cs = copy.deepcopy(plan_d)
    cs["training"]["fp8_recipe"] = "tensorwise"
    g_cs = graphed_whole(cs)
    print(f"\n{ROW} graphed whole (25.09 shape): projected {g:.0f} tokens/s/GPU (FP8-CS {g_cs:.0f}) against the 25.09 "
          f"token-drop run's {TOKENDROP_2509_B200:.0f} ({100 * (g - TOKENDROP_2509_B200) / TOKENDROP_2509_B200:+.1f}%; "
          f"FP8-CS {100 * (g_cs - TOKENDROP_2509_B200) / TOKENDROP_2509_B200:+.1f}%)")
    plan = Plan.model_validate(plan_d)
    c = next(c for c in cases if c["id"] == ROW)
    gm, gp = per_layer_mb_seconds(plan, TOKENDROP_2509_B200)[0], per_layer_mb_seconds(plan, g)[0]
    print(f"  eager dropless minus graphed, ms per layer x micro-batch: measured {1e3 * (c['sm'] - gm):.2f} "
          f"({1e3 * c['sm']:.2f} - {1e3 * gm:.2f}), model {1e3 * (c['sp'] - gp):.2f} ({1e3 * c['sp']:.2f} - {1e3 * gp:.2f})")
    print("\nsame-layout DGX-B200 pairs, 25.09 token drop (no sync) / 25.11 dropless (one forward sync per MoE layer):")
    for label, drop, dropless, rid, note in DROP_PAIRS:
        model = f"model without the sync {sync_free_ratio(rows[rid]['plan']):.3f}" if rid else "model: no row"
        print(f"  {label:50s} measured {drop / dropless:.3f}; {model}  ({note})")
    print(f"{ROW}: serialised host + GPU + dispatcher {1e3 * (c['host'] + c['gpu'] + c['ep']):.2f} ms against "
          f"{1e3 * c['sm']:.2f} measured per layer x micro-batch: no placement of the one forward sync reaches it at "
          f"the model's host prices (k = {c['k']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
