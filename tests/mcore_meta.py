"""Build megatron-core 0.16.1 models on the meta device for a Plan (test helper, CPU only).

``parallel_state`` is initialised on torch's fake process group
(``torch.testing._internal.distributed.fake_pg.FakeStore`` + backend ``"fake"``), which lets one
process claim any rank of any world size without peers: megatron-core's builders only read the
ranks and group sizes.  Weights are allocated on ``torch.device("meta")`` with
``perform_initialization=False``, so even the 671B model costs no memory.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*Transformer Engine.*")
warnings.filterwarnings("ignore", message=".*Apex.*")

from megatron.core import parallel_state as ps  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec  # noqa: E402
from megatron.core.models.gpt.gpt_model import GPTModel  # noqa: E402
from megatron.core.transformer.module import MegatronModule  # noqa: E402
from megatron.core.transformer.transformer_config import (  # noqa: E402
    MLATransformerConfig,
    TransformerConfig,
)
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from primus_launch.plan import Plan  # noqa: E402

import megatron.core.transformer.multi_latent_attention as _mla  # noqa: E402

if not isinstance(_mla.TELinear, type):
    # Shim: without Transformer Engine megatron-core 0.16.1 binds TELinear = None yet still runs
    # ``isinstance(self.linear_proj, TELinear)`` when building MLA.
    _mla.TELinear = type("_NoTELinear", (), {})

_STATE: dict = {}


class cpu_current_device:
    """Shim: megatron-core calls ``torch.cuda.current_device()`` for device placement in ~46
    places (RoPE, MLA, MoE, buffers) and moves the tied last-stage embedding copy with
    ``weight.data.cuda()``; answer ``"cpu"`` / leave the tensor where it is while building."""

    def __enter__(self):
        self._saved = torch.cuda.current_device, torch.Tensor.cuda
        torch.cuda.current_device = lambda: "cpu"
        torch.Tensor.cuda = lambda self, *a, **k: self
        return self

    def __exit__(self, *exc):
        torch.cuda.current_device, torch.Tensor.cuda = self._saved


def init_fake_parallel(tp: int, pp: int, ep: int = 1, etp: int | None = None, cp: int = 1,
                       vpp: int | None = None, pp_rank: int = 0, dp: int | None = None) -> None:
    """(Re)initialise megatron ``parallel_state`` on a fake world, as a rank of PP stage ``pp_rank``.

    The world is ``tp*cp*dp*pp`` with the smallest ``dp`` that also holds ``etp*ep`` per stage.
    """
    etp = etp or tp
    if dp is None:
        per_stage = math.lcm(tp * cp, etp * ep)
        dp = per_stage // (tp * cp)
    world = tp * cp * dp * pp
    key = (tp, pp, ep, etp, cp, vpp, pp_rank, world)
    # (another helper, e.g. titan_trace, may have replaced the default process group since)
    if (_STATE.get("key") == key and dist.is_initialized()
            and _STATE.get("pg") is dist.distributed_c10d._get_default_group()):
        return
    if dist.is_initialized():
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    rank = pp_rank * (world // pp)  # order tp-cp-ep-dp-pp: PP is outermost
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    ps.initialize_model_parallel(tp, pp, virtual_pipeline_model_parallel_size=vpp, context_parallel_size=cp,
                                 expert_model_parallel_size=ep, expert_tensor_parallel_size=etp,
                                 create_gloo_process_groups=False)
    _STATE["key"] = key
    _STATE["pg"] = dist.distributed_c10d._get_default_group()


def mcore_config(plan: Plan, num_layers: int | None = None, **overrides) -> TransformerConfig:
    """The TransformerConfig a Megatron-LM launch of ``plan`` would build (bf16, no init)."""
    m, p = plan.model, plan.parallel
    kw = dict(
        num_layers=num_layers or m.num_layers,
        hidden_size=m.hidden_size,
        ffn_hidden_size=m.ffn_hidden_size,
        num_attention_heads=m.num_attention_heads,
        num_query_groups=m.num_query_groups,
        kv_channels=m.head_dim,
        gated_linear_unit=m.swiglu,
        activation_func=torch.nn.functional.silu if m.swiglu else torch.nn.functional.gelu,
        normalization="RMSNorm" if m.normalization == "rmsnorm" else "LayerNorm",
        add_bias_linear=m.add_bias_linear,
        add_qkv_bias=m.add_qkv_bias,
        qk_layernorm=m.qk_layernorm,
        tensor_model_parallel_size=p.tp,
        pipeline_model_parallel_size=p.pp,
        virtual_pipeline_model_parallel_size=p.vpp if p.vpp > 1 else None,
        context_parallel_size=p.cp,
        expert_model_parallel_size=p.ep,
        expert_tensor_parallel_size=p.expert_tp,
        num_layers_in_first_pipeline_stage=p.pipeline_layers_first_stage,
        num_layers_in_last_pipeline_stage=p.pipeline_layers_last_stage,
        pipeline_dtype=torch.bfloat16,
        params_dtype=torch.bfloat16,
        bf16=True,
        use_cpu_initialization=True,
        perform_initialization=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    if m.is_moe:
        kw.update(num_moe_experts=m.num_experts, moe_ffn_hidden_size=m.expert_ffn,
                  moe_router_topk=m.moe_router_topk,
                  moe_shared_expert_intermediate_size=m.moe_shared_expert_intermediate_size or None,
                  moe_layer_freq=[0 if i < m.moe_dense_first_layers else 1 for i in range(kw["num_layers"])],
                  moe_token_dispatcher_type="allgather", moe_grouped_gemm=False)
    kw.update(overrides)
    if m.multi_latent_attention:
        kw.pop("kv_channels")
        kw.pop("num_query_groups")
        kw["qk_layernorm"] = True  # DeepSeek recipes' --qk-layernorm: MLA's q/kv norms
        return MLATransformerConfig(multi_latent_attention=True, rope_type="rope", q_lora_rank=m.q_lora_rank,
                                    kv_lora_rank=m.kv_lora_rank, qk_head_dim=m.qk_head_dim,
                                    qk_pos_emb_head_dim=m.qk_pos_emb_head_dim, v_head_dim=m.v_head_dim,
                                    **kw)
    return TransformerConfig(**kw)


class _FlashLike(torch.autograd.Function):
    """Causal attention that keeps what flash attention keeps -- q, k, v, the output and the fp32
    log-sum-exp ``[b, heads, s]`` -- and recomputes the rest in backward (for head dims the CPU
    flash kernel does not take, e.g. MLA's 192 / 128)."""

    @staticmethod
    def forward(ctx, q, k, v, scale):
        with torch.no_grad():
            res = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
            # written in [s, b, heads, d] order like flash / TE output, so the caller's
            # [s, b, heads * d] reshape is a view (no copy kept by the output projection)
            b, hh, s_, d = res.shape
            out = torch.empty((s_, b, hh, d), dtype=res.dtype, device=res.device).permute(1, 2, 0, 3)
            out.copy_(res)
        lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, _, _ = ctx.saved_tensors
        with torch.enable_grad():
            qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
            out = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=True, scale=ctx.scale)
            dq, dk, dv = torch.autograd.grad(out, (qq, kk, vv), grad)
        return dq, dk, dv, None


class SDPACoreAttention(MegatronModule):
    """A flash-like core attention for megatron-core on CPU: ``F.scaled_dot_product_attention``.

    Stands in for ``TEDotProductAttention`` (flash / cuDNN fused attention): like it, autograd keeps
    only q, k, v, the output and the per-row log-sum-exp, never the ``[b, heads, s, s]`` scores the
    local ``DotProductAttention`` materialises.  Accepts the MLA keyword arguments
    (``k_channels``, ``v_channels``) the local one rejects.
    """

    def __init__(self, config, layer_number, attn_mask_type, attention_type="self", attention_dropout=None,
                 softmax_scale=None, k_channels=None, v_channels=None, cp_comm_type=None, pg_collection=None,
                 **_):
        super().__init__(config=config)
        self.softmax_scale = softmax_scale

    def forward(self, query, key, value, attention_mask=None, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None, **_):
        # [s, b, heads, d] -> [b, heads, s, d]
        q, k, v = (x.permute(1, 2, 0, 3) for x in (query, key, value))
        if q.size(-1) != v.size(-1):  # MLA: torch's CPU flash kernel needs equal head dims
            out = _FlashLike.apply(q, k, v, self.softmax_scale)
        else:
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=self.softmax_scale, enable_gqa=k.size(1) != q.size(1))
        s, b = query.size(0), query.size(1)
        return out.permute(2, 0, 1, 3).reshape(s, b, -1)


def block_spec(plan: Plan, cfg: TransformerConfig, pp_rank: int, vp_stage: int | None):
    """``get_gpt_decoder_block_spec`` (local spec) with :class:`SDPACoreAttention` as core attention."""
    norm = "RMSNorm" if plan.model.normalization == "rmsnorm" else "LayerNorm"
    spec = get_gpt_decoder_block_spec(cfg, use_transformer_engine=False, normalization=norm,
                                      vp_stage=vp_stage, pp_rank=pp_rank)
    if plan.training.attention_backend in ("unfused", "local"):
        return spec  # megatron's own DotProductAttention (materialised s x s scores)
    for ls in spec.layer_specs:
        ls.submodules.self_attention.submodules.core_attention = SDPACoreAttention
    return spec


def build_stage(plan: Plan, pp_rank: int) -> list[GPTModel]:
    """The model chunks megatron-core builds on one GPU of PP stage ``pp_rank`` (meta device)."""
    p = plan.parallel
    vpp = p.vpp if p.vpp > 1 else None
    init_fake_parallel(p.tp, p.pp, p.ep, p.expert_tp, p.cp, vpp, pp_rank)
    cfg = mcore_config(plan)
    chunks = []
    for c in range(p.vpp):
        vp = c if vpp else None
        with torch.device("meta"), cpu_current_device():
            spec = block_spec(plan, cfg, pp_rank, vp)
            chunks.append(GPTModel(
                cfg, spec, vocab_size=plan.model.padded_vocab_size(p.tp),
                max_sequence_length=plan.model.max_position_embeddings or plan.model.seq_length,
                pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp),
                post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp),
                share_embeddings_and_output_weights=not plan.model.untie_embeddings_and_output_weights,
                position_embedding_type={"rope": "rope", "learned": "learned_absolute", "none": "none"}[
                    plan.model.position_embedding],
                vp_stage=vp))
    return chunks


def count(modules, expert_only: bool = False) -> int:
    """Parameters of the modules (``expert_only``: those megatron marks ``allreduce=False``)."""
    n = 0
    for mod in modules:
        for prm in mod.parameters():
            if expert_only and getattr(prm, "allreduce", True):
                continue
            n += prm.numel()
    return n
