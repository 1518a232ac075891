"""Trace helper for ``tests/test_titan_qk_norm.py``: one Qwen3-style attention block under torchtitan's TP plan
of d66b72a6a (``torchtitan/experiments/qwen3/infra/parallelize.py``:238-250: SP norm, ``PrepareModuleInput``
Shard(1) -> Replicate, ``ColwiseParallel(use_local_output=False)`` wq / wk / wv, ``RowwiseParallel(output_layouts=
Shard(1))`` wo) with q / k norm either ``NoParallel(use_local_output=False)`` (torchtitan's own class, same
redistribute-to-Replicate output hook at d66b72a6a and 0.3.0) or ``SequenceParallel(sequence_dim=2)`` (PR
#1870).  The model code is d66b72a6a's ``Attention.forward`` (view to heads, norms, ``repeat_kv``, transpose,
SDPA, ``wo``) with SDPA dispatched to ``aten._scaled_dot_product_flash_attention`` -- an H100's kernel, whose
DTensor sharding strategy decides the layouts -- on a fake world of ``tp`` ranks under ``FakeTensorMode``.
Prints one JSON line: ``{style: [[phase, op, gathered_or_input_numel], ...]}``, every c10d call of a forward
and a backward; with ``"rope": 1`` the block also runs d66b72a6a's ``apply_rotary_emb`` (cos / sin plain tensors,
under ``implicit_replication``) and the list ends with q's placement and local heads at the RoPE, forward and in
its gradient.  Given a JSON list of shapes: a list of those objects, one per shape, all traced in this one process
(each trace builds its own fake group and block)."""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.utils._python_dispatch import TorchDispatchMode


ROPE = False
PLACES: list = []


class _Attention(nn.Module):
    def __init__(self, h: int, nq: int, nkv: int, d: int):
        super().__init__()
        self.nq, self.nkv, self.d = nq, nkv, d
        self.wq = nn.Linear(h, nq * d, bias=False)
        self.wk = nn.Linear(h, nkv * d, bias=False)
        self.wv = nn.Linear(h, nkv * d, bias=False)
        self.wo = nn.Linear(nq * d, h, bias=False)
        self.q_norm = nn.RMSNorm(d, eps=1e-6)
        self.k_norm = nn.RMSNorm(d, eps=1e-6)

    def forward(self, x):
        bs, s, _ = x.shape
        xq = self.wq(x).view(bs, s, -1, self.d)
        xk = self.wk(x).view(bs, s, -1, self.d)
        xv = self.wv(x).view(bs, s, -1, self.d)
        xq, xk = self.q_norm(xq), self.k_norm(xk)
        if ROPE:  # d66b72a6a's apply_rotary_emb: (x * cos) + (rotate_half(x) * sin), cos / sin [1, s, 1, d]
            cos = torch.ones(1, s, 1, self.d)
            sin = torch.ones(1, s, 1, self.d)

            def rot(x):
                return torch.cat((-x[..., self.d // 2:], x[..., : self.d // 2]), dim=-1)

            PLACES.append(["fwd", "rope_in_q", str(xq.placements[0]), list(xq.to_local().shape)])
            xq.register_hook(lambda g: PLACES.append(["bwd", "rope_in_q_grad", str(g.placements[0]),
                                                      list(g.to_local().shape)]))
            xq, xk = (xq * cos) + (rot(xq) * sin), (xk * cos) + (rot(xk) * sin)
        rep = self.nq // self.nkv

        def repeat_kv(t):
            b_, s_, n_, d_ = t.shape
            return t[:, :, :, None, :].expand(b_, s_, n_, rep, d_).reshape(b_, s_, n_ * rep, d_)

        q, k, v = xq.transpose(1, 2), repeat_kv(xk).transpose(1, 2), repeat_kv(xv).transpose(1, 2)
        o = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True, scale=self.d ** -0.5)[0]
        return self.wo(o.transpose(1, 2).contiguous().view(bs, s, -1))


class _Block(nn.Module):
    def __init__(self, h: int, nq: int, nkv: int, d: int):
        super().__init__()
        self.attention_norm = nn.RMSNorm(h)
        self.attention = _Attention(h, nq, nkv, d)

    def forward(self, x):
        return x + self.attention(self.attention_norm(x))


class _Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[list] = []
        self.phase = "fwd"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if (ROPE and name.startswith("aten.mul.Tensor") and not isinstance(args[0], DTensor)
                and isinstance(args[1], torch.Tensor) and args[0].dim() == 4):
            self.calls.append([self.phase, "mul", list(args[0].shape), list(args[1].shape)])
        if name.startswith("_c10d_functional.") and "wait" not in name and "wrap" not in name:
            op = name.split(".")[1]
            numel = args[0].numel() * (args[1] if op == "all_gather_into_tensor" else 1)
            self.calls.append([self.phase, op, int(numel)])
        return func(*args, **(kwargs or {}))


def trace(style: str, tp: int, b: int, s: int, h: int, nq: int, nkv: int, d: int) -> list[list]:
    from torchtitan.distributed.tensor_parallel import NoParallel

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp)
    mesh = init_device_mesh("cpu", (tp,))
    qk = NoParallel(use_local_output=False) if style == "noparallel" else SequenceParallel(sequence_dim=2)
    log = _Log()
    torch.set_default_dtype(torch.bfloat16)
    with FakeTensorMode():
        blk = _Block(h, nq, nkv, d)
        parallelize_module(blk, mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "attention.wq": ColwiseParallel(use_local_output=False),
            "attention.wk": ColwiseParallel(use_local_output=False),
            "attention.wv": ColwiseParallel(use_local_output=False),
            "attention.q_norm": qk, "attention.k_norm": qk,
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        })
        x = torch.randn(b, s // tp, h, dtype=torch.bfloat16, requires_grad=True)
        from torch.distributed.tensor.experimental import implicit_replication

        with log, implicit_replication():   # cos / sin are plain tensors (module doc)
            y = blk(x)
            log.phase = "bwd"
            y.sum().backward()
    dist.destroy_process_group()
    return log.calls


def run(kw: dict) -> dict[str, list]:
    """Both styles for one shape (``kw``: the :func:`trace` arguments, ``"rope": 1`` to run the RoPE too)."""
    global ROPE
    kw = dict(kw)
    ROPE = bool(kw.pop("rope", False))
    out = {}
    for st in ("noparallel", "seqpar"):
        PLACES.clear()
        out[st] = trace(st, **kw) + [list(p) for p in PLACES]
    return out


if __name__ == "__main__":
    arg = json.loads(sys.argv[1])   # one shape, or a list of shapes traced one after another in this process
    print(json.dumps([run(kw) for kw in arg] if isinstance(arg, list) else run(arg)))
