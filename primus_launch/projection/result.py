"""Typed results of a projection: what ``project()`` returns and the CLI renders."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from primus_launch.plan import Plan, UnmodelledFlag


class StageMemory(BaseModel):
    """Per-GPU bytes on one pipeline stage (worst rank of that stage) at its allocated peak.

    ``parameters + gradients + optimizer + activations + transient = allocated_bytes`` (what
    ``torch.cuda.memory_allocated`` would show at the peak); ``reserve_bytes`` =
    ``allocator_reserve_bytes`` (caching allocator: reserved minus allocated) +
    ``outside_allocator_bytes`` (CUDA context, cuBLAS handles, NCCL buffers; the GEMM workspaces are inside
    the allocator, in ``transient_bytes`` and ``workspace_bytes``); ``total_bytes`` =
    allocated + reserve (the reserved basis plus what lives outside the allocator).
    """

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
    allocated_bytes: int = Field(default=0, description="allocated peak: parameters..transient")
    allocator_reserve_bytes: int = Field(default=0, description="reserved minus allocated (allocator caching, "
                                                               "fragmentation): a stated model")
    outside_allocator_bytes: int = Field(default=0, description="CUDA context, cuBLAS handles, NCCL buffers")
    workspace_bytes: int = Field(default=0, description="of transient_bytes: torch / Transformer Engine GEMM "
                                                        "workspaces, allocated through the caching allocator")
    releasable_bytes: int = Field(default=0, description="of allocator_reserve_bytes: free cached segments the "
                                                         "caching allocator gives back before it raises out of "
                                                         "memory (TorchTitan: FSDP2's free side-stream pools); "
                                                         "total_bytes - releasable_bytes is what the verdict compares")


class MemoryBand(BaseModel):
    """The projection's measured error band: the real peak of a run projected at ``P`` lay in
    ``[P (1 + low), P (1 + high)]`` for the published runs of ``source`` (10th-90th percentile)."""

    low: float = Field(description="10th percentile of published / projected - 1")
    high: float = Field(description="90th percentile of published / projected - 1")
    rows: int = Field(description="measured configurations (published peaks, one per configuration) the band is taken from")
    source: str = Field(description="which rows, and the command that regenerates the band")
    low_bytes: int = Field(default=0, description="the verdict's peak (MemoryReport.oom_peak_bytes) at the band's bottom")
    high_bytes: int = Field(default=0, description="the verdict's peak (MemoryReport.oom_peak_bytes) at the band's top")


class NodeTry(BaseModel):
    """One node count the fewest-nodes search (:mod:`projection.node_fit`) tried: its verdict and peak, or why the
    recipe cannot run there (``skipped``: the plan's own rule, e.g. the global batch not divisible by the
    data-parallel size at that count)."""

    nodes: int
    verdict: Optional[Literal["fits", "tight", "does not fit"]] = None
    peak_bytes: int = Field(default=0, description="the verdict's peak (MemoryReport.verdict_peak_bytes)")
    largest_term: Optional[str] = Field(default=None, description="the largest term of the worst stage's breakdown "
                                                                  "(MemoryReport.breakdown), e.g. 'activations'")
    skipped: Optional[str] = Field(default=None, description="why the count was not projected")


class NodeSearch(BaseModel):
    """The fewest nodes the same recipe fits on, searched when the node count was fitted (the recipe and the user
    state none: ``plan.source.nodes_fitted``) and the plan does not fit: doubling from the projected count, then
    bisecting (:func:`projection.node_fit.search_nodes`)."""

    from_nodes: int = Field(description="the node count of the projection (the fitted one)")
    gpus_per_node: int
    fits_from_nodes: Optional[int] = Field(default=None, description="the fewest nodes with verdict 'fits' "
                                                                     "(None: none up to max_nodes)")
    tight_from_nodes: Optional[int] = Field(default=None, description="the fewest tried count with verdict 'tight', "
                                                                      "below fits_from_nodes")
    exact: bool = Field(default=True, description="false when the projection budget ran out before the bisection "
                                                  "ended: fits_from_nodes fits but a smaller count might")
    max_nodes: int = Field(description="the bound searched (max_gpus / gpus_per_node)")
    tried: list[NodeTry] = Field(default_factory=list)


class MemoryReport(BaseModel):
    """``verdict``: ``fits`` when the band's top (``band.high_bytes``) fits ``capacity_bytes * (1 -
    margin_fraction)``, ``does not fit`` when even its bottom does not, ``tight`` between;
    ``fits`` is true for ``fits`` and ``tight``.  ``peak_bytes_per_gpu`` is the point estimate of the
    ``memory_basis`` peak (``reserved``: the caching allocator's reserved peak, what ``memory_stats`` reports;
    ``allocated``: the allocated peak) plus the memory outside the allocator; the band and the verdict are
    taken on ``oom_peak_bytes`` (the same less the free cached segments the allocator releases before it
    raises out of memory, :mod:`memory.verdict`)."""

    peak_bytes_per_gpu: int
    capacity_bytes: int
    margin_fraction: float
    fits: bool
    worst_stage: int
    breakdown: dict[str, int] = Field(description="the worst stage's bytes by component, summing to peak_bytes_per_gpu: "
                                                  "its stage's terms with transient_bytes split into transient and "
                                                  "workspaces (workspace_bytes), and reserve = reserve_bytes (the "
                                                  "allocator's reserve + the memory outside the allocator)")
    stages: list[StageMemory]
    notes: list[str] = Field(default_factory=list)
    memory_basis: Literal["reserved", "allocated"] = "reserved"
    allocated_peak_bytes: int = Field(default=0, description="worst stage's allocated peak (memory_allocated)")
    reserved_peak_bytes: int = Field(default=0, description="worst stage's estimated reserved peak "
                                                            "(memory_reserved; allocator model stated in notes)")
    outside_allocator_bytes: int = Field(default=0, description="CUDA context, cuBLAS handles, NCCL buffers")
    verdict: Literal["fits", "tight", "does not fit"] = Field(
        default="fits", description="fits: the band's top fits; tight: the capacity lies in the band; does not fit")
    band: Optional[MemoryBand] = None
    outside_allocator: dict[str, int] = Field(default_factory=dict, description="outside-allocator bytes by holder")
    fits_from_nodes: Optional[int] = Field(default=None, description="where the node count was fitted (the recipe "
                                                                     "states none) and the plan does not fit: the "
                                                                     "fewest nodes the same recipe fits on "
                                                                     "(node_search has the counts tried)")
    node_search: Optional[NodeSearch] = None
    oom_peak_bytes: int = Field(default=0, description="what the verdict compares with the capacity: the worst stage's "
                                                       "bytes that torch's caching allocator cannot give back when an "
                                                       "allocation fails (peak_bytes_per_gpu less the free cached "
                                                       "segments it releases and retries with, memory.verdict)")

    @property
    def verdict_peak_bytes(self) -> int:
        """The bytes the verdict compares with the capacity: ``oom_peak_bytes``, or the reported peak in a
        report written before that field existed (0 there)."""
        return self.oom_peak_bytes or self.peak_bytes_per_gpu


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
    statistic: str = Field("median", description="how the samples are summarized: median, or mean for a piece whose "
                                                 "work is drawn afresh each pass (an MoE layer routing at random)")
    converged: bool = Field(description="the spread reached the policy's target before its sample limit")
    cores: int = Field(0, description="CPU cores the measuring thread could run on while sampled "
                                      "(1: bound to one core, as a real run's rank); 0 on CUDA")
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
    cores: int = Field(0, description="the most CPU cores any piece's measuring thread could run on "
                                      "(1: every piece bound to one core); 0 on CUDA")
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


class ErrorBand(BaseModel):
    """The expected error of a dry-run projection: the spread of the judged validation rows of its group
    (``projection/band.py``, ``projection/data/error_bands.json`` written by ``scripts/validate.py
    --write-bands``).  ``low`` / ``median`` / ``high`` (``MemoryBand`` has ``low`` / ``high`` too; its row
    count is ``rows``, this one's ``n``) are fractions of measured / projected iteration time - 1 (= projected /
    measured tokens/s - 1): the run took ``(1 + low) .. (1 + high)`` times the projected iteration time on those
    rows."""

    low: float
    high: float
    median: float
    n: int = Field(description="judged validation rows in the group")
    group: str = Field(description="the rows the band was taken from, in words")
    relaxed: list[str] = Field(default_factory=list, description="judging dimensions dropped to reach enough rows")
    statistic: str = ""

    def iteration_range(self, t: float) -> tuple[float, float]:
        """Iteration seconds ``t`` projected -> the band's range of measured seconds."""
        return t * (1 + self.low), t * (1 + self.high)

    def tokens_range(self, tokens_per_s: float) -> tuple[float, float]:
        """Projected tokens/s -> the band's range of measured tokens/s: the iteration range inverted,
        ``tokens_per_s / (1 + high) .. tokens_per_s / (1 + low)`` (the text's "expected A .. B")."""
        return tokens_per_s / (1 + self.high), tokens_per_s / (1 + self.low)

    def text(self) -> str:
        """``-6% .. +9% on 38 judged rows like it (megatron / hopper / ...)``."""
        return (f"{100 * self.low:+.0f}% .. {100 * self.high:+.0f}% on {self.n} judged rows like it "
                f"({self.group})")


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
    measurement: Optional[MeasurementReport] = None
    memory_check: Optional[MemoryCheck] = None
    band: Optional[ErrorBand] = Field(default=None, description="expected error of the iteration time: the spread of "
                                                                "the judged validation rows like this plan (dry-run)")

    def to_json_dict(self) -> dict:
        """The result as JSON; ``band`` also carries the ranges the text answer prints from it
        (``iteration_time_s``, ``tokens_per_sec_per_gpu``, ``model_tflops_per_gpu`` and ``mfu``: [low, high]; the
        three rates are the band inverted), so that a script reads the same "expected 640 .. 686" the answer shows
        without inverting the band itself."""
        d = self.model_dump(mode="json")
        if self.band is not None:
            d["band"]["iteration_time_s"] = list(self.band.iteration_range(self.iteration_time_s))
            d["band"]["tokens_per_sec_per_gpu"] = list(self.band.tokens_range(self.tokens_per_sec_per_gpu))
            d["band"]["model_tflops_per_gpu"] = list(self.band.tokens_range(self.model_tflops_per_gpu))
            d["band"]["mfu"] = list(self.band.tokens_range(self.mfu))
        return d
