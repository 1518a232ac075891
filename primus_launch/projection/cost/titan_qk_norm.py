"""Qwen3's q / k norm under TorchTitan tensor parallelism before PR #1870: two extra forward all-gathers.

torchtitan's Qwen3 TP plan (``torchtitan/experiments/qwen3/infra/parallelize.py`` from f9e8897a6, 2025-08-18, to
``torchtitan/models/qwen3/infra/parallelize.py`` at 8c1d1c5fc^, e.g. at d66b72a6a lines 245-249) wraps
``attention.q_norm`` / ``attention.k_norm`` in ``NoParallel(use_local_output=False)`` after ``wq`` / ``wk`` are
``ColwiseParallel(use_local_output=False)``: the norm's input is the head-sharded DTensor ``[b, s, n/t, d]``
(``Shard(2)``), the norm runs on it locally, and ``NoParallel._prepare_output_fn`` (``torchtitan/distributed/
__init__.py`` at d66b72a6a) redistributes its output to ``Replicate()`` -- an all-gather of the whole q
(``T nq d`` elements, bf16) and of the whole k (``T nkv d``).  The replicated q and k then meet the still
head-sharded v in SDPA (``aten._scaled_dot_product_flash_attention`` on an H100), whose DTensor strategy (torch
``distributed/tensor/_ops/_matrix_ops.py``: all-replicate or all ``Shard(1)`` on heads) takes the heads-sharded
one -- a replicated input is sliced locally (``redistribute_cost`` 0) where v would have to be gathered --, so
attention stays 1/t, and the dispatcher's slicing is no autograd node: the gradients come back head-sharded, and
the backward adds no collective.  Per layer and micro-batch forward pass (the full-AC recompute is one more):

    forward  all-gather  2 T nq d  and  2 T nkv d  bytes (gathered sizes);  backward: none

with ``T = mbs s / cp`` (the attention sees the whole sequence after the sequence-parallel all-gather).  The
traced truth is ``tests/test_titan_qk_norm.py`` (the plan's styles, torchtitan's own ``NoParallel``, on a tiny attention
block on a fake world of 2 and 4 ranks under ``FakeTensorMode``, every c10d call with its size; torch 2.13's DTensor,
the runs' was a 2025-09 nightly).  They are plain DTensor redistributes between the QKV GEMMs and the attention
(``async_op=True`` but waited by the next op), so they stay exposed, as Megatron's QKV sub-sharding gather does
(``cost/tp_comm.py``).  PR #1870 (8c1d1c5fc, 2025-10-14, issue #1867 "Qwen3 model parallel including
unnecessary all_gather") replaced both with ``SequenceParallel(sequence_dim=2)``: no gather, and 0.3.0's
config sharding (``models/qwen3/sharding.py``: q / k norm in and out ``S(2)``) keeps that.

Which builds: every torchtitan build with Qwen3 before the fix carried version 0.1.0 (``assets/version.txt``
from b461ea82c, 2025-06-05, to 0.2.0's bump 29624e37f, 2025-10-17; 0.1.0 itself had no Qwen3), so the plan
says it with ``software.torchtitan`` < 0.2.0 (``plan/software.py``), except a nightly whose ``.devYYYYMMDD``
is on or after 20251014.  Unstated (None): the current stack, no gather.

The forward RoPE then runs on the replicated q / k -- every head, t x its bytes -- and its backward on the
rank's heads (the gradient arrives ``Shard(2)``; traced): ``Profile.qk_replicated`` (``cost/framework.py``),
priced in ``cost/attention_block.py``.  ``repeat_kv``'s copy of the replicated k (``T nq d``) is not priced
(no ``repeat_kv`` copy is, sharded or not).
"""

from __future__ import annotations

from packaging.version import Version

from primus_launch.plan import Plan, parse_torchtitan_version

FIXED_IN = Version("0.2.0")      # the first release with PR #1870
FIX_DATE = 20251014              # 8c1d1c5fc's date, for 0.x.y.devYYYYMMDD nightlies


def pre_fix(torchtitan: str | None) -> bool:
    """Whether a torchtitan version (``plan.software.torchtitan``) predates PR #1870 (module doc); None: no."""
    if torchtitan is None:
        return False
    v = parse_torchtitan_version(torchtitan)
    if v.dev is not None and v.dev >= FIX_DATE:
        return False
    return v < FIXED_IN if v.dev is None else Version(v.base_version) <= FIXED_IN


def qk_norm_gathers(plan: Plan) -> bool:
    """Whether ``plan``'s layers run the q / k norm all-gathers: TorchTitan, TP > 1, per-head q / k norms
    (Qwen3's ``qk_norm``, no MLA) and a pre-fix torchtitan (:func:`pre_fix`)."""
    m = plan.model
    return (plan.framework == "torchtitan" and plan.parallel.tp > 1 and m.qk_layernorm
            and not m.multi_latent_attention and pre_fix(plan.software.torchtitan))


def qk_norm_gather_bytes(plan: Plan, tokens: int) -> tuple[list[float], list[float]]:
    """Gathered bytes of each forward and each backward all-gather of one layer and micro-batch of ``tokens``
    (``mbs s / cp``) tokens (module doc: q and k forward, nothing backward); two empty lists where
    :func:`qk_norm_gathers` says no."""
    if not qk_norm_gathers(plan):
        return [], []
    m = plan.model
    return [2.0 * tokens * m.num_attention_heads * m.kv_channels, 2.0 * tokens * m.kv_heads * m.kv_channels], []
