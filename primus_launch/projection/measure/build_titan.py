"""Reduced real torchtitan models built from a :class:`~primus_launch.plan.Plan`.

The model is torchtitan 0.3.0's own: ``torchtitan.models.<name>.model_registry(flavor).model``
(the plan's ``model.name`` is ``"<name>-<flavor>"``, as the TorchTitan adapter writes it), its
``layers`` list sliced to up to ``measure_layers`` dense and MoE blocks, attention swapped to
torchtitan's ``ScaledDotProductAttention`` (:mod:`primus_launch.frameworks.titan_cpu`), RoPE sized
to the plan's sequence, then ``cfg.build()`` + ``init_states()``.

Per-rank shard (what one GPU of the target computes; world size 1), by editing the configs the
way torchtitan's TP plan shards the modules (``models/llama3/parallelize.py``: colwise
``wq/wk/wv/wqkv, w1, w3``, rowwise ``wo, w2``; vocab-sharded ``tok_embeddings`` and ``lm_head``):
``n_heads / tp``, ``n_kv_heads / tp`` (``head_dim`` kept), the colwise linears' ``out_features /
tp``, the rowwise ones' ``in_features / tp``, FFN and shared-expert hidden ``/ tp``, routed expert
hidden ``/ etp``, vocabulary ``/ tp``, sequence ``/ cp``.  Routed experts stay all
``num_experts`` (each token still visits ``top_k``; an EP rank computes ``tokens x top_k``
expert rows on average, the same FLOPs, in fewer larger GEMMs) -- noted in the result.

torchtitan's linears are plain ``nn.Linear`` underneath, so autograd's input-only backward skips
the weight-gradient GEMMs: the input-/weight-grad split is *measured* here.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from typing import Any, Iterator, Optional

import torch

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.projection.measure.piece import (
    Piece,
    attn_core_dims,
    attn_fwd_flops,
    bwd_input_fraction,
    cp_mask,
    layer_counts,
    linear_params,
)
from primus_launch.projection.measure.piece import piece_shapes as all_piece_shapes
from primus_launch.projection.measure.spec import (
    BuildSpec,
    Substitution,
    common_substitutions,
    torch_dtype,
    torch_dtype_name,
)


def parse_name(plan: Plan) -> tuple[str, str]:
    """``"llama3-8B"`` -> ("llama3", "8B") (model names never contain '-')."""
    from primus_launch.adapters.torchtitan_arch import SUPPORTED_MODELS

    name = plan.model.name
    model, _, flavor = name.partition("-")
    if model not in SUPPORTED_MODELS or not flavor:
        raise UserError(f"model.name={name!r}: a torchtitan plan needs '<model>-<flavor>' with model one of "
                        f"{', '.join(SUPPORTED_MODELS)}")
    return model, flavor


def piece_shapes(plan: Plan, measure_layers: int = 2) -> dict[str, dict[str, Any]]:
    """Name -> per-rank shapes (the cache key): megatron's shape set plus the torchtitan flavor
    (torchtitan's flavors have no sliding-window or MTP modules: those pieces are not built)."""
    model, flavor = parse_name(plan)
    out = {n: v for n, v in all_piece_shapes(plan, measure_layers).items()
           if n.split("#")[0] in ("embedding", "dense_layer", "moe_layer", "attn_core", "head_loss")}
    for v in out.values():
        v["titan_model"] = f"{model}:{flavor}"
    return out


#: torch.compile backend of the measured blocks: torchtitan's default ``inductor``; ``aot_eager``
#: (dynamo + AOT autograd, no code generation) for CI, where a cold inductor compile of a block and
#: the loss takes tens of seconds on a 2-core machine (stated as a substitution in the result)
COMPILE_BACKEND_ENV = "PRIMUS_LAUNCH_COMPILE_BACKEND"


def compile_backend() -> str:
    """The torch.compile backend of the measured blocks: ``$PRIMUS_LAUNCH_COMPILE_BACKEND`` or ``inductor``."""
    import os

    return os.environ.get(COMPILE_BACKEND_ENV, "").strip() or "inductor"


def compile_available() -> Optional[str]:
    """None when the compile backend can run here (inductor's CPU code generation needs a C++
    compiler), else why not."""
    import shutil

    if compile_backend() != "inductor" or any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        return None
    return "inductor's CPU code generation needs a C++ compiler, and none is on PATH"


def _div(lin: Any, field: str, k: int) -> Any:
    return dataclasses.replace(lin, **{field: getattr(lin, field) // k})


def _shard_attention(a: Any, tp: int) -> Any:
    if tp == 1:
        return a
    if hasattr(a, "kv_lora_rank"):  # DeepSeek MLA: q / kv_b colwise, wo rowwise
        upd: dict[str, Any] = {"n_heads": a.n_heads // tp, "wkv_b": _div(a.wkv_b, "out_features", tp),
                               "wo": _div(a.wo, "in_features", tp)}
        if a.wq is not None:
            upd["wq"] = _div(a.wq, "out_features", tp)
        if a.wq_b is not None:
            upd["wq_b"] = _div(a.wq_b, "out_features", tp)
        return dataclasses.replace(a, **upd)
    n_kv = a.n_kv_heads or a.n_heads
    head_dim = a.head_dim or a.dim // a.n_heads
    q = a.qkv_linear
    if hasattr(q, "wqkv"):
        # the fused init closes over the unsharded head counts; values do not matter for timing
        plain = {"weight": functools.partial(torch.nn.init.trunc_normal_, std=0.02), "bias": torch.nn.init.zeros_}
        wqkv = dataclasses.replace(_div(q.wqkv, "out_features", tp), param_init=plain)
        q = dataclasses.replace(q, n_heads=q.n_heads // tp, n_kv_heads=q.n_kv_heads // tp, wqkv=wqkv)
    else:
        q = dataclasses.replace(q, wq=_div(q.wq, "out_features", tp), wkv=_div(q.wkv, "out_features", tp))
    return dataclasses.replace(a, n_heads=a.n_heads // tp, n_kv_heads=n_kv // tp, head_dim=head_dim,
                               qkv_linear=q, wo=_div(a.wo, "in_features", tp))


def _shard_ffn(f: Any, tp: int) -> Any:
    if f is None or tp == 1:
        return f
    return dataclasses.replace(f, w1=_div(f.w1, "out_features", tp), w3=_div(f.w3, "out_features", tp),
                               w2=_div(f.w2, "in_features", tp))


def _shard_moe(moe: Any, tp: int, etp: int) -> Any:
    if moe is None:
        return moe
    re = moe.routed_experts
    inner = dataclasses.replace(re.inner_experts, hidden_dim=re.inner_experts.hidden_dim // etp)
    return dataclasses.replace(moe, routed_experts=dataclasses.replace(re, inner_experts=inner),
                               shared_experts=_shard_ffn(moe.shared_experts, tp))


def titan_config(plan: Plan, measure_layers: int = 2, per_rank: bool = True) -> Any:
    """The flavor's ``Decoder.Config`` reduced to the layers to measure (and sharded per rank)."""
    from primus_launch.adapters.torchtitan_arch import model_spec
    from primus_launch.frameworks import titan_cpu

    model, flavor = parse_name(plan)
    cfg = copy.deepcopy(model_spec(model, flavor).model)
    if cfg.dim != plan.model.hidden_size:
        raise UserError(f"model.hidden_size={plan.model.hidden_size}: torchtitan {model} {flavor} has dim "
                        f"{cfg.dim}; the measured path builds the flavor, so the plan must match it")
    layers = list(cfg.layers)
    n_dense, n_moe = layer_counts(plan, measure_layers)
    dense_ids = [i for i, lc in enumerate(layers) if getattr(lc, "moe", None) is None][:n_dense]
    moe_ids = [i for i, lc in enumerate(layers) if getattr(lc, "moe", None) is not None][:n_moe]
    cfg.layers = [layers[i] for i in dense_ids + moe_ids]
    titan_cpu.use_sdpa(cfg)
    titan_cpu.set_seq_len(cfg, plan.model.seq_length)
    p = plan.parallel
    if per_rank and (p.tp > 1 or p.expert_tp > 1):
        tp, etp = p.tp, p.expert_tp
        new = []
        for lc in cfg.layers:
            upd = {"attention": _shard_attention(lc.attention, tp)}
            if getattr(lc, "feed_forward", None) is not None:
                upd["feed_forward"] = _shard_ffn(lc.feed_forward, tp)
            if getattr(lc, "moe", None) is not None:
                upd["moe"] = _shard_moe(lc.moe, tp, etp)
            new.append(dataclasses.replace(lc, **upd))
        cfg.layers = new
        if tp > 1:
            v = cfg.vocab_size // tp
            cfg.tok_embeddings = dataclasses.replace(cfg.tok_embeddings, num_embeddings=v)
            cfg.lm_head = dataclasses.replace(cfg.lm_head, out_features=v)
            cfg.vocab_size = v
    return cfg, len(dense_ids), len(moe_ids)


@contextlib.contextmanager
def world_size_one(device: str) -> Iterator[None]:
    """torchtitan's model classes need no process group at world size 1: only the CPU shims."""
    from primus_launch.frameworks import titan_cpu

    titan_cpu.install(device)
    yield


def build_spec(plan: Plan, device: str = "cpu", measure_layers: int = 2) -> BuildSpec:
    """Everything :func:`pieces` builds from (the sliced, per-rank ``Decoder.Config``, input shapes,
    measured dtype) and the substitutions, without building."""
    m, p, t = plan.model, plan.parallel, plan.training
    cfg, nd, nm = titan_config(plan, measure_layers, per_rank=True)
    model, flavor = parse_name(plan)
    subs = common_substitutions(plan, device, "torchtitan")
    subs.append(Substitution(("layer", "attn_core"), "torchtitan ScaledDotProductAttention (causal) as the inner "
                             "attention", "FlexAttention has no CPU backward; one document per sequence needs no "
                             "block mask"))
    if nm and p.ep > 1:
        subs.append(Substitution(("moe_layer",), f"all {m.num_experts} routed experts built (plan: ep={p.ep})",
                                 "world size 1; each rank's experts compute the same tokens x top_k rows on "
                                 "average, in fewer, larger GEMMs", "EP all-to-all added analytically"))
    if nm and t.moe_token_dispatcher not in ("alltoall", "allgather"):
        subs.append(Substitution(("moe_layer",), f"torchtitan's local token routing (plan: {t.moe_token_dispatcher})",
                                 f"{t.moe_token_dispatcher} needs its library and a GPU fabric",
                                 "EP dispatch / combine added analytically for the plan's dispatcher", keyed=False,
                                 alt={"training": {"moe_token_dispatcher": "alltoall"}}))
    missing = [x for x, on in (
        (f"sliding window {m.window_size}", m.window_size is not None),
        (f"{m.mtp_num_layers} MTP layer(s): priced as a measured block + head, without the MTP projection",
         m.mtp_num_layers > 0),
        (f"softmax {m.softmax_type}", m.softmax_type != "vanilla"),
        (f"dropout {m.hidden_dropout:g} / {m.attention_dropout:g}", m.hidden_dropout > 0 or m.attention_dropout > 0))
        if on]
    if missing:
        subs.append(Substitution(("*",), f"built as torchtitan's {model} {flavor} defines it, without: "
                                 + "; ".join(missing), "torchtitan's model has no such option", "not corrected"))
    compiled = None
    if t.compile:
        why = compile_available()
        if why is None:
            compiled = compile_backend()
            if compiled != "inductor":
                subs.append(Substitution(("layer", "head_loss"), f"compiled with the {compiled} backend instead of "
                                         f"inductor (${COMPILE_BACKEND_ENV})", "set for this run",
                                         "not corrected"))
            if torch.device(device).type == "cpu":
                subs.append(Substitution(("layer", "head_loss"), "memory measured on the eager module (time: compiled)",
                                         "torch's MemTracker (a dispatch mode) cannot run inside compiled code",
                                         "kept bytes scaled by memory_titan's compiled / eager ratio of the block"))
            subs.append(Substitution(("attn_core", "embedding"), "not compiled (torchtitan compiles each block and "
                                     "the loss)", "the attention core alone is a share of the compiled block",
                                     "not corrected"))
        else:
            subs.append(Substitution(("*",), "eager (plan: training.compile)", why,
                                     "scaled by the dry-run roofline's compiled / eager ratio per piece kind",
                                     keyed=False, alt={"training": {"compile": False}}))
    shapes = piece_shapes(plan, measure_layers)
    names = [n for n in shapes if not (n.startswith("dense_layer#") or n.startswith("moe_layer#"))]
    layer_names = [f"dense_layer#{i}" for i in range(nd)] + [f"moe_layer#{i}" for i in range(nd, nd + nm)]
    return BuildSpec(framework="torchtitan", config=cfg,
                     model_args={"model": model, "flavor": flavor,
                                 "inner_attention": "CPEmulatedSDPA" if p.cp > 1 else "ScaledDotProductAttention",
                                 "cp": p.cp, "compile": compiled,
                                 "float8_recipe": (t.fp8_recipe or "tensorwise")
                                 if torch_dtype_name(plan, device, "torchtitan") == "fp8" else None},
                     inputs={"seq": m.seq_length // p.cp, "mbs": t.micro_batch_size, "hidden": m.hidden_size},
                     layers=(nd, nm), dtype=torch_dtype_name(plan, device, "torchtitan"),
                     piece_names=names[:1] + layer_names + names[1:], substitutions=subs,
                     extra={"shapes": shapes})


def _float8(model: Any, recipe: str = "tensorwise") -> None:
    """torchtitan's float8 converter: torchao ``convert_to_float8_training`` with the recipe's
    ``Float8LinearConfig.from_recipe_name`` on the linears whose dimensions are multiples of 16, the
    output layer excluded (torchtitan's default filter)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    def keep(mod: torch.nn.Module, fqn: str) -> bool:
        if not isinstance(mod, torch.nn.Linear) or "lm_head" in fqn or "output" == fqn:
            return False
        return mod.in_features % 16 == 0 and mod.out_features % 16 == 0

    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe), module_filter_fn=keep)


class CPEmulatedSDPA(torch.nn.Module):
    """The inner attention of one context-parallel rank at world size 1: this rank's two
    load-balanced chunks (``piece.cp_positions``; torchtitan's CP load balancer splits the
    sequence the same way) attend the whole sequence under the causal mask, the other ranks' keys
    and values being stand-in tensors that take part in backward -- what one rank of torch's ring
    attention computes, without the K/V exchange (the cost model adds it)."""

    def __init__(self, cp: int):
        super().__init__()
        self.cp = cp
        self._standin: dict = {}

    def _full(self, t: torch.Tensor, name: str) -> torch.Tensor:  # [B, L/cp, N, H] -> [B, L, N, H]
        key = (name, tuple(t.shape), t.dtype, t.device)
        if key not in self._standin:
            g = torch.Generator().manual_seed(11)
            self._standin[key] = [(torch.randn(t.shape, generator=g) * 0.5).to(t.device, t.dtype).requires_grad_(True)
                                  for _ in range(self.cp - 1)]
        n = t.size(1) // 2
        chunks: list = [None] * (2 * self.cp)
        for r, part in enumerate([t] + self._standin[key]):
            chunks[r], chunks[2 * self.cp - 1 - r] = part[:, :n], part[:, n:]
        return torch.cat(chunks, dim=1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: Optional[float] = None,
                enable_gqa: bool = False, **kwargs: Any) -> torch.Tensor:
        """SDPA of this rank's queries over the full sequence's keys and values (``[b, s, heads, d]``
        layout in and out) under the CP rank's causal mask (:func:`piece.cp_mask`)."""
        k, v = self._full(k, "k"), self._full(v, "v")
        mask = cp_mask(k.size(1), self.cp, 0, q.device)
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, scale=scale,
            enable_gqa=enable_gqa)
        return out.transpose(1, 2)


def build(plan: Plan, device: str = "cpu", measure_layers: int = 2, per_rank: bool = True,
          spec: BuildSpec | None = None) -> tuple[torch.nn.Module, int, int]:
    """(model, n_dense, n_moe): the reduced torchtitan model on ``device`` in the plan's dtype."""
    if spec is None:
        cfg, nd, nm = titan_config(plan, measure_layers, per_rank)
        dtype = torch_dtype(plan)
        fp8 = False
    else:
        cfg, (nd, nm) = spec.config, spec.layers
        dtype = torch.bfloat16 if spec.dtype == "fp8" else torch_dtype(plan)
        fp8 = spec.dtype == "fp8"
    dev = torch.device(device)
    with dev:
        model = cfg.build()
    model.init_states(buffer_device=dev)
    model.to(device=dev, dtype=dtype)
    if fp8:
        _float8(model, (spec.model_args.get("float8_recipe") if spec is not None else None) or "tensorwise")
    if per_rank and plan.parallel.cp > 1:
        for layer in model.layers.values():
            layer.attention.inner_attention = CPEmulatedSDPA(plan.parallel.cp)
    return model, nd, nm


def _ac_variants(layer: torch.nn.Module, i: int) -> dict[str, Any]:
    """The block under torchtitan's own activation checkpointing, for memory only (untimed: the
    recompute's time is the cost model's): ``ac_full`` (``FullAC``: the block's input kept) and
    ``ac_op`` (``SelectiveAC``: per-op save list, every second matmul recomputed), wrapped exactly
    as ``ActivationCheckpointing.apply`` wraps ``model.layers[i]``."""
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC

    full = FullAC(FullAC.Config())._wrap_block(layer, base_fqn=f"layers.{i}")
    op = SelectiveAC(SelectiveAC.Config())._wrap_block(layer, base_fqn=f"layers.{i}")
    return {"kept_ac_full": lambda x, w=full: w(x, None, None), "kept_ac_op": lambda x, w=op: w(x, None, None)}


def pieces(plan: Plan, device: str, measure_layers: int = 2,
           spec: BuildSpec | None = None) -> tuple[list[Piece], Any]:
    """Pieces as in :func:`build_mcore.pieces` (embedding, ``dense_layer#i`` / ``moe_layer#i``,
    ``attn_core``, ``head_loss``) from the torchtitan model; backward split measured with
    torch's pipelining split (``split="autograd"``, :mod:`.timing`).  With ``training.compile``
    (and a C++ compiler for inductor): each block compiled as torchtitan's ``apply_compile`` does
    (``block.compile(fullgraph=True)``) and the loss with ``torch.compile`` (its default components
    "model" and "loss"); a compiled block's split is by FLOPs, its memory measured on the eager
    module on the CPU (substitutions)."""
    from torchtitan.components.loss import cross_entropy_loss

    spec = spec or build_spec(plan, device, measure_layers)
    m, p, t = plan.model, plan.parallel, plan.training
    shapes = spec.extra["shapes"]
    model, n_dense, n_moe = build(plan, device, measure_layers, spec=spec)
    model.train()
    dev = torch.device(device)
    dtype = next(model.parameters()).dtype
    s, b = spec.inputs["seq"], spec.inputs["mbs"]
    vocab = model.tok_embeddings.weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (b, s), generator=gen).to(dev)
    labels = torch.randint(0, vocab, (b, s), generator=gen).to(dev)
    h = m.hidden_size
    out: list[Piece] = [Piece("embedding", lambda: model.tok_embeddings(ids), [],
                              list(model.tok_embeddings.parameters()), shapes["embedding"], split="no-input")]
    backend = spec.model_args.get("compile")
    compiled = backend is not None
    eager_mem = compiled and dev.type == "cpu"  # MemTracker cannot run inside compiled code
    if compiled:
        # as torchtitan's apply_compile: data-dependent shapes of token-choice MoE dispatch
        torch._dynamo.config.capture_scalar_outputs = True
    attn_f = attn_fwd_flops(plan)
    for i, layer in enumerate(model.layers.values()):
        kind = "dense_layer" if i < n_dense else "moe_layer"
        x = (torch.randn(b, s, h, generator=gen) * 0.5).to(dev, dtype).requires_grad_(True)

        def layer_forward(x, layer=layer):
            return layer(x, None, None)

        if not compiled:
            out.append(Piece(f"{kind}#{i}", layer_forward, [x], list(layer.parameters()), shapes[f"{kind}#{i}"],
                             split="autograd", memory_variants=_ac_variants(layer, i)))
            continue
        # torchtitan's apply_compile: each block compiled alone, fullgraph; its backward is one
        # compiled autograd node (input and weight gradients together), so the split is by FLOPs
        if p.cp > 1:  # the CP core's stand-in K / V made eagerly (a seeded generator cannot be traced)
            with torch.no_grad():
                layer_forward(x)
        layer.compile(backend=backend, fullgraph=True)
        active = m.moe_router_topk / max(1, m.num_experts or 1) if kind == "moe_layer" else 1.0
        r = bwd_input_fraction(linear_params(layer, active), s * b, attn_f)
        out.append(Piece(f"{kind}#{i}", layer_forward, [x], list(layer.parameters()), shapes[f"{kind}#{i}"],
                         split="flop-ratio", flop_split=r,
                         memory_forward=(lambda x, layer=layer: layer.forward(x, None, None)) if eager_mem else None))
    attn = next(iter(model.layers.values())).attention
    plan_heads, plan_kvh, dq, dv = attn_core_dims(plan)
    heads = getattr(attn, "n_heads", plan_heads)
    kvh = heads if m.multi_latent_attention else getattr(attn, "n_kv_heads", plan_kvh)
    q = torch.randn(b, s, heads, dq, generator=gen).to(dev, dtype).requires_grad_(True)
    k = torch.randn(b, s, kvh, dq, generator=gen).to(dev, dtype).requires_grad_(True)
    v = torch.randn(b, s, kvh, dv, generator=gen).to(dev, dtype).requires_grad_(True)
    core = attn.inner_attention
    out.append(Piece("attn_core", lambda q, k, v: core(q, k, v, enable_gqa=heads != kvh), [q, k, v], [],
                     shapes["attn_core"], flop_split=1.0, split="no-weights"))
    head_x = (torch.randn(b, s, h, generator=gen) * 0.5).to(dev, dtype).requires_grad_(True)

    loss_fn = torch.compile(cross_entropy_loss, backend=backend) if compiled else cross_entropy_loss

    def head_forward(x, loss_fn=loss_fn):
        logits = model.lm_head(model.norm(x))
        return loss_fn(logits, labels) / labels.numel()

    out.append(Piece("head_loss", head_forward, [head_x],
                     list(model.norm.parameters()) + list(model.lm_head.parameters()), shapes["head_loss"],
                     split="flop-ratio" if compiled else "autograd",  # a compiled loss node defeats the split
                     flop_split=bwd_input_fraction(float(h * vocab), s * b, 0.0),
                     memory_forward=(lambda x: head_forward(x, cross_entropy_loss)) if eager_mem else None))
    return out, model
