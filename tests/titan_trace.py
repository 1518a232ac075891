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

from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker  # noqa: E402

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

    @property
    def world(self) -> int:
        return self.dp_shard * self.dp_replicate * self.cp * self.tp


def _init_world(world: int) -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


def build(case: TitanCase):
    """torchtitan's model (meta device) with its parallelisms applied; returns (model, parallel_dims)."""
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.models.llama3.parallelize import parallelize_llama
    from torchtitan.models.llama3.sharding import set_llama3_sharding_config

    from primus_launch.adapters.torchtitan_arch import model_spec

    from torchtitan.distributed import utils as dist_utils

    _init_world(case.world)
    backend = "partial_dtensor"
    dist_utils.set_spmd_backend(backend)
    pd = ParallelDims(dp_replicate=case.dp_replicate, dp_shard=case.dp_shard, cp=case.cp, tp=case.tp, pp=1, ep=1,
                      world_size=case.world, spmd_backend=backend)
    pd.build_mesh()
    cfg = copy.deepcopy(model_spec(case.model, case.flavor).model)
    cfg.layers = cfg.layers[:case.layers]
    titan_cpu.use_sdpa(cfg)
    titan_cpu.set_seq_len(cfg, case.seq)
    if case.tp > 1:
        set_llama3_sharding_config(cfg, enable_sp=True)
    with torch.device("meta"):
        model = cfg.build()
    par = ParallelismConfig(data_parallel_shard_degree=case.dp_shard,
                            data_parallel_replicate_degree=case.dp_replicate, context_parallel_degree=case.cp,
                            tensor_parallel_degree=case.tp, spmd_backend=backend,
                            fsdp_reshard_after_forward=case.reshard_after_forward)
    ac: Any = None
    if case.ac == "full":
        ac = FullAC.Config()
    elif case.ac == "op":
        ac = SelectiveAC.Config()
    model = parallelize_llama(model, parallel_dims=pd, training=TrainingConfig(local_batch_size=case.mbs,
                                                                               seq_len=case.seq),
                              parallelism=par, compile_config=CompileConfig(), ac_config=ac, dump_folder="/tmp")
    if isinstance(case.ac, int):
        _layer_sac(model, case.ac)
    return model, pd


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


def trace(case: TitanCase) -> dict[str, Any]:
    """Bytes of rank 0 in the second training step of ``case``.

    Returns ``static`` (categories before forward: sharded fp32 params, buffers, optimizer
    states), ``after_forward`` (categories once the loss is computed: what the backward will use),
    ``after_backward``, ``peak`` (highest total of the step) and ``peak_phase`` (forward, backward
    or optimizer).
    """
    from torchtitan.components.loss import cross_entropy_loss

    model, pd = build(case)
    tp = case.tp
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
                pred = model(ids)
                loss = cross_entropy_loss(pred, ids)
                del pred
                if it == 1:
                    res["after_forward"] = _cats(mt.get_tracker_snapshot("current"))
                    res["peak_forward"] = max(mt._peak_mem.values())
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
    res["peak_phase"] = ("forward" if res["peak"] == res["peak_forward"] else
                         "backward" if res["peak"] == res["peak_backward"] else "optimizer")
    res["num_params_local"] = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                                  for p in model.parameters())
    del tp
    return res
