"""Count the grouped_gemm library calls of megatron-core 0.16.1's legacy ``GroupedMLP`` (test helper, CPU only).

Run in its own process (it owns the default process group): as a script, ``python tests/legacy_gmm_trace.py
'[4, 8]'``, or through ``tests/moe_host_trace.py`` (a configuration ``{"legacy_gmm": 8}``), which shares that
process's import of megatron with the MoE-layer traces (``tests/test_moe_host.py``)

builds megatron's real ``GroupedMLP`` (``--moe-use-legacy-grouped-gemm``) with the given numbers of local experts
on torch's fake process group and runs one forward and one backward of bf16 tokens, with ``gg.ops`` (megatron's
``grouped_gemm_util``) replaced by a stand-in that follows the call structure of the ROCm branch of the library
as read (caaatch22/grouped_gemm ``rocm`` @8a9b438; ``cost/moe_host.py`` item 2):

- ``gmm(a, b, batch_sizes, trans_b)`` is an autograd function whose forward runs one backend ``gmm`` and whose
  backward runs two (dgrad: ``trans_b`` flipped; wgrad: ``trans_a`` on the saved input and the gradient);
- the backend ``gmm`` refuses ``batch_sizes`` that are not a host int64 tensor (the C++ ``TORCH_CHECK``), reads
  each expert's M (or K for the wgrad) from it, and runs one GEMM per expert (``hipblasGemmEx``), between one
  event record + 4 stream waits before the loop and 4 records + 4 waits after it; nothing synchronises.

The stand-in computes the real products (``torch.mm`` per expert), so the layer's output and gradients are
checked against a plain per-expert reference.  Per expert count it prints, as JSON: ``gmm`` calls, BLAS GEMMs,
event operations and host syncs of the forward and of the backward, and whether the results matched.
"""

from __future__ import annotations

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from primus_launch.frameworks import mcore_cpu  # noqa: E402

COUNTS: dict[str, dict[str, int]] = {}
PHASE = ["fwd"]
BLAS_STREAMS = 4   # NUM_STREAM of csrc/grouped_gemm.cu


def _count(key: str, n: int = 1) -> None:
    d = COUNTS.setdefault(PHASE[0], {})
    d[key] = d.get(key, 0) + n


def _backend_gmm(a: torch.Tensor, b: torch.Tensor, batch_sizes: torch.Tensor, trans_a: bool = False,
                 trans_b: bool = False) -> torch.Tensor:
    """One backend call: the per-expert BLAS loop (module doc)."""
    if batch_sizes.device.type != "cpu" or batch_sizes.dtype != torch.int64:
        raise RuntimeError("batch_sizes must be a host int64 tensor")
    _count("gmm")
    _count("event_ops", 1 + BLAS_STREAMS)   # record on the current stream, the BLAS streams wait on it
    sizes = [int(x) for x in batch_sizes]   # host memory: no device read
    outs, off = [], 0
    for i, m in enumerate(sizes):
        _count("blas_gemm")
        if trans_a:   # wgrad: [m, k]^T x [m, n] -> [k, n] per expert (variable K)
            outs.append(a[off:off + m].t() @ b[off:off + m])
        else:
            w = b[i].t() if trans_b else b[i]
            outs.append(a[off:off + m] @ w)
        off += m
    _count("event_ops", 2 * BLAS_STREAMS)   # each BLAS stream records, the current stream waits on each
    return torch.stack(outs) if trans_a else torch.cat(outs)


class _GroupedGemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, batch_sizes, trans_b):
        ctx.save_for_backward(a, b, batch_sizes)
        ctx.trans_b = trans_b
        return _backend_gmm(a, b, batch_sizes, trans_b=trans_b)

    @staticmethod
    def backward(ctx, grad):
        a, b, batch_sizes = ctx.saved_tensors
        agrad = _backend_gmm(grad, b, batch_sizes, trans_b=not ctx.trans_b)
        lhs, rhs = (grad, a) if ctx.trans_b else (a, grad)
        bgrad = _backend_gmm(lhs, rhs, batch_sizes, trans_a=True)
        return agrad, bgrad, None, None


class _Ops:
    @staticmethod
    def gmm(a, b, batch_sizes, trans_b=False):
        return _GroupedGemm.apply(a, b, batch_sizes, trans_b)


def _wrap_syncs() -> None:
    """Count the host-blocking waits: the CPU shim's event / stream synchronize and torch.cuda.synchronize."""
    def counted(f):
        def g(*a, **k):
            _count("syncs")
            return f(*a, **k)
        g.__wrapped__ = f
        return g
    for cls in (mcore_cpu._CpuEvent, mcore_cpu._CpuStream):
        cls.synchronize = counted(cls.synchronize)
    torch.cuda.synchronize = counted(torch.cuda.synchronize)


def _unwrap_syncs() -> None:
    for cls in (mcore_cpu._CpuEvent, mcore_cpu._CpuStream):
        cls.synchronize = cls.synchronize.__wrapped__
    torch.cuda.synchronize = torch.cuda.synchronize.__wrapped__


def trace(local_experts: int) -> dict:
    mcore_cpu.install()
    from megatron.core import parallel_state as ps
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.moe import experts as ex
    from megatron.core.transformer.moe import grouped_gemm_util as gg
    from megatron.core.transformer.transformer_config import TransformerConfig

    if dist.is_initialized():
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    ps.initialize_model_parallel(1, 1, create_gloo_process_groups=False)
    mcore_cpu.seed_rng_tracker(1234)
    gg.grouped_gemm = object()   # "installed": megatron only checks it is not None
    gg.ops = _Ops
    ex.gg = gg
    h, f = 32, 48
    conf = TransformerConfig(num_layers=1, hidden_size=h, ffn_hidden_size=2 * h, num_attention_heads=4,
                             num_moe_experts=local_experts, moe_ffn_hidden_size=f, moe_grouped_gemm=True,
                             moe_use_legacy_grouped_gemm=True, gated_linear_unit=True,
                             activation_func=torch.nn.functional.silu, params_dtype=torch.bfloat16, bf16=True,
                             add_bias_linear=False, hidden_dropout=0.0, attention_dropout=0.0,
                             **mcore_cpu.config_overrides())
    mlp = ex.GroupedMLP(local_experts, conf, pg_collection=ProcessGroupCollection.use_mpu_process_groups())
    mlp = mlp.to(torch.bfloat16)
    sizes = torch.tensor([3 + 2 * i for i in range(local_experts)], dtype=torch.int64)   # the dispatcher's host counts
    x = torch.randn(int(sizes.sum()), h, dtype=torch.bfloat16, requires_grad=True)
    probs = torch.rand(int(sizes.sum()), dtype=torch.float32)
    COUNTS.clear()
    PHASE[0] = "fwd"
    _wrap_syncs()
    try:
        out, _ = mlp(x, sizes, probs)
        PHASE[0] = "bwd"
        g = torch.randn_like(out)
        out.backward(g)
    finally:
        _unwrap_syncs()
    # reference: the same experts as plain per-expert matmuls
    w1 = mlp.weight1.detach().view(local_experts, h, -1).float()
    w2 = mlp.weight2.detach().view(local_experts, -1, h).float()
    xr = x.detach().float().requires_grad_(True)
    outs, off = [], 0
    for i, m in enumerate(sizes.tolist()):
        a, b = (xr[off:off + m] @ w1[i]).chunk(2, dim=-1)
        outs.append((torch.nn.functional.silu(a) * b * probs[off:off + m, None]) @ w2[i])
        off += m
    ref = torch.cat(outs)
    ref.backward(g.float())
    ok = bool(torch.allclose(out.float(), ref, rtol=0.05, atol=0.05)
              and torch.allclose(x.grad.float(), xr.grad, rtol=0.05, atol=0.05))
    res = {p: dict(COUNTS.get(p, {})) for p in ("fwd", "bwd")}
    res["matches_reference"] = ok
    res["local_experts"] = local_experts
    return res


if __name__ == "__main__":
    print(json.dumps([trace(int(e)) for e in json.loads(sys.argv[1])]))
