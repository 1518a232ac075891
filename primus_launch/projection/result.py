"""Typed results of a projection: what ``project()`` returns and the CLI renders."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from primus_launch.plan import Plan, UnmodelledFlag


class StageMemory(BaseModel):
    """Per-GPU bytes on one pipeline stage (worst rank of that stage)."""

    stage: int
    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    transient_bytes: int
    reserve_bytes: int
    total_bytes: int
    microbatches_in_flight: int
    num_parameters: int = Field(description="parameters held by one GPU of this stage (after TP/EP/PP split)")


class MemoryReport(BaseModel):
    peak_bytes_per_gpu: int
    capacity_bytes: int
    margin_fraction: float
    fits: bool
    worst_stage: int
    breakdown: dict[str, int] = Field(description="the worst stage's bytes by component")
    stages: list[StageMemory]
    notes: list[str] = Field(default_factory=list)


class TimelineEvent(BaseModel):
    """One interval of the simulated pipeline (seconds from iteration start)."""

    stage: int
    kind: Literal["F", "B", "W", "BW", "send", "recv", "dp_comm", "optimizer", "bubble"]
    microbatch: int = -1
    chunk: int = 0
    start_s: float
    end_s: float


class ProjectionResult(BaseModel):
    mode: Literal["dry-run", "measured"]
    iteration_time_s: float
    tokens_per_sec_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    num_gpus: int
    model_flops_per_iteration: float = Field(description="Megatron num_floating_point_operations() per iteration")
    time_breakdown: dict[str, float] = Field(description="exposed seconds per component; sums to iteration_time_s")
    memory: MemoryReport
    plan: Plan
    timeline: list[TimelineEvent] = Field(default_factory=list, exclude=True)
    notes: list[str] = Field(default_factory=list)
    warnings: list[UnmodelledFlag] = Field(
        default_factory=list, description="recipe settings that change time or memory but are not modelled "
                                          "(from the reader and from the projection)")
    measurement: Optional[dict] = None

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json")
