"""A dispatch mode that records the bytes each ATen op moves in ``[*, h]`` rows (test helper).

Shared by the torchtitan MoE glue traces (``test_titan_moe_glue``, ``titan_ep_pr2107_trace``,
``titan_deepep_glue_trace``): every op not in ``skip`` (views, allocations without a fill) reads its floating
inputs of at least ``small`` elements and writes the outputs that are not one of its inputs (an in-place op's output
is its first input); a ``zeros`` allocation writes its output.  ``hook(name, phase)`` sees every op first and
returns True to leave it unrecorded (e.g. to count all-to-alls apart).  ``phase`` ("fwd" / "bwd") is set by the
caller around the backward.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


#: views and allocations without a fill: no bytes moved
NO_BYTES = ("aten::view", "aten::_unsafe_view", "aten::reshape", "aten::expand", "aten::slice", "aten::alias",
            "aten::detach", "aten::as_strided", "aten::select", "aten::t", "aten::transpose", "aten::empty",
            "aten::empty_like", "aten::new_empty", "aten::new_empty_strided", "aten::empty_strided")


class RowBytes(TorchDispatchMode):
    """Records ``(op, bytes)`` per phase in ``self.rec``."""

    def __init__(self, small: int, skip: Iterable[str],
                 hook: Optional[Callable[[str, str], bool]] = None) -> None:
        super().__init__()
        self.small, self.skip, self.hook = small, frozenset(skip), hook
        self.rec: dict[str, list] = {"fwd": [], "bwd": []}
        self.phase = "fwd"

    def nbytes(self, ts: Iterable[torch.Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in ts if t.is_floating_point() and t.numel() >= self.small)

    def __torch_dispatch__(self, func, types_, a=(), kw=None):
        out = func(*a, **(kw or {}))
        name = func._schema.name
        if name in self.skip or (self.hook is not None and self.hook(name, self.phase)):
            return out
        ins = [t for t in tree_leaves((a, kw)) if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        own = {t.data_ptr() for t in ins}
        n = (self.nbytes(outs) if "zeros" in name
             else self.nbytes(ins) + self.nbytes([t for t in outs if t.data_ptr() not in own]))
        if n:
            self.rec[self.phase].append((name, n))
        return out
