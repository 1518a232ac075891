"""Per-GPU memory of a TorchTitan training step (FSDP2 / HSDP / DDP-as-HSDP, TP/SP, CP, PP, AC modes).

Checked tensor by tensor against torchtitan 0.3.0's own step traced on the CPU under
``FakeTensorMode`` with a fake process group (``tests/titan_trace.py``, ``tests/test_memory_titan.py``).
Per GPU (rank) of a pipeline stage, ``S = dp_shard x cp`` (torchtitan's FSDP mesh, ``parallel_dims.py``
``fsdp = dp_shard * cp``; HSDP replicates over ``dp_replicate``; ``dp_shard = 1`` is HSDP with a shard
group of one: torchtitan 0.3.0 always applies ``fully_shard`` for its mixed-precision policy), ``t`` = TP
(always with sequence parallel), ``a`` = 2 (bf16 compute), ``sb`` = local sequence x micro-batch:

Static (exact):

- **parameters** fp32 shards ``4 N / S`` (FSDP2 keeps the fp32 sharded parameters as the master copy;
  ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``), plus each block's RoPE buffer
  ``freqs_cis`` complex64 ``[seq, d/2]`` (``4 seq d`` bytes per layer);
- **optimizer** AdamW ``exp_avg`` + ``exp_avg_sq`` fp32 ``8 N / S`` (torchtitan AdamW, fused);
- **gradients** fp32 shards ``4 N / S`` once the backward has reduce-scattered them (the breakdown is
  the one of the peak moment, so only the units reduced before it count).

Activations per decoder layer and micro-batch (:func:`layer_activation_bytes`), what autograd keeps
in torchtitan's modules (``models/common/{attention,feed_forward}.py``, ``nn.RMSNorm``):

- no AC: two norms (``norm_bytes sbh/t`` + fp32 rstd), the column linears' inputs at full sequence
  (``a sbh`` each: wqkv and w1/w3; under SP the all-gathered input is what is saved), q/k/v after RoPE
  ``a sb (nq + 2 nkv) d / t``, SDPA output (= wo's input) ``a sb nq d / t`` and fp32 log-sum-exp,
  SwiGLU unfused: w1 out, silu out, w3 out, w2 in ``4 a sb F / t``;
- ``op`` (``SelectiveAC``): the block input ``a sbh/t`` + the outputs of the ops on its save list: every
  odd-numbered matmul (wqkv, w1, w2 -- the policy recomputes every second mm), SDPA output + lse (flash
  / cuDNN SDPA are on the list; the CPU trace's SDPA kernel is not, :data:`TITAN_CPU`), and under TP the
  reduce-scatter outputs ``a sbh/t`` of wo and w2 (``_c10d_functional.reduce_scatter_tensor``);
- ``full``: the block input ``a sbh/t``; every-N: full AC on blocks ``N, 2N, ...`` (1-based), none on
  the others (torchtitan v0.2 ``_apply_layer_sac``);
- compiled (``training.compile``): the norms keep their bf16 input + rstd (inductor fuses them) and
  SwiGLU keeps w1 and w3 outputs only (``2 a sb F / t``; the min-cut partitioner of
  ``torch/_functorch/partitioners.py`` recomputes the pointwise silu*mul): a stated model, not traced.

Last stage: final norm kept + lm_head input ``a sbh`` + the loss's fp32 log-probabilities
``4 sb V/t`` (``cross_entropy_loss(pred.flatten(0, 1).float())``; under TP the vocab-parallel loss keeps
its local fp32 ``log_probs``).  Transient levels walked through the step (the peak is the largest):

- loss backward: all activations + the two fp32 gradients of the logits ``2 x 4 sb V`` (nll and
  log-softmax backward; TP: ``3 x 4 sb V/t``: zeros, exp(log_probs), their sum);
- head backward (FSDP unit ``[norm, lm_head]``, not resharded after forward): its unsharded bf16
  parameters ``2 U`` (when ``S > 1``), the bf16 weight gradient ``2 U``, the fp32 reduce-scatter input
  ``4 U``, its output ``4 U / S``, the world-size-one copy ``4 U`` (``S = 1``), lm_head's input gradient;
- each block's backward (same per-unit terms, the block's own backward temporaries, the previous
  block's prefetched parameters) and the embedding's (dense bf16 weight gradient);
- PP (torch.distributed.pipelining with FSDP): the stage's parameters stay unsharded in bf16
  (``reshard_after_forward=False`` by default under PP) and the gradients accumulate unsharded in fp32
  across micro-batches (``set_requires_gradient_sync(False)`` until the last; FSDP2
  ``unsharded_accumulated_grad`` in the reduce dtype): ``(2 + 4) N_stage`` on top, a stated model.
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import ModelArch


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


def layer_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, cp: int = 1, ac: str = "none",
                           compiled: bool = False, impl: TitanImpl = TITAN, moe: bool = False,
                           ep: int = 1) -> TitanLayer:
    """Bytes one torchtitan decoder block keeps per micro-batch on one GPU (module docstring).

    ``ac``: ``none`` | ``op`` | ``full``.  MoE blocks (not traced): the attention as for dense plus
    the routed tokens ``sb topk`` with their input ``h``, the expert w1/w3/silu/w2 inputs ``4 Fe`` and
    a shared expert as a dense MLP (torchtitan ``models/common/moe.py``; balanced routing).
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
        qkv_out = a * sb * (arch.kv_lora_rank + arch.qk_pos_emb_head_dim + (arch.q_lora_rank or nq * qk))
    else:
        d = arch.kv_channels
        qkv = (nq + 2 * arch.kv_heads) * d
        dv = d
        qkv_out = a * sb * qkv / t
    lse = 4.0 * mbs * nq / t * s
    o = a * sb * nq * dv / t
    attn = norm + a * sb * h + a * sb * qkv / t + o + lse
    g = 2 if arch.swiglu else 1
    mlp_norm = norm + a * sb * h
    if moe:
        k, fe = arch.moe_router_topk, arch.expert_ffn
        mlp = mlp_norm + sb * k * a * (h + (2 if compiled else 2 * g) * fe)
        if arch.moe_shared_expert_intermediate_size:
            mlp += (2 if compiled else 2 * g) * a * sb * arch.moe_shared_expert_intermediate_size / t
        f_out = a * sb * k * fe
    else:
        f = arch.ffn_hidden_size
        mlp = mlp_norm + (2 if compiled else 2 * g) * a * sb * f / t
        f_out = a * sb * f / t
    full = attn + mlp
    layer_input = a * sb * h / t
    if ac == "full":
        kept = layer_input
    elif ac == "op":
        # odd-numbered matmuls: wqkv (1), w1 (3), w2 (5); wo (2), w3 (4) recomputed
        kept = layer_input + qkv_out + f_out + a * sb * h
        if impl.sdpa_on_save_list:
            kept += o + lse
        if t > 1:
            kept += 2 * a * sb * h / t  # reduce-scatter outputs of wo and w2 (SP)
    else:
        kept = full
    return TitanLayer(kept=kept, full=full, layer_input=layer_input)


def head_kept_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, cp: int = 1, compiled: bool = False,
                    impl: TitanImpl = TITAN) -> tuple[float, float, float]:
    """(final-norm kept, lm_head input, fp32 log-probabilities) of the last stage."""
    s = seq // cp
    sb = s * mbs
    h = arch.hidden_size
    nb = 2 if compiled else impl.norm_bytes
    return nb * sb * h / tp + 4.0 * sb / tp, 2.0 * sb * h, 4.0 * sb * arch.vocab_size / tp


def _unit_transient(U: float, S: int, held: bool) -> float:
    """FSDP2 post-backward of one unit of ``U`` parameters (per TP rank), traced: bf16 unsharded
    weight gradient ``2U``, fp32 reduce-scatter input ``4U`` (``foreach_reduce`` copies the grads in the
    reduce dtype), with a shard group of one the divided copy ``4U``, the still-held bf16 parameters
    ``2U`` of a unit not resharded after forward (shard group > 1)."""
    return U * (2 + 4 + (4 if S == 1 else 0) + (2 if held and S > 1 else 0))


def stage_walk(*, static: float, units: list[tuple[str, float, float, float]], S: int, head: tuple | None,
               emb_ids: float, loss_grads: float, held_head: float, pp_extra: float,
               layer_bwd: float) -> tuple[float, dict[str, float]]:
    """The peak of one stage's step and its breakdown (``gradients``, ``activations``, ``transient``).

    ``units`` = the stage's blocks in forward order as (kind, U params per TP rank, kept bytes,
    recompute bytes rebuilt in its backward); ``head`` = (final-norm kept, lm_head input, log-probs,
    U_head) on the last stage; ``emb_ids`` the embedding's saved ids (and ``U_emb`` via units kind
    "emb").  Levels: loss backward, head backward, each block's backward, the embedding's backward.
    """
    levels: list[tuple[float, dict[str, float]]] = []
    acts = sum(u[2] for u in units if u[0] == "layer") + emb_ids
    if head is not None:
        hn, hin, logp, Uh = head
        base_act = acts + hn + hin + logp
        levels.append((static + base_act + held_head + loss_grads + pp_extra,
                       {"gradients": 0.0, "activations": base_act, "transient": held_head + loss_grads + pp_extra}))
        tr = _unit_transient(Uh, S, held_head > 0) + hin
        levels.append((static + acts + hn + 4 * Uh / S + tr + pp_extra,
                       {"gradients": 4 * Uh / S, "activations": acts + hn, "transient": tr + pp_extra}))
        grads = 4 * Uh / S
    else:
        grads = 0.0
    for kind, U, kept, rebuilt in reversed(units):
        if kind == "emb":
            # the embedding's reduce-scatter output is still a temporary at its level (traced)
            tr = U * (2 + 4 + 4 / S + (4 if S == 1 else 0))
            levels.append((static + grads + tr + pp_extra,
                           {"gradients": grads, "activations": 0.0, "transient": tr + pp_extra}))
            grads += 4 * U / S
            continue
        acts -= kept
        tr = _unit_transient(U, S, False) + rebuilt + layer_bwd + (2 * U if S > 1 else 0.0)
        levels.append((static + grads + acts + 4 * U / S + tr + pp_extra,
                       {"gradients": grads + 4 * U / S, "activations": acts, "transient": tr + pp_extra}))
        grads += 4 * U / S
    return max(levels, key=lambda x: x[0])
