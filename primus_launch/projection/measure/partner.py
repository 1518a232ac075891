"""The run's other rank beside the measurement, on a device whose ranks share one memory system.

The real 2-rank runs on the CPU put both ranks on one machine: while rank 0 runs a layer, rank 1
runs the same layer on the other core, and the two share the last-level cache and the DRAM
bandwidth.  The world-size-1 measurement runs alone.  Measured (RESULTS.md, block
MEASURE_GAP_PARTNER, ``scripts/measure_gap.py --modules --partner none,spin,stream``): with the MoE
piece as rank 0 of the run's EP layer (:mod:`.mirror_ranks`), EP=2's real layer forward reads
1.05 x its piece's alone, 1.01 x beside a process spinning on the other core and 0.87 x beside one
streaming DRAM, TP=2's 0.92 / 0.90 / 0.80 x: both ranks run as if alone (with the earlier MoE
piece, which routed differently from the run, EP=2 had read 1.17-1.18 x alone).  On GPUs each rank
has its own memory and nothing of this applies.

With ``TimingPolicy.partner`` (CPU only, plans with more than one rank per node), :func:`partnered`
runs a **mirror** of the measurement for its duration: a process bound to rank 1's core
(:func:`~.cpu_pin.pin_rank`) that builds the same pieces at world size 1 and runs their forward and
backward back to back, blocking where the run's collectives block (:mod:`.sync_points`), as the
run's other rank runs the same layers at the same time.  Off by default: the measured path is for
GPUs, where it does not apply; ``scripts/validate_measure.py`` compares the CPU runs with and
without it (``PRIMUS_LAUNCH_MEASURE_POLICY=partner=1``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from typing import Iterator

import torch

from primus_launch.plan import Plan

#: seconds the mirror may take to build its pieces before :func:`partnered` gives up (and raises)
READY_TIMEOUT_S = 300.0


def _mirror(plan_json: str, measure_layers: int, clock: str, ready, stop) -> None:
    """The mirror process: rank 1's core, one torch thread, freed memory kept; the plan's pieces
    at world size 1, forward + backward in turn until ``stop`` is set (``ready`` once looping)."""
    from primus_launch.projection.measure.cpu_alloc import keep_freed_memory
    from primus_launch.projection.measure.cpu_pin import pin_rank
    from primus_launch.projection.measure.sync_points import blocking_collectives
    from primus_launch.projection.measure.upscale import _builder

    pin_rank(1)
    torch.set_num_threads(1)
    keep_freed_memory()
    plan = Plan.model_validate_json(plan_json)
    b = _builder(plan.framework)
    with b.world_size_one("cpu"):
        pieces, model = b.pieces(plan, "cpu", measure_layers)
        with blocking_collectives(plan, "cpu", model, clock):
            while not stop.is_set():
                for pc in pieces:
                    out = pc.forward(*pc.inputs)
                    out = out if isinstance(out, torch.Tensor) else out[0]
                    torch.autograd.backward(out, torch.ones_like(out))
                    for t in list(pc.inputs) + list(pc.params):
                        t.grad = None
                ready.set()


def applies(plan: Plan, device: str, partner: bool) -> bool:
    """Whether :func:`partnered` runs a mirror: ``partner`` on, the CPU, and more than one of the
    plan's ranks on a node."""
    return partner and torch.device(device).type == "cpu" and min(plan.cluster.gpus_per_node, plan.world_size) > 1


@contextlib.contextmanager
def partnered(plan: Plan, device: str, measure_layers: int, clock: str, partner: bool) -> Iterator[bool]:
    """The mirror (module docstring) running for the block when :func:`applies`; yields whether it
    runs.  Raises ``RuntimeError`` (one line) when it exited or did not come up within
    :data:`READY_TIMEOUT_S`.  A spawned process: the calling program's main module must be
    import-safe (``if __name__ == "__main__"``)."""
    if not applies(plan, device, partner):
        yield False
        return
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_mirror, args=(plan.model_dump_json(), measure_layers, clock, ready, stop),
                       daemon=True)
    proc.start()
    try:
        t0 = time.monotonic()
        while not ready.wait(0.5) and proc.is_alive() and time.monotonic() - t0 < READY_TIMEOUT_S:
            pass
        if not (ready.is_set() and proc.is_alive()):
            raise RuntimeError("measurement: the mirror of the run's other rank (TimingPolicy.partner) "
                               f"did not start within {READY_TIMEOUT_S:g} s")
        yield True
    finally:
        stop.set()
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
            proc.join()
