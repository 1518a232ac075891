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
and afterwards the GPU follows the host launch by launch -- what ``host_sync.launch_bound_seconds`` walks.  So the
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

``--pr1760``: Megatron-Bridge PR #1760 (commit a6e92de5f, 2026-01-09: "Update Qwen3 235B A22B B200 performance recipe to
address performance regression from 25.09.  MXFP8 step time improved from 20.1s to 16.9s.  BF16 step time improved from
17.2s to 16s.  Disable moe_a2a_overlap due to CPU overhead"; 64 B200, GBS 1024, MBS 1, PP 8, EP 8, NCCL all-to-all,
dropless; MXFP8 VP 4 + overlap -> no VP, no overlap; BF16 VP 4 + overlap -> VP 4, no overlap): public step times that
are no validation row, projected from the Bridge 26.04 B200 Qwen3-235B row's plan switched to each recipe, and the
factor ``k`` on Megatron's eager launch price on NVIDIA x86 hosts that makes each no-overlap point's projection equal
its measurement; then Megatron-Bridge PR #3868's H100 eager / TE-graph pair (records ``mbridge3868-*``) at the model's
price and at the mean of the two factors.  ``--megatron-x86 K``: ``scripts/validate.py --quiet`` with that price times K
(a what-if).

    python scripts/a2a_sync_probe.py --pr1760
    python scripts/a2a_sync_probe.py --megatron-x86 2.37   (also lists the NVIDIA Megatron MoE rows that move)
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
     "25.11 not a row: the v0.2.1 config, VP 4 with the 1F1B overlap, whose step PR #1760 gives; the table says VP 2"),
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


def nvidia_megatron_moe_rows() -> list[dict]:
    """The NVIDIA Megatron MoE rows of runs.json (the rows both what-ifs print)."""
    return [r for r in json.loads(RUNS.read_text())["rows"] if r["plan"]["model"].get("num_experts")
            and r["plan"]["source"]["framework"] == "megatron" and not r["plan"]["cluster"]["gpu"].startswith("mi")]


def row_errors(rows: list[dict]) -> list[float]:
    """Projected / measured tokens/s/GPU - 1 of each row, as the model stands now."""
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    return [project_dry_run(Plan.model_validate(r["plan"])).tokens_per_sec_per_gpu
            / r["measured_tokens_per_sec_per_gpu"] - 1 for r in rows]


def row_errors_under(ctx) -> int:
    """Errors of the NVIDIA Megatron MoE rows as the model stands and inside context ``ctx`` (rows that move)."""
    rows = nvidia_megatron_moe_rows()
    base = row_errors(rows)
    with ctx:
        new = row_errors(rows)
    moved = [(r, b, n) for r, b, n in zip(rows, base, new) if abs(n - b) > 1e-3]
    print(f"\nNVIDIA Megatron MoE rows that move ({len(moved)} of {len(rows)}): error now -> under the what-if")
    for r, b, n in sorted(moved, key=lambda x: abs(x[2]) - abs(x[1])):
        print(f"  {r['id'][:62]:62s} {r['plan']['cluster']['gpu']:8s} {100 * b:+6.1f}% -> {100 * n:+6.1f}%")
    return 0


def host_factor_whatif(k: float, x86_only: bool = False) -> int:
    """Errors of the NVIDIA Megatron MoE rows with the host prices times ``k`` (module doc, ``--host-factor``); with
    ``x86_only`` only the x86 hosts' launch price (``framework.HOST_CPU_FACTOR["x86"]``), Grace's absolute price and
    the per-expert GEMM price kept."""
    from primus_launch.projection.cost import framework, moe_host

    rows = nvidia_megatron_moe_rows()
    base = row_errors(rows)
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
        new = row_errors(rows)
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


# PR #1760's recipes (module doc): label, precision, VP, 1F1B all-to-all overlap (Bridge's moe_a2a_overlap sets
# overlap_moe_expert_parallel_comm and delay_wgrad_compute, utils/overrides.py), measured step seconds
PR1760 = (("MXFP8 VP4 + overlap", "fp8", 4, True, 20.1), ("MXFP8 no VP, no overlap", "fp8", 1, False, 16.9),
          ("BF16 VP4 + overlap", "bf16", 4, True, 17.2), ("BF16 VP4, no overlap", "bf16", 4, False, 16.0))
PR1760_BASE = "mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu"


def pr1760_plan(prec: str, vp: int, overlap: bool):
    """The Bridge 26.04 B200 Qwen3-235B row's plan switched to one of PR #1760's recipes (64 GPUs, GBS 1024)."""
    from primus_launch.plan import Plan

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    d = copy.deepcopy(rows[PR1760_BASE]["plan"])
    d["cluster"]["num_nodes"] = 8
    d["training"]["global_batch_size"] = 1024
    if prec == "bf16":
        d["training"].update(precision="bf16", fp8_recipe=None, fp8_param_gather=False)
    if vp > 1:
        d["parallel"]["vpp"] = vp
        d["training"]["pipeline_schedule"] = "interleaved_1f1b"
    d["training"].update(overlap_moe_expert_parallel_comm=overlap, delay_wgrad_compute=overlap)
    return Plan.model_validate(d)


class MegatronX86Launch:
    """Context: Megatron's eager launch price on NVIDIA x86 hosts (``framework`` profile, host factor 1) times ``k``;
    Grace hosts, AMD and TorchTitan unchanged (a what-if, module doc)."""

    def __init__(self, k: float):
        self.k = k

    def __enter__(self):
        from primus_launch.projection.cost import framework

        self.orig = orig = framework._profile
        k = self.k

        def patched(fw, compile_, backend, arch, ce, perm, eager, compiled, rope=True, sinks=False, fac=1.0):
            if fw == "megatron" and fac == 1.0 and not arch.startswith("cdna"):
                eager, compiled = eager * k, compiled * k
            return orig(fw, compile_, backend, arch, ce, perm, eager, compiled, rope, sinks, fac)

        framework._profile = patched
        orig.cache_clear()
        return self

    def __exit__(self, *exc):
        from primus_launch.projection.cost import framework

        framework._profile = self.orig
        self.orig.cache_clear()
        return False


def pr1760_steps(k: float = 1.0) -> list[float]:
    """Projected step seconds of PR #1760's four recipes with :class:`MegatronX86Launch` ``k``."""
    from primus_launch.projection.dryrun import project_dry_run

    with MegatronX86Launch(k):
        return [project_dry_run(pr1760_plan(p, v, o)).iteration_time_s for _, p, v, o, _ in PR1760]


def _bridge3868():
    from moe_probe import bridge3868_plans   # the plans tests/test_moe_host.py holds to the PR's measurement

    return bridge3868_plans()


def pr3868_steps(k: float = 1.0) -> tuple[float, float]:
    """Projected step seconds of Megatron-Bridge PR #3868's eager / TE-graph runs (records ``mbridge3868-*``) with
    :class:`MegatronX86Launch` ``k``."""
    from primus_launch.projection.dryrun import project_dry_run

    base, cg = _bridge3868()
    with MegatronX86Launch(k):
        return project_dry_run(base).iteration_time_s, project_dry_run(cg).iteration_time_s


def solve_k(i: int, lo: float = 1.0, hi: float = 4.0) -> float:
    """The launch-price factor at which PR #1760's recipe ``i`` projects its measured step (bisection)."""
    for _ in range(30):
        mid = (lo + hi) / 2
        if pr1760_steps(mid)[i] < PR1760[i][4]:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def probe_pr1760() -> int:
    t1 = pr1760_steps(1.0)
    for (label, *_, meas), t in zip(PR1760, t1):
        print(f"PR #1760 {label:24s} measured {meas:5.1f} s, projected {t:5.2f} s ({100 * (meas - t) / meas:+.1f}% faster)")
    print(f"  overlap on / off: MXFP8 measured {PR1760[0][4] / PR1760[1][4]:.3f}, projected {t1[0] / t1[1]:.3f}; "
          f"BF16 measured {PR1760[2][4] / PR1760[3][4]:.3f}, projected {t1[2] / t1[3]:.3f}")
    for i in (1, 3):
        print(f"  factor on Megatron's x86 eager launch price matching '{PR1760[i][0]}': {solve_k(i, 0.25, 4.0):.2f}")
    for k in (1.0, (2.28 + 2.46) / 2):
        t0, t1 = pr3868_steps(k)
        print(f"  Bridge PR #3868 (16 H100, EP 16 over 2 nodes, MBS 1, BF16, all-to-all) at factor {k:.2f}: eager "
              f"{t0:.2f} s (measured 41.36), TE graphs attn / moe_router / moe_preprocess {t1:.2f} s (measured 42.00); "
              f"graphs / eager {t1 / t0:.3f} (measured {42.00 / 41.36:.3f})")
    return 0


def megatron_x86_validate(k: float) -> int:
    """``scripts/validate.py --quiet`` under :class:`MegatronX86Launch` ``k``."""
    import runpy

    old = sys.argv
    sys.argv = ["validate.py", "--quiet"]
    try:
        with MegatronX86Launch(k):
            runpy.run_path(str(ROOT / "scripts" / "validate.py"), run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        sys.argv = old
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--pr1760"]:
        return probe_pr1760()
    if argv[:1] == ["--megatron-x86"] and len(argv) == 2:
        try:
            k = float(argv[1])
        except ValueError:
            print(f"--megatron-x86: {argv[1]!r} is not a number", file=sys.stderr)
            return 2
        rc = megatron_x86_validate(k)
        return rc or row_errors_under(MegatronX86Launch(k))
    x86 = "--x86-only" in argv
    argv = [a for a in argv if a != "--x86-only"]
    if argv[:1] == ["--host-factor"] and len(argv) == 2:
        try:
            return host_factor_whatif(float(argv[1]), x86)
        except ValueError:
            print(f"--host-factor: {argv[1]!r} is not a number", file=sys.stderr)
            return 2
    if argv:
        print("usage: a2a_sync_probe.py [--host-factor K [--x86-only] | --pr1760 | --megatron-x86 K]", file=sys.stderr)
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
    tok = [1024 * 4096 / (64 * p[4]) for p in PR1760[:2]]
    print(f"  PR #1760's MXFP8 steps as tokens/s/GPU: VP 4 + overlap {tok[0]:.0f} (the 25.11 table: 3269), no VP, no "
          f"overlap {tok[1]:.0f}: 25.09 token drop / that {DROP_PAIRS[1][1] / tok[1]:.3f}")
    print(f"{ROW}: serialised host + GPU + dispatcher {1e3 * (c['host'] + c['gpu'] + c['ep']):.2f} ms against "
          f"{1e3 * c['sm']:.2f} measured per layer x micro-batch, as projected {1e3 * c['sp']:.2f} (full serialisation "
          f"would need the model's host price x {c['k']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
