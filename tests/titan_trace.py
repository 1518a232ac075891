"""Trace per-GPU memory of torchtitan 0.3.0's own training step on the CPU (test helper).

What runs is torchtitan's: the model class from its registry (``model_spec(name, flavor).model``,
``layers`` sliced to a few blocks at the real hidden sizes, attention swapped to its own
``ScaledDotProductAttention`` because flex attention has no CPU backward), its
``parallelize_llama`` (TP/SP sharding config ``set_llama3_sharding_config``, context parallel
``apply_cp_to_forward``, activation checkpointing ``FullAC`` / ``SelectiveAC`` (per-op save list),
FSDP2 ``apply_fsdp_to_decoder`` with its mixed-precision policy and reshard policy), its loss
``cross_entropy_loss`` (``pred.float()``), its optimizer choice (AdamW, ``implementation="fused"``)
and its layer-SAC every-N rule (torchtitan v0.2 ``_apply_layer_sac``: blocks whose running count is
divisible by N are wrapped by the full-AC wrapper; 0.3.0 dropped the option, the wrapper is the same
``ptd_checkpoint_wrapper`` as :class:`FullAC`).  The process group is torch's fake one
(``FakeStore`` + backend ``"fake"``, one process claims rank 0 of any world size), tensors are
``FakeTensorMode`` tensors (real shapes, no memory, no compute), and the bytes are counted by
torch's ``FSDPMemTracker`` (``torch.distributed._tools.fsdp2_mem_tracker``) by category.

One step = forward, ``cross_entropy_loss``, backward, ``optimizer.step()``, ``zero_grad()``; the
second step is measured (the optimizer's states exist, gradients were freed by ``zero_grad``).
The torchtitan "legacy" SPMD backend (``spmd_backend="partial_dtensor"``) is used: its FSDP mesh
is ``dp_shard x cp`` (the default ``spmd_types`` backend needs the trainer's sharding configs;
the memory is the same per rank).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.distributed.fake_pg import FakeStore

from primus_launch.frameworks import titan_cpu

titan_cpu.install()

from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker as _FSDPMemTracker  # noqa: E402
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState as _FSDPState  # noqa: E402


class _MergedGroups:
    """What ``FSDPMemTracker`` reads of a module's param group (its ``fsdp_params``), for a module whose
    parameters FSDP2 split into several groups (per-parameter meshes from ``shard_placement_fn``)."""

    def __init__(self, groups):
        self.fsdp_params = [fp for g in groups for fp in g.fsdp_params]


def _merged_group(state):
    groups = state._fsdp_param_groups
    if not groups:
        return None
    return groups[0] if len(groups) == 1 else _MergedGroups(groups)


class FSDPMemTracker(_FSDPMemTracker):
    """torch's ``FSDPMemTracker`` for modules with several FSDP2 param groups: torchtitan 0.3.0 shards an
    MoE block's routed experts over the ``efsdp`` mesh and its other parameters over the ``fsdp`` mesh
    (``apply_fsdp_to_decoder``'s ``ShardPlacementResult``), which FSDP2 keeps as two param groups of one
    module; the stock tracker reads the single-group ``FSDPState._fsdp_param_group`` (it raises for two).
    Here that property answers the union of the groups' parameters while tracking, and each group's
    ``pre_backward`` / ``post_backward`` is wrapped on its own.  Categories and snapshots are the stock
    tracker's."""

    def _instrument_fsdp_module(self) -> None:
        from torch.distributed.fsdp import FSDPModule

        groups_of = {}
        for module in self._root_mod.modules():
            if isinstance(module, FSDPModule):
                st = module._get_fsdp_state()
                if len(st._fsdp_param_groups) > 1:
                    groups_of[module] = list(st._fsdp_param_groups)
                    # the stock code wraps one group; hand it the first, wrap the others below
                    st._fsdp_param_groups[:] = groups_of[module][:1]
        try:
            super()._instrument_fsdp_module()
        finally:
            for module, groups in groups_of.items():
                module._get_fsdp_state()._fsdp_param_groups[:] = groups
        self._extra_groups = []
        for module, groups in groups_of.items():
            for g in groups[1:]:
                self._instrument_fsdp_sharded_params_grads(g)
                self._extra_groups.append((g, g.pre_backward, g.post_backward))
                g.pre_backward = self._fsdp_param_group_pre_backward(module, g.pre_backward)
                g.post_backward = self._fsdp_param_group_post_backward(module, g.post_backward)

    def _deregister_module_and_optimizer_hooks(self) -> None:
        super()._deregister_module_and_optimizer_hooks()
        for g, pre, post in getattr(self, "_extra_groups", []):
            g.pre_backward, g.post_backward = pre, post
        self._extra_groups = []

    def __enter__(self):
        if self._depth == 0:
            self._saved_prop = _FSDPState.__dict__["_fsdp_param_group"]
            _FSDPState._fsdp_param_group = property(_merged_group)
        return super().__enter__()

    def __exit__(self, *args):
        super().__exit__(*args)
        if self._depth == 0:
            _FSDPState._fsdp_param_group = self._saved_prop

CATS = ("Sharded Param", "Unsharded Param", "Buffer", "Sharded Grad", "Unsharded Grad", "Activation", "Temp",
        "All Gather", "Reduce Scatter", "OptState", "Inputs")


@dataclasses.dataclass(frozen=True)
class TitanCase:
    """One torchtitan job shape (per-rank memory of rank 0)."""

    model: str = "llama3"
    flavor: str = "8B"
    layers: int = 2
    seq: int = 2048
    mbs: int = 1
    dp_shard: int = 8
    dp_replicate: int = 1
    cp: int = 1
    tp: int = 1
    ac: str | int = "none"  # none | full | op | N (every N-th block, full)
    reshard_after_forward: str = "default"
    pp: int = 1
    nmb: int = 1  # pipeline micro-batches per step (local batch = nmb * mbs)
    schedule: str = "1F1B"  # torch.distributed.pipelining schedule name (torchtitan's pipeline_parallel_schedule)
    attn: str = "sdpa"  # sdpa (the CPU-traceable swap) | flex (torchtitan 0.3.0's default FlexAttention)
    float8: str | None = None  # torchtitan Float8LinearConverter recipe (rowwise | rowwise_with_gw_hp) or
    #                             "tensorwise" (torchao's recipe, which torchtitan <= 0.2 defaulted to)
    flash: bool = False  # SDPA dispatched to the flash-attention op a GPU runs (see :func:`use_flash_op`)
    sp: bool = True  # with tp > 1: sequence parallelism (torchtitan's enable_sequence_parallel, its default)
    ep: int = 1  # expert parallelism (MoE models): experts over ep ranks, FSDP over efsdp = dp_shard*cp*tp/ep
    first_layer: int = 0  # the blocks traced are the flavor's layers[first_layer : first_layer + layers]
    loss_chunks: int = 1  # > 1: torchtitan 0.3.0's ChunkedLossWrapper (lm_head + loss per sequence chunk)
    dtype: str = "float32"  # torchtitan's training.dtype: "bfloat16" builds the model in bf16 (set_default_dtype)

    @property
    def world(self) -> int:
        return self.dp_shard * self.dp_replicate * self.cp * self.tp * self.pp


class _FlashF:
    """``torch.nn.functional`` for torchtitan's attention module, with ``scaled_dot_product_attention``
    dispatched to ``aten._scaled_dot_product_flash_attention`` -- the kernel an H100 runs for causal
    bf16 attention (it keeps the output and the fp32 log-sum-exp, and torch's context-parallel dispatcher
    has its ring rule) -- instead of the CPU kernel ``_scaled_dot_product_flash_attention_for_cpu``,
    which CP has no sharding rule for.  Under ``FakeTensorMode`` only its shape function runs."""

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    @staticmethod
    def scaled_dot_product_attention(q, k, v, *, scale=None, is_causal=True, enable_gqa=False, **_):
        if q.shape[-1] != v.shape[-1]:  # MLA: cuDNN attention takes d_qk != d_v; flash does not
            return _CudnnLike.apply(q, k, v)
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, is_causal, scale=scale)[0]


class _CudnnLike(torch.autograd.Function):
    """Fused attention with different q/k and v head dims (MLA) at shape level: keeps q, k, v, the
    output ``[b, heads, s, d_v]`` (strides following q, like the fused kernels) and the fp32
    log-sum-exp, as cuDNN's fused attention does (``aten._scaled_dot_product_cudnn_attention``)."""

    @staticmethod
    def forward(ctx, q, k, v):
        b, n, s_, _ = q.shape
        out = torch.empty((b, s_, n, v.shape[-1]), dtype=q.dtype, device=q.device).transpose(1, 2)
        if q.stride(1) > q.stride(2):  # q laid out [b, heads, s, d]
            out = torch.empty((b, n, s_, v.shape[-1]), dtype=q.dtype, device=q.device)
        lse = torch.empty((b, n, s_), dtype=torch.float32, device=q.device)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, _, _ = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def use_flash_op(on: bool) -> None:
    """Point torchtitan's ``ScaledDotProductAttention`` at :class:`_FlashF` (``on``) or back."""
    import torchtitan.models.common.attention as attn

    attn.F = _FlashF() if on else torch.nn.functional


def _init_world(world: int, rank: int = 0) -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)


def _set_sharding(cfg, model: str, sp: bool, ep: bool = False) -> None:
    """torchtitan's own TP / SP sharding config for ``model`` (what its ``update_from_config`` sets
    from ``parallelism.enable_sequence_parallel``)."""
    if model == "deepseek_v3":
        from torchtitan.models.deepseek_v3.sharding import set_deepseek_v3_sharding_config

        set_deepseek_v3_sharding_config(cfg, enable_sp=sp, enable_ep=ep)
    elif model == "qwen3":
        from torchtitan.models.qwen3.sharding import set_qwen3_sharding_config

        set_qwen3_sharding_config(cfg, enable_sp=sp, enable_ep=ep)
    else:
        from torchtitan.models.llama3.sharding import set_llama3_sharding_config

        set_llama3_sharding_config(cfg, enable_sp=sp)


def build(case: TitanCase):
    """torchtitan's model (meta device) with its parallelisms applied; returns (model, parallel_dims)."""
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.models.llama3.parallelize import parallelize_llama

    from primus_launch.adapters.torchtitan_arch import model_spec

    from torchtitan.distributed import utils as dist_utils

    _init_world(case.world)
    use_flash_op(case.flash)
    backend = "partial_dtensor"
    dist_utils.set_spmd_backend(backend)
    pd = ParallelDims(dp_replicate=case.dp_replicate, dp_shard=case.dp_shard, cp=case.cp, tp=case.tp, pp=case.pp,
                      ep=case.ep, world_size=case.world, spmd_backend=backend)
    pd.build_mesh()
    cfg = copy.deepcopy(model_spec(case.model, case.flavor).model)
    cfg.layers = cfg.layers[case.first_layer:case.first_layer + case.layers]
    if case.attn == "sdpa":
        titan_cpu.use_sdpa(cfg)
    titan_cpu.set_seq_len(cfg, case.seq)
    if case.float8:
        cfg = float8_convert(cfg, case.float8)
    if case.tp > 1 or case.ep > 1:
        _set_sharding(cfg, case.model, case.sp, case.ep > 1)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, case.dtype))  # as torchtitan's trainer builds under training.dtype
    try:
        with torch.device("meta"):
            model = cfg.build()
    finally:
        torch.set_default_dtype(prev)
    par = ParallelismConfig(data_parallel_shard_degree=case.dp_shard,
                            data_parallel_replicate_degree=case.dp_replicate, context_parallel_degree=case.cp,
                            tensor_parallel_degree=case.tp, enable_sequence_parallel=case.sp, spmd_backend=backend,
                            expert_parallel_degree=case.ep, pipeline_parallel_degree=case.pp,
                            fsdp_reshard_after_forward=case.reshard_after_forward)
    ac: Any = None
    if case.ac == "full":
        ac = FullAC.Config()
    elif case.ac == "op":
        ac = SelectiveAC.Config()
    parallelize = parallelize_llama if case.model == "llama3" else model_spec(case.model, case.flavor).parallelize_fn
    model = parallelize(model, parallel_dims=pd, training=TrainingConfig(local_batch_size=case.mbs, seq_len=case.seq),
                        parallelism=par, compile_config=CompileConfig(), ac_config=ac, dump_folder="/tmp")
    if isinstance(case.ac, int):
        _layer_sac(model, case.ac)
    return model, pd


class _FlexStandIn(torch.autograd.Function):
    """torch's flex attention at shape level for ``FakeTensorMode`` on a CPU-only torch (its real path
    compiles the op, which needs a GPU backend): the output and the fp32 ``logsumexp`` / ``max_scores``
    come from torch's own fake implementation (``torch/_higher_order_ops/flex_attention.py``
    ``flex_attention_fake_impl``: output strides follow the query's), and autograd keeps what
    ``FlexAttentionAutogradOp.forward`` saves: query, key, value, out, logsumexp, max_scores and the block
    mask's tensors; the backward returns gradients shaped like query, key and value."""

    @staticmethod
    def forward(ctx, q, k, v, *mask_tensors):
        from torch._higher_order_ops.flex_attention import flex_attention_fake_impl

        out, lse, max_scores = flex_attention_fake_impl(q, k, v, None, (), 1.0, {})
        ctx.mark_non_differentiable(lse, max_scores)
        ctx.save_for_backward(q, k, v, out, lse, max_scores, *mask_tensors)
        return out, lse, max_scores

    @staticmethod
    def backward(ctx, g_out, g_lse, g_max):
        saved = ctx.saved_tensors
        q, k, v = saved[:3]
        return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)) + (None,) * (len(saved) - 6)


def use_eager_flex() -> None:
    """torchtitan's ``FlexAttention`` runs :class:`_FlexStandIn` (``FlexAttention._compiled_flex_attn``
    replaced; everything around it -- the layout transposes, CP's ``flex_cp_allgather`` of K and V -- is
    torchtitan's and torch's own)."""
    from torch.nn.attention.flex_attention import AuxOutput
    from torchtitan.models.common.attention import FlexAttention

    def flex(q, k, v, *, score_mod=None, block_mask=None, scale=None, enable_gqa=False, return_aux=None,
             kernel_options=None):
        masks = [t for t in block_mask.as_tuple() if isinstance(t, torch.Tensor)] if block_mask is not None else []
        out, lse, _ = _FlexStandIn.apply(q, k, v, *masks)
        return out, AuxOutput(lse=lse if (return_aux is not None and return_aux.lse) else None)

    FlexAttention._compiled_flex_attn = staticmethod(flex)


def use_balanced_all_to_all() -> None:
    """torchtitan's ``AllToAllTokenDispatcher`` with balanced split sizes: its
    ``_sync_token_count_exchange`` reads the all-to-all splits back to the host (``.tolist()``), which
    fake tensors cannot answer; here every EP rank sends ``N / ep`` of its ``N = tokens x top_k``
    routed rows to each EP rank and receives as many (the balanced routing the memory model assumes).
    Everything else -- the count exchange, the data all-to-alls, ``_permute`` / ``_unpermute``, the
    grouped GEMMs, the combine -- is torchtitan's and torch's own."""
    from torchtitan.models.common.token_dispatcher import AllToAllTokenDispatcher

    if getattr(AllToAllTokenDispatcher, "_balanced_shim", False):
        return
    reorder = AllToAllTokenDispatcher._local_reorder

    def local_reorder(self, x_TD, scores_TK, ids_TK):
        self._routed_rows = x_TD.shape[0] * ids_TK.shape[1]
        return reorder(self, x_TD, scores_TK, ids_TK)

    def sync(self, local_E, global_EP_e, ep_size):
        glob = torch.ops._c10d_functional.wait_tensor(global_EP_e).reshape(-1)
        split = [self._routed_rows // ep_size] * ep_size
        return glob, split, list(split)

    AllToAllTokenDispatcher._local_reorder = local_reorder
    AllToAllTokenDispatcher._sync_token_count_exchange = sync
    AllToAllTokenDispatcher._balanced_shim = True


def float8_convert(cfg, recipe: str):
    """torchtitan's ``Float8LinearConverter`` on the model config (``filter_fqns=["lm_head"]`` as its
    configs set), with the GPU capability check answered yes (no kernel runs under fake tensors);
    ``tensorwise`` swaps in torchao's tensorwise recipe (``Float8LinearConfig.from_recipe_name``)."""
    import torchtitan.components.quantization.float8 as f8
    from torchao.float8 import Float8LinearConfig

    saved = f8.has_cuda_capability
    f8.has_cuda_capability = lambda *a, **k: True
    try:
        conv = f8.Float8LinearConverter(f8.Float8LinearConverter.Config(
            recipe_name="rowwise" if recipe == "tensorwise" else recipe, filter_fqns=["lm_head"]))
    finally:
        f8.has_cuda_capability = saved
    if recipe == "tensorwise":
        conv.torchao_config = Float8LinearConfig.from_recipe_name("tensorwise")
    return conv.convert(cfg)


def _flex_masks(model, positions):
    inner = model.module if hasattr(model, "module") else model
    return type(inner).get_attention_masks(inner, positions=positions)


def _layer_sac(model, every: int) -> None:
    """torchtitan v0.2 ``_apply_layer_sac``: a running counter over the blocks; block ``i`` (1-based
    count) is checkpointed when ``count % every == 0``.  Applied to the FSDP-wrapped blocks (AC sits
    inside FSDP in torchtitan; wrapping an FSDP block keeps its hooks)."""
    from torchtitan.distributed.activation_checkpoint import FullAC

    wrap = FullAC(FullAC.Config())
    for i, (name, block) in enumerate(list(model.layers.named_children())):
        if (i + 1) % every == 0:
            model.layers.register_module(name, wrap._wrap_block(block))


def _cats(snap: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for dev_snap in snap.values():
        for k, v in dev_snap.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def trace(case: TitanCase, forward_only: bool = False) -> dict[str, Any]:
    """Bytes of rank 0 in the second training step of ``case``.

    Returns ``static`` (categories before forward: sharded fp32 params, buffers, optimizer
    states), ``after_forward`` (categories once the loss is computed: what the backward will use),
    ``after_backward``, ``peak`` (highest total of the step) and ``peak_phase`` (forward, backward
    or optimizer).  ``forward_only``: the trace ends once the second step's ``after_forward`` is
    taken (``static``, ``after_forward`` and ``peak_forward`` only; the same bytes -- nothing of
    the step after the snapshot reaches it).
    """
    from torchtitan.components.loss import ChunkedLossWrapper, cross_entropy_loss

    model, pd = build(case)
    loss_fn = cross_entropy_loss
    if case.loss_chunks > 1:  # as torchtitan 0.3.0's trainer wires it: lm_head skipped in forward, run per chunk
        chunked = ChunkedLossWrapper(ChunkedLossWrapper.Config(num_chunks=case.loss_chunks))
        chunked.set_lm_head(model.lm_head)
        model._skip_lm_head = True

        def _name_a_parent(module, args):
            # torch's FSDPMemTracker refuses an FSDP module called from the top level more than once a step
            # (ModTracker parents == {"Global"}, reset after every backward): lm_head runs once per chunk, so a
            # placeholder parent is named before each call (the bytes tracked are the same)
            if module is model.lm_head:
                mt._mod_tracker.parents.add("chunked_loss")

        def loss_fn(pred, labels):
            handle = torch.nn.modules.module.register_module_forward_pre_hook(_name_a_parent)
            try:
                return chunked(pred, labels)[0]
            finally:
                handle.remove()
                mt._mod_tracker.parents.discard("chunked_loss")
    tp = case.tp
    if case.ep > 1:
        use_balanced_all_to_all()
    kwargs: dict[str, Any] = {}
    if case.attn == "flex":
        # torchtitan's own causal + document block mask (the trainer's get_attention_masks), built on real
        # CPU tensors before the fake step (block sparsity is data)
        s_local = case.seq // case.cp
        pos = torch.arange(s_local).unsqueeze(0).expand(case.mbs, s_local)
        kwargs["attention_masks"] = _flex_masks(model, pos)
        use_eager_flex()
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        s = case.seq // case.cp
        ids = torch.zeros((case.mbs, s), dtype=torch.long)
        mt = FSDPMemTracker(model, opt)
        res: dict[str, Any] = {}
        for it in range(2):
            with mt:
                if it == 1:
                    res["static"] = _cats(mt.get_tracker_snapshot("current"))
                pred = model(ids, **kwargs)
                loss = loss_fn(pred, ids)
                del pred
                if it == 1:
                    res["after_forward"] = _cats(mt.get_tracker_snapshot("current"))
                    res["peak_forward"] = max(mt._peak_mem.values())
                    if forward_only:
                        del loss
                        break
                loss.backward()
                del loss
                if it == 1:
                    res["after_backward"] = _cats(mt.get_tracker_snapshot("current"))
                    res["peak_backward"] = max(mt._peak_mem.values())
                opt.step()
                opt.zero_grad()
                if it == 1:
                    res["peak"] = max(mt._peak_mem.values())
                    res["peak_snapshot"] = _cats(mt.get_tracker_snapshot("peak"))
    if forward_only:
        return res
    res["peak_phase"] = ("forward" if res["peak"] == res["peak_forward"] else
                         "backward" if res["peak"] == res["peak_backward"] else "optimizer")
    res["num_params_local"] = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                                  for p in model.parameters())
    del tp
    return res


# ------------------------------------------------------------------ pipeline parallel
class _PeakTracker(FSDPMemTracker):
    """``FSDPMemTracker`` that also records, at each new peak, the bytes of what FSDP2 and the pipeline
    stage hold at that moment: the fp32 unsharded gradients accumulated across micro-batches
    (``FSDPParam.unsharded_accumulated_grad``), the unsharded bf16 parameters, the stage's receive
    buffers, and the phase of the step (``forward`` / ``backward`` / ``reduce`` after the last backward)."""

    def __init__(self, parts, opt, fsdp_params, stages):
        super().__init__(parts[0], opt)
        if len(parts) > 1:  # the other model parts of a multi-stage schedule: their parameters and buffers
            self.track_external(*parts[1:])
        self._modules = parts
        self._opt_ref = opt
        self._fsdp_params = fsdp_params
        self._stages = stages
        self.record = False
        self.phase = "forward"
        self.at_peak: dict[str, Any] = {}
        self.phase_peaks: dict[str, tuple[int, dict[str, Any], dict[str, int]]] = {}

    def _extras(self) -> dict[str, Any]:
        acc = unsh = sharded = sgrad = 0
        for fp in self._fsdp_params:
            # an expert parameter under EP is a DTensor on the ep mesh: its local tensor is what the rank holds
            g = fp.unsharded_accumulated_grad
            if g is not None:
                acc += _local_bytes(g)
            u = getattr(fp, "_unsharded_param", None)
            if u is not None:
                unsh += getattr(u, "_local_tensor", u).untyped_storage().nbytes()
            sp = fp.sharded_param
            sharded += sp._local_tensor.untyped_storage().nbytes()
            if sp.grad is not None:
                sgrad += sp.grad._local_tensor.numel() * sp.grad._local_tensor.element_size()
        opt = sum(_local_bytes(v) for st in self._opt_ref.state.values() for v in st.values()
                  if isinstance(v, torch.Tensor) and v.dim() > 0)
        buffers = sum(_local_bytes(b) for m in self._modules for b in m.buffers())
        recv = 0
        for st in self._stages:
            for infos in list(st.args_recv_info.values()) + list(st.grad_recv_info.values()):
                for info in infos:
                    if not info.is_root_arg and info.buffer is not None:
                        recv += info.buffer.numel() * info.buffer.element_size()
        return {"accumulated_grads": acc, "unsharded_params": unsh, "recv_buffers": recv, "phase": self.phase,
                "is_bw": self._mod_tracker.is_bw, "sharded_params": sharded, "sharded_grads": sgrad,
                "optimizer": opt, "buffers": buffers,
                "total": sum(d["Total"] for d in self._curr_mem_snap.values())}

    def _update_peak_stats(self, peak_state) -> None:
        before = dict(self._peak_mem)
        super()._update_peak_stats(peak_state)
        if not self.record:
            return
        if self._peak_mem != before:
            self.at_peak = self._extras()
        total = sum(d["Total"] for d in self._curr_mem_snap.values())
        if total > self.phase_peaks.get(self.phase, (0,))[0]:
            self.phase_peaks[self.phase] = (total, self._extras(), _cats(self._curr_mem_snap))


def _local_bytes(t: torch.Tensor) -> int:
    t = getattr(t, "_local_tensor", t)
    return t.numel() * t.element_size()


def trace_pp(case: TitanCase, pp_rank: int) -> dict[str, Any]:
    """Bytes of one GPU of pipeline rank ``pp_rank`` in the second step of ``case`` (``case.pp > 1``).

    torchtitan's own pipeline path: ``pipeline_llm`` splits the model with its splitter
    (``_generate_llm_fqn_per_model_part``: embedding and norm + head weigh one layer each,
    ``_split_module``), applies ``parallelize_llama`` to each part (FSDP2 with
    ``reshard_after_forward=False`` under PP by default) and builds the
    ``torch.distributed.pipelining`` schedule (``_build_pipeline_schedule``) with torchtitan's loss.
    The process claims the first rank of its pipeline stage on a fake world of ``case.world`` ranks;
    peers' sends and receives are no-ops of the fake process group.  Two shims: the stages get static
    input/output metadata (``PipelineStage(input_args=..., output_args=...)``; the dynamic shape
    inference exchanges pickled objects, which a fake process group cannot carry), and the warm-up
    vote (an all-reduce read back with ``.item()``) is answered "static".

    Returns the categories of :func:`trace` plus ``at_peak``: the FSDP / stage holdings at the peak
    (:class:`_PeakTracker`).
    """
    from torch.distributed.pipelining.stage import InferenceMode
    from torchtitan.components.loss import cross_entropy_loss
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import pipeline_parallel as ppmod
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.models.llama3.parallelize import parallelize_llama

    from primus_launch.adapters.torchtitan_arch import model_spec

    assert case.tp == 1 and case.cp == 1, "PP traces run without TP/CP (stage boundary tensors are plain tensors)"
    world = case.world
    _init_world(world, rank=pp_rank * (world // case.pp))  # mesh order pp, dp_replicate, dp_shard, cp, tp
    use_flash_op(case.flash)
    backend = "partial_dtensor"
    dist_utils.set_spmd_backend(backend)
    pd = ParallelDims(dp_replicate=case.dp_replicate, dp_shard=case.dp_shard, cp=1, tp=1, pp=case.pp, ep=case.ep,
                      world_size=world, spmd_backend=backend)
    pd.build_mesh()
    cfg = copy.deepcopy(model_spec(case.model, case.flavor).model)
    cfg.layers = cfg.layers[case.first_layer:case.first_layer + case.layers]
    titan_cpu.use_sdpa(cfg)
    titan_cpu.set_seq_len(cfg, case.seq)
    if case.ep > 1:
        _set_sharding(cfg, case.model, False, True)
    with torch.device("meta"):
        model = cfg.build()
    vocab, hidden = model.tok_embeddings.weight.shape
    par = ParallelismConfig(data_parallel_shard_degree=case.dp_shard,
                            data_parallel_replicate_degree=case.dp_replicate, pipeline_parallel_degree=case.pp,
                            pipeline_parallel_schedule=case.schedule, pipeline_parallel_microbatch_size=case.mbs,
                            spmd_backend=backend, fsdp_reshard_after_forward=case.reshard_after_forward,
                            expert_parallel_degree=case.ep)
    parallelize = parallelize_llama if case.model == "llama3" else model_spec(case.model, case.flavor).parallelize_fn
    if case.ep > 1:
        use_balanced_all_to_all()
    ac: Any = None
    if case.ac == "full":
        ac = FullAC.Config()
    elif case.ac == "op":
        ac = SelectiveAC.Config()
    orig = ppmod.PipelineStage

    def static_stage(mod, idx, n, device, group=None, get_mesh=None):
        hid = torch.empty((case.mbs, case.seq, hidden), dtype=torch.bfloat16, device="meta", requires_grad=True)
        inp = torch.empty((case.mbs, case.seq), dtype=torch.long, device="meta") if idx == 0 else hid
        out = (torch.empty((case.mbs, case.seq, vocab), dtype=torch.bfloat16, device="meta", requires_grad=True)
               if idx == n - 1 else hid)
        return orig(mod, idx, n, device, input_args=(inp,), output_args=(out,), group=group)

    def loss_fn(pred, labels, **_):
        return cross_entropy_loss(pred, labels), {}

    ppmod.PipelineStage = static_stage
    try:
        sched, parts, first, last = ppmod.pipeline_llm(
            model, parallel_dims=pd, training=TrainingConfig(local_batch_size=case.mbs * case.nmb, seq_len=case.seq),
            parallelism=par, compile_config=CompileConfig(), ac_config=ac, dump_folder="/tmp",
            device=torch.device("cpu"), model_config=cfg, parallelize_fn=parallelize, loss_fn=loss_fn)
    finally:
        ppmod.PipelineStage = orig

    def _static_vote(stages, has_backward, p2p_done):
        for st in stages:
            st._inference_mode = InferenceMode.STATIC

    sched._warmup_p2p = _static_vote
    stages = list(getattr(sched, "_stages", None) or [sched._stage])
    from torch.distributed.fsdp import FSDPModule

    with FakeTensorMode(allow_non_fake_inputs=True):
        for p in parts:
            p.to_empty(device="cpu")
            p.train()
        opt = torch.optim.AdamW([q for p in parts for q in p.parameters()], lr=1e-4, fused=True)
        fsdp_params = list({id(fp): fp for p in parts for m in p.modules() if isinstance(m, FSDPModule)
                            for g in fully_shard_state(m)._fsdp_param_groups for fp in g.fsdp_params}.values())
        mt = _PeakTracker(parts, opt, fsdp_params, stages)
        for st in stages:  # the phase of the peak: after the last backward FSDP reduces in perform_reduce_grad
            f = st.perform_reduce_grad

            def reduce(*a, _f=f, **k):
                mt.phase = "reduce"
                return _f(*a, **k)

            st.perform_reduce_grad = reduce
        ids = torch.zeros((case.mbs * case.nmb, case.seq), dtype=torch.long)
        res: dict[str, Any] = {}
        for it in range(2):
            mt.record = it == 1
            mt.phase = "step"
            with mt:
                if it == 1:
                    res["static"] = _cats(mt.get_tracker_snapshot("current"))
                losses: list | None = [] if last else None
                sched.step(ids if first else None, target=ids if last else None, losses=losses,
                           return_outputs=False)
                del losses
                if it == 1:
                    res["after_backward"] = _cats(mt.get_tracker_snapshot("current"))
                mt.phase = "optimizer"
                opt.step()
                opt.zero_grad()
                if it == 1:
                    res["peak"] = max(mt._peak_mem.values())
                    res["peak_snapshot"] = _cats(mt.get_tracker_snapshot("peak"))
    res["at_peak"] = dict(mt.at_peak)
    res["phase_peaks"] = dict(mt.phase_peaks)
    res["modules"] = [[n for n, c in p.named_children() if c is not None and (not hasattr(c, "__len__") or len(c))]
                      for p in parts]
    res["num_params_local"] = sum(q.to_local().numel() if hasattr(q, "to_local") else q.numel()
                                  for p in parts for q in p.parameters())
    return res


def fully_shard_state(module):
    from torch.distributed.fsdp import fully_shard

    return fully_shard.state(module)


def _sdpa_after_repeat_kv(q, k, v, *, scale=None, is_causal=True, enable_gqa=False, **kw):
    """:meth:`_FlashF.scaled_dot_product_attention` on K and V first expanded to the query heads the way
    torchtitan's TOML-era attention did (``models/llama3/model/model.py`` up to v0.2.1 and 5fb7cc2e:
    ``repeat_kv`` on the ``[b, s, heads, d]`` projections -- unsqueeze, expand, reshape, i.e. a copy -- then
    the transpose to ``[b, heads, s, d]``); 0.3.0 passes ``enable_gqa`` instead."""
    n = q.shape[1] // k.shape[1]

    def expand(x):
        b, hk, s_, d = x.shape
        x = x.transpose(1, 2)
        return x.unsqueeze(3).expand(b, s_, hk, n, d).reshape(b, s_, hk * n, d).transpose(1, 2)

    if n > 1:
        k, v = expand(k), expand(v)
    return _FlashF.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=is_causal)


class _FlashRepeatKvF(_FlashF):
    scaled_dot_product_attention = staticmethod(_sdpa_after_repeat_kv)


def _split_qkv(cfg) -> None:
    """Each GQA block of ``cfg`` with three projections ``wq`` / ``wk`` / ``wv`` (torchtitan 0.3.0's own
    ``QKVLinear``, the module of its ``fuse_qkv=False`` config and the only one before 'Fused QKV
    GQAttention', 2026-04-16) in place of the fused ``wqkv``, at the same shapes."""
    from torchtitan.models.common.attention import QKVLinear
    from torchtitan.models.common.linear import Linear

    for layer in cfg.layers:
        fused = layer.attention.qkv_linear
        d, nq, nkv, dim = fused.head_dim, fused.n_heads, fused.n_kv_heads, fused.wqkv.in_features
        layer.attention.qkv_linear = QKVLinear.Config(
            head_dim=d, wq=Linear.Config(in_features=dim, out_features=nq * d),
            wkv=Linear.Config(in_features=dim, out_features=nkv * d))


def compiled_block_saved_bytes(flavor: str = "8B", seq: int = 2048, mbs: int = 1, model: str = "llama3",
                               layer: int = 0, repeat_kv: bool = False, ac: str = "none",
                               fuse_qkv: bool = True) -> int:
    """Bytes the forward graph of one torch.compile'd torchtitan block hands to its backward (unique
    storages, parameters, buffers and the block output excluded), as inductor partitions it: the block is
    built on the meta device at real sizes and compiled with an ``aot_autograd`` backend using inductor's
    decompositions (``select_decomp_table``) and partitioner (``min_cut_rematerialization_partition``,
    ``compiler="inductor"``) whose forward compiler only records the saved tensors; attention dispatches to
    the flash-attention op (:class:`_FlashF`), as on a GPU; ``repeat_kv``: on K and V expanded to the query
    heads first, as torchtitan's TOML-era attention did (:func:`_sdpa_after_repeat_kv`); ``ac="op"``: the block
    wrapped by torchtitan's ``SelectiveAC`` first (its per-op save policy, as ``apply`` does before compile);
    ``fuse_qkv=False``: with three q / k / v projections (:func:`_split_qkv`)."""
    from primus_launch.adapters.torchtitan_arch import model_spec

    cfg = copy.deepcopy(model_spec(model, flavor).model)
    cfg.layers = cfg.layers[layer:layer + 1]
    titan_cpu.use_sdpa(cfg)
    titan_cpu.set_seq_len(cfg, seq)
    if not fuse_qkv:
        _split_qkv(cfg)
    with torch.device("meta"):
        built = cfg.build()
    block = next(iter(built.layers.values())).to(torch.bfloat16)
    ref = block
    if ac == "op":
        from torchtitan.distributed.activation_checkpoint import SelectiveAC

        block = SelectiveAC(SelectiveAC.Config())._wrap_block(block)
    saved: list = []
    backend = _recording_backend(saved)
    use_flash_op(True)
    if repeat_kv:
        import torchtitan.models.common.attention as attn

        attn.F = _FlashRepeatKvF()
    torch._dynamo.reset()
    autocast = torch.autocast
    import contextlib

    # the MoE router's fp32 autocast region has no meta-device autocast: run it as plain code (its gate then
    # computes in the block's dtype: a [tokens, experts] tensor, bf16 instead of fp32)
    torch.autocast = lambda device_type, *a, **k: (contextlib.nullcontext() if device_type == "meta"
                                                    else autocast(device_type, *a, **k))
    try:
        x = torch.empty(mbs, seq, ref.attention_norm.weight.shape[0] if hasattr(ref, "attention_norm")
                        else cfg.dim, dtype=torch.bfloat16, device="meta", requires_grad=True)
        # as torchtitan's apply_compile (distributed/compile.py): per block, fullgraph, data-dependent MoE
        # dispatch shapes captured as unbacked symbols
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            torch.compile(block, backend=backend, fullgraph=True)(x, None)
    finally:
        torch.autocast = autocast
        use_flash_op(False)
        torch._dynamo.reset()
    persistent = {t.untyped_storage()._cdata for t in list(block.parameters()) + list(block.buffers())}
    shapes = {(tuple(t.shape), t.dtype) for t in list(block.parameters()) + list(block.buffers())}
    seen: dict[int, int] = {}
    for v in saved:
        key = v.untyped_storage()._cdata
        if key in persistent or ((tuple(v.shape), v.dtype) in shapes and v.shape != x.shape):
            continue
        seen[key] = max(seen.get(key, 0), v.untyped_storage().nbytes())
        if _DUMP:
            print("saved", tuple(v.shape), v.dtype, v.untyped_storage().nbytes())
    return sum(seen.values())


def _recording_backend(saved: list):
    """An ``aot_autograd`` backend with Inductor's min-cut partitioner (what ``torch.compile`` runs) whose forward
    compiler appends to ``saved`` the fake values of the tensors the forward graph hands to the backward."""
    import functools

    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table

    def fw(gm, _inputs):
        out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        saved.extend(o.meta["val"] for o in out[1:] if hasattr(o, "meta") and "val" in o.meta)
        return gm

    return aot_autograd(fw_compiler=fw, bw_compiler=lambda gm, _: gm, decompositions=select_decomp_table(),
                        partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"))


_DUMP = False


def compiled_tp_block_saved_bytes(flavor: str = "8B", seq: int = 2048, tp: int = 2, ac: str = "op",
                                  model: str = "llama3", by_storage: bool = False) -> int:
    """:func:`compiled_block_saved_bytes` of one torchtitan llama3 block as ``parallelize_llama`` leaves it under
    TP with sequence parallelism (DTensor weights, its AC wrapper, FSDP2 over a shard group of one; fake process
    group of ``tp`` ranks), compiled with the recording backend and run on the embedding's sequence-sharded
    output in ``FakeTensorMode``: bytes of the tensors the forward graph hands to the backward, the block's
    weights and buffers (by local shape) excluded.  Llama 3 8B's local shapes differ from its activations'.
    ``model`` picks the registry entry (``qwen3``: ``parallelize_qwen3``); ``by_storage`` counts each untyped
    storage once at its size (a view of a saved tensor, e.g. qwen3's wo input over the flash output, adds nothing)."""
    case = TitanCase(model=model, flavor=flavor, layers=1, seq=seq, tp=tp, dp_shard=1, ac=ac, flash=True,
                     attn="sdpa")
    model, _ = build(case)
    block = next(iter(model.layers.values()))
    saved: list = []
    backend = _recording_backend(saved)
    torch._dynamo.reset()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            model.to_empty(device="cpu")
            h = model.tok_embeddings(torch.zeros((1, seq), dtype=torch.long))
            torch.compile(block, backend=backend)(h, None)
    finally:
        use_flash_op(False)
        torch._dynamo.reset()
    local = [t.to_local() if hasattr(t, "to_local") else t for t in list(block.parameters()) + list(block.buffers())]
    shapes = {tuple(t.shape) for t in local}  # the weights come in as FSDP2's bf16 all-gather outputs
    seen: dict[int, int] = {}
    for v in saved:
        if isinstance(v, torch.Tensor) and tuple(v.shape) not in shapes:
            if by_storage:
                key = v.untyped_storage()._cdata
                seen[key] = max(seen.get(key, 0), v.untyped_storage().nbytes())
                continue
            seen[id(v)] = v.numel() * v.element_size()
            if _DUMP:
                print("saved", tuple(v.shape), v.dtype, seen[id(v)])
    return sum(seen.values())


# ------------------------------------------------------------------ tensor-parallel collectives
def tp_collectives(model: str, flavor: str, layers: int = 2, seq: int = 64, mbs: int = 1, tp: int = 2,
                   sp: bool = True) -> list[tuple[str, str, int]]:
    """The collectives rank 0 of torchtitan's own TP step issues: ``model`` / ``flavor`` from its
    registry (``layers`` blocks, SDPA attention), its sharding config and ``parallelize_fn`` at
    world size ``tp`` (:func:`build`: fake process group, the ``partial_dtensor`` backend; ``FakeTensorMode``),
    one forward, ``cross_entropy_loss`` and backward.  Returns ``(phase, op, nbytes)`` per call in
    the convention of ``cost.layer_collectives.Call`` (all-reduce: the tensor; all-gather: the
    gathered output; reduce-scatter: the input), recorded at torch's ``_c10d_functional`` ops."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torchtitan.components.loss import cross_entropy_loss

    net, _ = build(TitanCase(model=model, flavor=flavor, layers=layers, seq=seq, mbs=mbs, dp_shard=1, tp=tp, sp=sp))
    calls: list[tuple[str, str, int]] = []
    phase = ["fwd"]

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            if name.split("::")[0] in ("_c10d_functional", "_c10d_functional_autograd", "c10d") and "wait" not in name:
                op = name.split("::")[1]
                x = args[0]
                nbytes = x.numel() * x.element_size() * (tp if op == "all_gather_into_tensor" else 1)
                calls.append((phase[0], {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor":
                                         "reduce_scatter"}.get(op, op), int(nbytes)))
            return func(*args, **(kwargs or {}))

    with FakeTensorMode(allow_non_fake_inputs=True):
        net.to_empty(device="cpu")
        ids = torch.zeros((mbs, seq), dtype=torch.long)
        with _Record():
            loss = cross_entropy_loss(net(ids), ids)
            phase[0] = "bwd"
            loss.backward()
    dist.destroy_process_group()
    return calls


# ------------------------------------------------------------------ MoE backward phases

def moe_backward_phases(case: TitanCase) -> dict[str, int]:
    """Net bytes the backward of the last block's MoE allocates in each of its phases, traced on rank 0 of
    ``case``'s torchtitan step (second step, :func:`build`, ``FakeTensorMode``): every storage an ATen op
    creates is followed (a ``TorchDispatchMode`` holding weak references; resized FSDP2 storages count at
    their current size), and at the highest total of each phase -- ``combine`` (the MoE's backward before
    its grouped experts), ``experts`` (``GroupedExperts``' backward) -- the net is the total minus the
    total when the MoE's backward began."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.weak import WeakIdKeyDictionary
    from torchtitan.components.loss import cross_entropy_loss

    model, _ = build(case)
    if case.ep > 1:
        use_balanced_all_to_all()
    blk = list(model.layers.values())[-1]
    state = {"phase": None, "start": 0, "peaks": {}}
    live = WeakIdKeyDictionary()

    class _Live(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and not hasattr(t, "_local_tensor"):
                    st = t.untyped_storage()
                    if st not in live:
                        live[st] = (tuple(t.shape), t.dtype)
            ph = state["phase"]
            if ph in ("combine", "experts"):
                net = sum(k.nbytes() for k in live.keys()) - state["start"]
                if net > state["peaks"].get(ph, -float("inf")):
                    state["peaks"][ph] = net
            return out

    def enter(phase):
        def hook(*_):
            if phase == "combine":
                state["start"] = sum(k.nbytes() for k in live.keys())
            state["phase"] = phase
        return hook

    blk.moe.register_full_backward_pre_hook(enter("combine"))
    blk.moe.register_full_backward_hook(enter(None))
    blk.moe.routed_experts.inner_experts.register_full_backward_pre_hook(enter("experts"))
    blk.moe.routed_experts.inner_experts.register_full_backward_hook(enter("combine_after"))
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        model.train()
        ids = torch.zeros((case.mbs, case.seq // case.cp), dtype=torch.long)
        with _Live():
            for _ in range(2):
                state["peaks"].clear()
                loss = cross_entropy_loss(model(ids), ids)
                loss.backward()
                del loss
                for p in model.parameters():
                    p.grad = None
    dist.destroy_process_group()
    return dict(state["peaks"])


# ------------------------------------------------------------------ per-unit states of a rank
def unit_states(case: TitanCase) -> dict[str, list[dict[str, int]]]:
    """What torchtitan's ``parallelize`` leaves on rank 0 of ``case``'s mesh, per FSDP unit (module path)
    and parameter group: the group's shard-mesh size, its fp32 sharded parameter storage, the fp32
    gradient accumulated unsharded by a backward without gradient sync (what a pipeline stage holds
    between micro-batches: ``set_requires_gradient_sync(False)``), the sharded gradient storage after a
    second backward with sync (the reduce-scatter output the gradients view), the AdamW states after
    ``optimizer.step()`` and (first group) the unit's buffers; bytes of the rank's local tensors (an EP expert weight is a DTensor on the ep
    mesh).  The model is ``case``'s :func:`build` (the mesh includes ``pp``: with PP torchtitan keeps the
    parameters unsharded after forward), run as one module under ``FakeTensorMode``."""
    from torch.distributed.fsdp import FSDPModule
    from torchtitan.components.loss import cross_entropy_loss

    model, _ = build(case)
    if case.ep > 1:
        use_balanced_all_to_all()
    units = [(name, mod) for name, mod in model.named_modules() if isinstance(mod, FSDPModule) and name
             and name != "norm"]  # [norm, lm_head] is one unit, reported under lm_head
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        ids = torch.zeros((case.mbs, case.seq), dtype=torch.long)
        model.set_requires_gradient_sync(False)
        cross_entropy_loss(model(ids), ids).backward()
        acc = {id(fp): _local_bytes(fp.unsharded_accumulated_grad) for _, m in units
               for g in fully_shard_state(m)._fsdp_param_groups for fp in g.fsdp_params
               if fp.unsharded_accumulated_grad is not None}
        model.set_requires_gradient_sync(True)
        cross_entropy_loss(model(ids), ids).backward()
        opt.step()
        out: dict[str, list[dict[str, int]]] = {}
        for name, m in units:
            rows = []
            for g in fully_shard_state(m)._fsdp_param_groups:
                grads = {}
                for fp in g.fsdp_params:
                    gr = fp.sharded_param.grad
                    if gr is not None:
                        st = gr._local_tensor.untyped_storage()
                        grads[st._cdata] = st.nbytes()
                rows.append({
                    "shard": g.mesh_info.shard_mesh_size,
                    "params": sum(fp._sharded_param_data.untyped_storage().nbytes() for fp in g.fsdp_params),
                    "accumulated": sum(acc.get(id(fp), 0) for fp in g.fsdp_params),
                    "grads": sum(grads.values()),
                    "optimizer": sum(_local_bytes(v) for fp in g.fsdp_params
                                     for v in opt.state[fp.sharded_param].values() if v.dim() > 0),
                })
            rows[0]["buffers"] = sum(_local_bytes(b) for b in m.buffers())
            out[name] = rows
    dist.destroy_process_group()
    return out


# ------------------------------------------------------------------ FSDP2's side streams
def side_stream_bytes(case: TitanCase) -> dict[str, dict[str, int]]:
    """Bytes FSDP2 allocates while one of its own streams is current, in the second training step of
    ``case`` (rank 0): per stream (``copy_in``: ``all_gather_copy_in_stream``, ``all_gather``,
    ``reduce_scatter``) the high-water mark of the bytes alive (``hwm``) and the total allocated over the
    step (``total``), plus ``grads_aliasing``: bytes of the sharded gradients whose storage is one of the
    reduce-scatter stream's allocations once the backward is done.

    torch's own FSDP2 code runs (``_fsdp_collectives.foreach_all_gather`` / ``foreach_reduce`` enter
    ``device_handle.stream(...)``; on the CPU ``torch.cpu.stream`` sets what ``torch.cpu.current_stream()``
    returns), a dispatch mode above ``FakeTensorMode`` tags every newly allocated storage with the stream
    current at its allocation and a finalizer on the storage counts it free again."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torchtitan.components.loss import cross_entropy_loss

    model, _ = build(case)
    if case.ep > 1:
        use_balanced_all_to_all()
    root = fully_shard_state(model)

    class _Tag(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: dict[int, str] = {}
            self.alive = {"copy_in": 0, "all_gather": 0, "reduce_scatter": 0}
            self.hwm = dict(self.alive)
            self.total = dict(self.alive)
            self.seen: set[int] = set()
            self.rs_storages: dict[int, int] = {}

        def _free(self, name: str, key: int, n: int) -> None:
            self.alive[name] -= n
            self.seen.discard(key)
            self.rs_storages.pop(key, None)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = self.names.get(id(torch.cpu.current_stream()))
            if name is None:
                return out
            for t in tree_leaves(out):
                if not isinstance(t, torch.Tensor):
                    continue
                st = t.untyped_storage()
                key = st._cdata
                if key in self.seen or any(a is t or (isinstance(a, torch.Tensor) and a.untyped_storage()._cdata == key)
                                           for a in tree_leaves((args, kwargs))):
                    continue  # a view of, or written into, an existing storage
                n = st.nbytes()
                self.seen.add(key)
                self.alive[name] += n
                self.total[name] += n
                self.hwm[name] = max(self.hwm[name], self.alive[name])
                if name == "reduce_scatter":
                    self.rs_storages[key] = n
                weakref.finalize(st, self._free, name, key, n)
            return out

    tag = _Tag()
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        ids = torch.zeros((case.mbs, case.seq // case.cp), dtype=torch.long)
        res: dict[str, dict[str, int]] = {}
        for it in range(2):
            if it == 1:
                ctx = root._comm_ctx
                tag.names = {id(ctx.all_gather_copy_in_stream): "copy_in", id(ctx.all_gather_stream): "all_gather",
                             id(ctx.reduce_scatter_stream): "reduce_scatter"}
                tag.hwm = dict(tag.alive)
                tag.total = {k: 0 for k in tag.total}
            with tag:
                loss = cross_entropy_loss(model(ids), ids)
                loss.backward()
                del loss
            if it == 1:
                grads = {}
                for prm in model.parameters():
                    if prm.grad is not None:
                        st = prm.grad._local_tensor.untyped_storage()
                        grads[st._cdata] = st.nbytes()
                res = {"hwm": dict(tag.hwm), "total": dict(tag.total),
                       "grads_aliasing": {"reduce_scatter": sum(n for k, n in grads.items() if k in tag.rs_storages)},
                       "grads": {"all": sum(grads.values())}}
            opt.step()
            opt.zero_grad()
    dist.destroy_process_group()
    return res
