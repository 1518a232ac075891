"""Run torchtitan 0.3.0's own ``AllToAllTokenDispatcher`` under its own per-op ``SelectiveAC`` (test helper).

One MoE-style block on the CPU: a router (softmax + ``topk``), the dispatcher's ``dispatch`` (count exchange,
token exchange, ``_permute``), one matmul standing in for the experts, its ``combine`` (token exchange back,
score, ``deterministic_scatter_add``), wrapped by ``SelectiveAC._wrap_block`` exactly as ``SelectiveAC.apply``
wraps a transformer block.  The process group is a one-rank gloo group, the EP mesh a one-rank ``DeviceMesh``
named ``ep``; the SPMD backend is set with torchtitan's ``set_spmd_backend`` (as ``Trainer`` does from
``parallelism.spmd_backend``) and, for ``spmd_types``, its sparse mesh registered (``set_spmd_meshes``).
Compiled: ``torch.compile(fullgraph=True, backend="aot_eager")`` of the wrapped block with the two dynamo
settings torchtitan's ``apply_compile`` sets (dynamo cannot trace spmd_types' ``set_current_mesh`` of a
process group on the CPU, so the EP mesh is pushed on torchtitan's mesh stack directly; the exchanges read
only ``torch.compiler.is_compiling()`` and ``self.ep_mesh`` on that path).

Recorded: every decision torchtitan's policy returns for an all-to-all op (its name, the decision, the bytes of
its output; None where the size is symbolic, compiled), the all-to-all calls of the forward (eager only: a dispatch mode would stop dynamo) and of the
backward.  Run as a script: ``python tests/titan_a2a_trace.py spmd_types:eager partial_dtensor:compile ...``
prints one JSON object keyed by those arguments (a fresh process: the process group, dynamo's settings and
torchtitan's backend are process-wide); a third field ``:unlisted`` runs a ``SelectiveAC`` subclass whose
``get_save_ops`` (the override point torchtitan documents) drops ``_c10d_functional.all_to_all_single`` -- the save
list of torchtitan main before ab95c7031 (2025-09-06).
"""

from __future__ import annotations

import collections
import contextlib
import json
import sys

A2A_OPS = ("c10d.alltoall_.default", "_c10d_functional.all_to_all_single.default")
TOKENS, EXPERTS, TOP_K, HIDDEN = 16, 4, 2, 8


def trace(backend: str, compiled: bool, unlisted: bool = False) -> dict:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    import torchtitan.distributed.activation_checkpoint as tac
    from torchtitan.distributed import spmd_types as tts
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.models.common.token_dispatcher import AllToAllTokenDispatcher

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("ep",))
    dist_utils.set_spmd_backend(backend)
    if backend == "spmd_types":
        if compiled:
            tts.set_spmd_meshes(dense_mesh=mesh, sparse_mesh=None)
            tts._spmd_mesh_stack().append(mesh)
        else:
            tts.set_spmd_meshes(dense_mesh=mesh, sparse_mesh=mesh)
            tts._spmd_mesh_stack()

    decisions: list[tuple[str, str, int | None]] = []
    original = tac.create_selective_checkpoint_contexts

    def spy(policy):  # noqa: ANN001, ANN202 - torch's policy signature
        def recorded(ctx, func, *args, **kwargs):  # noqa: ANN001, ANN202
            d = policy(ctx, func, *args, **kwargs)
            if str(func) in A2A_OPS:
                leaves = [t for t in tree_leaves(ctx.op_output) if isinstance(t, torch.Tensor)]
                nbytes = sum(t.numel() * t.element_size() for t in leaves)
                try:
                    nbytes = int(nbytes)
                except Exception:  # noqa: BLE001 - a data-dependent size while dynamo traces the block
                    nbytes = None
                decisions.append((str(func), d.name, nbytes))
            return d
        return original(recorded)

    tac.create_selective_checkpoint_contexts = spy

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.disp = AllToAllTokenDispatcher(AllToAllTokenDispatcher.Config(num_experts=EXPERTS, top_k=TOP_K))
            self.disp.wire_meshes(ep_mesh=mesh)
            self.w = nn.Parameter(torch.randn(HIDDEN, HIDDEN, dtype=torch.bfloat16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scores = torch.softmax(x[:, :EXPERTS].float(), -1)
            s, ids = torch.topk(scores, TOP_K, dim=-1)
            counts = torch.bincount(ids.view(-1), minlength=EXPERTS)
            routed, _, meta = self.disp.dispatch(x, s, ids, counts)
            return self.disp.combine(routed @ self.w, meta, x)

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN202
            if str(func) in A2A_OPS:
                self.n[str(func)] += 1
            return func(*args, **(kwargs or {}))

    ac_cls = tac.SelectiveAC
    if unlisted:  # a save list without the functional all-to-all (torchtitan main before ab95c7031, 2025-09-06)
        class Unlisted(tac.SelectiveAC):
            def get_save_ops(self) -> set:
                return super().get_save_ops() - {torch.ops._c10d_functional.all_to_all_single.default}

        ac_cls = Unlisted
    block = ac_cls(ac_cls.Config(force_recompute_mm_shapes_by_fqns=[]))._wrap_block(Block())
    if compiled:
        torch._dynamo.config.capture_scalar_outputs = True
        torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True
        block = torch.compile(block, backend="aot_eager", fullgraph=True)
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    fwd = Count()
    with contextlib.nullcontext() if compiled else fwd:
        out = block(x)
    with Count() as bwd:
        out.float().sum().backward()
    tac.create_selective_checkpoint_contexts = original
    return {"decisions": decisions, "forward": None if compiled else sum(fwd.n.values()),
            "backward": sum(bwd.n.values())}


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")
    result = {}
    for arg in sys.argv[1:]:
        backend, mode, *rest = arg.split(":")
        result[arg] = trace(backend, mode == "compile", unlisted=rest == ["unlisted"])
    print("JSON" + json.dumps(result))
