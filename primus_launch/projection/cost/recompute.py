"""Activation recomputation: which layers of a model chunk re-run their forward in the backward, and
the forward seconds selective / per-op recompute re-runs inside one layer.

``full`` re-runs a layer's forward (its TP / CP / EP communication included, added by the stage step)
in its backward for every layer of a chunk (``uniform``), the first ``num_layers`` of each chunk
(``block``), every ``num_layers``-th (``every_n``) or the listed global layer ids (``layer_ids``, AMD
Primus); ``selective`` re-runs the forward of the ``recompute.modules`` (core attention, MLP, MoE
experts, MoE activation, norms, MLA up-projections, shared experts: their per-layer forward times
from the kernel list) (Korthikanti et al. 2022, arXiv 2205.05198 sec. 4.2); ``op`` (TorchTitan
per-op SAC) re-runs the non-matmul ops and every second ``aten.mm`` of each block (attention
outputs are saved; the roofline's ``non_matmul`` and ``op_sac_mm`` parts).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

from primus_launch.plan import ATTENTION_RECOMPUTE_MODULES, Chunk, Plan, RecomputeGranularity
from primus_launch.projection.layer_times import LayerTimes

K = TypeVar("K")


def full_recompute_inert(plan: Plan) -> bool:
    """Whether ``--recompute-granularity full`` re-runs no layer of ``plan``: a Megatron hybrid (Mamba) stack.

    megatron-core 0.16.1 (the pinned version) ``ssm/mamba_block.py`` ``MambaStack.forward`` calls each layer
    directly -- it has no ``_checkpointed_forward`` and nothing in ``ssm/`` or ``models/mamba/`` reads
    ``recompute_granularity`` -- so block-level (``full``) recompute checkpoints nothing in a hybrid model; the
    selective modules, which act inside its attention and MoE layers (``TransformerLayer`` / ``MoELayer``), still
    do.  The same holds at Megatron-LM 3758b54b2 (2026-03-27) and in AMD Primus's own ``models/mamba/mamba_block.py``
    and ``models/hybrid/hybrid_block.py``.  Megatron-LM 118933a859 (2026-05-14, 'Support recomputing in
    HybridModel', #4496) added it to ``HybridStack`` -- a later Megatron-Core than 0.16.1 does recompute."""
    return plan.training.recompute.granularity == "full" and plan.framework == "megatron" and plan.model.is_hybrid


def effective_granularity(plan: Plan) -> RecomputeGranularity:
    """The recompute granularity that acts on ``plan``'s layers: ``none`` where :func:`full_recompute_inert`,
    else the plan's own."""
    return "none" if full_recompute_inert(plan) else plan.training.recompute.granularity


def recomputed_layers(plan: Plan, kinds: Sequence[K], chunk: Chunk, mtp_ids: Sequence[int]) -> list[K]:
    """The entries of ``kinds`` (one per decoder layer of ``chunk``, then one per MTP layer) whose
    forward ``full`` recompute re-runs in the backward (module doc); ``mtp_ids``: the global ids of
    the chunk's MTP layers (``Plan.chunk_mtp_ids``; read only by ``layer_ids``)."""
    r = plan.training.recompute
    if r.granularity != "full" or full_recompute_inert(plan):
        return []
    if r.method == "every_n":
        return [k for j, k in enumerate(kinds) if j % (r.num_layers or 1) == 0]
    if r.method == "layer_ids":
        # AMD Primus recompute_layer_ids: exactly the listed layers (global ids; MTP depth d
        # = num_layers + d), each its own checkpoint (patches/recompute_layer_patches.py)
        rec_ids = set(r.layer_ids)
        gids = chunk.layers + tuple(mtp_ids)
        return [k for gid, k in zip(gids, kinds) if gid in rec_ids]
    if r.method == "block":
        # megatron TransformerBlock._checkpointed_forward: the chunk's first N decoder layers;
        # its MTP layers are not recomputed under block (MultiTokenPredictionLayer warns)
        nd = len(chunk.layers)
        return list(kinds[:nd if r.num_layers is None else min(r.num_layers, nd)])
    return list(kinds)  # uniform: every decoder layer and every MTP layer (checkpointed with N = 1)


#: a hybrid stack's layer symbol -> the roofline's layer kind whose per-module shares it has
#: (cost/hybrid_layers.py ``hybrid_layers``); a Mamba layer has no recompute module (megatron-core 0.16.1
#: ``ssm/mamba_layer.py``: no checkpointed sub-module; only full recompute reaches it)
HYBRID_KIND = {"*": "hybrid_attn", "-": "hybrid_mlp", "E": "hybrid_moe"}


def recompute_modules_fwd(plan: Plan, lt: LayerTimes, kind: str) -> float:
    """Forward seconds re-run by selective (or per-op) recompute in one layer of ``kind`` (dense /
    moe, or a hybrid symbol ``M`` / ``*`` / ``-`` / ``E``) (module doc)."""
    if kind in ("M", "*", "-", "E"):
        r = plan.training.recompute
        if r.granularity != "selective" or kind == "M":
            return 0.0
        # core_attn / mla_up_proj (plan.ATTENTION_RECOMPUTE_MODULES) act in the attention layer, the others in the
        # MLP / MoE layers (the layers' input norms are fused into their first TE linear, only an MoE layer's
        # pre_mlp_layernorm is a module of its own)
        mods = [x for x in r.modules if (x in ATTENTION_RECOMPUTE_MODULES) == (kind == "*")]
        return sum(lt.part(HYBRID_KIND[kind], mod).fwd_s for mod in mods)
    r = plan.training.recompute
    if r.granularity == "op":   # TorchTitan per-op SAC: the non-matmul ops and every second mm
        return lt.part(kind, "non_matmul").fwd_s + lt.part(kind, "op_sac_mm").fwd_s
    if r.granularity != "selective":
        return 0.0
    if not lt.parts:
        return lt.attn_core.fwd_s if lt.attn_core is not None else 0.0
    return sum(lt.part(kind, mod).fwd_s for mod in r.modules)
