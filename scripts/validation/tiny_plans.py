"""Bundled recipes at tiny size: every plan the dry-run reads, shrunk so that its measured path
builds, runs and upscales on a CPU in seconds (``tests/test_measure_matrix.py``,
``scripts/gpu_check.py --smoke``).

:func:`tiny` keeps what decides which pieces are built and how they are wired -- the framework,
every parallel degree (TP, PP, VPP, CP, EP, expert-TP, pipeline layout), the layer count and
pattern (dense / MoE / window layers, MTP), the attention kind (GQA, MLA), the experts and their
routing (count, top-k, groups, shared experts), precision, recompute, dispatcher, schedule -- and
makes the per-rank shapes tiny: 2 attention heads and 1 KV head per TP rank of head size 16,
hidden 64, FFN 32 per TP rank, expert FFN 32 per expert-TP rank, vocabulary 256, 64 tokens per
CP rank.  A TorchTitan plan becomes its model's ``debugmodel`` flavor (``debugmodel_moe`` for an
MoE Qwen3; the builder builds torchtitan's flavors as they are) with the recipe's layer count, its
EP capped at the flavor's expert count.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE_SUFFIXES = (".sh", ".yaml", ".toml")


def bundled_recipes() -> list[Path]:
    """Every recipe file under ``recipes/`` (the bundled recipes the dry-run reads)."""
    return sorted(p for p in (ROOT / "recipes").rglob("*") if p.is_file() and p.suffix in RECIPE_SUFFIXES)


def _tiny_megatron(plan):
    m, p = plan.model, plan.parallel
    tp, cp, etp = p.tp, p.cp, p.expert_tp
    heads = 2 * tp
    model = {"hidden_size": 64, "ffn_hidden_size": 32 * tp, "num_attention_heads": heads, "head_dim": 16,
             "vocab_size": 256, "make_vocab_size_divisible_by": 64, "seq_length": 64 * cp,
             "max_position_embeddings": 64 * cp}
    if not m.multi_latent_attention:
        grouped = m.num_query_groups is not None and m.num_query_groups < m.num_attention_heads
        model["num_query_groups"] = tp if grouped else None
    else:
        model.update(q_lora_rank=32 if m.q_lora_rank else None, kv_lora_rank=32, qk_head_dim=16,
                     qk_pos_emb_head_dim=8, v_head_dim=16)
    if m.window_size is not None:
        model["window_size"] = min(m.window_size, 16)
    if m.num_experts:
        model["moe_ffn_hidden_size"] = 32 * etp
        if m.moe_shared_expert_intermediate_size:
            model["moe_shared_expert_intermediate_size"] = 32 * tp
    return plan.with_changes(model=model)


def _tiny_torchtitan(plan):
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor
    from primus_launch.plan import Plan

    name = plan.model.name.partition("-")[0]
    flavor = "debugmodel_moe" if name == "qwen3" and plan.model.num_experts else "debugmodel"
    p = plan.parallel
    arch = arch_from_flavor(name, flavor, seq_len=64 * p.cp)
    parallel = p.model_dump()
    if arch.num_experts and p.ep > arch.num_experts:
        parallel["ep"] = arch.num_experts
    data = plan.model_dump()
    # the recipe's layer count (its pipeline split reads it); the flavor's layers are what is built
    data.update(model={**arch.model_dump(), "num_layers": plan.model.num_layers}, parallel=parallel)
    return Plan.model_validate(data)


def tiny(plan):
    """``plan`` at tiny per-rank shapes, every feature kept (module docstring)."""
    return _tiny_torchtitan(plan) if plan.framework == "torchtitan" else _tiny_megatron(plan)
