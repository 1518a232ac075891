"""Count the host-launched ops of megatron-core 0.16.1's real MoE layer outside its experts (test helper, CPU only).

Run as a script (its own process: it owns the default process group)::

    python tests/moe_host_trace.py '[{"dispatcher": "alltoall", "ep": 2, "num_experts": 8, "topk": 2,
                                      "lb": "aux_loss", "force_lb": true, "fused": true}, ...]'

builds megatron's ``MoELayer`` (local spec) on torch's fake process group and runs one forward and one
backward of bf16 tokens under a ``TorchDispatchMode`` that records every non-view ATen op (on the GPU each
is one kernel launched by the host through PyTorch's dispatcher).  Per configuration it prints, as JSON,
the kernels of the forward per graph scope (``moe_router``: ``router.forward``; ``moe_preprocess``:
``dispatch_preprocess``; ``moe``: token dispatch, post-process, combine) and of the backward (total), and
the host-blocking waits of each pass (``syncs``: calls of ``torch.cuda.Event.synchronize`` /
``Stream.synchronize`` / ``torch.cuda.synchronize`` and blocking ``Tensor.cpu()`` copies, which the CPU shim ``frameworks/mcore_cpu.py`` stands in
for; on the GPU each blocks the host until the GPU queue up to that point has drained).

What is not megatron's own Python is replaced, so the count is the framework's:
- the experts (``self.experts``): an autograd function that passes the tokens through and records
  nothing (the experts are priced from TE's GroupedLinear code, ``cost/roofline.py``);
- with ``fused``, the TE kernels Megatron calls under ``--moe-router-fusion`` / ``--moe-permute-fusion``
  (``moe_utils.fused_*``): each computes megatron's own unfused result with the dispatch mode off and
  records the kernels TE 2.14.1 launches for it (``TE_KERNELS``; transformer_engine/pytorch/router.py:
  one ``tex`` kernel per pass; permutation.py + triton/permutation.py: ``make_row_id_map`` 3 Triton
  kernels + ``_permute_kernel``, ``_unpermute_kernel``, ``make_chunk_sort_map`` + ``_sort_chunks_by_map``);
- the collectives are recorded as one op each and return their input's shape.
"""

from __future__ import annotations

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes  # noqa: E402

from primus_launch.frameworks import mcore_cpu  # noqa: E402

# TE 2.14.1 kernels per Megatron-called fused function: (forward, backward)
TE_KERNELS = {
    "fused_topk_with_score_function": (1, 1),
    "fused_compute_score_for_moe_aux_loss": (1, 1),
    "fused_moe_aux_loss": (1, 1),
    "fused_permute": (4, 1),
    "fused_permute_with_probs": (4, 1),
    "fused_unpermute": (1, 1),
    "fused_sort_chunks_by_index": (2, 1),
    "fused_sort_chunks_by_index_with_probs": (2, 1),
}


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, str]] = []
        self.scope = "other"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view or func in _NO_KERNEL:
            return out
        ts = [a for a in torch.utils._pytree.tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)]
        if ts and all(t.dim() == 0 and not t.is_floating_point() for t in ts):
            return out   # host arithmetic on split sizes (numpy / Python ints on the GPU path)
        self.ops.append((_scope(), str(func)))
        return out


SPANS: list[tuple[int, int, str]] = []   # autograd sequence numbers of the nodes each scope created


def _seq() -> int:
    with _disable_current_modes(), torch.enable_grad():
        return (torch.zeros(1, requires_grad=True) * 1).grad_fn._sequence_nr()


def _scope() -> str:
    """The forward scope, or in backward the scope whose forward created the running autograd node."""
    if MODE and MODE[0].scope != "bwd":
        return MODE[0].scope
    node = torch._C._current_autograd_node()
    if node is None:
        return "other"
    n = node._sequence_nr()
    for lo, hi, sc in SPANS:
        if lo < n < hi:
            return sc
    return "other"


# allocations and host reads launch no kernel
_NO_KERNEL = {torch.ops.aten.empty.memory_format, torch.ops.aten.new_empty.default, torch.ops.aten.empty_like.default,
              torch.ops.aten.empty_strided.default, torch.ops.aten._local_scalar_dense.default}


MODE: list[_Ops] = []


def _record(name: str, n: int) -> None:
    if MODE:
        MODE[0].ops.extend([(_scope(), "te::" + name)] * n)


class _Opaque(torch.autograd.Function):
    """``ref(*args)`` computed with the dispatch mode off; records ``kf`` / ``kb`` kernels."""

    @staticmethod
    def forward(ctx, meta, *tensors):
        ref, build, name, kf, kb = meta
        with _disable_current_modes(), torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) if t.is_floating_point() else t for t in tensors]
            outs = ref(*build(leaves))
            outs = outs if isinstance(outs, tuple) else (outs,)
        ctx.leaves, ctx.outs, ctx.meta = leaves, outs, meta
        _record(name, kf)
        with _disable_current_modes():
            res = tuple(o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs)
        ctx.mark_non_differentiable(*[o for o in res if isinstance(o, torch.Tensor) and not o.is_floating_point()])
        return res

    @staticmethod
    def backward(ctx, *grads):
        name, kb = ctx.meta[2], ctx.meta[4]
        with _disable_current_modes(), torch.enable_grad():
            pairs = [(o, g) for o, g in zip(ctx.outs, grads)
                     if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            res = tuple(t.grad if isinstance(t, torch.Tensor) and t.is_floating_point() else None for t in ctx.leaves)
        _record(name, kb)
        return (None,) + res


def _standins(mu) -> dict:
    """TE-level stand-ins with megatron's own unfused maths (module doc)."""
    orig = {n: getattr(mu, n) for n in ("topk_routing_with_score_function", "compute_routing_scores_for_aux_loss",
                                        "switch_load_balancing_loss_func", "permute", "unpermute",
                                        "sort_chunks_by_idxs")}

    def opaque(name, ref, tensors, build):
        kf, kb = TE_KERNELS[name]
        out = _Opaque.apply((ref, build, name, kf, kb), *tensors)
        return out

    def topk(logits, topk, use_pre_softmax=False, num_groups=None, group_topk=None, scaling_factor=None,
             score_function="softmax", expert_bias=None):
        ref = lambda x: orig["topk_routing_with_score_function"](  # noqa: E731
            x, topk, use_pre_softmax, num_groups, group_topk, scaling_factor, score_function, expert_bias)
        return opaque("fused_topk_with_score_function", ref, [logits], lambda l: l)

    def scores(logits, topk, score_function):
        ref = lambda x: orig["compute_routing_scores_for_aux_loss"](x, topk, score_function)  # noqa: E731
        return opaque("fused_compute_score_for_moe_aux_loss", ref, [logits], lambda l: l)

    def aux(probs, tokens_per_expert, total_num_tokens, num_experts, topk, coeff):
        ref = lambda p, t: orig["switch_load_balancing_loss_func"](  # noqa: E731
            p, t, total_num_tokens, topk, num_experts, coeff)
        return opaque("fused_moe_aux_loss", ref, [probs, tokens_per_expert], lambda l: l)[0]

    def perm_probs(tokens, probs, routing_map, num_out_tokens=None):
        ref = lambda t, p, m: orig["permute"](t, m, p, num_out_tokens)  # noqa: E731
        out = opaque("fused_permute_with_probs", ref, [tokens, probs, routing_map], lambda l: l)
        MAPS[id(out[2])] = routing_map
        return out

    def perm(tokens, routing_map, num_out_tokens=None):
        ref = lambda t, m: orig["permute"](t, m, None, num_out_tokens)[::2]  # noqa: E731
        out = opaque("fused_permute", ref, [tokens, routing_map], lambda l: l)
        MAPS[id(out[1])] = routing_map
        return out

    def unperm(tokens, row_id_map, merging_probs=None, restore_shape=None):
        st = MAPS.get(id(row_id_map))
        if merging_probs is None:
            ref = lambda t, i: orig["unpermute"](t, i, restore_shape, None, st)  # noqa: E731
            return opaque("fused_unpermute", ref, [tokens, row_id_map], lambda l: l)[0]
        ref = lambda t, i, p: orig["unpermute"](t, i, restore_shape, p, st)  # noqa: E731
        return opaque("fused_unpermute", ref, [tokens, row_id_map, merging_probs], lambda l: l)[0]

    def sort(inp, split_sizes, sorted_idxs):
        ref = lambda x: orig["sort_chunks_by_idxs"](x, split_sizes, sorted_idxs)[0]  # noqa: E731
        return opaque("fused_sort_chunks_by_index", ref, [inp], lambda l: l)[0]

    def sort_probs(inp, probs, split_sizes, sorted_idxs):
        ref = lambda x, p: orig["sort_chunks_by_idxs"](x, split_sizes, sorted_idxs, p)  # noqa: E731
        return opaque("fused_sort_chunks_by_index_with_probs", ref, [inp, probs], lambda l: l)

    return dict(fused_topk_with_score_function=topk, fused_compute_score_for_moe_aux_loss=scores,
                fused_moe_aux_loss=aux, fused_permute=perm, fused_permute_with_probs=perm_probs,
                fused_unpermute=unperm, fused_sort_chunks_by_index=sort,
                fused_sort_chunks_by_index_with_probs=sort_probs)


MAPS: dict = {}


class _PassExperts(torch.autograd.Function):
    """The experts replaced by a pass-through that records no op (module doc)."""

    @staticmethod
    def forward(ctx, x, probs):
        with _disable_current_modes():
            ctx.pshape = probs.shape
            return x.clone()

    @staticmethod
    def backward(ctx, g):
        with _disable_current_modes():
            return g.clone(), torch.zeros(ctx.pshape, dtype=torch.float32)


def trace(cfg: dict) -> dict:
    mcore_cpu.install()
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.moe import moe_utils as mu
    from megatron.core.transformer.moe.moe_layer import MoELayer
    from megatron.core.transformer.transformer_config import TransformerConfig

    ep, E, h = cfg["ep"], cfg["num_experts"], 64
    fused = cfg.get("fused", False)
    if dist.is_initialized():
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ep)
    ps.initialize_model_parallel(1, 1, expert_model_parallel_size=ep, expert_tensor_parallel_size=1,
                                 create_gloo_process_groups=False)
    mcore_cpu.seed_rng_tracker(1234)
    if fused:
        mu.HAVE_TE = True
        for k, v in _standins(mu).items():
            setattr(mu, k, v)
    lb = cfg.get("lb", "aux_loss")
    ov = {**mcore_cpu.config_overrides(), "moe_token_dispatcher_type": cfg["dispatcher"]}
    conf = TransformerConfig(num_layers=1, hidden_size=h, ffn_hidden_size=2 * h, num_attention_heads=4,
                             num_moe_experts=E, moe_router_topk=cfg["topk"], moe_ffn_hidden_size=2 * h,
                             moe_grouped_gemm=False, expert_model_parallel_size=ep,
                             params_dtype=torch.bfloat16, bf16=True, add_bias_linear=False,
                             hidden_dropout=0.0, attention_dropout=0.0,
                             moe_router_load_balancing_type=lb, moe_aux_loss_coeff=1e-3 if lb != "none" else 0.0,
                             moe_router_force_load_balancing=cfg.get("force_lb", False),
                             moe_router_dtype=cfg.get("router_dtype"),
                             moe_router_fusion=fused, moe_permute_fusion=fused, **ov)
    spec = get_gpt_layer_local_spec(num_experts=E, moe_grouped_gemm=False).submodules.mlp.submodules
    layer = MoELayer(conf, spec).to(torch.bfloat16)
    mode = _Ops()

    def scoped(obj, name, scope):
        f = getattr(obj, name)

        def g(*a, **k):
            old, mode.scope = mode.scope, scope
            lo = _seq()
            try:
                return f(*a, **k)
            finally:
                mode.scope = old
                SPANS.append((lo, _seq(), scope))
        object.__setattr__(obj, name, g)

    syncs = {"fwd": 0, "bwd": 0}

    def counted(f):
        def g(*a, **k):
            syncs["bwd" if mode.scope == "bwd" else "fwd"] += 1
            return f(*a, **k)
        g.__wrapped__ = f
        return g
    mcore_cpu._CpuEvent.synchronize = counted(mcore_cpu._CpuEvent.synchronize)
    mcore_cpu._CpuStream.synchronize = counted(mcore_cpu._CpuStream.synchronize)
    torch.cuda.synchronize = counted(torch.cuda.synchronize)
    torch.Tensor.cpu = counted(torch.Tensor.cpu)   # a GPU tensor's blocking copy to the host
    td = layer.token_dispatcher
    scoped(layer.router, "forward", "moe_router")
    scoped(td, "dispatch_preprocess", "moe_preprocess")
    for n in ("token_dispatch", "dispatch_postprocess", "combine_preprocess", "token_combine", "combine_postprocess"):
        scoped(td, n, "moe")
    layer.experts.forward = lambda x, tpe, probs: (_PassExperts.apply(x, probs), None)
    dist.all_to_all_single = lambda o, i, *a, **k: _record("all_to_all", 1)
    x = torch.randn(cfg.get("tokens", 64), 1, h, dtype=torch.bfloat16, requires_grad=True)
    MODE[:] = [mode]
    with mode:
        out, _ = layer(x)
    fwd = list(mode.ops)
    grad = torch.ones_like(out)
    mode.ops.clear()
    mode.scope = "bwd"
    with mode:
        out.backward(grad)
    bwd = list(mode.ops)
    MODE.clear()
    SPANS.clear()

    def by(ops):
        d: dict[str, int] = {}
        for sc, _ in ops:
            d[sc] = d.get(sc, 0) + 1
        return d
    for cls in (mcore_cpu._CpuEvent, mcore_cpu._CpuStream):   # unwrap: the next configuration counts afresh
        cls.synchronize = cls.synchronize.__wrapped__
    torch.cuda.synchronize = torch.cuda.synchronize.__wrapped__
    torch.Tensor.cpu = torch.Tensor.cpu.__wrapped__
    return dict(fwd=len(fwd), bwd=len(bwd), fwd_by_scope=by(fwd), bwd_by_scope=by(bwd), fwd_ops=fwd, bwd_ops=bwd,
                syncs=syncs)


if __name__ == "__main__":
    import legacy_gmm_trace   # noqa: E402 (tests/: the legacy GroupedMLP's grouped_gemm calls, same process)

    print(json.dumps([legacy_gmm_trace.trace(c["legacy_gmm"]) if "legacy_gmm" in c else trace(c)
                      for c in json.loads(sys.argv[1])]))
