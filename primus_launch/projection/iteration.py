"""One training iteration from per-layer compute times: the model shared by the dry-run (roofline
layer times) and the hybrid projection (measured layer times).

Input: :class:`~primus_launch.projection.layer_times.LayerTimes`, the COMPUTE time of one micro-batch
on one GPU per layer kind with the plan's TP/CP/EP sharding applied and no communication.
:func:`assemble` runs the typed steps of :mod:`primus_launch.projection.steps`:

1. layer costs (``steps/layer.py``): one layer's TP (``cost/tp_comm.py``), CP (``cost/cp_comm.py``),
   EP (``cost/ep_comm.py``, ``cost/ep_overlap.py``) and FSDP (``cost/fsdp.py``) communication, raw
   and left exposed by each framework's overlap, the SMs the hidden part holds
   (``cost/contention.py``); selective recompute (``cost/recompute.py``) and activation offload
   (``cost/offload.py``);
2. stage costs (``steps/stage.py``): per pipeline stage and model chunk, its layers
   (``plan/layout.py``), full recompute, embedding, head and loss, one micro-batch's forward /
   backward seconds;
3. pipeline schedule (``steps/schedule.py``): the plan's schedule simulated on them
   (``pipeline/simulate.py``);
4. iteration (``steps/iteration.py``): the DP gradient sync (``cost/dp_comm.py``) and optimizer step
   (``cost/optimizer.py``) after the pipeline, the iteration time and its breakdown.
"""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.layer_times import LayerTimes
from primus_launch.projection.result import ProjectionResult
from primus_launch.projection.steps.flow import projection_result, run_steps


def assemble(plan: Plan, layer_times: LayerTimes, mode: str, record_timeline: bool = False,
             memory_margin: float = 0.05) -> ProjectionResult:
    """One iteration of ``plan`` from ``layer_times`` (module doc for the model)."""
    return projection_result(run_steps(plan, layer_times, record_timeline), mode, record_timeline, memory_margin)
