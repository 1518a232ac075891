"""TorchTitan v0.2's MoE routing glue as the eager ATen kernels it launches: bytes and launches per layer pass.

Which code runs eager (torchtitan at the v0.2 TOML era; the rows' version, between PR #1895 of 2025-10-29 and
PR #2741 of 2026-04-14; read at v0.2.1 and at b3da1a2d8, the commit that published the Llama 4 Scout MXFP8
table):

- ``models/llama4/infra/parallelize.py`` (the same in ``deepseek_v3`` / ``qwen3``) ``apply_compile``: an MoE
  block is compiled submodule by submodule ("If it is a MoE layer, FSDP(GroupedExperts) will cause a graph
  break ... wrapping each submod's forward"): ``attention``, the norms, ``moe.router``, ``moe.reorderer`` and
  ``moe.shared_experts`` each get ``torch.compile(fullgraph=True)``; ``moe.experts`` is skipped ("We don't
  compile token dispatch and token combine due to an issue on B200", torchtitan#1940), and only the module-level
  ``_run_experts_grouped_mm`` (the three ``torch._grouped_mm`` and ``silu(.) * .``) is compiled on its own.
  ``MoE.forward`` itself and the expert-parallel hooks run eager.  torchtitan 0.3 compiles the whole block
  (``distributed/compile.py``: ``transformer_block.compile(fullgraph=True)``), so this module is for
  ``Training.moe_glue_eager`` (set by the v0.1/v0.2 job readers under ``compile.enable``) and for TorchTitan
  without compile.
- The eager ops, per element of the routed tokens ``R = T_e k`` rows x ``h`` (bf16, 2 B) or per element of
  the layer's own tokens ``T_e`` rows x ``h`` (``/k`` below), from ``models/moe/moe.py`` ``MoE.forward``,
  ``models/moe/utils.py`` ``_permute`` / ``_unpermute`` and ``distributed/expert_parallel.py``
  ``ExpertParallel._token_dispatch`` / ``_token_combine`` (the same two helpers run in
  ``indices_padding_wrapper`` without EP):

  ======================================  ====================================  =====================================
  op (forward)                            bytes forward                         autograd backward
  ======================================  ====================================  =====================================
  ``x[token_indices // top_k]``           gather: read 2/k + write 2 = 2 +     ``index_put(zeros, idx, g,
                                          2/k; 2 launches (floor-divide,        accumulate=True)``: zeros 2/k, read
                                          index)                                self 2/k + g 2, write 2/k = 2 + 6/k;
                                                                                2 launches
  ``score_before_experts``: ``.to(fp32)   6 + 8 + 6 = 20; 3 launches            ``.to`` back 6, ``g * scores`` 8,
  * scores .to(bf16)`` (Llama 4)                                                ``(g * x).sum(-1)`` 12 + 4, ``.to``
                                                                                6 = 36; 5 launches
  ``_permute``: ``vstack((x, zeros))``,   cat 4 + padded gather 4 = 8;          index backward (zeros + accumulate)
  ``x[permuted_indices, :]`` (+ the       4 launches (new_zeros, cat,           8, cat backward a view; 2 launches
  Triton ``generate_permute_indices``)    Triton kernel, index)
  ``_unpermute``: ``new_empty``,          scatter 4; 1 launch                   ``slice_backward`` of ``[:-1]`` (zeros
  ``out[permuted_indices, :] = o``,                                             + copy) 4, gather 4 = 8; 2 launches
  ``[:-1]``
  unsort: ``torch.zeros``, ``[idx] = o``  2 + 4 = 6; 2 launches                 gather 4; 1 launch
  combine, ``score_before_experts``:      read 2 + write 2/k; 1 launch          the expanded grad reshaped: write 2
  ``.sum(dim=1)``                                                               + read 2/k (k = 1: a view, none)
  combine otherwise (DeepSeek-V3,         ``.float()`` 6, bmm read 4 +          ``.to`` back 6/k, bmm grads 4 + 4/k
  Qwen3): ``bmm(scores, o.float())        write 4/k, ``.to`` 6/k: 10 + 10/k;    and 4 + 4/k, ``.float()`` back 6:
  .to(bf16)``                             3 launches                            14 + 14/k; 4 launches
  ``out + out_experts``                   6/k; 1 launch                         the gradient passes (no kernel)
  ======================================  ====================================  =====================================

  Llama 4 (``score_before_experts=True``, k = 1): 52 B forward, 64 B backward per routed element, 14 / 12
  launches; DeepSeek-V3 / Qwen3 (``False``, k = 8): 30 + 18/k B forward and 36 + 20/k B backward.  Checked
  against torchtitan v0.2.1's own ``MoE`` traced on the CPU under a dispatch mode
  (``tests/test_titan_moe_glue.py``).  A compiled
  block (torchtitan 0.3) fuses the casts and the score multiply into the gathers: the generic
  ``cost/roofline.py`` permute / unpermute rows price it (``perm_x`` index kernels).
- The all-to-alls and the host-device sync of ``_token_dispatch`` (``.to("cpu", non_blocking=False)`` of the
  split sizes) are priced elsewhere (``cost/moe_dispatch.py``, ``host_sync.launch_bound_seconds``).

Byte counts are the operands' sizes of each ATen kernel (read every input once, write every output once), as
the rest of the roofline counts element-wise kernels; index kernels move their rows at streaming speed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GlueOp:
    """One eager op group of the MoE glue: bytes per routed element (``per_routed``) and per token element
    (``per_token``, i.e. divided by top-k when expressed per routed element), forward and backward, and the
    kernels each pass launches."""

    name: str
    fwd_routed: float
    fwd_token: float
    bwd_routed: float
    bwd_token: float
    kernels: tuple[int, int]
    stage: str   # "pre" (MoE.forward before the dispatch) | "permute" (after the all-to-all) | "combine"


def glue_ops(score_before_experts: bool, top_k: int = 1) -> tuple[GlueOp, ...]:
    """The eager ops of one TorchTitan v0.2 MoE layer around its experts (module doc table), in launch order."""
    ops = [GlueOp("routing gather x[token_indices // top_k]", 2.0, 2.0, 2.0, 6.0, (2, 2), "pre")]
    if score_before_experts:
        ops.append(GlueOp("score before experts (fp32 cast, x scores, bf16 cast)", 20.0, 0.0, 36.0, 0.0, (3, 5), "pre"))
    ops.append(GlueOp("_permute (vstack + padded gather, Triton permute indices)", 8.0, 0.0, 8.0, 0.0, (4, 2),
                      "permute"))
    ops.append(GlueOp("_unpermute (scatter into new_empty)", 4.0, 0.0, 8.0, 0.0, (1, 2), "combine"))
    ops.append(GlueOp("unsort (zeros + scatter)", 6.0, 0.0, 4.0, 0.0, (2, 1), "combine"))
    if score_before_experts:
        kb = 2.0 if top_k > 1 else 0.0   # the expanded gradient reshaped: a copy unless k = 1 (a view)
        ops.append(GlueOp("combine sum over top-k", 2.0, 2.0, kb, kb, (1, 1 if top_k > 1 else 0), "combine"))
    else:
        ops.append(GlueOp("combine bmm(scores, out.float()) -> bf16", 10.0, 10.0, 14.0, 14.0, (3, 4), "combine"))
    ops.append(GlueOp("out + out_experts (shared + routed)", 0.0, 6.0, 0.0, 0.0, (1, 0), "combine"))
    return tuple(ops)


def deepep_glue_ops(score_before_experts: bool, received_per_token: float) -> tuple[GlueOp, ...]:
    """The eager ops of one TorchTitan DeepEP MoE layer around its experts, in launch order, as :class:`GlueOp` rows
    (``fwd_token`` / ``bwd_token`` per element of the layer's own ``T`` tokens: the received tokens' terms times
    ``received_per_token`` = ``R_recv / T``, the distinct EP ranks a token goes to).

    pytorch/torchtitan 36a4b6942 (PR #2107): ``models/moe/moe_deepep.py`` ``DeepEPMoE.forward`` has no reorderer,
    no routing gather, no unsort and no top-k combine (the token goes to DeepEP once per destination rank, the
    combine kernel sums the copies); ``distributed/deepep/deepep.py`` ``dispatch_tokens`` after the dispatch:
    ``_permute_tokens`` (``tokens.index_select(0, sorted_indices)``: the ``R_recv`` received rows into ``T k``
    expert-sorted rows), the score multiply (``hidden * scores.to(bf16)``, in ``dispatch_tokens`` with
    ``score_before_experts``, else in ``combine_tokens``), ``_unpermute_tokens`` (``zeros(R_recv, h)`` +
    ``scatter_add_``), then ``out + routed_output``.  Bytes per element (2 B bf16; the routing-map / index
    tensors are below a row's width and not counted), with ``a`` per routed element (``T k h``) and ``b`` per
    received-token element (``R_recv h``):

    ==========================  =====================  ==============================================
    op                          forward                backward (autograd of the same file)
    ==========================  =====================  ==============================================
    ``index_select``            a 2 + b 2              ``new_zeros`` b 2 + ``index_add`` a 2 + b 4
    score multiply              a 4                    ``g * s`` a 4, ``g * x`` a 6, ``.sum`` a 2
    zeros + ``scatter_add_``    a 2 + b 4              ``gather`` a 2 + b 2
    ``out + routed_output``     6 per token element    (the gradient passes)
    ==========================  =====================  ==============================================

    Checked against the file run on the CPU around a one-rank stand-in of DeepEP's ``Buffer``
    (``tests/titan_deepep_glue_trace.py``, ``tests/test_titan_pr2107_ep.py``)."""
    r = float(received_per_token)
    score = GlueOp("score multiply (hidden x scores)", 4.0, 0.0, 12.0, 0.0, (2, 3),
                   "permute" if score_before_experts else "combine")
    ops = [GlueOp("_permute_tokens (index_select of the received tokens)", 2.0, 2.0 * r, 2.0, 6.0 * r, (1, 2),
                  "permute")]
    ops.append(score)   # its stage says where it runs
    ops.append(GlueOp("_unpermute_tokens (zeros + scatter_add_)", 2.0, 4.0 * r, 2.0, 2.0 * r, (2, 1), "combine"))
    ops.append(GlueOp("out + routed_output (shared + routed)", 0.0, 6.0, 0.0, 0.0, (1, 0), "combine"))
    return tuple(ops)


def glue_bytes(score_before_experts: bool, routed: float, tokens: float, h: int) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the whole eager glue of one layer: ``routed`` rows (T_e k) and
    ``tokens`` rows (T_e) of width ``h``."""
    ops = glue_ops(score_before_experts, max(1, round(routed / tokens)) if tokens else 1)
    f = sum(o.fwd_routed * routed + o.fwd_token * tokens for o in ops) * h
    b = sum(o.bwd_routed * routed + o.bwd_token * tokens for o in ops) * h
    return f, b


# ----------------------------------------------------------------------------- torchao MXFP8 grouped GEMM
# torchao's MXFP8 grouped GEMM (prototype/moe_training/scaled_grouped_mm.py ``_MXFP8GroupedMM.backward``, the same
# from 2025-09 #2977 to torchao HEAD 36027d82) converts the weight-gradient GEMM's two scale tensors (grad_out^T and
# A^T, scales along the tokens) to the per-group blocked layout with ``triton_mx_block_rearrange_2d_K_groups``
# (kernels/mxfp8/quant.py, unchanged since #2956 of 2025-09-11): one Triton program per (group, 128-row block) that
# walks its group's scale columns in a serial ``while`` loop, 4 columns = 128 tokens per iteration.  Its time is
# therefore the loop's length, not its bytes: ``ceil(tokens per group / 128)`` iterations while the programs fit in
# one wave (the records' 8 x 16 and 8 x 56 programs on 148 SMs).  The per-iteration time is torchao's own kernel
# breakdown (records ``ao-b200-moe-wgrad-triton_mx_block_rearrange_2d_K_groups-(2048,4096)`` 199.8 us and
# ``-(7168,4096)`` 207.9 us: 16384 tokens per group, 128 iterations, B200): their mean over 128.
K_GROUPS_REARRANGE_ITER_S = (199.8e-6 + 207.9e-6) / 2 / 128
TOKENS_PER_ITER = 128
K_GROUPS_PER_GEMM = 2   # grad_out^T and A^T scales, per grouped GEMM's backward


def k_groups_rearrange_seconds(tokens_per_group: int, gemms: int = 1) -> float:
    """Seconds of torchao's K-groups scale rearranges in the backward of ``gemms`` MXFP8 grouped GEMMs whose
    groups hold ``tokens_per_group`` tokens (the busiest group's when they differ): ``gemms x 2 x
    ceil(tokens / 128) x K_GROUPS_REARRANGE_ITER_S`` (section doc)."""
    it = -(-max(1, int(tokens_per_group)) // TOKENS_PER_ITER)
    return gemms * K_GROUPS_PER_GEMM * it * K_GROUPS_REARRANGE_ITER_S
