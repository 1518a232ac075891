"""Static-shape MoE memory of megatron-core main / dev, and what a full-iteration CUDA graph adds.

Read from Megatron-LM ``main`` @d98e8a64dd (2026-08-22; the paged stash landed in f007db77b9, 2026-05-22)
and torch 2.13 ``torch/cuda/graphs.py``.

- **Capacity** (``--moe-expert-rank-capacity-factor c``; ``transformer/moe/token_dispatcher.py``
  ``_HybridEPManager.setup_metadata``): each EP rank's permuted-token buffer is sized
  ``budget = int(n k c)`` rounded up to the quantization alignment (:func:`capacity_tokens`), ``n`` the
  rank's tokens and ``k`` the top-k, whatever the routing did: the dispatch output, the fused grouped
  MLP's tensors (``moe/experts.py`` ``_fused_forward``: ``max_num_tokens`` = that budget) and their
  gradients are ``c`` times the balanced routed count the dropless model counts.
- **Paged stash** (``--moe-paged-stash``, ``transformer/moe/paged_stash.py``): inside the fused grouped
  MLP a saved-tensor hook copies the experts' saved tensors into one CUDA buffer per (dtype, hidden) of
  ``ceil(int(|f| T) / page) * page`` tokens (``allocate_stash_buffers``, ``PagedStashBuffer``;
  :func:`stash_buffer_tokens`), ``T`` the largest sum of stashed *average* tokens in flight over the
  schedule that the first warm-up step tracked (``avg_num_tokens = max_num_tokens // c``: the balanced
  count), ``f`` = ``--moe-paged-stash-buffer-size-factor-cuda`` (default 1.10; negative: over the actual
  counts, equal under balanced routing).  The buffer is allocated once, at the second warm-up step, and
  kept.  The padded originals are freed once copied (``wait_for_stash_to_complete``) and a layer's
  tensors come back at the padded shape (``reload_paged_tensors``: ``torch.empty(original_shape)``)
  before its backward.  Against the dropless eager step keeping ``E`` bytes of experts' saved tensors
  in flight at its peak (balanced), ``e`` of them one layer's: ``kept = (|f| - 1) E`` and
  ``transient = c e`` (the layer being stashed or reloaded, beside its pages); a factor under 1 spills
  the rest to pinned host memory (``--moe-paged-stash-buffer-size-factor-cpu``, host memory, not counted)
  or overflows and reruns the step dropless without the stash (``PagedStashRunner``).  Capacity without
  the stash: the saved tensors keep the padded shape, ``kept = (c - 1) E``.  :func:`static_moe_extra`.
  The stash hooks only the fused grouped MLP (``--use-transformer-engine-op-fuser``, which the capacity
  factor requires with HybridEP); recompute of ``moe`` / ``moe_act`` removes what it recomputes from
  ``E`` (:mod:`memory.mcore`); layers under full recompute are counted as stashing nothing.
- **Full-iteration CUDA graph** (``full_cuda_graph.py`` ``FullCudaGraphWrapper``): forward-backward of
  all micro-batches is captured into one private pool after ``cuda_graph_warmup_steps`` eager steps.
  ``torch.cuda.graph.__enter__`` calls ``torch.cuda.empty_cache()``, so the warm-up's cached blocks go
  back to the device before capture: the pool holds what the captured step holds, not a second copy of
  the activations.  The graph also keeps every micro-batch's input data: ``FullCudaGraphWrapper.data_read``
  hands each micro-batch's batch dict, as the dataloader yields it, to ``StaticBufferLoader``, whose
  ``copy_tensors_in_struct`` clones *every* tensor in it to the GPU, one static copy per micro-batch of the
  step, kept for the graph's life.  megatron-core's ``GPTDataset.__getitem__`` (``datasets/gpt_dataset.py``,
  0.16.1 and main) yields tokens and labels (int64), the loss mask (fp32), position ids (int64) -- 28 bytes
  per token -- and, with ``GPTDatasetConfig.create_attention_mask`` (default True; Megatron-LM
  ``--no-create-attention-mask-in-dataloader`` clears it, Megatron-Bridge keeps the default and only skips
  moving it in ``get_batch``), the ``[1, s, s]`` bool causal mask of ``_get_ltor_masks_and_position_ids``:
  :func:`static_batch_bytes` = ``mbs (28 s + s^2)`` per micro-batch, the whole sequence (context-parallel
  slicing happens after the copy, in ``get_batch``), times the step's micro-batches (counted in
  :mod:`memory.mcore`).  At ``s`` = 4096 that is 16 MiB of mask per sample: the step's ``GBS / DP``
  samples, not the micro-batch size, set it.  Train, eval and optimizer graphs share the one pool
  (``cuda_graph_use_single_mempool``, default True).  The pool stays reserved while the eager optimizer
  step runs after the replay, so the step's fp32 gradient copies (``mcore.optimizer_step_grad_bytes``)
  come on top of it.  PyTorch's
  caching allocator does not use expandable segments inside a graph's private pool
  (``c10/cuda/CUDACachingAllocator.cpp`` ``alloc_block``: "our checkpointing logic for private pools
  doesn't support the expandable_segments_ structure yet"), so ``expandable_segments:True`` does not
  apply to the captured step.  **Not modelled** (reported by :func:`full_graph_note`): inside a capture the
  caching allocator neither reuses a block freed while another stream's use of it is pending
  (``record_stream``: deferred to the capture's end, or, with ``graph_capture_record_stream_reuse``, until
  every using stream's free marker precedes the allocating stream's terminal nodes,
  ``free_safe_blocks_in_capture``) nor hands one stream's freed blocks to another, so side-stream work
  inside the graph (the EP-overlap communication
  stream, the stash's pack stream, NCCL under ``TORCH_NCCL_AVOID_RECORD_STREAMS=0``) can hold more than
  the eager step; how much depends on the allocator settings and environment, which the plan does not
  carry.
"""

from __future__ import annotations

import math

__all__ = ["capacity_tokens", "full_graph_note", "stash_buffer_tokens", "static_batch_bytes", "static_moe_extra"]


def capacity_tokens(tokens: int, topk: int, factor: float, align: int = 0) -> int:
    """Permuted tokens one EP rank's HybridEP buffers hold under ``--moe-expert-rank-capacity-factor``
    (``_HybridEPManager.setup_metadata``): ``int(tokens * topk * factor)`` rounded up to ``align``
    (the quantization alignment; 0 = none)."""
    budget = int(tokens * topk * factor)
    if align > 0:
        budget += -budget % align
    return budget


def stash_buffer_tokens(inflight_tokens: float, factor: float, page: int = 64) -> int:
    """Tokens of one paged stash CUDA buffer (``allocate_stash_buffers`` then ``PagedStashBuffer``):
    ``int(inflight_tokens * |factor|)`` rounded up to whole pages of ``page`` tokens."""
    n = int(inflight_tokens * abs(factor))
    return math.ceil(n / page) * page


def static_moe_extra(experts_inflight: float, experts_layer: float, capacity: float | None, paged: bool,
                     stash_factor: float = 1.10) -> tuple[float, float]:
    """(kept, transient) bytes the static-shape MoE path adds to the dropless eager model (module doc):
    ``experts_inflight`` = the experts' saved tensors in flight at the rank's peak (balanced routing),
    ``experts_layer`` = one layer's.  Paged stash: ``((|f| - 1) E, c e)``; capacity alone:
    ``((c - 1) E, 0)``; no capacity factor: nothing."""
    if capacity is None:
        return 0.0, 0.0
    if paged:
        return (abs(stash_factor) - 1.0) * experts_inflight, capacity * experts_layer
    return (capacity - 1.0) * experts_inflight, 0.0


def static_batch_bytes(seq: int, mbs: int, attention_mask: bool = True) -> float:
    """Bytes of one micro-batch's input data that a full-iteration graph's ``StaticBufferLoader`` keeps on
    the GPU (module doc): tokens, labels, position ids (int64) and loss mask (fp32) of ``mbs`` samples of
    ``seq`` tokens, plus each sample's ``[1, seq, seq]`` bool causal mask when the dataloader creates it."""
    return float(mbs) * (28.0 * seq + (float(seq) * seq if attention_mask else 0.0))


def full_graph_note(ep_overlap: bool, paged: bool) -> str:
    """The explanation line of a full-iteration CUDA graph (what is and is not counted, module doc)."""
    side = [s for s, on in (("the EP-overlap communication stream", ep_overlap),
                            ("the paged stash's pack stream", paged)) if on]
    return ("CUDA graph (full_iteration): the captured step's pool counted as the eager step (torch.cuda.graph "
            "empties the warm-up's cache before capture) plus every micro-batch's static input data (with the "
            "dataloader's s x s attention masks unless --no-create-attention-mask-in-dataloader), and the optimizer "
            "step's fp32 gradient copies beside the pool it keeps; not modelled: the pool's fragmentation (its "
            "segments are not expandable) and blocks the caching allocator cannot reuse inside a capture (freed "
            "with another stream's use pending"
            + (": " + ", ".join(side) if side else "") + "; allocator settings and environment are not in the plan)")
