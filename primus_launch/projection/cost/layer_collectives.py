"""The tensor- and context-parallel collectives one micro-batch issues, call by call.

Each :class:`Call` is one collective a rank issues: pass (``fwd`` / ``bwd``), operation, its size
by the NCCL-tests convention the collectives model prices (all-reduce: the tensor; all-gather: the
gathered output; reduce-scatter: the input), the group (``tp`` / ``cp``) and where it sits
(``layer``: each transformer layer; ``embedding``; ``head``: the output layer; ``loss``: the
vocabulary-parallel cross-entropy).  :mod:`.tp_comm` and :mod:`.cp_comm` price exactly
these lists, and ``tests/test_layer_collectives.py`` checks them against the calls megatron-core
makes in a real 2-process gloo run.

Megatron-core 0.16.1 (``tensor_parallel/layers.py``, ``mappings.py``, ``cross_entropy.py``):

- layer, TP without sequence parallelism: forward all-reduce after the attention projection and
  after fc2 (``RowParallelLinear``: ``reduce_from_tensor_model_parallel_region``); backward the
  input-gradient all-reduce of the QKV and fc1 ``ColumnParallelLinear``
  (``LinearWithGradAccumulationAndAsyncCommunication.backward``, ``allreduce_dgrad``): 2 + 2;
- layer, with sequence parallelism: forward an all-gather before QKV and fc1 (the column-parallel
  linear gathers its input) and a reduce-scatter after proj and fc2
  (``reduce_scatter_to_sequence_parallel_region``); backward the all-gather of the row-parallel
  linears' output gradient, the column-parallel linears' re-all-gather of their saved sequence-
  sharded input (for the weight gradient) and their input-gradient reduce-scatter: 2 + 2 forward,
  4 + 2 backward; the all-gathers move quantised data under Megatron + TE FP8 recipes
  (:func:`sp_gather_bytes`).  TorchTitan's DTensor SP saves the gathered input: no re-gather (2 + 2 backward);
- embedding (``VocabParallelEmbedding``): forward all-reduce (reduce-scatter with SP), backward
  nothing (all-gather with SP: the reduce-scatter's backward);
- head (the output ``ColumnParallelLinear``): backward input-gradient all-reduce; with SP forward
  all-gather, backward re-all-gather and reduce-scatter;
- loss (``_VocabParallelCrossEntropy.forward``): three fp32 all-reduces of one value per token
  (the logits' max, the target logit, the sum of exponentials).

TorchTitan 0.3.0 with sequence parallelism (its default, ``enable_sequence_parallel``), as its own
step makes them -- ``tests/test_layer_collectives.py`` traces torchtitan's model, sharding config
and ``parallelize_fn`` at world size 2 (torch's fake process group, ``FakeTensorMode``, the
``partial_dtensor`` SPMD backend), recording each functional collective op with its size
(``tests/titan_trace.tp_collectives``), for llama3, Qwen3 (dense and MoE) and DeepSeek-V3 (MLA,
shared experts), and holds this list equal to it call by call:

- layer: forward an all-gather into the attention and into the FFN / MoE and a reduce-scatter of
  their outputs (2 + 2); backward the reverse (2 + 2, no re-gather), and one all-reduce of the
  partial gradient of each parameter the TP plan replicates (:func:`titan_replicated_grads`: the
  two norms, Qwen3's q / k norms, MLA's down-projections and their norms, a MoE layer's router);
- MoE layer (``where="moe_layer"``, its own list in place of the layer's): the all-gathers and
  reduce-scatters around the attention and the MoE as above, the shared experts' output
  reduce-scattered apart from the routed experts' (forward 3, backward 3 all-gathers); backward
  one reduce-scatter only (the attention's input gradient: torchtitan's MoE sharding config lets
  the router's and shared experts' gradients flow as ``Partial``), and without shared experts the
  MoE input's gradient all-reduced instead; the replicated parameters' all-reduces, the router gate
  among them where there are shared experts (Qwen3's MoE layer, without them, all-reduces no gate);
- embedding: forward reduce-scatter, backward all-gather; head: forward all-gather of the final
  norm's output, backward its reduce-scatter and the norm weight's all-reduce;
- loss (``components/loss.py`` ``_LossParallelCrossEntropy``, both SPMD backends): three fp32
  all-reduces of one value per token forward ("max, sumexp, gather"), none backward.

Without sequence parallelism (not torchtitan's default) the layer is priced with Megatron's 2 + 2
all-reduces, the embedding's output and the head's input gradient all-reduced: not checked against
torchtitan's step, whose traced backward makes other calls there (``tp_collectives(sp=False)``).

Context parallelism, ``cp_comm_type="allgather"`` (TransformerEngine
``pytorch/attention/dot_product_attention/context_parallel.py``, ``AttnFuncWithCPAndKVAllGather``,
the same since v1.13): forward all-gathers K and V separately (``gather_along_first_dim``);
backward all-gathers them again (only the local K, V are saved) and reduce-scatters dK and dV
(``reduce_scatter_along_first_dim``): 2 forward, 2 + 2 backward per layer.

QKV sub-sharding (``where="qkv_gather"``, in every Megatron layer's list by :func:`layer_calls`): with fewer
query groups than TP ranks (megatron-core >= 0.16.0, f7dfb99795) ``SelfAttention.get_query_key_value_tensors``
(0.16.1 ``transformer/attention.py``:1398-1414) all-gathers the QKV linear's output along its last dimension
(``all_gather_last_dim_from_tensor_parallel_region``) before slicing the rank's group out; the autograd function
(``tensor_parallel/mappings.py``:380-397 ``_AllGatherFromTensorParallelRegion``) reduce-scatters the gradient in
the backward (``_reduce_scatter_along_last_dim``): one all-gather forward, one reduce-scatter backward, each of
the full-width ``[T, (nq + 2 ng) d]`` output in the activation dtype (:func:`qkv_subshard_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import Plan


@dataclass(frozen=True)
class Call:
    """One collective call of one rank (module doc)."""

    phase: str    # "fwd" | "bwd"
    op: str       # "all_reduce" | "all_gather" | "reduce_scatter"
    nbytes: float  # all-reduce: the tensor; all-gather: the gathered output; reduce-scatter: the input
    group: str    # "tp" | "cp"
    where: str    # "layer" | "moe_layer" (a MoE layer's own list, where it has one) | "qkv_gather" (each layer's
    #               QKV sub-sharding calls) | "qk_norm_gather" (each layer's q / k norm gathers,
    #               cost/titan_qk_norm.py) | "embedding" | "head" | "loss"


def rank_tokens(plan: Plan) -> int:
    """Tokens of one micro-batch on one rank of the context-parallel group: ``mbs * s / cp``."""
    return plan.training.micro_batch_size * plan.model.seq_length // plan.parallel.cp


def sp_gather_bytes(plan: Plan) -> tuple[float, float, float]:
    """Gathered bytes of one sequence-parallel all-gather of a layer GEMM's input (forward), of a
    row-parallel linear's output gradient (backward) and of Megatron's backward re-gather of the
    input; bf16 ``2 T h`` each, but under Megatron + TE with an FP8 recipe the gathers move quantised
    data: per-tensor (delayed / tensorwise) 1 B per element -- the norm output of QKV / FC1 is
    quantised before its gather (TE ``LayerNormLinear``), the output gradient too (``module/base.py``
    ``grad_output_preprocess``: ``quantizer(grad_output)`` then ``gather_along_first_dim``), and
    ``distributed.py`` ``_all_gather_fp8`` gathers the row-wise data, building any transpose after the
    gather; MXFP8 (``_all_gather_mxfp8``) gathers each usage it needs: row-wise for the forward GEMM,
    column-wise for the weight-gradient re-gather, both for the output gradient (1, 1, 2 B per
    element, + 1/32 for the E8M0 scales).  Reduce-scatters stay bf16.  TorchTitan with torchao float8
    tensorwise applies ``Float8ColwiseParallel`` / ``Float8RowwiseParallel`` / ``PrepareFloat8ModuleInput``
    (torchtitan @9dec370 ``parallelisms/parallelize_llama.py`` ``apply_tp`` with ``enable_float8``; later
    versions only for tensorwise): the input is cast to float8 before its sequence-parallel all-gather and the
    output gradient before the all-gather that is the backward of the row-parallel reduce-scatter
    (torchao ``float8/float8_tensor_parallel.py``: ``hp_tensor_to_float8_dynamic`` then ``redistribute``;
    ``NoopFwToFloat8BwDynamic`` after it): 1 B per element; its reduce-scatters stay bf16."""
    act = float(rank_tokens(plan) * plan.model.hidden_size * 2)
    if plan.framework == "torchtitan" and plan.training.precision == "fp8":
        from primus_launch.projection.cost import fp8 as fp8m

        if fp8m.recipe_of(plan) == "tensorwise":
            return act / 2, act / 2, act
    if plan.framework == "megatron" and plan.training.precision == "fp8":
        from primus_launch.projection.cost import fp8 as fp8m

        rec = fp8m.recipe_of(plan)
        if rec in ("delayed", "tensorwise"):
            return act / 2, act / 2, act / 2
        if rec == "mxfp8":
            one = act / 2 * (1 + 1 / 32)
            return one, 2 * one, one
    return act, act, act


def qkv_subsharded(plan: Plan) -> bool:
    """Whether ``plan``'s attention runs megatron-core's QKV sub-sharding: Megatron, no MLA, fewer query groups
    than TP ranks (0.16.1 ``transformer/attention.py``:289 and :1398, ``num_query_groups < world_size``)."""
    m = plan.model
    return plan.framework == "megatron" and not m.multi_latent_attention and m.kv_heads < plan.parallel.tp


def qkv_subshard_bytes(plan: Plan) -> float:
    """Gathered bytes of the QKV sub-sharding all-gather (and its backward reduce-scatter's input): the fused
    QKV output of ``T`` tokens at its full width ``(nq + 2 ng) d`` (``SelfAttention.linear_qkv_out_dim``; the
    linear's output, gathered before any norm or RoPE; the GEMM's high-precision output dtype, bf16, under FP8
    recipes too); 0 when the plan does not sub-shard (:func:`qkv_subsharded`)."""
    if not qkv_subsharded(plan):
        return 0.0
    m = plan.model
    width = (m.num_attention_heads + 2 * m.kv_heads) * m.kv_channels
    return float(rank_tokens(plan) * width * 2)


def titan_replicated_grads(plan: Plan, moe: bool = False) -> list[float]:
    """Bytes (bf16) of each parameter of one layer that TorchTitan's TP plan with sequence
    parallelism replicates over the TP group, whose gradient is partial and all-reduced in the
    backward (module doc): the attention and FFN norms (``h``), Qwen3's q / k norms (``qk_layernorm``:
    ``head_dim`` each), MLA's ``wkv_a`` (``h x (kv_lora_rank + rope dim)``) and ``kv_norm``, with a
    query LoRA ``wq_a`` and ``q_norm``, and with ``moe`` a MoE layer's router gate (``h x E``) where
    the layer has shared experts (without them the traced step all-reduces no gate gradient)."""
    m = plan.model
    h = m.hidden_size
    out = [h, h]
    if m.qk_layernorm and not m.multi_latent_attention:
        out += [m.kv_channels, m.kv_channels]
    if m.multi_latent_attention:
        out += [h * (m.kv_lora_rank + m.qk_pos_emb_head_dim), m.kv_lora_rank]
        if m.q_lora_rank:
            out += [h * m.q_lora_rank, m.q_lora_rank]
    if moe and m.moe_shared_expert_intermediate_size:
        out.append(h * m.num_experts)
    return [2.0 * n for n in out]


# the attention's own gathers, in every layer's list and always exposed (cost/tp_comm.py): Megatron's QKV
# sub-sharding (qkv_subsharded) and torchtitan < 0.2.0's Qwen3 q / k norm gathers (cost/titan_qk_norm.py)
ATTENTION_GATHERS = ("qkv_gather", "qk_norm_gather")


def tp_calls(plan: Plan) -> list[Call]:
    """The TP calls of one micro-batch: one layer's (``where="layer"``; where a MoE layer makes
    others, its own list, ``"moe_layer"``), the embedding's, the head's and the loss's (module
    doc); empty for ``tp = 1``."""
    p, m = plan.parallel, plan.model
    if p.tp <= 1:
        return []
    act = float(rank_tokens(plan) * m.hidden_size * 2)   # [T, h] bf16 (gathered size)
    megatron = plan.framework == "megatron"
    titan = plan.framework == "torchtitan"
    out: list[Call] = []

    def add(phase: str, op: str, where: str, n: int = 1, nbytes: float = act) -> None:
        out.extend(Call(phase, op, nbytes, "tp", where) for _ in range(n))

    if p.sequence_parallel:
        g_in, g_dy, g_re = sp_gather_bytes(plan)
        add("fwd", "all_gather", "layer", 2, g_in)
        add("fwd", "reduce_scatter", "layer", 2)
        add("bwd", "all_gather", "layer", 2, g_dy)
        if megatron:
            add("bwd", "all_gather", "layer", 2, g_re)
        add("bwd", "reduce_scatter", "layer", 2)
        if titan:
            for nb in titan_replicated_grads(plan):
                add("bwd", "all_reduce", "layer", 1, nb)
            if m.is_moe:  # a MoE layer's own list (module doc)
                shared = bool(m.moe_shared_expert_intermediate_size)
                add("fwd", "all_gather", "moe_layer", 2, g_in)
                add("fwd", "reduce_scatter", "moe_layer", 3 if shared else 2)
                add("bwd", "all_gather", "moe_layer", 3 if shared else 2, g_dy)
                add("bwd", "reduce_scatter", "moe_layer")
                for nb in titan_replicated_grads(plan, moe=True):
                    add("bwd", "all_reduce", "moe_layer", 1, nb)
                if not shared:
                    add("bwd", "all_reduce", "moe_layer")
    else:
        add("fwd", "all_reduce", "layer", 2)
        add("bwd", "all_reduce", "layer", 2)
    if qkv_subsharded(plan):   # module doc: the QKV output's all-gather and its gradient's reduce-scatter
        add("fwd", "all_gather", "qkv_gather", 1, qkv_subshard_bytes(plan))
        add("bwd", "reduce_scatter", "qkv_gather", 1, qkv_subshard_bytes(plan))
    # torchtitan < 0.2.0's Qwen3 q / k norm NoParallel: q, k gathered forward, their gradients backward
    from primus_launch.projection.cost.titan_qk_norm import qk_norm_gather_bytes

    qk_fwd, qk_bwd = qk_norm_gather_bytes(plan, rank_tokens(plan))
    for nb in qk_fwd:
        add("fwd", "all_gather", "qk_norm_gather", 1, nb)
    for nb in qk_bwd:
        add("bwd", "all_gather", "qk_norm_gather", 1, nb)
    if megatron or titan:
        if p.sequence_parallel:
            add("fwd", "reduce_scatter", "embedding")
            add("bwd", "all_gather", "embedding")
            add("fwd", "all_gather", "head")
            if megatron:  # the output layer's re-gather of its saved input
                add("bwd", "all_gather", "head")
            add("bwd", "reduce_scatter", "head")
            if titan:  # the final norm weight's partial gradient
                add("bwd", "all_reduce", "head", 1, 2.0 * m.hidden_size)
        else:
            add("fwd", "all_reduce", "embedding")
            add("bwd", "all_reduce", "head")
        add("fwd", "all_reduce", "loss", 3, float(rank_tokens(plan) * 4))
    return out


def layer_calls(plan: Plan, moe: bool = False) -> list[Call]:
    """The TP calls of one layer: with ``moe``, a MoE layer's own list where it has one
    (``where="moe_layer"``, TorchTitan's), else the layer's (:func:`tp_calls`); with Megatron's QKV
    sub-sharding its attention's all-gather and reduce-scatter (``where="qkv_gather"``) in either."""
    calls = tp_calls(plan)
    mine = [c for c in calls if c.where == "moe_layer"] if moe else []
    return (mine or [c for c in calls if c.where == "layer"]) + [c for c in calls if c.where in ATTENTION_GATHERS]


def cp_calls(plan: Plan) -> list[Call]:
    """The CP calls of one layer and micro-batch for Megatron's ``cp_comm_type="allgather"``
    (TransformerEngine's K/V all-gather attention, module doc); empty otherwise (the other
    exchanges are priced per step in :func:`cost.cp_comm.cp_layer_comm`)."""
    p, m = plan.parallel, plan.model
    if p.cp <= 1 or p.cp_comm_type != "allgather" or plan.framework != "megatron":
        return []
    T = rank_tokens(plan)
    if m.multi_latent_attention:
        k_elems = m.num_attention_heads // p.tp * (m.qk_head_dim + m.qk_pos_emb_head_dim)
        v_elems = m.num_attention_heads // p.tp * m.v_head_dim
    else:
        k_elems = v_elems = max(1, m.kv_heads // p.tp) * m.kv_channels
    k, v = float(T * p.cp * k_elems * 2), float(T * p.cp * v_elems * 2)
    return [Call("fwd", "all_gather", k, "cp", "layer"), Call("fwd", "all_gather", v, "cp", "layer"),
            Call("bwd", "all_gather", k, "cp", "layer"), Call("bwd", "all_gather", v, "cp", "layer"),
            Call("bwd", "reduce_scatter", k, "cp", "layer"), Call("bwd", "reduce_scatter", v, "cp", "layer")]


def priced(calls: list[Call], gpu: str, groups: dict) -> tuple[float, float]:
    """(forward, backward) seconds of ``calls``, each priced by the collectives model on its
    group's placement (``groups``: ``{"tp": layout.tp, "cp": layout.cp}``)."""
    from primus_launch.projection.cost import collectives as coll

    fn = {"all_reduce": coll.all_reduce, "all_gather": coll.all_gather, "reduce_scatter": coll.reduce_scatter}
    f = b = 0.0
    for c in calls:
        t = fn[c.op](c.nbytes, groups[c.group], gpu)
        if c.phase == "fwd":
            f += t
        else:
            b += t
    return f, b
