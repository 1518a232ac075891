"""The framework-neutral plan (:mod:`.schema`), where its layers sit in the pipeline
(:mod:`.layout`) and its legality rules (:mod:`.legality`)."""

from primus_launch.plan.layout import Chunk, chunk_layout, format_layout, parse_layout, virtual_stages
from primus_launch.plan.legality import check_plan, legality_problems
from primus_launch.plan.schema import (
    CUDA_GRAPH_SCOPES,
    GPU_NAMES,
    OFFLOAD_MODULES,
    RECOMPUTE_MODULES,
    Cluster,
    DPSharding,
    Fp8Recipe,
    Framework,
    ModelArch,
    Offload,
    Parallelism,
    PipelineSchedule,
    Plan,
    PlanError,
    Precision,
    Recompute,
    RecomputeGranularity,
    RecomputeMethod,
    Source,
    Training,
    UnmodelledFlag,
)

__all__ = [
    "CUDA_GRAPH_SCOPES", "GPU_NAMES", "OFFLOAD_MODULES", "RECOMPUTE_MODULES", "Chunk", "Cluster", "DPSharding",
    "Fp8Recipe", "Framework", "ModelArch", "Offload", "Parallelism", "PipelineSchedule", "Plan", "PlanError",
    "Precision", "Recompute", "RecomputeGranularity", "RecomputeMethod", "Source", "Training", "UnmodelledFlag",
    "check_plan", "chunk_layout", "format_layout", "legality_problems", "parse_layout", "virtual_stages",
]
