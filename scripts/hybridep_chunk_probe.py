"""HybridEP's 64-token combine chunks in Megatron-LM's moe_recipes runs (issue 28: the Qwen3-235B H100 reference).

Diagnostics only.  The model prices the chunk since branch hepchunk (``Plan.training.moe_hybridep_combine_chunk``,
``projection/cost/hybridep_chunk.py``; the adapters read it from the launch environment or the pinned DeepEP build,
``adapters/hybridep_env.py``); this probe shows where it comes from and what it moves.

The facts it rests on, read from public sources:

- DeepEP ``hybrid-ep`` PR #588 (a0d27f1, 2026-03-31, "Add Permute/Unpermute Fusion Code Path") changed the default
  ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API`` (and the dispatch / preprocessing chunks) from 128 tokens
  (``deep_ep/hybrid_ep_buffer.py`` before it) to 64 (``csrc/hybrid_ep/config.cuh`` ``Configurer`` after it); the
  hybrid-ep ``docs/README_Hybrid-EP.md`` (@94a9f8f) says 64 is the default and that without the fused path 128 "in
  some cases" is faster.
- Its cost, measured on the kernel (PR #588, comment of 2026-04-14, 4 ranks inside one NVLink domain): combine kernel
  315.61 us before, 522.63 us after (789.26 -> 476.63 GB/s NVL); dispatch 287.36 / 287.26 us, unchanged.
  Megatron-Bridge 797a11418 (2026-04-03) sets ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API=128`` on every HybridEP recipe,
  H100 included ("~2x combine-kernel regression for unfused combine"); Megatron-LM's own moe_recipes set it on some
  recipes only.
- Across nodes (RDMA-bound) no before / after pair exists.  The closest: the README's H100 kernel-only figures (last
  changed 7febc6e, 2026-02-09, 128-token chunks) at 32 ranks, 8 SMs: combine 56.40 / dispatch BF16 54.50 GB/s = 1.035;
  DeepEP PR #634 (2026-05-19, 64-token default, 4 nodes x 8 = 32 ranks, non-fused kernels): combine 105.41 / dispatch
  110.54 GB/s RDMA = 0.954.  Read as the chunk's whole effect (different hardware, so an upper bound), the RDMA combine
  is <= 1.085x slower.
- The model's HybridEP figures are the README's (128-token era), so it prices every run at 128-token combines.
  Megatron-LM runs HybridEP unfused unless ``--moe-permute-fusion-into-hybridep`` (``transformer_config.py``, default
  False; none of the moe_recipes sets it).

Sections:

1. ``recipes``: the Megatron-LM moe_recipes rows on HybridEP: the DeepEP commit each recipe pins (``DEPENDENCIES``),
   the ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API`` its ``ENV_VARS`` set, the combine chunk it ran at, its error as built.
2. ``bound``: one HybridEP combine of each row per micro-batch as the model prices it: the RDMA stage, the NVLink stage
   (``collectives.dispatch_time`` with the other stage's rate set infinite), which one binds, and whether the NVLink
   stage x PR #588's ratio would bind.
3. ``scaled``: the rows whose plans run 64-token unfused combines, projected at their chunk (as the model prices
   them: NVLink x PR #588's ratio, RDMA x the 1.085 upper bound) and at 128 tokens (the model before hepchunk).

    python scripts/hybridep_chunk_probe.py                 # all sections
    python scripts/hybridep_chunk_probe.py --section bound
    python scripts/hybridep_chunk_probe.py --runs /tmp/runs.json   # rows built elsewhere (build_runs.py's output)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from typing import Iterator, Optional

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "scripts" / "validation" / "runs.json"

# DeepEP PR #588 (comment of 2026-04-14): combine kernel over NVLink, us, before / after the 64-token default
NVL_COMBINE_US_CHUNK128, NVL_COMBINE_US_CHUNK64 = 315.61, 522.63
NVL_RATIO = NVL_COMBINE_US_CHUNK64 / NVL_COMBINE_US_CHUNK128
# combine / dispatch-BF16 kernel-only GB/s at 32 ranks across 4 nodes: README H100 (8 SMs, 128-token chunks) and
# DeepEP PR #634 (4 nodes, 64-token default); their quotient read as the chunk's whole effect: an upper bound
RDMA_RATIO = (56.40 / 54.50) / (105.41 / 110.54)
CHUNK_DEFAULT_BEFORE, CHUNK_DEFAULT_AFTER = 128, 64
CHUNK_CHANGE_DATE = "2026-03-31"   # DeepEP hybrid-ep a0d27f1

# Megatron-LM dev @d48bd6be examples/moe_recipes, the HybridEP rows: (runs.json id, recipe, DeepEP commit pinned,
# its commit date, NUM_OF_TOKENS_PER_CHUNK_COMBINE_API in ENV_VARS or None).  No recipe sets
# moe_permute_fusion_into_hybridep, so every one runs the unfused combine.
MLM_HYBRIDEP: tuple[tuple[str, str, str, str, Optional[int]], ...] = (
    ("mlm_moe_qwen3_235b_h100_bf16_256gpu_tp2pp8ep32", "qwen3_235b/h100/bf16_256GPU_TP2PP8EP32.yaml",
     "cf78085", "2026-04-14", None),
    ("mlm_moe_qwen3_30b_h100_fp8_32gpu_tp1pp1ep8", "qwen3_30b/h100/fp8_32GPU_TP1PP1EP8.yaml",
     "cf78085", "2026-04-14", None),
    ("mlm_moe_qwen3_30b_h100_bf16_32gpu_tp1pp1ep8", "qwen3_30b/h100/bf16_32GPU_TP1PP1EP8.yaml",
     "cf78085", "2026-04-14", None),
    ("mlm_moe_deepseek_v3_gb200_mxfp8_256gpu_tp1pp4ep64", "deepseek_v3/gb200/mxfp8_256GPU_TP1PP4EP64.yaml",
     "1b8f467", "2026-04-16", None),
    ("mlm_moe_deepseek_v3_gb300_mxfp8_256gpu_tp1pp4ep64", "deepseek_v3/gb300/mxfp8_256GPU_TP1PP4EP64.yaml",
     "1b8f467", "2026-04-16", None),
    ("mlm_moe_qwen3_235b_gb300_mxfp8_128gpu_tp1pp1ep64_paged_stash_full_cg",
     "qwen3_235b/gb300/mxfp8_128GPU_TP1PP1EP64_paged_stash_full_cg.yaml", "d28bd67", "2026-04-29", None),
    ("mlm_moe_qwen3_235b_gb200_mxfp8_128gpu_tp1pp1ep64_paged_stash_fullcg_overlap",
     "qwen3_235b/gb200/mxfp8_128GPU_TP1PP1EP64_paged_stash_fullcg_overlap.yaml", "d28bd67", "2026-04-29", 128),
    ("mlm_moe_qwen3_235b_gb200_mxfp8_128gpu_tp1pp1ep64_partial_cg_overlap",
     "qwen3_235b/gb200/mxfp8_128GPU_TP1PP1EP64_partial_cg_overlap.yaml", "7febc6e", "2026-02-09", 128),
    ("mlm_moe_qwen3_235b_b300_mxfp8_128gpu_tp2pp1ep16_partial_cg", "qwen3_235b/b300/mxfp8_128GPU_TP2PP1EP16_partial_cg.yaml",
     "7febc6e", "2026-02-09", None),
    ("mlm_moe_qwen3_30b_gb200_bf16_16gpu_tp1pp1ep16", "qwen3_30b/gb200/bf16_16GPU_TP1PP1EP16.yaml",
     "7febc6e", "2026-02-09", None),
    ("mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_partial_cg", "qwen3_30b/gb200/mxfp8_16GPU_TP1PP1EP16_partial_cg.yaml",
     "7febc6e", "2026-02-09", None),
    ("mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_paged_stash",
     "qwen3_30b/gb200/mxfp8_16GPU_TP1PP1EP16_paged_stash.yaml", "7febc6e", "2026-02-09", None),
)


def combine_chunk(deepep_date: str, env_chunk: Optional[int]) -> int:
    """Tokens per chunk the HybridEP combine API ran at: the recipe's ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API``, else the
    default of the DeepEP commit it pinned (128 before a0d27f1 of 2026-03-31, 64 from it on)."""
    if env_chunk is not None:
        return env_chunk
    return CHUNK_DEFAULT_AFTER if deepep_date >= CHUNK_CHANGE_DATE else CHUNK_DEFAULT_BEFORE


def _rows(path: Path = RUNS) -> dict[str, dict]:
    return {r["id"]: r for r in json.loads(Path(path).read_text())["rows"]}


def _plan(plan: dict):
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan

    return Plan.model_validate(plan)


def combine_stages(plan) -> tuple[float, float]:
    """Seconds of one HybridEP combine per micro-batch of ``plan`` (in situ, without the per-call API time): its RDMA
    stage and its NVLink stage, each priced by ``collectives.dispatch_time`` with the other stage's rate infinite
    (inside one NVLink domain the RDMA stage is 0)."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost.moe_routing import expected_units_hit
    from primus_launch.projection.hardware.placement import layout

    m, t, p = plan.model, plan.training, plan.parallel
    pl = layout(plan).ep
    tokens = float(t.micro_batch_size * m.seq_length) / p.cp / p.tp * p.expert_tp
    per_rank = max(1, m.num_experts // pl.size)
    d_rank = expected_units_hit(m.num_experts, m.moe_router_topk, per_rank)
    d_dom = expected_units_hit(m.num_experts, m.moe_router_topk, per_rank * pl.per_node) if pl.nodes > 1 else 1.0
    fab, lib, inf = coll.fabric(plan.cluster.gpu), "hybridep", 1e30
    tb = float(m.expert_hidden * 2)
    rdma_only = dataclasses.replace(fab, e_nvl={**fab.e_nvl, lib: inf})
    nvl_only = dataclasses.replace(fab, e_rdma={**fab.e_rdma, lib: inf})
    lat = coll.dispatch_time(tokens, tb, pl.size, pl.nodes, pl.per_node, dataclasses.replace(
        rdma_only, e_rdma={**fab.e_rdma, lib: inf}), d_rank, d_dom, lib)
    t_rdma = (coll.dispatch_time(tokens, tb, pl.size, pl.nodes, pl.per_node, rdma_only, d_rank, d_dom, lib) - lat
              if pl.nodes > 1 else 0.0)
    t_nvl = coll.dispatch_time(tokens, tb, pl.size, pl.nodes, pl.per_node, nvl_only, d_rank, d_dom, lib) - lat
    return t_rdma, t_nvl


@contextlib.contextmanager
def slower_combine(nvl: float = NVL_RATIO, rdma: float = RDMA_RATIO) -> Iterator[None]:
    """Inside: every HybridEP combine the model prices runs its NVLink stage ``nvl`` times and its RDMA stage ``rdma``
    times slower (the fabric's HybridEP rates divided for ``op == "combine"`` calls only); restored on exit."""
    from primus_launch.projection.cost import collectives as coll

    orig_dd, orig_fabric = coll.deepep_dispatch, coll.fabric

    def dd(tokens, token_bytes, pl, gpu, num_experts, topk, num_groups=1, group_topk=1, lib="deepep", insitu=True,
           op="dispatch", api=True, num_sms=0, forward=True, round_robin=False, combine_chunk=128,
           probs=False):
        args = (tokens, token_bytes, pl, gpu, num_experts, topk, num_groups, group_topk, lib, insitu, op, api,
                num_sms, forward, round_robin, combine_chunk, probs)
        if lib != "hybridep" or op != "combine":
            return orig_dd(*args)
        fab = orig_fabric(gpu)
        slow = dataclasses.replace(
            fab, e_nvl={**fab.e_nvl, lib: fab.e_nvl.get(lib, 0.7) / nvl},
            e_rdma={**fab.e_rdma, lib: fab.e_rdma[lib] / rdma} if lib in fab.e_rdma else fab.e_rdma)
        coll.fabric = lambda g: slow
        try:
            return orig_dd.__wrapped__(*args)
        finally:
            coll.fabric = orig_fabric

    coll.deepep_dispatch = dd
    try:
        yield
    finally:
        coll.deepep_dispatch = orig_dd


def _project(plan) -> float:
    from primus_launch.projection.dryrun import project_dry_run

    return project_dry_run(plan).tokens_per_sec_per_gpu


def section_recipes(rows: dict[str, dict]) -> None:
    print("Megatron-LM moe_recipes rows on HybridEP (dev @d48bd6be; DeepEP's combine default 128 -> 64 tokens at "
          f"a0d27f1, {CHUNK_CHANGE_DATE}); unfused everywhere (no moe_permute_fusion_into_hybridep)")
    for rid, recipe, commit, date, env in MLM_HYBRIDEP:
        r = rows.get(rid)
        if r is None:
            print(f"  {rid}: not in runs.json")
            continue
        got = _project(_plan(r["plan"]))
        meas = r["measured_tokens_per_sec_per_gpu"]
        env_s = f"env {env}" if env is not None else "env unset"
        chunk = _plan(r["plan"]).training.moe_hybridep_combine_chunk
        print(f"  {rid:76s} DeepEP {commit} ({date}), {env_s:9s} -> combine chunk {combine_chunk(date, env):3d}"
              f" (plan: {chunk})   {got / meas - 1:+6.1%}")


def section_bound(rows: dict[str, dict]) -> None:
    print(f"one HybridEP combine per micro-batch as priced (in situ, kernel only): RDMA / NVLink stage ms; "
          f"NVLink x {NVL_RATIO:.3f} (PR #588) binds?")
    for rid, _recipe, _commit, _date, _env in MLM_HYBRIDEP:
        r = rows.get(rid)
        if r is None:
            continue
        plan = _plan(r["plan"])
        t_rdma, t_nvl = combine_stages(plan)
        binds = "RDMA" if t_rdma >= t_nvl else "NVLink"
        slow_binds = "yes" if t_nvl * NVL_RATIO > t_rdma else "no"
        print(f"  {rid:76s} RDMA {t_rdma * 1e3:6.3f}  NVLink {t_nvl * 1e3:6.3f}  binds {binds:6s}  "
              f"NVLink x ratio binds: {slow_binds}")


def section_scaled(rows: dict[str, dict]) -> None:
    print("rows whose plans run 64-token unfused combines: projected at their chunk (the model) and at 128 tokens "
          "(the model before hepchunk)")
    for rid, _recipe, _commit, _date, _env in MLM_HYBRIDEP:
        r = rows.get(rid)
        if r is None:
            continue
        plan, meas = _plan(r["plan"]), r["measured_tokens_per_sec_per_gpu"]
        if (plan.training.moe_hybridep_combine_chunk or CHUNK_DEFAULT_AFTER) != CHUNK_DEFAULT_AFTER:
            continue
        got = _project(plan)
        at128 = _project(plan.model_copy(update={"training": plan.training.model_copy(
            update={"moe_hybridep_combine_chunk": CHUNK_DEFAULT_BEFORE})}))
        print(f"  {rid:76s} measured {meas:9.1f}  at 128 {at128:9.1f} ({at128 / meas - 1:+6.1%})  at 64 {got:9.1f} "
              f"({got / meas - 1:+6.1%})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", choices=("recipes", "bound", "scaled"), action="append")
    ap.add_argument("--runs", default=str(RUNS), help="the validation rows (default scripts/validation/runs.json)")
    a = ap.parse_args(argv)
    sections = a.section or ["recipes", "bound", "scaled"]
    rows = _rows(Path(a.runs))
    for s in sections:
        {"recipes": section_recipes, "bound": section_bound, "scaled": section_scaled}[s](rows)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
