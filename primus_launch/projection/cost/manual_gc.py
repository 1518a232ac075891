"""Megatron's manual garbage collection: one full Python ``gc.collect()`` every ``--manual-gc-interval`` iterations.

With ``--manual-gc`` Megatron-LM disables the automatic collector (``gc.disable()`` at the start of training) and,
after every ``--manual-gc-interval``-th iteration, runs a full collection on the host (Megatron-LM 24bad8e67
``megatron/training/training.py``: ``if args.manual_gc_interval != 0 and iteration % args.manual_gc_interval == 0:
gc.collect()``, after the step's logging; Megatron-Bridge 600d069b8 ``training/train.py`` ``maybe_run_manual_gc``, the
same test after ``training_log``).  ``gc.collect()`` without an argument is a generation-2 collection: a
stop-the-world traversal of every object the collector tracks, so its duration is the live heap's size, not the
garbage's.  No CUDA work is queued while it runs (the host is inside the collector between two iterations; the
step's loss / gradient-norm ``.item()`` reads have drained the GPU before it), so it adds to the iteration it
follows, averaged over the interval:

    t_gc = N_tracked x c_object x host_cpu_factor / manual_gc_interval      (per iteration)

- ``c_object`` = :data:`GC_S_PER_OBJECT` = 41.17 s / 74.8 M objects = 0.55 us: a single generation-2
  ``gc.collect()`` on a live x86 serving rank that traversed 74.8 M tracked objects and freed none
  (sgl-project/sglang PR #28067, 2026-06-12, 8x B300, DeepSeek-V3.1 class; record ``sglang28067-gc-gen2-traversal``).
- ``N_tracked`` = :data:`HEAP_TRACKED_OBJECTS`: the objects the collector tracks after importing what a Megatron
  training process imports at the least -- ``torch`` and megatron-core 0.16.1's GPT model, MoE layer, optimizer
  and DDP packages -- counted with ``len(gc.get_objects())`` after a full collection (``scripts/gc_heap_probe.py``;
  python 3.11.7, torch 2.13.0+cpu, megatron-core 0.16.1: 437,289).  A lower bound: Transformer Engine, Megatron-Bridge (which imports
  Hugging Face ``transformers`` for its ``AutoBridge`` providers), the data pipeline and the model's own modules add
  to it, so ``t_gc`` is a floor.
- ``host_cpu_factor``: ``framework.HOST_CPU_FACTOR`` of the GPU's host (a Grace host runs Python ~2.75x slower per
  call than the x86 hosts the constant comes from).

TorchTitan's ``GarbageCollection`` (``tools/utils.py``, 0.3.0) collects generation 1 only (young objects) every
``gc_freq`` steps: not a full traversal, not priced.  Megatron's CUDA-graph capture freezes the heap only while it
captures (``core/transformer/cuda_graphs.py``: ``gc.freeze()`` ... ``gc.unfreeze()``), so graphs leave the steady
collection as it is.  Without ``--manual-gc`` Python's own generation-2 collections run only when the long-lived
objects grow by 25 % (CPython ``gc`` thresholds), which a steady training loop does not do: not priced.
"""

from __future__ import annotations

from primus_launch.plan import Plan

# one generation-2 collection per tracked object (sgl-project/sglang PR #28067: 41.17 s for 74.8 M tracked objects)
GC_S_PER_OBJECT = 41.17 / 74.8e6
# tracked objects after importing torch + megatron-core 0.16.1's GPT / MoE / optimizer / DDP packages (a lower
# bound on a Megatron training process; scripts/gc_heap_probe.py counts them)
HEAP_TRACKED_OBJECTS = 437_289


def gc_pause_s(host_cpu_factor: float = 1.0, tracked_objects: int = HEAP_TRACKED_OBJECTS) -> float:
    """Seconds of one full ``gc.collect()`` over ``tracked_objects`` live objects (module doc)."""
    return tracked_objects * GC_S_PER_OBJECT * host_cpu_factor


def manual_gc_s(plan: Plan) -> float:
    """Seconds per iteration Megatron's manual garbage collection adds (module doc): one :func:`gc_pause_s` every
    ``training.manual_gc_interval`` iterations under ``training.manual_gc``; 0 outside Megatron, without manual
    GC or with interval 0 (no periodic collection)."""
    t = plan.training
    if plan.framework != "megatron" or not t.manual_gc or t.manual_gc_interval <= 0:
        return 0.0
    from primus_launch.projection.cost.framework import host_cpu_factor

    return gc_pause_s(host_cpu_factor(plan.cluster.gpu)) / t.manual_gc_interval
