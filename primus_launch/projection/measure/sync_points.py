"""The run's blocking collectives, kept inside a world-size-1 piece on the CPU.

A piece measured at world size 1 makes none of the collective calls its layer makes in the run:
megatron's mappings (``tensor_parallel/mappings.py``: ``_reduce``, ``_gather_along_*_dim``,
``_reduce_scatter_along_*_dim``) return at once for a group of one rank, and the MoE token
dispatchers' gathers and all-to-alls, on the stand-in expert groups of :mod:`.mirror_ranks`, copy
this rank's data without blocking.  The collectives' own time is added analytically
(:mod:`~primus_launch.projection.cost.layer_collectives`, :mod:`~primus_launch.projection.cost.moe_dispatch`),
but on the CPU a blocking call also slows the compute that *follows* it: the rank's thread sleeps in
the call, and resumes with cold caches on a core that ran other work meanwhile.  Measured
(``scripts/measure_gap.py --stand-ins``: the real 2-rank runs' iterations alternate between
gloo's collectives and local stand-ins, in the same processes): the TP=2 and EP=2 cases' main-thread
CPU per iteration is about 0.6 ms per collective call higher with the real calls, and a 1 ms sleep
in place of each call brings back most of it -- work the world-size-1 pieces, timed back to back,
never did.

So, on the CPU (the CPU-time clocks; the wall clock would count the block), :func:`blocking_collectives`
blocks the measuring thread for :data:`BLOCK_S` at each point where the run blocks and the piece
does not: each mapping call on a group that has more than one rank in the plan (TP, CP, expert-TP,
TP x EP, EP), each collective megatron's loss calls on such a group directly (:data:`DIRECT_CALLS`),
and with sequence parallelism the calls the world-size-1 pieces, built without it, do not make
(:data:`SP_COLUMN` / :data:`SP_ROW` / :data:`SP_EMBEDDING`: 10 per TP=2 layer, as the run's and
``tp_calls``; an asynchronous one blocks at its issue, where the run's thread waits for it after
the overlapped GEMM); for MoE layers with EP (or expert-TP) > 1, once at the start of the token
dispatch and of the combine, forward and backward (``_Block``; the run's dispatch makes up to three
calls back to back there, whose later ones resume no compute); with CP > 1, at each of the
measured core's stand-in K and V (:func:`block_point`, forward and backward: the run's all-gather
and its backward's re-gather and reduce-scatter).  The block is not CPU time, so the
piece's time gains only the slower resumption.  That resumption varies with the machine's state
(RESULTS.md, section of block MEASURE_NOISE_FLOOR: the TP=2 embedding piece, ~55 us of work and
one block per iteration, read up to 0.77 relative IQR in runs where the plain reference workload
read 0.02-0.13), so the noise floor timed after each sample blocks as often as the sample did
(:data:`ACTIVE_BLOCKS`, ``timing.PieceSampler(blocks=)``).  On CUDA nothing changes (kernels are timed by
events; the host thread's waits do not slow them).  TorchTitan's DTensor redistributions make no
call at world size 1 to hook, so its pieces block through module hooks where torchtitan's own step
calls (:func:`_titan_hooks`: the calls ``cost/layer_collectives.tp_calls`` prices, held against
torchtitan's traced step; its routed experts' dispatch and combine with EP; the CP core's stand-in
K and V, ``build_titan.CPEmulatedSDPA``).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections import Counter
from typing import Iterator, Optional

import torch

from primus_launch.plan import Plan
from primus_launch.projection.measure.spec import Substitution

#: seconds a piece blocks at each of the run's blocking collectives: gloo's calls at the sizes of
#: the validation cases take 0.4-4 ms on this machine (``scripts/validate_measure.py``); a 1 ms and
#: a 3 ms sleep slowed the TP=2 layer alike within the noise (``scripts/measure_gap.py --stand-ins``)
BLOCK_S = 0.002

#: megatron ``tensor_parallel/mappings.py`` functions that run a collective on ``group`` (they return
#: before calling ``torch.distributed`` for a group of one rank, so they are hooked themselves)
MAPPINGS = ("_reduce", "_gather_along_first_dim", "_gather_along_last_dim", "_reduce_scatter_along_first_dim",
            "_reduce_scatter_along_last_dim")

#: ``torch.distributed`` functions megatron calls directly on a piece's group, at any group size:
#: the vocab-parallel cross entropy's three all-reduces (``tensor_parallel/cross_entropy.py``)
DIRECT_CALLS = ("all_reduce",)

#: with sequence parallelism, the modules around which the run makes the calls a world-size-1
#: piece does not (megatron's ``ColumnParallelLinear`` turns SP off for a group of one rank, and
#: the pieces run without SP: ``build_mcore``'s substitution): each column-parallel linear
#: all-gathers its input (forward) and again for its weight gradient, and reduce-scatters its input
#: gradient where the non-SP piece all-reduces it (backward); each row-parallel linear
#: reduce-scatters its output where the non-SP piece all-reduces it, and all-gathers its output
#: gradient (backward); the embedding all-gathers its output's gradient (backward)
#: (``cost/layer_collectives.tp_calls``; ``tensor_parallel/layers.py``)
SP_COLUMN = ("self_attention.linear_qkv", "mlp.linear_fc1", "output_layer")
SP_ROW = ("self_attention.linear_proj", "mlp.linear_fc2")
SP_EMBEDDING = ("embedding",)


def blocked_groups(plan: Plan) -> tuple[str, ...]:
    """The plan's groups with more than one rank whose collectives sit inside the layers:
    ``tp``, ``cp``, ``etp`` (expert-TP), ``tp_ep`` (expert-TP x EP, megatron's
    ``expert_tensor_and_model_parallel_group``), ``ep`` (megatron parallel-state names)."""
    p = plan.parallel
    out = [name for name, n in (("tp", p.tp), ("cp", p.cp), ("etp", p.expert_tp), ("tp_ep", p.expert_tp * p.ep),
                                ("ep", p.ep)) if n > 1]
    if not plan.model.num_experts:
        out = [g for g in out if g in ("tp", "cp")]
    return tuple(out)


def applies(plan: Plan, device: str, clock: str = "thread") -> bool:
    """Whether :func:`blocking_collectives` blocks anything: a megatron or torchtitan plan with
    :func:`blocked_groups`, timed on the CPU in CPU time (``clock`` "thread" or "process")."""
    return (torch.device(device).type == "cpu" and clock != "wall"
            and plan.framework in ("megatron", "torchtitan") and bool(blocked_groups(plan)))


def _blocks_dispatch(plan: Plan) -> bool:
    """Whether MoE token dispatch / combine block: the plan's dispatcher exchanges tokens
    (megatron: EP or expert-TP > 1; torchtitan: EP > 1, its expert-TP without EP exchanges none)."""
    groups = blocked_groups(plan)
    return "ep" in groups if plan.framework == "torchtitan" else any(g in groups for g in ("ep", "etp"))


def blocking_substitution(plan: Plan, device: str, clock: str = "thread") -> Optional[Substitution]:
    """The measured pieces' entry for the blocks (None when :func:`applies` is False): keyed, so a
    piece timed with them is never read for one timed without."""
    if not applies(plan, device, clock):
        return None
    groups = blocked_groups(plan)
    moe = _blocks_dispatch(plan)
    cp = "cp" in groups
    where = (f"megatron's mappings on the {', '.join(groups)} group(s)" if plan.framework == "megatron" else
             f"torchtitan's calls on the {', '.join(groups)} group(s), at the modules that make them")
    pieces: tuple[str, ...] = ("layer", "embedding", "head_loss", "mtp")
    if plan.framework == "torchtitan" and plan.training.compile:
        from primus_launch.projection.measure.build_titan import compile_available

        if compile_available() is None:  # the blocks compiled whole (_titan_hooks): not in them
            pieces = ("embedding", "head_loss")
            where += "; none in the layers, compiled whole (a compiled graph cannot block)"
    return Substitution(
        pieces + (("attn_core",) if cp else ()),
        f"each of the run's blocking collectives inside the piece ({where}"
        + ("; the MoE token dispatch and combine, forward and backward" if moe else "")
        + ("; the core's stand-in K and V, forward and backward" if cp else "")
        + f") kept as a {BLOCK_S * 1e3:g} ms block of the measuring thread",
        "world size 1 makes no collective call, but on the CPU the compute after a blocking call resumes slower "
        "(scripts/measure_gap.py --stand-ins)",
        "the block itself is not CPU time; the collectives' own time is added analytically")


#: wall seconds the blocks have slept in this process (every kind, the reference's included): what a
#: sampler's time cap leaves out (``timing.PieceSampler``; the sleep stands in for the run's wait, it
#: is no measuring work)
_SLEPT_S = 0.0


def _sleep(counts: Counter, where: str) -> None:
    global _SLEPT_S
    counts[where] += 1
    t0 = time.perf_counter()
    time.sleep(BLOCK_S)
    _SLEPT_S += time.perf_counter() - t0


class _BackwardBlock(torch.autograd.Function):
    """Identity that blocks :data:`BLOCK_S` in backward only (a call the run makes on the gradient)."""

    @staticmethod
    def forward(ctx, x, counts, where):
        ctx.counts, ctx.where = counts, where
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        _sleep(ctx.counts, ctx.where + ".backward")
        return grad, None, None


class _Block(torch.autograd.Function):
    """Identity that blocks :data:`BLOCK_S` in forward and in backward (a MoE dispatch / combine)."""

    @staticmethod
    def forward(ctx, x, counts, where):
        ctx.counts, ctx.where = counts, where
        _sleep(counts, where)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        _sleep(ctx.counts, ctx.where + ".backward")
        return grad, None, None


class _ForwardBlock(torch.autograd.Function):
    """Identity that blocks :data:`BLOCK_S` in forward only (a call the run makes on the activation
    whose backward makes none)."""

    @staticmethod
    def forward(ctx, x, counts, where):
        _sleep(counts, where)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


#: the blocks' counter while :func:`blocking_collectives` is active (None: no blocks)
_ACTIVE: Optional[Counter] = None


class _ActiveBlocks:
    """The blocks of the active :func:`blocking_collectives` as :class:`.timing.Blocks`: how many
    were made so far, one more (a reference workload's, counted apart as ``"reference"``), and the
    wall seconds all blocks have slept."""

    def count(self) -> int:
        return 0 if _ACTIVE is None else sum(n for k, n in _ACTIVE.items() if k != "reference")

    def block(self) -> None:
        if _ACTIVE is not None:
            _sleep(_ACTIVE, "reference")

    def slept_s(self) -> float:
        return _SLEPT_S


#: :class:`.timing.Blocks` of whichever :func:`blocking_collectives` is active (a piece sampler's
#: ``blocks`` while the pieces are timed inside it)
ACTIVE_BLOCKS = _ActiveBlocks()


def block_point(t: torch.Tensor, where: str) -> torch.Tensor:
    """``t``, through a block forward and backward while :func:`blocking_collectives` is active
    (where the run's collective would be: the MoE dispatch / combine wrapped here, the CP stand-in
    K / V of ``build_mcore``); else -- and inside a graph being compiled, which cannot block -- ``t``
    itself."""
    return t if _ACTIVE is None or torch.compiler.is_compiling() else _Block.apply(t, _ACTIVE, where)


def _group_ids(names: tuple[str, ...]) -> set[int]:
    from megatron.core import parallel_state as ps

    get = {"tp": ps.get_tensor_model_parallel_group, "cp": ps.get_context_parallel_group,
           "etp": ps.get_expert_tensor_parallel_group, "tp_ep": ps.get_expert_tensor_and_model_parallel_group,
           "ep": ps.get_expert_model_parallel_group}
    return {id(get[n]()) for n in names}


def _sp_hooks(model: torch.nn.Module, counts: Counter) -> list:
    """Forward hooks that add the sequence-parallel calls of :data:`SP_COLUMN` / :data:`SP_ROW` /
    :data:`SP_EMBEDDING` modules (not the experts') as blocks; returns their handles."""

    def column(mod, args):  # forward: the input's all-gather; backward: the re-gather for wgrad
        return (_Block.apply(args[0], counts, "sp"),) + tuple(args[1:])

    def grad_only(mod, args, out):  # backward: the output gradient's all-gather
        if isinstance(out, tuple):
            return (_BackwardBlock.apply(out[0], counts, "sp"),) + out[1:]
        return _BackwardBlock.apply(out, counts, "sp")

    handles = []
    for name, mod in model.named_modules():
        if ".experts." in f".{name}." or ".shared_experts." in f".{name}.":
            continue
        if any(name == n or name.endswith("." + n) for n in SP_COLUMN):
            handles.append(mod.register_forward_pre_hook(column))
        elif any(name == n or name.endswith("." + n) for n in SP_ROW + SP_EMBEDDING):
            handles.append(mod.register_forward_hook(grad_only))
    return handles


def _titan_hooks(plan: Plan, model: torch.nn.Module, counts: Counter) -> list:
    """Hooks that block a torchtitan piece where torchtitan's own step makes its calls
    (``cost/layer_collectives.tp_calls``, traced from torchtitan in ``tests/test_layer_collectives.py``):

    - TP with sequence parallelism: around the attention and the FFN / MoE (the input's all-gather
      forward, its reduce-scatter backward; the output's reduce-scatter forward, its all-gather
      backward), the shared experts' output apart; a MoE layer's input blocks forward only where it
      has shared experts (their gradient flows on as ``Partial``), its input gradient's all-reduce
      where it has none; each replicated parameter's gradient all-reduce at the end of the layer's
      backward; the embedding's output; the final norm's output and its weight's all-reduce; the
      loss's three all-reduces forward;
    - TP without it: the attention's and FFN's output all-reduce forward, their input-gradient
      all-reduce backward; the embedding's output forward, the output layer's input gradient;
      the loss's three;
    - EP (:func:`_blocks_dispatch`): the routed experts' input and output, forward and backward
      (dispatch and combine, as the megatron dispatchers block).

    Returns the handles."""
    from primus_launch.projection.cost.layer_collectives import titan_replicated_grads

    groups = blocked_groups(plan)
    tp, sp = "tp" in groups, plan.parallel.sequence_parallel
    handles: list = []

    def pre(mod: torch.nn.Module, fn, n: int = 1, where: str = "tp") -> None:
        def hook(_mod, args):
            x = args[0]
            for _ in range(n):
                x = fn.apply(x, counts, where)
            return (x,) + tuple(args[1:])
        handles.append(mod.register_forward_pre_hook(hook))

    def post(mod: torch.nn.Module, fn, n: int = 1, where: str = "tp") -> None:
        def hook(_mod, args, out):
            first = out[0] if isinstance(out, tuple) else out
            for _ in range(n):
                first = fn.apply(first, counts, where)
            return (first,) + tuple(out[1:]) if isinstance(out, tuple) else first
        handles.append(mod.register_forward_hook(hook))

    # a block compiled whole (torchtitan's apply_compile, fullgraph) cannot sleep inside its graph:
    # its calls are not kept (blocking_substitution leaves the layers out)
    layers = [x for x in getattr(model, "layers", {}).values() if getattr(x, "_compiled_call_impl", None) is None]
    if tp:
        for layer in layers:
            moe = getattr(layer, "moe", None)
            ffn = moe if moe is not None else getattr(layer, "feed_forward", None)
            shared = getattr(moe, "shared_experts", None) if moe is not None else None
            if sp:
                pre(layer.attention, _Block)
                post(layer.attention, _Block)
                pre(ffn, _ForwardBlock if shared is not None else _Block)
                post(ffn, _Block)
                if shared is not None:
                    post(shared, _Block)
                pre(layer, _BackwardBlock, len(titan_replicated_grads(plan, moe=moe is not None)))
            else:
                for mod in (layer.attention, ffn):
                    pre(mod, _BackwardBlock)
                    post(mod, _ForwardBlock)
        if sp:
            post(model.tok_embeddings, _Block)
            pre(model.norm, _BackwardBlock)
            post(model.norm, _Block)
        else:
            post(model.tok_embeddings, _ForwardBlock)
            pre(model.lm_head, _BackwardBlock)
        post(model.lm_head, _ForwardBlock, 3)
    if _blocks_dispatch(plan):
        for layer in layers:
            experts = getattr(getattr(layer, "moe", None), "routed_experts", None)
            if experts is not None:
                pre(experts, _Block, where="dispatch")
                post(experts, _Block, where="combine")
    return handles


def _megatron_blocks(plan: Plan, model: torch.nn.Module, counts: Counter, stack: contextlib.ExitStack) -> None:
    """Make megatron's pieces block (module docstring): its mappings and direct calls on the
    blocked groups, the SP hooks, the MoE dispatchers' dispatch and combine; each undone by
    ``stack``."""
    import megatron.core.tensor_parallel.mappings as mappings

    from primus_launch.projection.measure.realrun import patched_collectives

    names = blocked_groups(plan)
    groups = _group_ids(names)

    def hook(fn):
        def blocking(input_, group=None, *args, **kwargs):
            if id(group) in groups:
                _sleep(counts, "mapping")
            return fn(input_, group, *args, **kwargs)
        return blocking

    def direct(name: str, fn):  # a torch.distributed call on a blocked group (DIRECT_CALLS)
        sig = inspect.signature(fn)

        def blocking(*args, **kwargs):
            if id(sig.bind_partial(*args, **kwargs).arguments.get("group")) in groups:
                _sleep(counts, "call")
            return fn(*args, **kwargs)
        return blocking

    stack.enter_context(patched_collectives(direct, DIRECT_CALLS))
    if plan.parallel.sequence_parallel and "tp" in names:
        for h in _sp_hooks(model, counts):
            stack.callback(h.remove)
    for name in MAPPINGS:
        fn = getattr(mappings, name)
        stack.callback(setattr, mappings, name, fn)
        setattr(mappings, name, hook(fn))
    if not _blocks_dispatch(plan):
        return
    for mod in model.modules():
        d = getattr(mod, "token_dispatcher", None)
        if d is None:
            continue
        own = {k: vars(d)[k] for k in ("token_dispatch", "token_combine") if k in vars(d)}

        def restore(d=d, own=own) -> None:  # back to the class's methods, or the builder's own wrappers
            for k in ("token_dispatch", "token_combine"):
                vars(d).pop(k, None)
            vars(d).update(own)

        stack.callback(restore)
        dispatch, combine = d.token_dispatch, d.token_combine

        def token_dispatch(hidden_states, probs, *a, _f=dispatch, **k):
            return _f(block_point(hidden_states, "dispatch"), probs, *a, **k)

        def token_combine(hidden_states, *a, _f=combine, **k):
            return _f(block_point(hidden_states, "combine"), *a, **k)

        d.token_dispatch, d.token_combine = token_dispatch, token_combine


@contextlib.contextmanager
def blocking_collectives(plan: Plan, device: str, model: torch.nn.Module, clock: str = "thread") -> Iterator[Counter]:
    """Within it, the pieces of ``model`` (built at world size 1 inside megatron's parallel state)
    block at the plan's collectives (module docstring): megatron's by :func:`_megatron_blocks`,
    torchtitan's by :func:`_titan_hooks`; yields a ``Counter`` of the blocks made per kind
    (``"mapping"``, ``"call"``, ``"sp"``, ``"tp"``, ``"dispatch"``, ``"combine"``, ``"cp_gather"``, with
    ``.backward``).  A no-op when :func:`applies` is False."""
    global _ACTIVE
    counts: Counter = Counter()
    if not applies(plan, device, clock):
        yield counts
        return
    with contextlib.ExitStack() as stack:
        try:
            if plan.framework == "torchtitan":
                for h in _titan_hooks(plan, model, counts):
                    stack.callback(h.remove)
            else:
                _megatron_blocks(plan, model, counts, stack)
            _ACTIVE = counts
            yield counts
        finally:
            _ACTIVE = None
