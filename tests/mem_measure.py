"""Measure per-GPU memory of one training step of a reduced real megatron-core model (test helper).

The model is megatron-core 0.16.1's ``GPTModel`` (local spec, :class:`mcore_meta.SDPACoreAttention`
as a flash-like core attention), built and run under ``FakeTensorMode`` on a fake process group of
the plan's TP size (so tensors carry real shapes at real hidden sizes but cost no memory or time),
tracked by torch's own ``torch.distributed._tools.mem_tracker.MemTracker``.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

from mcore_meta import block_spec, init_fake_parallel, mcore_config
from primus_launch.frameworks import mcore_cpu
from primus_launch.plan import Plan


class SPRMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` with megatron's norm signature; allowed under sequence parallel
    (megatron's ``WrappedTorchNorm`` refuses SP only because of how it reduces the weight grads)."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-5):
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)
        setattr(self.weight, "sequence_parallel", config.sequence_parallel)


def _patch_checkpoint_rng() -> None:
    """Shim: megatron's ``CheckpointFunction`` (recompute) saves/restores the CUDA RNG state; on a
    CPU-only torch keep the CPU generator state instead (dropout is 0 here, RNG is irrelevant)."""
    import megatron.core.tensor_parallel.random as r

    r._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    r._set_cuda_rng_state = lambda *a, **k: None
    if not hasattr(r, "FP8GlobalStateManager"):
        # output-discarding checkpointing (CheckpointWithoutOutput: --recompute-modules layernorm, moe_act,
        # mla_up_proj) asks Transformer Engine whether fp8 is on; without TE it is not
        r.FP8GlobalStateManager = type("_NoFP8", (), {"is_fp8_enabled": staticmethod(lambda: False),
                                                        "get_fp8_recipe": staticmethod(lambda: None)})
    if not hasattr(r, "activation_recompute_forward"):  # TE's context marking the recompute phase (a no-op here)
        import contextlib

        r.activation_recompute_forward = lambda **_: contextlib.nullcontext()
        r.fp8_autocast = lambda **_: contextlib.nullcontext()


def _total(snap: dict) -> int:
    return sum(v["Total"] for v in snap.values())


def measure_step(plan: Plan, num_layers: int, *, pre_process: bool = True, post_process: bool = True,
                 fused_swiglu: bool = False, fake: bool = True) -> dict[str, int]:
    """Bytes of one fwd+bwd of ``num_layers`` decoder layers of ``plan.model`` on one GPU (TP rank 0).

    ``fake=False`` runs real CPU tensors (MoE: routing needs data, ``FakeTensorMode`` cannot run
    megatron's token dispatch); keep the sizes small then.  Returns ``activations`` (live after
    forward minus before: what autograd keeps for backward),
    ``peak`` (highest live bytes during forward+backward) and ``static`` (parameters + grads before
    the step, grads preallocated like megatron's grad buffer).  Parameters and grads are bf16 (no
    optimizer: the harness measures activations and the backward's temporaries).
    """
    import torch._dynamo

    p = plan.parallel
    mcore_cpu.install()
    _patch_checkpoint_rng()
    init_fake_parallel(p.tp, 1, 1, p.etp, 1, None, 0)
    mcore_cpu.seed_rng_tracker(1234)
    from megatron.core import parallel_state as ps

    # a fresh global memory buffer (megatron allocates the SP all-gather buffer in it on first use
    # and keeps it): every measurement then sees that allocation, independent of earlier runs
    ps._GLOBAL_MEMORY_BUFFER = None
    ps._set_global_memory_buffer()
    r = plan.training.recompute
    over = dict(mcore_cpu.config_overrides())
    over.update(pipeline_model_parallel_size=1, num_layers_in_first_pipeline_stage=None,
                num_layers_in_last_pipeline_stage=None, virtual_pipeline_model_parallel_size=None,
                expert_model_parallel_size=1, sequence_parallel=p.sequence_parallel,
                bias_activation_fusion=fused_swiglu, hidden_dropout=plan.model.hidden_dropout,
                attention_dropout=plan.model.attention_dropout,
                mtp_num_layers=plan.model.mtp_num_layers or None)
    if r.granularity == "selective":
        over.update(recompute_granularity="selective", recompute_modules=list(r.modules))
    elif r.granularity == "full":
        over.update(recompute_granularity="full", recompute_method=r.method,
                    recompute_num_layers=r.num_layers or 1)
    cfg = mcore_config(plan, num_layers=num_layers, **over)
    m = plan.model
    # megatron's fused bias-SwiGLU is wrapped in torch.compile (jit_fuser); compiling it for real
    # CPU tensors costs seconds and changes nothing that is kept: run it eagerly
    dynamo_was = torch._dynamo.config.disable
    torch._dynamo.config.disable = True
    try:
        return _run(plan, cfg, p, m, num_layers, pre_process, post_process, fake)
    finally:
        torch._dynamo.config.disable = dynamo_was


def _run(plan, cfg, p, m, num_layers, pre_process, post_process, fake) -> dict[str, int]:
    import contextlib

    from megatron.core.models.gpt.gpt_model import GPTModel

    s, b = m.seq_length, plan.training.micro_batch_size
    with FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext():
        spec = block_spec(plan, cfg, 0, None)
        if p.sequence_parallel:
            for ls in spec.layer_specs:
                ls.submodules.input_layernorm = SPRMSNorm
                ls.submodules.pre_mlp_layernorm = SPRMSNorm
                att = getattr(ls.submodules.self_attention, "submodules", None)
                for name in ("q_layernorm", "kv_layernorm"):  # MLA's latent norms
                    if m.multi_latent_attention and getattr(att, name, None) is not None:
                        setattr(att, name, SPRMSNorm)
            spec.layer_norm = SPRMSNorm
        mtp_spec = None
        if m.mtp_num_layers and post_process:
            # megatron's MultiTokenPredictionBlock (get_gpt_mtp_block_spec: the decoder's last layer kind,
            # enorm / hnorm / eh_proj / final norm)
            from megatron.core.models.gpt.gpt_layer_specs import get_gpt_mtp_block_spec

            mtp_spec = get_gpt_mtp_block_spec(cfg, spec, use_transformer_engine=False)
            if p.sequence_parallel:
                for ls in mtp_spec.layer_specs:
                    for name in ("enorm", "hnorm", "layer_norm"):
                        setattr(ls.submodules, name, SPRMSNorm)
        model = GPTModel(cfg, spec, vocab_size=m.padded_vocab_size(p.tp), max_sequence_length=s,
                         pre_process=pre_process, post_process=post_process,
                         share_embeddings_and_output_weights=not m.untie_embeddings_and_output_weights,
                         position_embedding_type="rope", mtp_block_spec=mtp_spec)
        gen = torch.Generator().manual_seed(0)
        for prm in model.parameters():
            prm.data = prm.data.to(torch.bfloat16)
            if not fake:
                prm.data.normal_(0.0, 0.02, generator=gen)
        tokens = (torch.zeros((b, s), dtype=torch.long) if fake
                  else torch.randint(0, m.vocab_size, (b, s), generator=gen))
        pos = torch.arange(s).unsqueeze(0).expand(b, s)
        # megatron's unfused attention builds its default causal mask on "cuda": pass one (True = masked)
        mask = torch.triu(torch.ones((1, 1, s, s), dtype=torch.bool), diagonal=1)
        hidden = None
        if not pre_process:
            sh = s // p.tp if p.sequence_parallel else s
            hidden = torch.zeros((sh, b, m.hidden_size), dtype=torch.bfloat16, requires_grad=True)
            model.set_input_tensor(hidden)
        for prm in model.parameters():  # megatron's contiguous grad buffer exists before the step
            prm.grad = torch.zeros_like(prm)
        mt = MemTracker()
        mt.track_external(model)
        import megatron.core.tensor_parallel.random as rnd

        discarded = [0]
        discard = rnd.CheckpointWithoutOutput.discard_output_and_register_recompute

        def counted_discard(self, hook_tensor):
            # output-discarding checkpointing frees its outputs with ``storage.resize_(0)``, which the
            # tracker does not see (it looks the storage up by a different Python object): count them here
            discarded[0] += sum(o.untyped_storage().nbytes() for o in self.outputs)
            return discard(self, hook_tensor)

        rnd.CheckpointWithoutOutput.discard_output_and_register_recompute = counted_discard
        try:
            with mt:
                before = _total(mt.get_tracker_snapshot("current"))
                out = model(tokens, pos, mask, labels=tokens if post_process else None)
                loss = out.float().sum()
                after = _total(mt.get_tracker_snapshot("current"))
                loss.backward()
                peak = _total(mt.get_tracker_snapshot("peak"))
        finally:
            rnd.CheckpointWithoutOutput.discard_output_and_register_recompute = discard
    return {"activations": after - before - discarded[0], "peak": peak, "static": before}
