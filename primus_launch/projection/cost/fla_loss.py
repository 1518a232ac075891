"""Time of FLA's fused linear cross-entropy (``training.loss_impl`` fla_linear): the output GEMM, the loss and
both gradients, all in the forward.

flash-linear-attention @bc3b101 ``fla/modules/fused_linear_cross_entropy.py`` ``fused_linear_cross_entropy_forward``
(l. 277-410), on ``n`` tokens (the SP shard Primus passes: ``mamba_fused_ce_patches.py`` l. 99-102 bypasses the
output layer and its gather), vocabulary shard ``V``, hidden ``h``, in ``NC`` chunks of ``C`` rows
(:func:`~primus_launch.projection.memory.activations.fla_linear_chunk`):

- per chunk: ``F.linear`` logits GEMM ``[C, V, h]`` bf16; FLA's ``logsumexp_fwd`` (reads the logits, ``a`` B per
  logit) and ``cross_entropy_kernel`` (reads them, writes their gradient in place: ``2 a``); ``torch.mm(c_logits,
  weight)`` -- the input gradient ``[C, h, V]`` bf16 -- copied into ``dx`` (``4 C h`` B); the weight gradient
  ``torch.addmm(dw, c_logits.t().to(fp32), c_x.to(fp32))``: an fp32 GEMM ``[V, h, C]`` (priced at the GPU's fp32
  rate, :func:`~primus_launch.projection.cost.compute.gemm_time` ``precision="fp32"``) after two casts
  (``(a + 4) C V`` and ``(a + 4) C h`` B); 9 kernels (linear, logsumexp kernel + its reduction, CE kernel,
  2 casts, mm, copy, addmm);
- once: ``zeros_like`` of ``dx`` (``a n h``) and of the fp32 ``dw`` (``4 V h``), ``dw.to(weight)`` (``(4 + a) V h``),
  the ignored-token count and the loss sum (6 kernels);
- backward (l. 413-455): ``dx`` and ``dw`` scaled in place by the incoming gradient (``2 a (n h + V h)`` B,
  3 kernels: Megatron's loss is masked and averaged after FLA, so the gradient is not 1.0); the weight
  gradient reaches ``main_grad`` through autograd's ``.grad`` (Megatron's ``param.main_grad.add_(param.grad)``:
  ``(a + 4 + 4) V h`` B).

FLOPs: ``6 n V h`` as Megatron's output layer (forward logits, input and weight gradients): the same model
FLOPs, moved into the forward, the third in fp32.  Not priced: the two host synchronisations (``.item()`` of the
token count, l. 325; the ``torch.ne(do, 1.0)`` test, l. 421), which stall the host's run-ahead.
"""

from __future__ import annotations

from primus_launch.projection.cost.compute import elementwise_time, gemm_time
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.memory.activations import fla_linear_chunk

#: forward kernels per chunk and per call, backward kernels per call (module doc)
KERNELS_PER_CHUNK, KERNELS_ONCE, KERNELS_BWD = 9, 6, 3


def fla_linear_head(acc: LayerOps, n: int, v: int, h: int, chunks: int, gpu: str, a: float = 2.0) -> None:
    """Add FLA's fused linear cross-entropy on ``n`` tokens, vocabulary shard ``v``, hidden ``h`` and
    ``chunks`` asked to ``acc`` (module doc for the formula)."""
    c, nc = fla_linear_chunk(n, h, v, chunks)
    last = n - (nc - 1) * c
    sizes = [c] * (nc - 1) + [last]
    logits = sum(gemm_time(r, v, h, gpu, "bf16") for r in sizes)
    dx = sum(gemm_time(r, h, v, gpu, "bf16") for r in sizes)
    dw = sum(gemm_time(v, h, r, gpu, "fp32") for r in sizes)
    for name, t, flops in (("logits", logits, 2.0 * n * v * h), ("input gradient", dx, 2.0 * n * h * v),
                           ("weight gradient (fp32)", dw, 2.0 * v * h * n)):
        acc.add(t, 0.0, 0.0, "gemm")
        acc.count(nc, 0)
        acc.record(f"FLA fused linear CE: {name} x{nc} chunks [{c}x{v}x{h}]", t * acc.slow, 0.0, 0.0,
                   ("gemm", "bf16" if "fp32" not in name else "fp32", flops))
    cast = 4.0 + a
    nbytes = n * v * (3 * a + cast) + n * h * (cast + 4.0) + a * n * h + v * h * (4.0 + cast)
    f = sum(elementwise_time(r * v * (3 * a + cast) + r * h * (cast + 4.0), gpu) for r in sizes) \
        + elementwise_time(a * n * h, gpu) + elementwise_time(4.0 * v * h, gpu) + elementwise_time(cast * v * h, gpu)
    bi = elementwise_time(2 * a * n * h, gpu) + elementwise_time(2 * a * v * h, gpu)
    bw = elementwise_time((a + 8.0) * v * h, gpu)
    acc.add(f, bi, bw, "non_matmul")
    acc.count((KERNELS_PER_CHUNK - 3) * nc + KERNELS_ONCE, KERNELS_BWD)
    acc.record("FLA fused linear CE: loss, casts, gradient scaling", f * acc.slow, bi * acc.slow, bw * acc.slow,
               ("elementwise", "hbm", 0.0, nbytes))
