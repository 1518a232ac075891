"""Typed results of a projection: what ``project()`` returns and the CLI renders."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from primus_launch.plan import Plan


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


class SubstitutionReport(BaseModel):
    """One way a measured piece differs from the plan's run: what was measured instead, why, and
    how the projection corrects for it ("" = used as measured)."""

    what: str
    why: str
    model: str = ""


class PieceReport(BaseModel):
    """One measured piece (one micro-batch on one GPU of the target, per-rank shapes)."""

    source: Literal["measured", "cached"] = Field(description="timed in this run, or read from the cache")
    fwd_s: float
    bwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    split: str = Field(description="how the backward was split: autograd (torch's stage_backward_input/weight, "
                                   "measured), flop-ratio, no-weights, no-input")
    split_ratio: float = Field(description="input-grad share of the backward")
    bwd_input_raw_s: Optional[float] = None
    bwd_weight_raw_s: Optional[float] = None
    spread: dict[str, float] = Field(description="relative inter-quartile range per figure over the samples")
    repeats: int
    converged: bool = Field(description="the spread reached the policy's target before its sample limit")
    measured_dtype: str
    activation_bytes: int = Field(description="bytes the piece keeps for its backward")
    output_bytes: int
    peak_bytes: int = Field(description="peak bytes above the start in forward + backward (grads preallocated)")
    reserved_bytes: int = Field(description="CUDA caching-allocator peak reserved (0 on the CPU)")
    param_count: int
    substitutions: list[SubstitutionReport] = Field(default_factory=list)
    adjustments: list[str] = Field(default_factory=list, description="corrections applied to the measured figures")


class MeasurementReport(BaseModel):
    """What the measured path measured, where, how, and what it substituted."""

    device: str
    framework: str
    policy: str
    clock: str
    threads: int
    cache_dir: str
    cache_hits: int
    cache_warning: Optional[str] = None
    pieces: dict[str, PieceReport]
    layer_times: dict[str, Optional[dict[str, float]]]


class MemoryCheck(BaseModel):
    """Measured memory (``ProjectionResult.memory`` of a measured result) against the analytic model."""

    measured_peak_bytes_per_gpu: int
    analytic_peak_bytes_per_gpu: int
    relative_difference: float = Field(description="measured / analytic - 1 of the peak per GPU")
    analytic_model: str
    components: dict[str, dict[str, int]] = Field(description="worst stage, per component: measured, analytic")
    per_layer: dict[str, dict[str, float]] = Field(
        description="kind -> activation bytes kept per layer: measured, model of the measured implementation, "
                    "model of the dry-run")
    analytic: MemoryReport
    notes: list[str] = Field(default_factory=list)


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
    measurement: Optional[MeasurementReport] = None
    memory_check: Optional[MemoryCheck] = None

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json")
