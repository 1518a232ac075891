"""Per-GPU memory of a TorchTitan training step (FSDP2 / HSDP / DDP-as-HSDP, TP/SP, CP, PP, AC modes).

Checked tensor by tensor against torchtitan 0.3.0's own step traced on the CPU under
``FakeTensorMode`` with a fake process group (``tests/titan_trace.py``, ``tests/test_memory_titan.py``;
MoE with EP: ``tests/test_memory_titan_moe.py``, the all-to-all with balanced split sizes).
Per GPU (rank) of a pipeline stage, ``S = dp_shard x cp`` (torchtitan's FSDP mesh, ``parallel_dims.py``
``fsdp = dp_shard * cp``; HSDP replicates over ``dp_replicate``; ``dp_shard = 1`` is HSDP with a shard
group of one: torchtitan 0.3.0 always applies ``fully_shard`` for its mixed-precision policy), ``t`` = TP
(always with sequence parallel), ``a`` = 2 (bf16 compute), ``sb`` = local sequence x micro-batch:

Static (exact, rank 0; ``tests/test_memory_titan_moe.py`` builds the presets' own meshes):

- **units**: torchtitan 0.3.0 ``distributed/fsdp.py`` ``apply_fsdp_to_decoder`` wraps the embedding, each
  block and ``[norm, lm_head]``; an MoE block with EP is one module with two FSDP2 parameter groups, the
  routed experts (``E / ep`` local experts, ``expert_param_placement_sparse``) on the ``efsdp`` mesh
  ``Se = dp_shard x cp x tp / ep`` and the rest on ``fsdp`` (:func:`fsdp_groups`,
  :func:`titan_param_shapes`); without EP the experts are TP-sharded and share the ``fsdp`` mesh;
  experts shard on dim 1 when the expert mesh exceeds ``E``.  Every parameter's shard is padded to
  ``ceil(dim / S)`` rows (``_fsdp_param.py``);
- **parameters** the fp32 padded shards (FSDP2 keeps them as the master copy;
  ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``), plus each block's buffers
  (:func:`titan_buffer_bytes`: the RoPE cache, an MoE block's expert bias and token counts);
- **optimizer** AdamW ``exp_avg`` + ``exp_avg_sq`` fp32 shaped like the shards (torchtitan AdamW, fused);
- **gradients** the fp32 reduce-scatter outputs (one padded shard per group) once the backward has
  reduced them (the breakdown is the one of the peak moment, so only the units reduced before it count);
  under PP the fp32 unsharded gradients of the parameters' own size accumulated across micro-batches.

Activations per decoder layer and micro-batch (:func:`layer_activation_bytes`), what autograd keeps
in torchtitan's modules (``models/common/{attention,feed_forward}.py``, ``nn.RMSNorm``):

- no AC: two norms (``norm_bytes sbh/t`` + fp32 rstd), the column linears' inputs at full sequence
  (``a sbh`` each: wqkv and w1/w3; under SP the all-gathered input is what is saved), q/k/v after RoPE
  ``a sb (nq + 2 nkv) d / t``, SDPA output (= wo's input) ``a sb nq d / t`` and fp32 log-sum-exp,
  SwiGLU unfused: w1 out, silu out, w3 out, w2 in ``4 a sb F / t``;
- ``op`` (``SelectiveAC``): the block input ``a sbh/t`` + the outputs of the ops on its save list: every
  odd-numbered matmul of the block in forward order (:func:`op_sac_mm_outputs`; GQA: wqkv, w1, w2 -- the
  policy recomputes every second mm; MLA without a query LoRA: wq, wkv_b, then w1 / w2 of the dense or
  shared-expert FFN), SDPA output + lse (flash
  / cuDNN SDPA are on the list; the CPU trace's SDPA kernel is not, :data:`TITAN_CPU`), and under TP the
  reduce-scatter outputs ``a sbh/t`` of wo and w2 (``_c10d_functional.reduce_scatter_tensor``).  Up to
  torchtitan v0.2.2 (every TOML release; 'Fused QKV GQAttention' ad7a86533, 2026-04-16, fused them) q, k, v
  are three linears (6fc499f6f ``models/llama3/model/model.py``): the rule saves wq (1), wv (3), w1 (5), w2
  (7) and recomputes wk (2), wo, w3 -- wk's output ``a sb nkv d / t`` less.  Compiled (per-block
  ``torch.compile`` of the checkpointed block) the policy only tags ops; inductor's partitioner saves a
  ``MUST_SAVE`` output only where the backward graph reads it, so w2's output (and under TP its
  reduce-scatter output), which feeds only the block output, is not kept (traced on the meta device with
  torchtitan 0.3.0's ``SelectiveAC``, ``tests/test_memory_titan.py``; under TP 2 + SP through its
  ``parallelize_llama`` too);
- ``full``: the block input ``a sbh/t``; every-N: full AC on blocks ``N, 2N, ...`` (1-based), none on
  the others (torchtitan v0.2 ``_apply_layer_sac``);
- compiled (``training.compile``, per-block ``torch.compile``): what inductor's partitioner
  (``torch/_functorch/partitioners.py`` ``min_cut_rematerialization_partition``, ``compiler="inductor"``,
  with inductor's decompositions) saves between the forward and backward graphs: the block input, the
  norms' bf16 outputs and fp32 rstd, q/k/v after RoPE, the attention output and log-sum-exp, wo's output,
  w1 and w3 outputs and w2's input (``3 a sb F / t``: silu(w1) is recomputed), traced on a meta block
  (``tests/test_memory_titan.py``); qwen3 also the per-head q / k norms' inputs and fp32 rstd, and its
  wo input is a view of the flash output's ``[b, s, heads, d]`` storage (one tensor, traced for the 0.6B and
  14B dense blocks; MEMORY.md round 29).

Last stage: final norm kept + lm_head input ``a sbh`` + the loss's fp32 log-probabilities
``4 sb V/t`` (``cross_entropy_loss(pred.flatten(0, 1).float())``; under TP the vocab-parallel loss keeps
its local fp32 ``log_probs``).  Transient levels walked through the step (the peak is the largest):

- loss backward: all activations + the two fp32 gradients of the logits ``2 x 4 sb V`` (nll and
  log-softmax backward; TP: ``3 x 4 sb V/t``: zeros, exp(log_probs), their sum);
- head backward (FSDP unit ``[norm, lm_head]``, not resharded after forward): its unsharded bf16
  parameters ``2 U`` (when ``S > 1``), the bf16 weight gradient ``2 U``, the fp32 reduce-scatter input
  ``4 U``, its output ``4 U / S``, the world-size-one copy ``4 U`` (``S = 1``), lm_head's input gradient;
- each block's backward (same per-unit terms, the block's own backward temporaries, the previous
  block's prefetched parameters) and the embedding's (dense bf16 weight gradient); an MoE block's
  backward at its own peak (:func:`moe_backward_phases`: the combine's fp32 gradients or the grouped
  experts' gradients, traced per phase), then its post-backward;
- PP (torch.distributed.pipelining with FSDP2, :func:`pp_rank_walk` over the rank's schedule order
  :func:`torch_pp_ops`): receive buffers per micro-batch, the stage's parameters unsharded in bf16
  (``reshard_after_forward=False`` by default under PP), fp32 unsharded gradients accumulated across
  micro-batches (no gradient sync until ``perform_reduce_grad``), each micro-batch in flight with its
  stage output, then the reduce unit by unit; traced per stage and per term for 1F1B, GPipe and
  Interleaved 1F1B (``tests/test_memory_titan_pp.py``).

Reserved (what torchtitan's ``DeviceMemoryMonitor`` logs, ``reserved_bytes.all.peak``): the allocated peak, a
stated 10 % of its activations and transients (:data:`memory.stage.TITAN_DYNAMIC_FRAGMENTATION`), and what
FSDP2's all-gather copy-in and reduce-scatter streams keep reserved beyond what the peak holds of them
(:func:`fsdp2_stream_pools`; traced in ``tests/test_memory_titan_streams.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from primus_launch.plan import ModelArch

Shape = tuple[int, ...]


# ------------------------------------------------------------------ parameters on one rank
def titan_param_shapes(arch: ModelArch, part: str, *, tp: int, ep: int, etp: int = 1) -> tuple[tuple[Shape, bool], ...]:
    """Local shapes of the parameters of one torchtitan 0.3.0 FSDP unit on one rank after tensor and
    expert parallelism, before FSDP, each with whether it is a routed-expert weight.

    ``part``: ``emb`` (``tok_embeddings`` ``[V/t, h]``, rowwise = vocab-sharded), ``head`` (final
    ``norm`` ``[h]`` + ``lm_head`` ``[V/t, h]``, colwise), ``dense`` or ``moe`` (a decoder block).
    Torchtitan's modules and TP plans (``models/common/{attention,feed_forward,moe}.py``,
    ``models/{llama3,qwen3,deepseek_v3}/{model,sharding}.py``, ``models/common/{decoder,moe}_sharding.py``):

    - GQA attention (llama3, qwen3): fused ``wqkv`` ``[(nq + 2 nkv) d / t, h]`` (colwise), ``wo``
      ``[h, nq d / t]`` (rowwise), qwen3's per-head ``q_norm`` / ``k_norm`` ``[d]`` (replicated);
    - MLA (deepseek_v3): ``wq_a`` ``[ql, h]``, ``q_norm`` ``[ql]``, ``wkv_a`` ``[kvl + dr, h]``, ``kv_norm``
      ``[kvl]`` replicated over TP; ``wq_b`` ``[nq (dn + dr) / t, ql]`` (or ``wq`` ``[nq (dn + dr) / t, h]``
      without a query LoRA), ``wkv_b`` ``[nq (dn + dv) / t, kvl]`` colwise, ``wo`` ``[h, nq dv / t]``;
    - ``attention_norm``, ``ffn_norm`` ``[h]``; dense FFN ``w1``, ``w3`` ``[F / t, h]``, ``w2`` ``[h, F / t]``;
    - MoE: ``router.gate`` ``[E, h]`` (replicated), shared experts as a dense FFN of ``Fs``, routed experts
      ``w1_EFD``, ``w3_EFD`` ``[e, Fe', h]``, ``w2_EDF`` ``[e, h, Fe']``: with EP ``e = E / ep`` local experts at
      full width (``expert_param_placement_sparse``: ``EP: Shard(0)``, no TP; torchtitan v0.2's
      ``expert_tensor_parallel_degree`` ``etp`` = TP split them ``Fe' = Fe / etp``), without EP all ``E``
      experts TP-sharded on their FFN dim (``Fe' = Fe / t``).
    """
    h, t = arch.hidden_size, tp
    if part == "emb":
        return (((arch.vocab_size // t, h), False),)
    if part == "head":
        return (((h,), False), ((arch.vocab_size // t, h), False))
    nq = arch.num_attention_heads
    out: list[tuple[Shape, bool]] = [((h,), False), ((h,), False)]  # attention_norm, ffn_norm
    if arch.multi_latent_attention:
        dn, dr, dv, kvl = arch.qk_head_dim, arch.qk_pos_emb_head_dim, arch.v_head_dim, arch.kv_lora_rank
        if arch.q_lora_rank:
            ql = arch.q_lora_rank
            out += [((ql, h), False), ((ql,), False), ((nq * (dn + dr) // t, ql), False)]
        else:
            out.append(((nq * (dn + dr) // t, h), False))
        out += [((kvl + dr, h), False), ((kvl,), False), ((nq * (dn + dv) // t, kvl), False), ((h, nq * dv // t), False)]
    else:
        d = arch.kv_channels
        out += [(((nq + 2 * arch.kv_heads) * d // t, h), False), ((h, nq * d // t), False)]
        if arch.qk_layernorm:
            out += [((d,), False), ((d,), False)]

    def ffn(f: int) -> list[tuple[Shape, bool]]:
        return [((f // t, h), False), ((h, f // t), False), ((f // t, h), False)]

    if part == "dense":
        return tuple(out + ffn(arch.ffn_hidden_size))
    E, fe = arch.num_experts or 1, arch.expert_ffn
    out.append(((E, h), False))
    if arch.moe_shared_expert_intermediate_size:
        out += ffn(arch.moe_shared_expert_intermediate_size)
    if ep > 1:
        e, f = E // ep, fe // max(1, etp)
        out += [((e, f, h), True), ((e, h, f), True), ((e, f, h), True)]
    else:
        out += [((E, fe // t, h), True), ((E, h, fe // t), True), ((E, fe // t, h), True)]
    return tuple(out)


@dataclass(frozen=True)
class FsdpGroup:
    """One FSDP2 parameter group of a unit on one rank (``torch/distributed/fsdp/_fully_shard``).

    ``unsharded``: elements of the group's all-gather output on this rank (``S x`` the padded shard:
    ``FSDPParam.init_all_gather_outputs``), what the unit holds unsharded in bf16 and reduce-scatters
    from in fp32; ``sharded``: elements of the rank's padded shard (``_sharded_param_data``, the fp32
    parameter, the reduce-scatter output its gradient views, each AdamW state of rank 0); ``shard``: the
    group's shard-mesh size ``S``; ``orig``: elements of the parameters themselves (unpadded), the size of
    their unsharded gradients."""

    unsharded: float
    sharded: float
    shard: int
    orig: float = -1.0

    @property
    def grad_elems(self) -> float:
        """Elements of the group's unsharded gradient: ``orig`` where it is known, else ``unsharded``."""
        return self.orig if self.orig >= 0 else self.unsharded


def fsdp_shard_elems(shape: Shape, shard: int, dim: int = 0) -> int:
    """Elements of one rank's padded FSDP2 shard of a ``shape`` parameter sharded on ``dim`` over ``shard``
    ranks: ``_fsdp_param.py`` ``_init_sharded_param`` chunks with ``torch.chunk`` (``_chunk_with_empty``)
    and allocates every rank the first, largest chunk ``ceil(shape[dim] / shard)`` (``padded_sharded_size``)."""
    rows = shape[dim] if shape else 1
    return math.ceil(rows / shard) * math.prod(shape) // max(1, rows)


def fsdp_groups(shapes: tuple[tuple[Shape, bool], ...], *, S: int, Se: int, ep: int,
                num_experts: int) -> tuple[FsdpGroup, ...]:
    """The FSDP2 parameter groups of one unit (torchtitan 0.3.0 ``distributed/fsdp.py``
    ``apply_fsdp_to_decoder``): everything on the ``fsdp`` mesh (``S = dp_shard x cp``) sharded on dim 0;
    in an MoE block with EP the routed experts on the ``efsdp`` mesh (``Se = dp_shard x cp x tp / ep``),
    which FSDP2 keeps as a second group of the same module (``ShardPlacementResult`` per parameter,
    ``_fsdp_init.py`` groups parameters by process group); the experts are sharded on dim 1 instead of
    dim 0 when the expert mesh (``Se x ep``, or ``S`` without EP) is larger than ``E``."""
    dense = [sh for sh, ex in shapes if not ex]
    expert = [sh for sh, ex in shapes if ex]
    e_mesh = Se if ep > 1 else S
    e_dim = 1 if (Se * ep if ep > 1 else S) > num_experts else 0

    def group(items: list[Shape], n: int, dim: int) -> FsdpGroup:
        sh = sum(fsdp_shard_elems(x, n, dim if len(x) > dim else 0) for x in items)
        return FsdpGroup(unsharded=float(n * sh), sharded=float(sh), shard=n,
                         orig=float(sum(math.prod(x) for x in items)))

    if expert and ep > 1:
        return (group(dense, S, 0), group(expert, e_mesh, e_dim))
    if expert and e_dim == 1:  # one group, experts on dim 1 (shard_placement_fn Shard(1))
        sh = sum(fsdp_shard_elems(x, S, 0) for x in dense) + sum(fsdp_shard_elems(x, S, 1) for x in expert)
        return (FsdpGroup(unsharded=float(S * sh), sharded=float(sh), shard=S,
                          orig=float(sum(math.prod(x) for x in dense + expert))),)
    return (group(dense + expert, S, 0),)


def titan_buffer_bytes(arch: ModelArch, *, seq: int, moe: bool) -> float:
    """Buffers of one torchtitan block on every rank (FSDP2 does not shard buffers): the RoPE cache
    (``models/common/rope.py``: complex64 ``[seq, d_rope / 2]`` for llama3 / deepseek_v3, fp32 cos|sin
    ``[seq, 2 d]`` for qwen3; sized to the training sequence as ``update_from_config`` does) and, in an MoE
    block, ``expert_bias_E`` and ``tokens_per_expert_E`` fp32 ``[E]`` (``models/common/moe.py``)."""
    d_rope = arch.qk_pos_emb_head_dim if arch.multi_latent_attention else arch.kv_channels
    rope = (8.0 if arch.name.startswith("qwen3") else 4.0) * seq * d_rope
    return rope + (8.0 * (arch.num_experts or 0) if moe else 0.0)


@dataclass(frozen=True)
class TitanImpl:
    """What the kernels keep (GPU vs the CPU trace)."""

    norm_bytes: int = 2  # RMSNorm keeps its input: CUDA ``_fused_rms_norm`` bf16 (2); CPU composite fp32 copy + fp32 normalised (8)
    sdpa_on_save_list: bool = True  # flash / cuDNN SDPA are on SelectiveAC's save list; the CPU SDPA kernel is not


TITAN = TitanImpl()
TITAN_CPU = TitanImpl(norm_bytes=8, sdpa_on_save_list=False)


@dataclass(frozen=True)
class TitanLayer:
    kept: float  # bytes kept by the block for its backward (under its AC mode)
    full: float  # bytes a block without AC keeps (what a recomputed block rebuilds)
    layer_input: float


def titan_ac_mode(granularity: str) -> str:
    """The ``ac`` mode of :func:`layer_activation_bytes` for a plan's recompute granularity: ``none``, ``op``
    (TorchTitan's SelectiveAC, the plan's ``selective`` or ``op``) or ``full`` (FullAC)."""
    return {"none": "none", "op": "op", "selective": "op", "full": "full"}[granularity]


def layer_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, cp: int = 1, ac: str = "none",
                           compiled: bool = False, impl: TitanImpl = TITAN, moe: bool = False,
                           ep: int = 1, attn: str = "flex", mm_saved: bool = True,
                           a2a_rows: Optional[float] = None) -> TitanLayer:
    """Bytes one torchtitan decoder block keeps per micro-batch on one GPU (module docstring).

    ``attn``: ``flex`` (torchtitan 0.3.0's default ``FlexAttention``: also keeps the fp32 ``max_scores``
    ``[b, heads, s]``, ``torch/_higher_order_ops/flex_attention.py`` ``FlexAttentionAutogradOp``; under
    CP its K and V are all-gathered (``flex_cp_allgather``) and kept at the full sequence), ``sdpa``
    (``ScaledDotProductAttention`` with ``enable_gqa``: K and V kept at their ``nkv`` heads; under CP
    torch's ring attention, whose merged output is laid out ``[b, heads, s, d]``, so the output projection
    keeps its own contiguous copy) or ``sdpa_repeat_kv`` (torchtitan's TOML-config releases up to v0.2.1 and
    Primus v0.5.0's torchtitan 5fb7cc2e: ``models/{llama3,llama4,qwen3}/model/model.py`` ``Attention.forward``
    calls ``repeat_kv(xk / xv, n_rep)`` -- ``expand`` + ``reshape``, a copy -- before SDPA, removed by
    torchtitan ff0829c10 'GQA without kv repeats', 2026-01-27): SDPA's autograd node keeps the expanded K
    and V, ``a sb 2 nq d / t`` instead of ``a sb 2 nkv d / t``; compiled, inductor's partitioner keeps the
    expanded copies too rather than recompute the expansion (traced, ``tests/test_memory_titan.py``).
    SelectiveAC recomputes the copies (not on its save list): ``op`` is unchanged.

    ``ac``: ``none`` | ``op`` | ``full``.  MoE blocks (traced for qwen3 and deepseek_v3 without AC, with
    EP and with TP + EP): the attention plus, per routed row (``T k`` with ``T`` = :func:`moe_tokens`), the
    router's scores, top-k indices and scores, the dispatcher's sorted indices, the routed tokens with
    their input ``h``, the grouped-GEMM w1/w3/silu/w2 tensors ``4 F`` (``F`` = :func:`moe_expert_width`),
    the combine's fp32 copy ``4 h``, with EP the permute index, and a shared expert as a dense MLP
    (torchtitan ``models/common/{moe,token_dispatcher}.py``; balanced routing).  op-SAC on an MoE block:
    the saved matmuls of :func:`op_sac_mm_outputs` (MLA's and the shared expert's included), the router's
    top-k, the all-to-all outputs; traced for GQA (qwen3, EP) and MLA with a shared expert (deepseek_v3, EP 1).

    ``a2a_rows`` (:func:`projection.cost.titan_sac.op_sac_a2a_rows`; ``None``: ``2 k``, both all-to-all outputs
    ``2 a Tk h``): the rows of ``h`` per token of the rank that op-SAC keeps from the two EP token exchanges,
    ``a T h a2a_rows``.  0 for torchtitan 0.3's eager ``spmd_types`` backend: its ``AllToAllTokenDispatcher``
    sends them with spmd_types' ``_AllToAllUneven`` (``torch.split`` + ``torch.distributed.all_to_all`` --
    ``c10d.alltoall_`` -- + ``torch.cat``, spmd_types 0.2.3 ``_collectives.py``), none of them on the save list
    (``_c10d_functional.all_to_all_single``), so the policy recomputes both (traced,
    ``tests/test_titan_sac_all_to_all.py``); DeepEP keeps each token once per destination rank plus the
    combined ``T``.

    float8 / MXFP8 grouped GEMMs (``quantize.grouped_mm.*``, torchao ``moe_training/fp8_grouped_mm.py``
    ``_Float8GroupedMM`` and ``mxfp8_grouped_mm.py`` ``_MXFP8GroupedMM``) save the high-precision input
    and weight, as the bf16 ``torch._grouped_mm`` does; their fp8 casts are transient, and the
    ``TorchAOTokenDispatcher`` pads each local expert's rows to 16 (32 for MXFP8) -- at most ``e x 16``
    rows per layer, not counted here.

    ``mm_saved=False``: the block's linears are torchao's NVFP4 ``nvfp4_mm_triton`` (torchtitan 0.3.0's
    ``NVFP4LinearConverter`` layers), whose forward quantizes with Triton kernels and multiplies with
    ``torch.nn.functional.scaled_mm`` -- ``aten._scaled_mm_v2`` in torch 2.13 -- where SelectiveAC's save list
    (``_get_default_save_ops``: torch's ``compute_intensive_ops`` -- ``aten.mm``, ``aten._scaled_mm``, ... -- plus
    attention, ``aten.max``, ``aten.linear``, the collectives) has neither: under ``op`` no linear output and none
    of the fp4 codes the function saves survive the forward (recomputed in the backward), and its linears do not
    advance the every-second-mm count.  The block keeps its input, the attention output and log-sum-exp and,
    under TP, the reduce-scatter outputs (an MoE block's grouped GEMMs are not converted).  Without AC the
    function keeps the fp4 codes of its input instead of the bf16 input: not modelled (counted as bf16).
    """
    a = 2
    s = seq // cp
    sb = s * mbs
    h = arch.hidden_size
    t = tp
    nq = arch.num_attention_heads
    nb = 2 if compiled else impl.norm_bytes
    norm = nb * sb * h / t + 4.0 * sb / t
    if arch.multi_latent_attention:
        qk = arch.qk_head_dim + arch.qk_pos_emb_head_dim
        qkv = nq * (2 * qk + arch.v_head_dim)
        dv = arch.v_head_dim
    else:
        d = arch.kv_channels
        # keys / values as SDPA keeps them: ``sdpa_repeat_kv`` (torchtitan up to v0.2.1) expands them to the
        # query heads before the kernel (``repeat_kv``), and autograd / inductor keep the expanded copies
        kv_kept = nq if (attn == "sdpa_repeat_kv" and arch.kv_heads < nq) else arch.kv_heads
        qkv = (nq + 2 * kv_kept) * d
        dv = d
    lse = 4.0 * mbs * nq / t * s
    if attn == "flex":
        lse *= 2  # logsumexp + max_scores
    o = a * sb * nq * dv / t
    kv_extra = 0.0
    if cp > 1 and attn == "flex" and not arch.multi_latent_attention:
        kv_extra = a * mbs * (seq - s) * 2 * arch.kv_heads * arch.kv_channels / t  # K, V at the full sequence
    ring_copy = o if (cp > 1 and attn != "flex") else 0.0  # wo's contiguous copy of the ring output
    if arch.multi_latent_attention:
        # torchtitan deepseek_v3 MLA (models/deepseek_v3/model.py): the latents are not split over TP;
        # kept: the q (LoRA) norm and wq_b input, the kv norm and wkv_b input, q and k after the RoPE
        # concat, wkv_b's output (V is a view of it), the attention output and log-sum-exp
        dn, dr, kvl = arch.qk_head_dim, arch.qk_pos_emb_head_dim, arch.kv_lora_rank
        lat = (nb * sb * kvl + 4.0 * sb) + a * sb * kvl
        if arch.q_lora_rank:
            lat += (nb * sb * arch.q_lora_rank + 4.0 * sb) + a * sb * arch.q_lora_rank
        qkv_b = a * sb * nq * (2 * (dn + dr) + dn + dv) / t
        attn_b = norm + a * sb * h + lat + qkv_b + o + lse + kv_extra + ring_copy
    else:
        attn_b = norm + a * sb * h + a * sb * qkv / t + o + lse + kv_extra + ring_copy
    if arch.qk_layernorm and not arch.multi_latent_attention:
        # per-head q / k RMSNorm (qwen3): their inputs (the QKV output's q and k) + fp32 rstd per head
        attn_b += (nb * sb * arch.kv_channels + 4.0 * sb) * (nq + arch.kv_heads) / t
    g = 2 if arch.swiglu else 1
    mlp_norm = norm + a * sb * h
    if moe:
        k, fe = arch.moe_router_topk, arch.expert_ffn
        # router (models/common/moe.py TokenChoiceTopKRouter): its scores over the experts, the top-k
        # indices (int64) and scores; the dispatcher's sorted token indices (int64, two) and scores per
        # (token, expert) pair; the combine multiplies the experts' output by the scores in fp32
        # (token_dispatcher.py ``combine``: the fp32 copy is kept for the scores' gradient)
        # (token_dispatcher.py ``combine``: the fp32 copy is kept for the scores' gradient); with EP the
        # all-to-all dispatcher's ``_permute`` index (int64 per received row)
        E = arch.num_experts or 1
        T, fe_ = moe_tokens(sb, tp=t, ep=ep), moe_expert_width(arch, tp=t, ep=ep)
        mlp_norm += a * T * E + T * k * (8 + a) + T * k * (16 + a) + 4.0 * T * k * h
        if ep > 1:
            # the router and the dispatcher take the rank's sequence shard (no all-gather): its input is
            # the MoE input's local ``a T h``; a TP-sharded shared expert still all-gathers its own copy
            mlp_norm += 8.0 * T * k - a * (sb - T) * h
            if arch.moe_shared_expert_intermediate_size and t > 1:
                mlp_norm += a * sb * h
        if compiled:
            # torch.compile of the block (fullgraph, as torchtitan's apply_compile): inductor's partitioner
            # drops the sorted scores and the combine's fp32 copy and keeps the router's scores and top-k,
            # the two sorted index tensors, three [N, F] expert tensors and at most two [N, h] (traced,
            # tests/titan_trace.py compiled_block_saved_bytes: qwen3 30B-A3B keeps the two [N, h], qwen3
            # debugmodel_moe and deepseek_v3 16B recompute them; counted, an upper bound)
            mlp = (mlp_norm - (T * k * (16 + a) + 4.0 * T * k * h) + 16.0 * T * k + 3 * a * T * k * fe_
                   + 2 * a * T * k * h)
            if arch.qk_layernorm:
                # qwen3's MoE block, compiled, also hands the backward a residual-stream sum ``a sb h / t`` and
                # the combine's zero-filled ``[T, h]`` scatter_add base (traced, compiled_block_saved_bytes:
                # qwen3 30B-A3B ``add`` and ``full`` outputs; a dense qwen3 block keeps neither -- wo's input is a
                # view of the flash output, one storage -- tests/test_memory_titan.py)
                mlp += a * sb * h / t + a * T * h
        else:
            mlp = mlp_norm + T * k * a * (h + 2 * g * fe_)
        if arch.moe_shared_expert_intermediate_size:
            mlp += (g + 1 if compiled else 2 * g) * a * sb * arch.moe_shared_expert_intermediate_size / t
    else:
        f = arch.ffn_hidden_size
        mlp = mlp_norm + (g + 1 if compiled else 2 * g) * a * sb * f / t
    full = attn_b + mlp
    layer_input = a * sb * h / t
    if ac == "full":
        kept = layer_input
    elif ac == "op" and moe:
        # SelectiveAC on an MoE block (distributed/activation_checkpoint.py ``_get_default_save_ops``): the
        # grouped GEMMs are not on the save list (recomputed); the odd-numbered matmuls of the attention and the
        # shared expert (op_sac_mm_outputs; the router's gate neither counted nor saved), the attention, the
        # router's ``topk`` (values + int64 indices) and every ``all_to_all_single`` output (EP: the
        # dispatched rows ``a R D`` and the combined rows ``a N D``; not 0.3's eager spmd_types all-to-alls,
        # ``a2a_rows``) are saved
        Tk = moe_tokens(sb, tp=t, ep=ep) * arch.moe_router_topk
        mms = op_sac_mm_outputs(arch, sb=sb, tp=t, moe=True, split_qkv=attn == "sdpa_repeat_kv") if mm_saved else []
        rows = 2.0 * arch.moe_router_topk if a2a_rows is None else a2a_rows
        kept = layer_input + sum(mms[0::2]) + Tk * (a + 8) + (a * moe_tokens(sb, tp=t, ep=ep) * h * rows
                                                               if ep > 1 else 0.0)
        if impl.sdpa_on_save_list:
            kept += o + lse
        if t > 1:
            kept += a * sb * h / t  # reduce-scatter output of wo (SP)
    elif ac == "op":
        # odd-numbered matmuls (op_sac_mm_outputs): fused GQA wqkv (1), w1 (3), w2 (5); wo (2), w3 (4) recomputed
        mms = op_sac_mm_outputs(arch, sb=sb, tp=t, moe=False, split_qkv=attn == "sdpa_repeat_kv") if mm_saved else []
        kept = layer_input + sum(mms[0::2])
        if impl.sdpa_on_save_list:
            kept += o + lse
        if t > 1:
            kept += 2 * a * sb * h / t  # reduce-scatter outputs of wo and w2 (SP)
        if compiled and mm_saved:
            # compiled, the partitioner passes to the backward only what the backward graph reads: w2's output
            # (and under TP its reduce-scatter output) feeds the block output alone, so MUST_SAVE does not keep it
            kept -= (mms[-1] if len(mms) % 2 else 0.0) + (a * sb * h / t if t > 1 else 0.0)
        elif compiled and t > 1:
            kept -= a * sb * h / t  # w2's reduce-scatter output, as above
    else:
        kept = full
    return TitanLayer(kept=kept, full=full, layer_input=layer_input)


def op_sac_mm_outputs(arch: ModelArch, *, sb: float, tp: int, moe: bool, split_qkv: bool) -> list[float]:
    """Bytes of the outputs of one block's ``aten.mm`` calls in forward order (bf16, per micro-batch and GPU),
    the calls torchtitan's per-op SAC counts: its policy saves every odd-numbered one and recomputes every
    second (torchtitan 0.3.0 ``distributed/activation_checkpoint.py`` ``SelectiveAC``, f2191557c / 6fc499f6f
    ``_apply_op_sac``: ``meta[mm_count_key] % 2 == 0`` -> recompute), the MoE router's gate forced to
    recompute and not counted (``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``, the default
    since 2025), the routed experts' ``_grouped_mm`` not an ``aten.mm`` (not counted, not saved).  Order:

    - GQA fused (0.3.0 ``FusedQKVLinear``): ``wqkv`` ``(nq + 2 nkv) d / t``, ``wo`` ``h``; separate (every
      release before 'Fused QKV GQAttention', 2026-04-16: ``split_qkv``, the TOML-sourced plans) ``wq``,
      ``wk``, ``wv``, ``wo``;
    - MLA (``models/deepseek_v3/model.py`` at f2191557c and 0.3.0 alike): ``wq_a`` ``ql``, ``wq_b``
      ``nq (dn + dr) / t`` (or one ``wq`` without a query LoRA), ``wkv_a`` ``kvl + dr``, ``wkv_b``
      ``nq (dn + dv) / t``, ``wo`` ``h``;
    - the dense FFN ``w1``, ``w3`` ``F / t``, ``w2`` ``h``; in an MoE block (``MoE.forward``: routed experts
      first) only the shared expert's ``w1``, ``w3`` ``Fs / t``, ``w2`` ``h``.

    ``h``-wide outputs of the row-parallel ``wo`` / ``w2`` are the full-sequence partial sums ``a sb h``.
    E.g. DeepSeek-V3 16B (no query LoRA, two shared experts): ``wq``, ``wkv_b`` and the shared ``w1`` / ``w2``
    are saved: 752 MiB per MoE block at 8 x 4096 tokens (of the 1012 MiB it keeps) where ``wq`` + ``wkv_a`` are
    228."""
    a = 2.0
    h, nq, t = arch.hidden_size, arch.num_attention_heads, tp
    if arch.multi_latent_attention:
        qk = arch.qk_head_dim + arch.qk_pos_emb_head_dim
        q = [a * sb * arch.q_lora_rank, a * sb * nq * qk / t] if arch.q_lora_rank else [a * sb * nq * qk / t]
        out = q + [a * sb * (arch.kv_lora_rank + arch.qk_pos_emb_head_dim),
                   a * sb * nq * (arch.qk_head_dim + arch.v_head_dim) / t, a * sb * h]
    else:
        d, nkv = arch.kv_channels, arch.kv_heads
        qkv = [a * sb * nq * d / t, a * sb * nkv * d / t, a * sb * nkv * d / t] if split_qkv \
            else [a * sb * (nq + 2 * nkv) * d / t]
        out = qkv + [a * sb * h]
    f = (arch.moe_shared_expert_intermediate_size or 0) if moe else arch.ffn_hidden_size
    if f:
        out += [a * sb * f / t, a * sb * f / t, a * sb * h]
    return out


def moe_tokens(sb: int, *, tp: int, ep: int) -> float:
    """Tokens one rank routes per micro-batch: with EP torchtitan 0.3.0 splits the sequence over the TP
    ranks before the router (``models/common/moe_sharding.py``: the router's and routed experts' input
    is ``dense_sequence_parallel_placement`` when ``enable_ep``); without EP every TP rank routes all
    ``sb`` tokens (``Replicate``) through TP-sharded experts."""
    return sb / tp if ep > 1 else float(sb)


def moe_expert_width(arch: ModelArch, *, tp: int, ep: int) -> float:
    """FFN width of one rank's routed experts: full with EP, ``Fe / tp`` without (module docstring of
    :func:`titan_param_shapes`)."""
    return float(arch.expert_ffn if ep > 1 else arch.expert_ffn / tp)


def moe_backward_phases(arch: ModelArch, *, seq: int, mbs: int, tp: int, cp: int = 1,
                        ep: int = 1) -> dict[str, tuple[float, float]]:
    """(bytes allocated, kept bytes already freed) at the peak of each phase of the backward of one
    torchtitan MoE layer, on top of what its forward kept
    (per micro-batch and rank, balanced routing: ``R = N = T k`` rows, ``D = h``, ``F`` the rank's expert
    width, ``a = 2``), the larger of its two phases walked in autograd's order through torchtitan 0.3.0's
    ``models/common/{moe,token_dispatcher}.py`` and ``ops/scatter_add.py``:

    - the combine's backward (first): ``deterministic_scatter_add``'s gather, ``.to(bf16)``'s fp32 grad,
      the ``routed_output.float() * scores`` backward's fp32 grad of the routed output and its fp32
      product for the scores' grad: three fp32 ``[N, D]`` alive at the ``sum`` (``12 N D``); without TP a
      shared expert's backward runs before it (autograd runs the later-created branch first) and leaves
      its input gradient ``a sb D`` while freeing what it kept (``2 g a sb Fs``); under TP the routed
      branch's output redistribution is created last, so the shared expert's backward follows (traced);
    - the grouped experts' backward (``GroupedExperts.forward``), after the combine freed its kept fp32
      copy ``4 N D``, at the larger of two moments: the SwiGLU ``mul`` backward (the incoming bf16
      ``[R, D]`` gradient -- ``_unpermute``'s ``index`` backward, alive through the experts' backward --,
      ``w2``'s input gradient and the ``mul``'s two gradients ``3 a R F``, ``w2``'s bf16 weight gradient
      ``a e D F`` with ``e`` local experts; ``w2``'s saved input ``a R F`` released) and the end of ``w1`` /
      ``w3``'s backward (their two input gradients beside the incoming one ``3 a R D``, one ``a R F``
      gradient, the three weight gradients ``3 a e D F``; the four kept ``[R, F]`` released).

    The phase with the larger net (allocated minus freed) is the peak (:func:`moe_backward_bytes`).  The attention's backward that
    follows runs after the MoE's kept tensors are freed; the other weight gradients are the FSDP unit's
    (its post-backward).  Traced per phase (``tests/test_memory_titan_moe.py``)."""
    a = 2.0
    sb = seq // cp * mbs
    T = moe_tokens(sb, tp=tp, ep=ep)
    N = T * arch.moe_router_topk
    D = arch.hidden_size
    F = moe_expert_width(arch, tp=tp, ep=ep)
    grad_in = freed = 0.0
    if arch.moe_shared_expert_intermediate_size and tp == 1:
        g, fs = (2 if arch.swiglu else 1), arch.moe_shared_expert_intermediate_size
        # its input gradient and bf16 weight gradients (w1, w2, w3) in, its kept tensors out
        grad_in, freed = a * sb * D + a * (g + 1) * D * fs, 2 * g * a * sb * fs
    e = (arch.num_experts or 1) // ep if ep > 1 else (arch.num_experts or 1)
    # SwiGLU backward: w2's bf16 weight gradient [e, D, F] came with its input gradient
    swiglu = (a * N * D + 3 * a * N * F + a * e * D * F + grad_in, freed + 4.0 * N * D + a * N * F)
    # w1 / w3 backward: their input gradients beside the incoming one, all three weight gradients
    w13 = (3 * a * N * D + a * N * F + 3 * a * e * D * F + grad_in, freed + 4.0 * N * D + 4 * a * N * F)
    return {"combine": (12.0 * N * D + grad_in, freed), "experts": max(swiglu, w13, key=lambda x: x[0] - x[1])}


def moe_backward_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, cp: int = 1,
                       ep: int = 1) -> tuple[float, float]:
    """(allocated, freed) of the phase of :func:`moe_backward_phases` with the larger net."""
    ph = moe_backward_phases(arch, seq=seq, mbs=mbs, tp=tp, cp=cp, ep=ep)
    return max(ph.values(), key=lambda x: x[0] - x[1])


def head_kept_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, cp: int = 1, compiled: bool = False,
                    impl: TitanImpl = TITAN) -> tuple[float, float, float]:
    """(final-norm kept, lm_head input, fp32 log-probabilities) of the last stage:
    ``nb sb h / t + 4 sb / t`` (the norm's input and fp32 rstd; ``nb`` = 2 compiled, else the implementation's
    norm bytes), ``2 sb h`` and ``4 sb V / t`` (module doc, "Last stage"; torchtitan 0.3.0 traced on the CPU)."""
    s = seq // cp
    sb = s * mbs
    h = arch.hidden_size
    nb = 2 if compiled else impl.norm_bytes
    return nb * sb * h / tp + 4.0 * sb / tp, 2.0 * sb * h, 4.0 * sb * arch.vocab_size / tp


Unit = tuple  # (kind "emb" | "layer" | "moe" | "head", tuple[FsdpGroup, ...], kept, rebuilt, backward bytes)


def unit_unsharded(groups: tuple[FsdpGroup, ...]) -> float:
    """Elements a unit holds unsharded on this rank: the sum of its groups' all-gather outputs
    (:class:`FsdpGroup` ``unsharded``, FSDP2 ``FSDPParam.init_all_gather_outputs``)."""
    return sum(g.unsharded for g in groups)


def unit_sharded(groups: tuple[FsdpGroup, ...]) -> float:
    """Elements of the unit's padded shards on this rank (fp32 parameter, gradient, each AdamW state):
    the sum of its groups' :class:`FsdpGroup` ``sharded`` (FSDP2 ``_sharded_param_data``)."""
    return sum(g.sharded for g in groups)


@dataclass(frozen=True)
class Fsdp2StreamPools:
    """Bytes FSDP2 allocates on its own CUDA streams (high-water marks over a step), which the caching
    allocator keeps reserved for those streams (``copy_in``: the all-gather copy-in stream; ``reduce_scatter``:
    the reduce-scatter stream).  See :func:`fsdp2_stream_pools`."""

    copy_in: float
    reduce_scatter: float


def fsdp2_stream_pools(units: list[tuple[FsdpGroup, ...]], *, param_bytes: float = 2.0,
                       master_bytes: float = 4.0, all_reduce: bool = False) -> Fsdp2StreamPools:
    """What FSDP2's side streams hold reserved on one rank, ``units`` = the rank's FSDP units' parameter
    groups in forward order (:func:`fsdp_groups`), ``param_bytes`` the all-gather dtype (bf16: 2).

    Where the tensors are allocated (torch ``distributed/fsdp/_fully_shard/_fsdp_collectives.py``, the same
    from torch 2.4 (Dec-2024 nightly 1963fc8 of the torchtitan benchmarks) to 2.13):

    - ``foreach_all_gather`` runs under ``device_handle.stream(all_gather_copy_in_stream)``: the bf16 copy of
      the rank's shards (``_get_param_all_gather_inputs``' ``flat_foreach_copy_input``, ``param_bytes x sharded``)
      and the flat all-gather output (``param_bytes x unsharded``, the input is a slice of it); in forward the
      output is kept (``AllGatherState``) until the next unit's copy-out (``_fsdp_param_group.py``
      ``wait_for_unshard``), so the copy-in stream's high-water mark is ``max_i (flat_{i-1} + flat_i + copy_i)``
      over consecutive units in forward order (groups sharded over more than one rank; a shard group of one
      all-gathers nothing).  A unit of several parameter groups (an MoE block under EP, torch >= 2.9
      ``shard_placement_fn`` meshes) counts all its groups' flats and its largest copy: the backward prefetch
      (``_backward_prefetch`` from group index 1) holds one group of the unit in backward beside both of the
      previous unit's, which this bounds from above (traced: within 3.3 % for the qwen3 MoE debug flavor);
    - ``foreach_reduce`` allocates the reduce-scatter output under ``device_handle.stream(reduce_scatter_stream)``
      and the sharded ``.grad`` are views of it (fp32, ``4 x sharded`` per group, every group, shard group of
      one included: "The RS output is allocated in the RS stream and used in the default stream (for
      optimizer)"), alive until the next step's ``zero_grad``: ``4 x`` the rank's padded shards; with a
      shard group of one (DDP as HSDP) the output is a copy made there of the input divided by
      torchtitan's gradient divide factor (``reduce_output.copy_(reduce_scatter_input / factor)``), whose
      ``4 U`` temporary also lives on that stream: the high-water mark is reached at the last unit of the
      backward (units in reverse order), ``4 x`` all shards plus that unit's ``4 U``.

    ``master_bytes``: bytes of the sharded parameters (torchtitan ``training.dtype``: float32 4, bfloat16 2).
    Where they are already the all-gather dtype, ``FSDPParam.all_gather_inputs`` returns the shard itself
    (``_to_dtype_if_needed`` casts only on a dtype change), so the copy-in stream holds no shard copy; and
    ``foreach_reduce`` casts the fp32 reduce-scatter output to the parameter's dtype (``reduce_output =
    _to_dtype_if_needed(reduce_output, orig_dtype)``) under ``post_reduce_stream``, which is the reduce-scatter
    stream unless an all-reduce follows (HSDP / DDP-as-HSDP: ``all_reduce``, the all-reduce stream, left as
    above): each unit's post-reduce then holds its fp32 output ``4 s`` and the new ``master_bytes x s`` copy at
    once, and only the copies stay, so the mark is ``max over units in backward order of (master_bytes x the
    shards reduced before + (4 + master_bytes) x s)``.  Traced (torch 2.13, ``tests/test_memory_titan_streams.py``,
    Llama 3 8B blocks, ``training.dtype = "bfloat16"``, FSDP 8): both marks to the byte.

    The caching allocator serves a stream only from blocks of that stream (``CUDACachingAllocator.cpp``:
    ``get_free_block`` compares ``(stream, size)``; with ``expandable_segments:True``, which torchtitan's
    ``run_llama_train.sh`` / ``run_train.sh`` set, ``find_expandable_block`` maps pages only into the
    requesting stream's segment and frees none until ``empty_cache`` or an allocation retry).  So a step's
    reserved peak holds both pools at their high-water marks beside the default stream's peak, where
    ``memory_allocated`` counts only what is alive at that moment (at the loss backward: no gradient yet).
    Under memory pressure a failed allocation releases every stream's free cached pages and retries
    (``release_cached_blocks``, counted in ``num_alloc_retries``), so the free part of these pools raises
    the reported reserved peak but not the point where the step runs out: as a term of the fits verdict it
    errs on the side of ``does not fit`` by at most its size.
    """
    flats = [param_bytes * sum(g.unsharded for g in gs if g.shard > 1) for gs in units]
    cast = param_bytes if master_bytes != param_bytes else 0.0  # the all-gather input's dtype cast, if any
    copies = [cast * max((g.sharded for g in gs if g.shard > 1), default=0.0) for gs in units]
    copy_in = max(((flats[i - 1] if i else 0.0) + flats[i] + copies[i] for i in range(len(units))), default=0.0)
    # bytes per element each reduced shard keeps on this stream, and the cast copy made beside the fp32 output
    kept, extra = (4.0, 0.0) if all_reduce or master_bytes == 4.0 else (master_bytes, master_bytes)
    rs = done = 0.0
    for gs in reversed(units):  # backward order: each unit's post-backward reduce
        for g in gs:
            rs = max(rs, done + (4.0 + extra) * g.sharded + (4.0 * g.unsharded if g.shard == 1 else 0.0))
            done += kept * g.sharded
    return Fsdp2StreamPools(copy_in=copy_in, reduce_scatter=rs)


def reserved_peak_over_levels(levels: list[tuple[float, dict[str, float]]], pools: Fsdp2StreamPools,
                              dynamic_fraction: float) -> float:
    """The step's reserved peak over the levels of :func:`stage_walk`: at each level the default stream's
    allocation, its fragmentation (``dynamic_fraction`` of the level's activations and transients) and FSDP2's
    side-stream pools (:func:`fsdp2_stream_pools`) less what of them the level has allocated
    (``side_pools``); the largest.  The pools keep their high-water marks reserved from one step to the next
    (the reduce-scatter stream's gradients are freed by ``zero_grad`` but stay mapped in that stream's
    expandable segment), so at the loss backward, where no gradient is allocated yet, the whole of them sits
    beside the default stream's allocation: that level can hold the reserved peak where a later one (the
    gradients all reduced, the embedding's backward) holds the allocated peak."""
    return max((alloc + dynamic_fraction * (parts.get("activations", 0.0) + parts.get("transient", 0.0))
                + max(0.0, pools.copy_in + pools.reduce_scatter - parts.get("side_pools", 0.0))
                for alloc, parts in levels), default=0.0)


def _unit_transient(groups: tuple[FsdpGroup, ...], held: bool) -> float:
    """FSDP2 post-backward of one unit, per parameter group of ``U`` unsharded elements over ``S`` ranks,
    traced: bf16 unsharded weight gradient ``2U``, fp32 reduce-scatter input ``4U`` (``foreach_reduce``
    copies the grads in the reduce dtype), with a shard group of one the divided copy ``4U``, the
    still-held bf16 parameters ``2U`` of a unit not resharded after forward (shard group > 1)."""
    return sum(g.unsharded * (2 + 4 + (4 if g.shard == 1 else 0) + (2 if held and g.shard > 1 else 0))
               for g in groups)


def _held_bf16(groups: tuple[FsdpGroup, ...]) -> float:
    """bf16 unsharded parameters of the groups FSDP2 actually shards (a shard group of one keeps none)."""
    return sum(2.0 * g.unsharded for g in groups if g.shard > 1)


def stage_walk(*, static: float, units: list[Unit], head: tuple | None, emb_ids: float, loss_grads: float,
               held_head: float, pp_extra: float, in_grad: float = 0.0,
               mb_scale: float = 1.0, loss_chunks: int = 1, loss_buffer: float = 0.0, held_units: bool = False,
               grad_bytes: float = 4.0,
               levels_out: list[tuple[float, dict[str, float]]] | None = None) -> tuple[float, dict[str, float]]:
    """The peak of one stage's step and its breakdown (``gradients``, ``activations``, ``transient``).

    ``units`` = the stage's FSDP units in forward order as ``(kind, groups, kept bytes, recompute bytes
    rebuilt in its backward, backward bytes)`` (:class:`FsdpGroup` per parameter group; the backward bytes
    are what the block's backward holds beyond the activations without its kept ones: a dense block's
    measured temporaries; for an MoE block :func:`moe_backward_bytes`' (allocated, freed)); ``head`` =
    (final-norm kept, lm_head input, log-probs, head groups) on the last stage; ``emb_ids`` the
    embedding's saved ids; ``in_grad`` one block's input gradient ``a sb h / t``; ``mb_scale`` the
    micro-batches in flight the units' kept bytes are scaled by (one of them is in backward).  Levels: loss backward,
    head backward, each block's backward (with the unit FSDP2 prefetches next in backward, the one before
    it in forward order, unsharded; an MoE block in two moments: its backward, with its own unsharded
    parameters, then its post-backward's reduce-scatter), the embedding's backward.  ``levels_out``, when
    given, receives every level ``(allocated, breakdown)``: the reserved peak need not sit at the allocated one
    (:func:`reserved_peak_over_levels`).

    ``loss_chunks`` ``N > 1``: torchtitan 0.3.0's ``ChunkedLossWrapper`` (``components/loss.py``; main's
    ``ChunkedCELoss`` of 2026-04 .. 05 alike) runs lm_head + loss and their backward chunk by chunk of the
    sequence before the decoder's backward, so the loss's log-probabilities and logits gradients
    (``logp``, ``loss_grads``) are one chunk's, ``1 / N``; beside them ``loss_buffer`` (its fp32
    ``GradAccumulator`` of the hidden states' gradient ``4 sb h`` and, for a micro-batch above one, the
    chunks' contiguous copies ``2 sb h``), lm_head's unsharded bf16 weight (``set_reshard_after_backward(False)``,
    ``held_head``) and, with gradient sync off for chunks ``0 .. N-2``, its weight gradient upcast to the fp32
    reduce dtype and accumulated there (torch ``_fsdp_param.py`` ``to_accumulated_grad_if_needed``: ``4 U``); the
    last chunk's post-backward reduce-scatters it (its bf16 gradient ``2 U`` still beside the accumulated one,
    the fp32 input ``4 U``, output ``4 U / S``).

    ``held_units``: ``reshard_after_forward=False`` without PP (``fsdp_reshard_after_forward = "never"``): every
    unit's bf16 unsharded parameters stay from its forward until its own post-backward reshards them (FSDP2
    ``reshard_after_backward`` default True), so each level holds those of the units not yet through their
    backward and nothing more is prefetched.  ``grad_bytes``: bytes of a sharded gradient as FSDP2 leaves it
    (the fp32 reduce-scatter output cast to the parameter's dtype: 4, or 2 with ``training.dtype = "bfloat16"``).
    """
    levels: list[tuple[float, dict[str, float]]] = [] if levels_out is None else levels_out
    acts = sum(u[2] for u in units if u[0] in ("layer", "moe")) + emb_ids
    held_all = sum(_held_bf16(u[1]) for u in units) if held_units else 0.0
    if head is not None:
        hn, hin, logp, hg = head
        if loss_chunks > 1:
            N, Uh = float(loss_chunks), unit_unsharded(hg)
            gh = grad_bytes * unit_sharded(hg)
            keep = held_head + 4.0 * Uh + loss_buffer + held_all  # weight, fp32 accumulated gradient, buffers
            levels.append((static + acts + hn + hin + (logp + loss_grads) / N + keep + pp_extra,
                           {"gradients": 0.0, "activations": acts + hn + hin + logp / N,
                            "transient": keep + loss_grads / N + pp_extra, "side_pools": 0.0}))
            # the last chunk's post-backward: its bf16 weight gradient 2U beside the fp32 accumulated one, the
            # reduce-scatter's fp32 input 4U and output 4U / S (traced, tests/test_titan_chunked_loss.py)
            tr = keep + 2.0 * Uh + 4.0 * Uh + 4.0 * unit_sharded(hg)
            levels.append((static + acts + hn + hin + tr + pp_extra,
                           {"gradients": 0.0, "activations": acts + hn + hin, "transient": tr + pp_extra,
                            "side_pools": 4.0 * unit_sharded(hg)}))
        else:
            base_act = acts + hn + hin + logp
            levels.append((static + base_act + held_head + loss_grads + held_all + pp_extra,
                           {"gradients": 0.0, "activations": base_act,
                            "transient": held_head + loss_grads + held_all + pp_extra, "side_pools": 0.0}))
            tr = _unit_transient(hg, held_head > 0) + hin + held_all
            gh = grad_bytes * unit_sharded(hg)
            levels.append((static + acts + hn + gh + tr + pp_extra,
                           {"gradients": gh, "activations": acts + hn, "transient": tr + pp_extra, "side_pools": gh}))
        grads = gh
    else:
        grads = 0.0
    for j in reversed(range(len(units))):
        kind, groups, kept, rebuilt, bwd = units[j][:5]
        U = unit_unsharded(groups)
        g_out = grad_bytes * unit_sharded(groups)
        held_all -= _held_bf16(groups) if held_units else 0.0  # resharded by its own post-backward
        if kind == "emb":
            # the embedding's reduce-scatter output is still a temporary at its level (traced)
            tr = sum(g.unsharded * (2 + 4 + (4 if g.shard == 1 else 0)) + 4 * g.sharded for g in groups)
            levels.append((static + grads + tr + pp_extra,
                           {"gradients": grads, "activations": 0.0, "transient": tr + pp_extra,
                            "side_pools": grads + 4.0 * unit_sharded(groups)}))
            grads += g_out
            continue
        acts -= kept
        # the unit FSDP2 prefetches for the next backward; with held_units every earlier unit is still unsharded
        prefetched = held_all if held_units else (_held_bf16(units[j - 1][1]) if j > 0 else 0.0)
        if kind == "moe":
            # its backward: the activations it kept (or rebuilt) and what its backward allocates
            alloc, freed = bwd
            own = kept / max(1.0, mb_scale) + rebuilt - freed
            tr = alloc + _held_bf16(groups) + prefetched
            levels.append((static + grads + acts + own + tr + pp_extra,
                           {"gradients": grads, "activations": acts + own, "transient": tr + pp_extra,
                            "side_pools": grads + prefetched}))
            tr = _unit_transient(groups, False) + prefetched + in_grad
        else:
            tr = _unit_transient(groups, False) + rebuilt + bwd + prefetched
        levels.append((static + grads + acts + g_out + tr + pp_extra,
                       {"gradients": grads + g_out, "activations": acts, "transient": tr + pp_extra,
                        "side_pools": grads + g_out + prefetched}))
        grads += g_out
        del U
    if not levels:  # a rank with no module (a placement leaving one PP rank no layer, embedding nor head)
        levels.append((static + pp_extra, {"gradients": 0.0, "activations": 0.0, "transient": pp_extra,
                                           "side_pools": 0.0}))
    return max(levels, key=lambda x: x[0])


@dataclass(frozen=True)
class PPStage:
    """One pipeline stage (a model part of torchtitan's splitter) as the PP walk sees it, per GPU.

    ``units``: FSDP units in forward order, ``(kind, groups, kept, rebuilt, bwd)`` with ``kind`` ``emb`` /
    ``layer`` / ``moe`` / ``head``, ``groups`` its :class:`FsdpGroup` s, ``kept`` bytes one micro-batch
    keeps for its backward, ``bwd`` what its backward allocates (:func:`stage_walk`),
    ``rebuilt`` what its recomputation rebuilds in backward.  ``extra_kept``: per micro-batch bytes kept
    outside the units (token ids, the stage output held in the schedule's ``fwd_cache``, on the last
    stage the final norm, lm_head input, fp32 log-probabilities and the bf16 logits).  ``boundary``: the
    bytes of one stage-boundary tensor ``a sb h`` (one receive buffer per micro-batch).
    """

    units: tuple[Unit, ...]
    extra_kept: float
    first: bool
    last: bool
    boundary: float
    loss_grads: float = 0.0  # last stage: fp32 gradients of the logits in the loss backward
    logits_kept: float = 0.0  # last stage: bf16 logits (the stage output, alive through its backward)
    log_probs: float = 0.0  # last stage: the loss's fp32 log-probabilities (freed by the loss backward)


def torch_pp_ops(schedule: str, pp: int, vpp: int, nmb: int, rank: int) -> list[tuple[str, int, int]]:
    """The compute actions of one PP rank in torch.distributed.pipelining's schedule order, as
    ``(F|B, local chunk, micro-batch)``: ``Schedule1F1B`` (``min(nmb, pp - rank)`` warm-up forwards, then
    one backward and one forward, then the remaining backwards), ``ScheduleGPipe`` (all forwards, then
    all backwards) and ``ScheduleInterleaved1F1B`` (``_get_warmup_ops`` / ``_get_1f1b_rank_ops``:
    ``(vpp - 1) * mpr + 2 (pp - 1 - rank)`` warm-up forwards with ``mpr = nmb / max(1, nmb // pp)``
    micro-batches per round, chunk ``(op // mpr) % vpp`` forward, ``vpp - 1 - ((op - warmup) // mpr) % vpp``
    backward)."""
    if schedule == "gpipe":
        return [("F", 0, i) for i in range(nmb)] + [("B", 0, i) for i in range(nmb)]
    if vpp == 1:
        w = min(nmb, pp - rank)
        ops = [("F", 0, i) for i in range(w)]
        for i in range(nmb):
            ops.append(("B", 0, i))
            if w + i < nmb:
                ops.append(("F", 0, w + i))
        return ops
    rounds = max(1, nmb // pp)
    mpr = nmb // rounds
    warm = min((vpp - 1) * mpr + 2 * (pp - 1 - rank), nmb * vpp)
    total = nmb * vpp
    fwd_mb = [0] * vpp
    bwd_mb = [0] * vpp
    ops: list[tuple[str, int, int]] = []
    for op in range(total + warm):
        if op < total:
            c = (op // mpr) % vpp
            ops.append(("F", c, fwd_mb[c]))
            fwd_mb[c] += 1
        if op >= warm:
            c = vpp - 1 - ((op - warm) // mpr) % vpp
            ops.append(("B", c, bwd_mb[c]))
            bwd_mb[c] += 1
    return ops


def pp_rank_walk(*, static: float, stages: list[PPStage], ops: list[tuple[str, int, int]], nmb: int,
                 held: bool, levels_out: list[tuple[float, dict[str, float]]] | None = None
                 ) -> tuple[float, dict[str, float]]:
    """Peak of one GPU of a pipeline rank over torch.distributed.pipelining's step with FSDP2, and its
    breakdown (``gradients``, ``activations``, ``transient``, and inside those ``held`` unsharded
    parameters, ``recv`` buffers, ``accumulated`` gradients).  ``stages``: the rank's model parts (one per
    local virtual stage), ``ops``: :func:`torch_pp_ops`; ``held``: ``reshard_after_forward=False``
    (torchtitan's default under PP; ``True`` reshards each unit after every forward, and its backward,
    which under PP does not reshard, unshards it again).

    What torch (``torch/distributed/pipelining/{stage,schedules}.py``) and FSDP2
    (``torch/distributed/fsdp/_fully_shard/_fsdp_param{,_group}.py``, ``_fsdp_collectives.py``) hold,
    traced (``tests/titan_trace.py trace_pp``):

    - receive buffers allocated once per micro-batch and kept across steps
      (``_setup_forward_recv_info`` / ``_setup_backward_recv_info``): ``nmb`` activation buffers on every
      stage but the first, ``nmb`` gradient buffers on every stage but the last, ``a sb h`` each;
    - parameters unsharded in bf16 at the first forward and kept (``reshard_after_forward=False`` and
      ``set_reshard_after_backward(False)`` in ``backward_maybe_with_nosync``): ``2 N``;
    - gradients accumulated unsharded in fp32 (``set_requires_gradient_sync(False)``:
      ``to_accumulated_grad_if_needed`` casts the first bf16 gradient to fp32, later ones add in place):
      ``4 N`` from each unit's first backward on;
    - per micro-batch in flight: the units' kept activations and the stage output held in ``fwd_cache``
      (last stage: the bf16 logits, alive through that micro-batch's backward); the previous backward's
      input gradient is still referenced by its pending send;
    - after a stage's last backward ``perform_reduce_grad`` reduces unit by unit in forward order:
      reshard, the fp32 reduce-scatter input ``4 U`` beside the accumulated gradient (the embedding's and
      the head's still alive at the output ``4 U / S``); the last forward's output is still referenced.

    ``levels_out``, when given, receives every level and its breakdown (for
    :func:`reserved_peak_over_levels`, as :func:`stage_walk`'s).
    """
    n = len(stages)
    hp = [2.0 * sum(unit_unsharded(u[1]) for u in st.units) for st in stages]
    acc_all = [4.0 * sum(g.grad_elems for u in st.units for g in u[1]) for st in stages]
    K = [sum(u[2] for u in st.units) + st.extra_kept for st in stages]
    recv = sum(nmb * st.boundary * ((not st.first) + (not st.last)) for st in stages)
    # per stage, its units in backward order with their unsharded elements and unsharded gradients (the
    # parameters' own size)
    units_rev = [[(k, unit_unsharded(g), sum(x.grad_elems for x in g), kept, rebuilt, bwd)
                  for k, g, kept, rebuilt, bwd in reversed(st.units)] for st in stages]
    inflight = [0] * n
    acc_done = [False] * n
    unsh = [False] * n
    reduced = [False] * n
    sharded_grads = 0.0
    pending_in_grad = 0.0
    last_out = 0.0
    best: list = [None, None]  # the first highest level and its breakdown

    def add(acts: float, grads: float, trans: float, held_now: float, acc: float, side: float | None = None) -> None:
        level = static + acts + grads + trans + held_now
        if best[0] is None or level > best[0] or levels_out is not None:
            # side_pools: what of this level lives on FSDP2's reduce-scatter stream (the sharded gradients)
            parts = {"activations": acts, "gradients": grads, "transient": trans + held_now,
                     "held": held_now, "recv": recv, "accumulated": acc,
                     "side_pools": sharded_grads if side is None else side}
            if levels_out is not None:
                levels_out.append((level, parts))
            if best[0] is None or level > best[0]:
                best[0], best[1] = level, parts

    for kind, c, mb in ops:
        st = stages[c]
        if kind == "F":
            inflight[c] += 1
            unsh[c] = held  # reshard_after_forward=True frees them again after the forward
            last_out = st.logits_kept if st.last else st.boundary
            continue
        others = sum(inflight[i] * K[i] for i in range(n)) - K[c]
        base_acts = recv + others + pending_in_grad
        G_other = sharded_grads + sum(acc_all[i] for i in range(n) if i != c and acc_done[i])
        H_other = sum(hp[i] for i in range(n) if i != c and unsh[i])
        G = G_other + (acc_all[c] if acc_done[c] else 0.0)
        acts = K[c]
        unit_unsh = 0.0
        for ukind, U, Ug, kept, rebuilt, bwd in units_rev[c]:
            first_acc = 0.0 if acc_done[c] else 4.0 * Ug
            Hc = hp[c] if unsh[c] else unit_unsh + 2.0 * U
            if ukind == "head":
                # loss backward: fp32 gradients of the logits beside everything kept
                add(base_acts + acts, G, st.loss_grads, H_other + (hp[c] if unsh[c] else unit_unsh), G)
                acts -= st.log_probs
                # lm_head backward: bf16 weight gradient beside the logits' gradient and its input's
                add(base_acts + acts, G + first_acc, 2.0 * Ug + st.logits_kept + st.boundary, H_other + Hc,
                    G + first_acc)
                acts -= kept
            elif ukind == "emb":
                acts -= kept
                add(base_acts + acts, G + first_acc, 2.0 * Ug, H_other + Hc, G + first_acc)
            else:
                # the block's backward (its recomputed activations, gradient temporaries, bf16 weight
                # gradients), then its post-backward (the first micro-batch upcasts to fp32)
                # an MoE block's peak comes before its weight gradients (moe_backward_bytes)
                if ukind == "moe":
                    alloc, freed = bwd
                    add(base_acts + acts + rebuilt - freed, G, alloc, H_other + Hc, G)
                else:
                    add(base_acts + acts - kept, G, 2.0 * Ug + rebuilt + bwd, H_other + Hc, G)
                acts -= kept
                add(base_acts + acts, G + first_acc, 2.0 * Ug, H_other + Hc, G + first_acc)
            G += first_acc
            unit_unsh += 2.0 * U
        inflight[c] -= 1
        acc_done[c] = True
        unsh[c] = True
        pending_in_grad = 0.0 if st.first else st.boundary
        if mb == nmb - 1:
            # perform_reduce_grad of this stage, units in forward order
            others = sum(inflight[i] * K[i] for i in range(n))
            acts_r = recv + others + last_out + pending_in_grad
            G_other = sharded_grads + sum(acc_all[i] for i in range(n) if i != c and acc_done[i] and not reduced[i])
            H_other = sum(hp[i] for i in range(n) if i != c and unsh[i])
            done = 0.0
            rest_acc = acc_all[c]
            rest_held = hp[c]
            for ukind, groups, *_ in st.units:
                for g in groups:  # one foreach_reduce per FSDP2 parameter group
                    U = g.unsharded
                    rest_acc -= 4.0 * g.grad_elems
                    rest_held -= 2.0 * U
                    # copy-in: the accumulated gradient beside the reduce-scatter input; the embedding's and
                    # the head's accumulated gradient is still alive when the output is allocated (traced), a
                    # block's is freed after the copy-in (``foreach_reduce``: ``unsharded_grads.clear()``)
                    rs = 4.0 * g.grad_elems + 4.0 * U + (4.0 * g.sharded if ukind in ("emb", "head") else 0.0)
                    add(acts_r, G_other + done + rest_acc, rs, H_other + rest_held, G_other + rest_acc,
                        side=sharded_grads + done)
                    done += 4.0 * g.sharded
            sharded_grads += done
            reduced[c] = True
            unsh[c] = False
            acc_done[c] = False
    return best[0], best[1]
