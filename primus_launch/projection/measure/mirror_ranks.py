"""A MoE layer's expert-parallel groups at world size 1: the other ranks as mirrors of this one.

On rank ``r`` of an expert-parallel group of ``n`` ranks, megatron-core's MoE layer (0.16.1
``transformer/moe/moe_layer.py``, ``router.py``, ``token_dispatcher.py``) scores *all* ``E``
experts in its router, holds ``E / n`` of them (``num_local_experts = num_moe_experts // ep_size``)
and computes, for its local experts, the tokens every rank of the group routed to them: the
allgather dispatcher gathers the routing map, the probabilities and the hidden states over the
expert-TP x EP group (``tp_ep``) and keeps its experts' columns; the alltoall dispatcher
all-gathers the per-expert token counts over ``tp_ep`` to size its all-to-all over ``ep`` (and
all-gathers over expert-TP after it), then sorts the received tokens by local expert.  None of that
code runs at world size 1, where megatron's groups have one rank: a piece built there routes over
the local experts only.

:class:`MirrorGroup` stands in for such a group in a world-size-1 build: a group of ``n`` ranks of
which this process is rank 0 and in which *every other rank holds this rank's tensors*.  megatron
reads a group only through ``group.size()`` / ``group.rank()`` (``utils.get_pg_size``,
``tensor_parallel/mappings.py``), so the layer built with it (:func:`expert_groups`) is megatron's
rank-0 layer of the run: an ``E``-expert router, ``E / n`` local experts, the dispatcher's real
multi-rank code path.  Its collectives, inside :func:`mirrored_collectives`, move this rank's data
as the mirrored group would:

- all-gather (``all_gather_into_tensor``, ``all_gather``): every rank's block is this rank's input;
- all-to-all (``all_to_all_single``): block ``j`` of the output is what rank ``j`` sends rank 0 --
  by the mirror, this rank's own block for rank 0 (its first input block), repeated to the size the
  caller's split asks (the sizes agree whenever the splits themselves went through the mirror, as
  megatron's alltoall dispatcher exchanges them);
- reduce-scatter / all-reduce: this rank's own contribution (its block for rank 0 / the tensor
  unchanged).  The reduction's arithmetic belongs to the collective, whose time -- transfer and
  reduction -- the cost model adds analytically (``cost/moe_dispatch.py``); the mirror's copies are
  the only work it adds to the piece (one pass over the gathered bytes).

With balanced routing the local experts then receive what the run's do: ``n`` copies of this
rank's assignments to them, ``n * T * k * (E / n) / E = T k`` tokens for ``T`` tokens per rank and
top-``k`` routing (each rank's tokens spread evenly over all ``E`` experts).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Optional

import torch


class MirrorGroup:
    """A stand-in process group of ``n`` ranks: this process is rank 0, every other rank holds its
    tensors (module docstring).  Only megatron's ``size()`` / ``rank()`` reads and the collectives
    of :func:`mirrored_collectives` accept it."""

    def __init__(self, n: int, name: str = "ep") -> None:
        if n < 2:
            raise ValueError(f"a mirror group needs at least 2 ranks, got {n}")
        self.n, self.name = n, name

    def size(self) -> int:
        """The mirrored group's size (the run's, not the world size of 1)."""
        return self.n

    def rank(self) -> int:
        """Always 0: the build is the run's rank 0 of the group."""
        return 0

    def __repr__(self) -> str:
        return f"MirrorGroup({self.name}, {self.n} ranks)"


class _Done:
    """The handle of a mirrored ``async_op`` call: already complete."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _fill(out: torch.Tensor, src: torch.Tensor) -> None:
    """``out`` <- ``src``'s rows (dim 0), repeated or cut to ``out``'s row count; zeros when ``src``
    has none."""
    rows = out.shape[0] if out.dim() else 1
    have = src.shape[0] if src.dim() else 1
    if rows == 0:
        return
    if have == 0:
        out.zero_()
    elif have == rows:
        out.copy_(src.reshape(out.shape))
    else:
        reps = -(-rows // have)
        out.copy_(src.repeat(reps, *([1] * (src.dim() - 1)))[:rows].reshape(out.shape))


def _blocks(t: torch.Tensor, sizes: Optional[list], n: int) -> list[torch.Tensor]:
    """``t`` split along dim 0 into ``sizes`` (or ``n`` equal blocks)."""
    if sizes is None:
        return list(t.chunk(n)) if t.shape[0] else [t] * n
    return list(torch.split(t, [int(s) for s in sizes]))


def _all_gather_into_tensor(n: int, a: dict) -> None:
    out, inp = a["output_tensor"], a["input_tensor"]
    if inp.numel():
        out.view(n, -1).copy_(inp.reshape(1, -1).expand(n, -1))


def _all_gather(n: int, a: dict) -> None:
    for out in a["tensor_list"]:
        _fill(out, a["tensor"])


def _reduce_scatter_tensor(n: int, a: dict) -> None:
    out, inp = a["output"], a["input"]
    if inp.numel():
        out.copy_(inp.reshape(n, -1)[0].view_as(out))


def _reduce_scatter(n: int, a: dict) -> None:
    _fill(a["output"], a["input_list"][0])


def _all_reduce(n: int, a: dict) -> None:
    return None


def _all_to_all_single(n: int, a: dict) -> None:
    out, inp = a["output"], a["input"]
    to_rank0 = _blocks(inp, a.get("input_split_sizes"), n)[0]
    for block in _blocks(out, a.get("output_split_sizes"), n):
        _fill(block, to_rank0)


#: ``torch.distributed`` function -> what it does on a :class:`MirrorGroup` (module docstring)
MIRRORED: dict[str, Callable[[int, dict], None]] = {
    "all_gather_into_tensor": _all_gather_into_tensor, "all_gather": _all_gather,
    "reduce_scatter_tensor": _reduce_scatter_tensor, "reduce_scatter": _reduce_scatter,
    "all_reduce": _all_reduce, "all_to_all_single": _all_to_all_single}


#: megatron-core's aliases of torch.distributed functions, bound at import in
#: ``tensor_parallel/mappings.py`` and ``layers.py``: patching ``torch.distributed`` alone misses them
MEGATRON_ALIASES = ("dist_all_gather_func", "dist_reduce_scatter_func")


@contextlib.contextmanager
def patched_collectives(wrap: Callable[[str, Callable], Callable], names: tuple[str, ...]) -> Iterator[None]:
    """Within it, each ``torch.distributed`` function in ``names`` -- and each of megatron-core's
    :data:`MEGATRON_ALIASES` bound to one of them -- is ``wrap(name, function)``; restored on exit."""
    import torch.distributed as dist
    from megatron.core.tensor_parallel import layers, mappings

    saved = [(dist, name, getattr(dist, name)) for name in names]
    name_of = {f: name for _, name, f in saved}
    for mod in (mappings, layers):
        for alias in MEGATRON_ALIASES:
            if getattr(mod, alias, None) in name_of:
                saved.append((mod, alias, getattr(mod, alias)))
    try:
        for mod, attr, f in saved:
            setattr(mod, attr, wrap(name_of[f], f))
        yield
    finally:
        for mod, attr, f in saved:
            setattr(mod, attr, f)


@contextlib.contextmanager
def mirrored_collectives() -> Iterator[None]:
    """Within it, each ``torch.distributed`` function of :data:`MIRRORED` (and megatron-core's
    aliases of them, :func:`patched_collectives`) called on a :class:`MirrorGroup` does what the
    mirrored group would (module docstring); on any other group it is the function itself."""
    def wrap(name: str, f: Callable) -> Callable:
        sig = inspect.signature(f)
        mirror = MIRRORED[name]

        def call(*args, **kwargs):
            bound = sig.bind(*args, **kwargs).arguments
            group = bound.get("group")
            if not isinstance(group, MirrorGroup):
                return f(*args, **kwargs)
            mirror(group.n, bound)
            return _Done() if bound.get("async_op") else None
        call.__wrapped__ = f
        return call

    with patched_collectives(wrap, tuple(MIRRORED)):
        yield


def expert_groups(ep: int, expert_tp: int, dispatcher: bool = False) -> Optional[Any]:
    """megatron's ``ProcessGroupCollection`` of the world-size-1 parallel state with its ``ep`` and
    ``tp_ep`` groups mirrored (``ep`` and ``ep * expert_tp`` ranks), for a per-rank build whose MoE
    layers are the run's rank 0 (module docstring); None when neither has more than one rank.
    ``expt_tp`` stays the one-rank group unless ``dispatcher``: the build's expert FFN is already
    one expert-TP shard, so the experts' linears must not shard it again, while the token
    dispatcher's expert-TP exchange is mirrored (:func:`mirror_expert_tp`)."""
    if ep * expert_tp == 1:
        return None
    from megatron.core.process_groups_config import ProcessGroupCollection

    pgs = ProcessGroupCollection.use_mpu_process_groups()
    if ep > 1:
        pgs.ep = MirrorGroup(ep, "ep")
    pgs.tp_ep = MirrorGroup(ep * expert_tp, "tp_ep")
    if dispatcher and expert_tp > 1:
        pgs.expt_tp = MirrorGroup(expert_tp, "expt_tp")
    return pgs


def mirror_expert_tp(model: torch.nn.Module, ep: int, expert_tp: int) -> None:
    """Rebuild each MoE layer's token dispatcher of ``model`` (megatron's own class and arguments)
    with the mirrored expert-TP group as well (:func:`expert_groups` ``dispatcher=True``), so its
    expert-TP exchange runs as in the run -- megatron sizes it in the dispatcher's ``__init__``
    (``tp_size``, and the alltoall dispatcher's chunk-sort indices); a no-op for ``expert_tp`` 1."""
    if expert_tp < 2:
        return
    groups = expert_groups(ep, expert_tp, dispatcher=True)
    for mod in model.modules():
        d = getattr(mod, "token_dispatcher", None)
        if d is None:
            continue
        new = type(d)(d.num_local_experts, d.local_expert_indices, config=d.config, pg_collection=groups)
        if d.shared_experts is not None:
            new.set_shared_experts(d.shared_experts)
        mod.token_dispatcher = new
