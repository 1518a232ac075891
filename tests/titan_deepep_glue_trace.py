"""Run pytorch/torchtitan's DeepEP token dispatch / combine glue at PR #2107's commit on the CPU (test helper).

``torchtitan/distributed/deepep/deepep.py`` at 36a4b6942 (PR #2107) is executed from the local git mirror
(``/work/.mirror/pytorch+torchtitan/repo`` or ``$TORCHTITAN_MIRROR``) as a module, with a stand-in ``deep_ep``
package: its ``Buffer`` is a one-rank identity (``get_dispatch_layout`` placeholders, ``dispatch`` returns the tokens,
their top-k indices and weights and the per-expert counts, ``combine`` returns its input), and the file's own
``deepep::dispatch`` / ``deepep::combine`` custom ops get a CPU kernel that calls the file's own CUDA
implementations (``_dispatch_op_impl`` / ``_combine_op_impl``).  Everything around the two library calls --
``dispatch_tokens`` (masking, ``_indices_to_multihot``, ``_permute_tokens``, the per-expert counts, the score
multiply) and ``combine_tokens`` (score multiply, ``_unpermute_tokens``), with the file's registered autograd -- is
torchtitan's code.  A dispatch mode records every ATen op that moves ``[*, h]`` rows (views and unfilled
allocations left out), forward and backward, for ``T`` tokens, top-``k`` over ``E`` local experts (one rank: every
token is received once, ``R_recv = T``).

Run as a script: ``python tests/titan_deepep_glue_trace.py SCORE_BEFORE`` (0 / 1) prints ``{"fwd": [[op, bytes],
...], "bwd": [...], "T": T, "k": k, "h": h}`` or ``{"skip": reason}``.
"""

from __future__ import annotations

import json
import sys
import types

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from aten_row_bytes import NO_BYTES, RowBytes  # noqa: E402
from titan_ep_pr2107_trace import source  # noqa: E402

T, K, H, E = 256, 4, 256, 8


def trace(score_before: bool) -> dict:
    src = source("torchtitan/distributed/deepep/deepep.py")
    if src is None:
        return {"skip": "torchtitan 36a4b6942 deepep.py not available from the mirror"}
    import torch

    class Buffer:   # one rank: every token stays, once
        group = None
        num_nvl_bytes = num_rdma_bytes = 1 << 40

        def get_dispatch_layout(self, topk_idx, num_experts):
            return None, None, None, None, None

        def dispatch(self, x, topk_idx=None, topk_weights=None, num_tokens_per_expert=None, handle=None, **kw):
            if handle is not None:   # the combine's backward: a dispatch of the gradient on the handle
                return x, None, None, None, None, None
            counts = torch.bincount(topk_idx[topk_idx >= 0].view(-1), minlength=E).tolist()
            return x, topk_idx, topk_weights, counts, "handle", None

        def combine(self, x, handle=None, topk_weights=None, **kw):
            return x, topk_weights, None

    dep = types.ModuleType("deep_ep")
    dep.Buffer = Buffer
    utils = types.ModuleType("deep_ep.utils")
    utils.EventHandle = lambda: None
    utils.EventOverlap = lambda e: None
    sys.modules["deep_ep"], sys.modules["deep_ep.utils"] = dep, utils
    mod = types.ModuleType("tt2107_deepep")
    sys.modules["tt2107_deepep"] = mod   # dataclasses look their module up
    exec(compile(src, "deepep.py@36a4b6942", "exec"), mod.__dict__)   # noqa: S102 - torchtitan's own file
    mod._buffer = Buffer()
    mod.get_buffer = lambda group, hidden_bytes: mod._buffer
    lib = torch.library.Library("deepep", "IMPL")
    lib.impl("dispatch", mod._dispatch_op_impl, "CPU")
    lib.impl("combine", mod._combine_op_impl, "CPU")

    torch.manual_seed(0)
    x = torch.randn(T, H, dtype=torch.bfloat16, requires_grad=True)
    idx = torch.stack([torch.randperm(E)[:K] for _ in range(T)])
    scores = torch.rand(T, K, dtype=torch.float32, requires_grad=True)
    rec_mode = RowBytes(T * H // 8, NO_BYTES + ("aten::unsqueeze", "aten::squeeze"),
                        hook=lambda name, phase: name.startswith("deepep::"))
    rec = rec_mode.rec

    with rec_mode:
        hs, _, state = mod.dispatch_tokens(x, idx, scores, E, E, None, score_before_experts=score_before)
        y = hs.clone()   # the experts' stand-in (not recorded below)
        out = mod.combine_tokens(y, state)
        rec_mode.phase = "bwd"
        out.backward(torch.ones_like(out))
    fwd = [r for r in rec["fwd"] if r[0] != "aten::clone"]
    bwd = [r for r in rec["bwd"] if r[0] not in ("aten::ones_like", "aten::fill_", "aten::clone")]
    return {"fwd": fwd, "bwd": bwd, "T": T, "k": K, "h": H}


if __name__ == "__main__":
    print(json.dumps(trace(sys.argv[1:2] == ["1"])))
