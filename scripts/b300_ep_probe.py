"""What the DGX B300 fabric delivered to Megatron's NCCL all-to-all across nodes (issue 28, Blackwell Ultra group).

Diagnostics only: nothing here changes the model, the hardware database or the validation rows.

The held-out pair ``mbridge2602_{b300,b200}_bf16_gpt_oss_120b_64gpu_ep64`` (Megatron-Bridge 26.02 table: GPT-OSS 120B
BF16, 64 GPUs = 8 x86 DGX nodes, EP 64 on Megatron's NCCL all-to-all dispatcher, MBS 4, GBS 1280) measured B300 / B200
1.039 where the model gives 1.51: the model spends 47 % of the B300 step and 60 % of the B200 step in the EP
all-to-all, priced on the hardware database's NIC per GPU (B300 ConnectX-8 800 Gb/s = 100 GB/s, B200 ConnectX-7
400 Gb/s = 50 GB/s).  The probe asks, from the measurements:

1. ``pairs``: each B300 / B200 pair of the same Bridge table, measured and modelled ratio, the plan fields that
   differ besides the GPU, and the modelled ratio on ONE recipe (each row's plan projected on the other GPU): how much
   of the modelled ratio is the SKU and how much the recipe.
2. ``implied``: the all-to-all seconds the EP 64 rows leave once their non-all-to-all time is scaled by the error of
   the same recipe on an NVL72 twin (Bridge ran the B300 recipe unchanged on GB300 and the B200 recipe on GB200, EP 64
   inside one NVLink domain: ``gpt_oss_workload_base_configs.py`` @v0.3.0, B300_BF16_V1 = GB300_BF16_V1 and B200_BF16_V1
   = GB200_BF16_V1 field by field; the 26.02 table's GB300 / GB200 rows, same container as the pair), and the NIC
   rate (database-equivalent, before the fitted all-to-all efficiency) that would price the all-to-all at that time
   (the model's all-to-all here is bandwidth-bound: time x rate is constant, checked by ``--what-if``).
3. ``calls``: one all-to-all call of the EP 64 rows: bytes per rank, per peer, through the NIC, and the model's
   latency share.
4. ``records``: every public NCCL alltoall_perf run across scale-up domains in the kernel evidence, read as the NIC
   efficiency per GPU it implies, ``e = busbw x (n - k) / ((n - 1) x B_nic)`` (``cost/collectives.py``: the remote
   share (n - k) / n of S leaves through each GPU's own NIC; busbw = (n - 1) / n x S / t), with peers per GPU across
   domains and bytes per peer.
5. ``what-if``: the B300 priced with a 400 Gb/s NIC (50 GB/s, a what-if GPU registered under its own name): every
   B300 row of the validation set and the pairs' modelled ratios -- which rows a slower NIC would move.

    python scripts/b300_ep_probe.py            # all sections
    python scripts/b300_ep_probe.py --section implied
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from moe_probe import sweep_fixed_cost  # scripts/: the fixed cost a published sweep allows

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "scripts" / "validation" / "runs.json"

EP64 = {"b300": "mbridge2602_b300_bf16_gpt_oss_120b_64gpu_ep64", "b200": "mbridge2602_b200_bf16_gpt_oss_120b_64gpu_ep64"}
# the NVL72 twins: the same recipe inside one NVLink domain.  Their plans are the 26.04.01 rows switched back to the
# 26.02 recipe (@v0.3.0 GB300_BF16_V2 = the 26.04.01 one; @v0.3.0 GB200_BF16_V2 has no moe_a2a_overlap, which v0.4.2's
# V2 adds: overlap_moe_expert_parallel_comm + delay_wgrad_compute, utils/overrides.py _set_moe_a2a_overlap_overrides);
# their measurements the 26.02 table's, the pair's container (Megatron-Bridge docs/performance-summary-archive.md,
# '26.02 NeMo Container', GPT OSS 120B: DGX-GB300 64 BF16 GBS 1280 MBS 4 EP 64 19,412 tokens/s/GPU; DGX-GB200 the same
# layout 15,784)
# (the 26.04.01 twins, read at Bridge v0.4.2, run --calculate-per-token-loss, which the 26.02 rows, read at v0.3.0, do
# not: priced since scale17 as a pass over the gradient buffer, switched off here like the B200's v0.4.2 additions)
TWIN = {"b300": ("mbridge2604_gb300_bf16_gpt_oss_120b_64gpu", 19412.0, {"calculate_per_token_loss": False}),
        "b200": ("mbridge2604_gb200_bf16_gpt_oss_120b_64gpu", 15784.0,
                 {"delay_wgrad_compute": False, "overlap_moe_expert_parallel_comm": False,
                  "calculate_per_token_loss": False})}
PAIR_MODELS = ("bf16_gpt_oss_120b_64gpu_ep64", "fp8_mx_deepseek_v3_256gpu", "fp8_mx_qwen3_235b_a22b_256gpu",
               "fp8_mx_qwen3_30b_a3b_8gpu", "bf16_gpt_oss_120b_64gpu")
# public NCCL alltoall_perf runs across scale-up domains (kernel evidence): record -> (ranks per domain, NIC GB/s)
A2A_RECORDS = {"oci-b300-a2a-r16-8589934592": (8, 100.0), "oci-gb200-a2a-r128-8589934592": (64, 50.0),
               "oci-gb200-a2a-r192-8589934592": (64, 50.0), "oci-gb300-a2a-r128-17179869184": (64, 100.0),
               "deepep3-h100-a2a-r16-nonvl": (1, 50.0)}
SLOW_NIC = 50e9   # a 400 Gb/s NIC per GPU (ConnectX-7, the B200's)
# OCI's HGX B300 2-node alltoall_perf (16 ranks, NCCL 2.28.9, 8 x 2 x 400G RoCE = 800 Gb/s per GPU;
# github.com/oracle-quickstart/oci-gpu-quickstarts @6a0abdc nvidia/B300/README-B300.md 'All-to-All - 2 Nodes'): bus
# bandwidth 180.98 GB/s at 8 GiB (record oci-b300-a2a-r16-8589934592), 'Avg bus bandwidth : 102.495' over its sizes
# 512 KiB .. 8 GiB by factors of 2 (the smaller sizes' lines are truncated on the page)
OCI_B300_2NODE = {"ranks": 16, "busbw": 180.98e9, "avg_busbw": 102.495e9, "sizes": tuple(2 ** k for k in range(19, 34))}


def _rows() -> dict:
    return {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}


def _pair_id(gpu: str, model: str) -> str:
    return f"mbridge2602_{gpu}_{model}" if model.endswith("_ep64") else f"mbridge2604_{gpu}_{model}"


def project(plan: dict):
    """The dry-run projection of a plan dict (``ProjectionResult``)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    return project_dry_run(Plan.model_validate(plan))


def on_gpu(plan: dict, gpu: str) -> dict:
    """``plan`` with only ``cluster.gpu`` switched."""
    out = json.loads(json.dumps(plan))
    out["cluster"]["gpu"] = gpu
    return out


def step_seconds(plan: dict, tokens_per_gpu_s: float) -> float:
    """Iteration seconds of a Bridge table row: GBS x sequence / (tokens/s/GPU x GPUs)."""
    t, c = plan["training"], plan["cluster"]
    return t["global_batch_size"] * plan["model"]["seq_length"] / (tokens_per_gpu_s * c["num_nodes"] * c["gpus_per_node"])


def plan_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Dotted plan fields whose values differ (``cluster.gpu`` included)."""
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += plan_diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}")
    return out


def twin_plan_2602(sku: str) -> dict:
    """The NVL72 twin of ``sku``'s EP 64 row as the 26.02 table ran it (the 26.04.01 row's plan, ``TWIN`` switches)."""
    twin_id, _tok, switches = TWIN[sku]
    plan = json.loads(json.dumps(_rows()[twin_id]["plan"]))
    plan["training"].update(switches)
    return plan


def implied_a2a(sku: str, twin_sku: str) -> dict:
    """The EP 64 row of ``sku`` with its non-all-to-all time scaled by the measured / projected step of ``twin_sku``'s
    NVL72 twin: all-to-all seconds it leaves, and the database-equivalent NIC rate pricing them (module doc, 2)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    rows = _rows()
    row = rows[EP64[sku]]
    res = project(row["plan"])
    a2a = res.time_breakdown.get("ep_comm", 0.0)
    t_meas = step_seconds(row["plan"], row["measured_tokens_per_sec_per_gpu"])
    twin_plan = twin_plan_2602(twin_sku)
    twin_tok = TWIN[twin_sku][1]
    f = step_seconds(twin_plan, twin_tok) / project(twin_plan).iteration_time_s
    left = t_meas - f * (res.iteration_time_s - a2a)
    nic = get_gpu(row["plan"]["cluster"]["gpu"]).inter_node_bw
    return {"measured_s": t_meas, "projected_s": res.iteration_time_s, "a2a_s": a2a, "twin_factor": f,
            "implied_a2a_s": left, "db_nic": nic, "implied_nic": nic * a2a / left if left > 0 else float("inf")}


def a2a_calls(sku: str) -> dict:
    """One dispatch (or combine) all-to-all of the EP 64 row: tokens x top-k x hidden x 2 bytes per rank (BF16), per
    peer, through the NIC ((n - k) / n), and the model's seconds and latency share for it."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import layout

    plan = Plan.model_validate(_rows()[EP64[sku]]["plan"])
    m, t = plan.model, plan.training
    s = t.micro_batch_size * m.seq_length * m.moe_router_topk * m.hidden_size * 2
    pl = layout(plan).ep
    f = coll.fabric(plan.cluster.gpu)
    sec = coll.all_to_all(float(s), pl, plan.cluster.gpu)
    lat = f.l_nic if f.l_nic_a2a is None else f.l_nic_a2a
    n, k = pl.size, pl.per_node
    return {"bytes_per_rank": s, "bytes_per_peer": s / n, "nic_bytes": s * (n - k) / n, "seconds": sec,
            "latency_share": lat / sec, "ranks": n, "per_domain": k, "nic_eff": f.e_nic_a2a}


def a2a_calls_per_step(sku: str) -> int:
    """NCCL all-to-all calls of Megatron's alltoall dispatcher per iteration on one rank: dispatch and combine in the
    forward, their two in the backward, per MoE layer and micro-batch (no pipeline: every layer on every rank)."""
    from primus_launch.plan import Plan

    plan = Plan.model_validate(_rows()[EP64[sku]]["plan"])
    return 4 * plan.model.num_layers * plan.num_microbatches


def record_nic_efficiency(rec: dict, per_domain: int, nic_gbs: float) -> float:
    """NIC efficiency per GPU a cross-domain alltoall_perf record implies (module doc, 4)."""
    n = rec["shape"]["ranks"]
    return rec["value"] * (n - per_domain) / ((n - 1) * nic_gbs)


def what_if_nic(rate: float = SLOW_NIC) -> list[tuple[str, float, float]]:
    """(row, error as built, error with the B300's NIC at ``rate``) for every B300 row of the validation set."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from moe_probe import knob_gpu

    name = knob_gpu("b300", f"nic {rate / 1e9:.0f} GB/s", {"inter_node_bw": rate})
    out = []
    for rid, row in _rows().items():
        if row["plan"]["cluster"]["gpu"] != "b300":
            continue
        meas = row["measured_tokens_per_sec_per_gpu"]
        a = project(row["plan"]).tokens_per_sec_per_gpu
        b = project(on_gpu(row["plan"], name)).tokens_per_sec_per_gpu
        out.append((rid, a / meas - 1, b / meas - 1))
    return out


def _pairs() -> None:
    rows = _rows()
    print("B300 / B200 pairs: measured, modelled as built, modelled on one recipe (the B300 row's / the B200 row's)")
    for model in PAIR_MODELS:
        a, b = rows[_pair_id("b300", model)], rows[_pair_id("b200", model)]
        ma, mb = a["measured_tokens_per_sec_per_gpu"], b["measured_tokens_per_sec_per_gpu"]
        pa, pb = project(a["plan"]).tokens_per_sec_per_gpu, project(b["plan"]).tokens_per_sec_per_gpu
        r3 = pa / project(on_gpu(a["plan"], "b200")).tokens_per_sec_per_gpu
        r2 = project(on_gpu(b["plan"], "b300")).tokens_per_sec_per_gpu / pb
        diff = [d for d in plan_diff(a["plan"], b["plan"]) if d != "cluster.gpu"]
        print(f"  {model:34s} measured {ma / mb:5.3f}  modelled {pa / pb:5.3f}  one recipe {r3:5.3f} / {r2:5.3f}  "
              f"errors {100 * (pa / ma - 1):+5.1f}% / {100 * (pb / mb - 1):+5.1f}%")
        print(f"    differ: {', '.join(diff) or '(the GPU only)'}")


def _implied() -> None:
    print("EP 64 across 8 nodes: all-to-all seconds left by the measured step, non-all-to-all time scaled by a twin's "
          "measured / projected")
    for sku in ("b300", "b200"):
        for twin in ("b300", "b200"):
            r = implied_a2a(sku, twin)
            print(f"  {sku} (twin {TWIN[twin][0].split('_')[1]}, x{r['twin_factor']:.3f}): step measured "
                  f"{r['measured_s']:.3f} s, projected {r['projected_s']:.3f} s (all-to-all {r['a2a_s']:.3f}); "
                  f"all-to-all left {r['implied_a2a_s']:.3f} s = NIC {r['implied_nic'] / 1e9:5.1f} GB/s "
                  f"(database {r['db_nic'] / 1e9:.0f})")


def _calls() -> None:
    print("one all-to-all call of the EP 64 rows (dispatch or combine, one micro-batch)")
    for sku in ("b300", "b200"):
        c = a2a_calls(sku)
        print(f"  {sku}: one all-to-all {c['bytes_per_rank'] / 1e6:.1f} MB per rank over {c['ranks']} ranks "
              f"({c['per_domain']} per node), {c['bytes_per_peer'] / 1e6:.2f} MB per peer, {c['nic_bytes'] / 1e6:.1f} MB "
              f"through the NIC; priced {1e3 * c['seconds']:.3f} ms at e_nic_a2a {c['nic_eff']:.3f}, latency "
              f"{100 * c['latency_share']:.1f} % of it")
    o = OCI_B300_2NODE
    lat = sweep_fixed_cost(o["busbw"], o["avg_busbw"], o["ranks"], o["sizes"])
    f = a2a_calls("b300")
    n = a2a_calls_per_step("b300")
    r = implied_a2a("b300", "b300")
    print(f"  OCI's B300 2-node sweep read at its most pessimistic (every shortfall a fixed cost): {1e6 * lat:.0f} us per "
          f"call against the model's {1e6 * f['latency_share'] * f['seconds']:.0f}; x {n} calls per iteration = "
          f"{n * (lat - f['latency_share'] * f['seconds']):.3f} s more per iteration (the B300 row leaves "
          f"{r['implied_a2a_s'] - r['a2a_s']:.3f} s beyond its priced all-to-all, twin GB300)")


def _records() -> None:
    from primus_launch.projection.cost import evidence as ev

    print("public NCCL alltoall_perf runs across scale-up domains, NIC efficiency per GPU implied")
    for rid, (k, nic) in A2A_RECORDS.items():
        rec = ev.record(rid)
        n, size = rec["shape"]["ranks"], rec["shape"]["bytes"]
        per_peer = f"{size / n / 1e6:7.1f} MB" if isinstance(size, (int, float)) else "  large  "
        print(f"  {rid:34s} {rec['gpu']:8s} {n:4d} ranks, {k:2d} per domain, {n - k:3d} remote peers, "
              f"{per_peer} per peer, busbw {rec['value']:6.1f}: "
              f"e = {record_nic_efficiency(rec, k, nic):.3f} of {nic:.0f} GB/s")


def _what_if() -> None:
    print(f"B300 rows with the NIC at {SLOW_NIC / 1e9:.0f} GB/s per GPU (error as built -> what-if)")
    res = what_if_nic()
    for rid, a, b in res:
        print(f"  {rid:58s} {100 * a:+6.1f}% -> {100 * b:+6.1f}%")
    rows = _rows()
    b3, b2 = rows[EP64["b300"]], rows[EP64["b200"]]
    e3 = {rid: b for rid, _a, b in res}[EP64["b300"]]
    p2 = project(b2["plan"]).tokens_per_sec_per_gpu
    print(f"  EP 64 pair B300 / B200: measured {b3['measured_tokens_per_sec_per_gpu'] / b2['measured_tokens_per_sec_per_gpu']:.3f}, "
          f"modelled with the B300 NIC at {SLOW_NIC / 1e9:.0f} GB/s "
          f"{(1 + e3) * b3['measured_tokens_per_sec_per_gpu'] / p2:.3f}")


SECTIONS = {"pairs": _pairs, "implied": _implied, "calls": _calls, "records": _records, "what-if": _what_if}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", choices=sorted(SECTIONS), action="append", help="one section (repeatable; default all)")
    a = ap.parse_args(argv)
    for name in a.section or list(SECTIONS):
        SECTIONS[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
