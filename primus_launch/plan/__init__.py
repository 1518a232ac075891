"""The framework-neutral plan (:mod:`.schema`), its sections (:mod:`.sections`), where its layers sit
in the pipeline (:mod:`.layout`; TorchTitan's own split: :mod:`.torchtitan_split`) and its legality rules
(:mod:`.legality`)."""

from primus_launch.plan.layout import Chunk, chunk_layout, format_layout, parse_layout, virtual_stages
from primus_launch.plan.legality import (check_plan, ep_overlap_problems, framework_problems, legality_problems,
                                         torchtitan_problems)
from primus_launch.plan.schema import Plan
from primus_launch.plan.software import Software, parse_torch_version, parse_torchtitan_version
from primus_launch.plan.sections import (
    ATTENTION_RECOMPUTE_MODULES,
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
    PlanError,
    Precision,
    Recompute,
    RecomputeGranularity,
    RecomputeMethod,
    STATE_DTYPE_BYTES,
    Source,
    Training,
    UnmodelledFlag,
)

__all__ = [
    "ATTENTION_RECOMPUTE_MODULES", "CUDA_GRAPH_SCOPES", "GPU_NAMES", "OFFLOAD_MODULES", "RECOMPUTE_MODULES", "Chunk", "Cluster", "DPSharding",
    "Fp8Recipe", "Framework", "ModelArch", "Offload", "Parallelism", "PipelineSchedule", "Plan", "PlanError",
    "Precision", "Recompute", "RecomputeGranularity", "RecomputeMethod", "STATE_DTYPE_BYTES", "Software", "Source", "Training", "UnmodelledFlag",
    "check_plan", "chunk_layout", "ep_overlap_problems", "format_layout", "framework_problems", "legality_problems", "parse_layout", "parse_torch_version", "parse_torchtitan_version",
    "torchtitan_problems", "virtual_stages",
]
