"""The allocation / free sequence of torchtitan 0.3.0's own training steps on the CPU (test and probe helper).

The model, parallelisms, loss and optimizer are :func:`titan_trace.build`'s (torchtitan's own code on the meta
device, ``FakeTensorMode``, torch's fake process group).  A dispatch mode above ``FakeTensorMode`` records every
new storage an op returns with its bytes and the stream current at the call (FSDP2's ``all_gather_copy_in`` /
``all_gather`` / ``reduce_scatter`` / ``all_reduce`` streams entered by ``torch.cpu.stream``, else ``default``),
a finalizer on the storage records its free, and FSDP2's ``alloc_storage`` / ``free_storage`` (the unsharded
parameters' ``untyped_storage().resize_``, which no op dispatch sees) are recorded as the allocation / free they
are on a GPU.  Order is the step's: what torch's caching allocator would be asked, one request at a time.

Events: ``("a", key, nbytes, stream)``, ``("f", key)``, ``("reset",)`` at the start of each step after the first
(where torchtitan's ``DeviceMemoryMonitor`` restarts its peaks), ``("mark", name)`` at phase boundaries.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves

from titan_trace import TitanCase, build, fully_shard_state, use_balanced_all_to_all

__all__ = ["TitanCase", "alloc_events"]


def _plain(t: torch.Tensor):
    """The plain tensors that hold ``t``'s memory: a wrapper subclass (DTensor) holds none of its own, its inner
    tensors (``__tensor_flatten__``) do; an op on it runs their ops below this mode, so they are read here."""
    if is_traceable_wrapper_subclass(t):
        for a in t.__tensor_flatten__()[0]:
            inner = getattr(t, a)
            if isinstance(inner, torch.Tensor):
                yield from _plain(inner)
    else:
        yield t


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []
        self.names: dict[int, str] = {}
        self.live: dict[int, int] = {}  # storage key -> event key
        self._ids = itertools.count()

    def stream(self) -> str:
        return self.names.get(id(torch.cpu.current_stream()), "default")

    def alloc(self, st: torch.UntypedStorage, n: int) -> None:
        key = st._cdata
        k = next(self._ids)
        self.live[key] = k
        self.events.append(("a", k, n, self.stream()))

    def free(self, key: int) -> None:
        k = self.live.pop(key, None)
        if k is not None:
            self.events.append(("f", k))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        ins = None
        for t in (p for o in tree_leaves(out) if isinstance(o, torch.Tensor) for p in _plain(o)):
            st = t.untyped_storage()
            key = st._cdata
            if key in self.live:
                continue
            if ins is None:
                ins = {p.untyped_storage()._cdata for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)
                       for p in _plain(a)}
            if key in ins:
                continue  # a view of, or written into, an existing storage
            n = st.nbytes()
            if n == 0:
                continue
            self.alloc(st, n)
            weakref.finalize(st, self.free, key)
        return out


def _patch_fsdp_storage(rec: _Recorder):
    """FSDP2's ``alloc_storage`` / ``free_storage`` (``_fsdp_param.py``): a storage ``resize_`` is a free of the
    old block and an allocation of the new one on a GPU."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    orig_alloc, orig_free = _fsdp_param.alloc_storage, _fsdp_param.free_storage

    def alloc_storage(tensor):
        st = tensor.untyped_storage()
        size = tensor.numel() * tensor.itemsize
        if st.size() != size:
            rec.free(st._cdata)
            orig_alloc(tensor)
            if size:
                if st._cdata not in rec.live:
                    weakref.finalize(st, rec.free, st._cdata)
                rec.alloc(st, size)

    def free_storage(tensor):
        st = tensor.untyped_storage()
        if st.size() != 0:
            rec.free(st._cdata)
        orig_free(tensor)

    mods = (_fsdp_param, _fsdp_param_group)
    for m in mods:
        m.alloc_storage = alloc_storage
    _fsdp_param.free_storage = free_storage

    def undo():
        for m in mods:
            m.alloc_storage = orig_alloc
        _fsdp_param.free_storage = orig_free
    return undo


def alloc_events(case: TitanCase, steps: int = 2) -> list[tuple]:
    """The allocation / free events of rank 0 of ``case`` from building the parameters on the device through
    ``steps`` training steps (forward, torchtitan's loss, backward, fused AdamW ``step``, ``zero_grad``)."""
    from torchtitan.components.loss import ChunkedLossWrapper, cross_entropy_loss

    model, _ = build(case)
    if case.ep > 1:
        use_balanced_all_to_all()
    loss_fn: Any = cross_entropy_loss
    if case.loss_chunks > 1:
        chunked = ChunkedLossWrapper(ChunkedLossWrapper.Config(num_chunks=case.loss_chunks))
        chunked.set_lm_head(model.lm_head)
        model._skip_lm_head = True

        def loss_fn(pred, labels):
            return chunked(pred, labels)[0]
    root = fully_shard_state(model)
    rec = _Recorder()
    undo = _patch_fsdp_storage(rec)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            with rec:
                model.to_empty(device="cpu")
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
            ids = torch.zeros((case.mbs, case.seq // case.cp), dtype=torch.long)
            for it in range(steps):
                ctx = root._comm_ctx
                rec.names = {id(s): n for n, s in (
                    ("copy_in", getattr(ctx, "all_gather_copy_in_stream", None)),
                    ("all_gather", getattr(ctx, "all_gather_stream", None)),
                    ("reduce_scatter", getattr(ctx, "reduce_scatter_stream", None)),
                    ("all_reduce", getattr(ctx, "all_reduce_stream", None))) if s is not None}
                if it:
                    rec.events.append(("reset",))
                with rec:
                    loss = loss_fn(model(ids), ids)
                    rec.events.append(("mark", "forward"))
                    loss.backward()
                    del loss
                    rec.events.append(("mark", "backward"))
                    opt.step()
                    opt.zero_grad()
                    rec.events.append(("mark", "step"))
    finally:
        undo()
        dist.destroy_process_group()
    return rec.events
